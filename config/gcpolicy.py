"""The garbage collector's policy while a worker does bulk work (an ingest, a sync, a re-embed, the index applier).

Why: CPython's cyclic collector runs a young collection every 700 container allocations and, every so often, a
full one that walks every object the process holds. Bulk work allocates millions of short-lived objects (parse
trees, chunk drafts, rows) that almost never form cycles, while the process already holds hundreds of thousands
of long-lived ones (modules, the model, Django's app registry): measured on this platform's own ingest of 6,000
chunks of Python, reading and chunking spent about half its CPU in the collector (docs/benchmarks/context.md, "Ingest pipeline without the encoder").

So, for the span of the work:
- what is alive when the work starts is frozen (`gc.freeze`): a full collection no longer walks it;
- the young generation is collected every `GC_BULK_THRESHOLD` allocations instead of 700: the same garbage is
  found, a few thousand times less often.
Both are undone when the work ends (also on an error), so cyclic garbage among the objects frozen at the start is
collected then, and a process that does bulk work now and then is left as it was. Nested or concurrent uses (two
jobs in two threads of one process) share one policy: the outermost entry sets it and the last one out restores it.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def bulk_work() -> Iterator[None]:
    """Run the body under the bulk policy (see the module's docstring); a threshold setting of 0 turns it off."""
    global _depth, _saved
    threshold = settings.GC_BULK_THRESHOLD
    if threshold <= 0:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(threshold, _saved[0]), _saved[1], _saved[2])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                gc.unfreeze()
                _saved = None
