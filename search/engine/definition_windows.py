"""The window look: `locate`'s best definitions scored again by the best short window of their lines.

Why: the dense model reads at most 256 wordpieces, about 25 lines of code, and a chunk holds up to 80 lines
(search.ingest.base.MAX_CHUNK_LINES), so the dense leg never sees the tail of a long definition, and the
definitions a change touches are long (a median of 30 lines, against 11 for every function of click and seaborn;
docs/benchmarks/code-localisation.md). Scored by its best window of WINDOW_LINES lines, every line of a definition
is read by the model. Measured before it was built, on every definition of the changed files (the benchmark's
commits, each at its parent; bench/definition_windows_probe.py): the gold definitions' recall@3 0.394 -> 0.534 on
the development window, and 0.409 -> 0.479 on the 45 older commits of each of click, httpx and seaborn (click alone
a little lower, httpx and seaborn higher). Through `locate`, whose order already holds the sparse leg (which reads
every line of a chunk) and the second look, it then moved function recall@10 by nothing measurable on the four
test windows, for ten times the time of a call, so `locate` runs it only when asked (Ranking.windows), for the
evidence: where in a long function the task's words are.

Only the first `top` definitions are looked at again: embedding a window costs several milliseconds on two CPU
cores, so the look is bounded by what it re-ranks, the request's deadline is checked between batches, and the
vectors are kept in a per-process LRU (window_vectors), so a code base looked at again embeds only what changed.
The windows are embedded with the model that searched the definition's dataset (an adopted model reads its own
vectors), and nothing is written: a read stays a read (the embedding cache is filled by ingestion only).
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings

from config import deadlines
from inference.encoders import dense_model_id, embed_query, embed_texts
from search.engine.code_graph import FUNCTION_KINDS
from search.engine.dataset_models import model_arg, serving_groups
from search.models import Chunk, Symbol

if TYPE_CHECKING:
    from search.engine.code_graph import Def

WINDOW_LINES = 24   # about what the model reads of a line of code at 256 wordpieces
WINDOW_STEP = 12    # windows overlap by half, so a few changed lines sit whole in one of them
WINDOW_BATCH = 64   # windows embedded between two deadline checks


def definition_lines(*, defs: list[Def]) -> dict[int, dict[int, str]]:
    """document id -> {line number: text} over the lines of `defs`, rebuilt from the stored chunks (a code chunk's
    text is its exact lines, search.ingest.base.exact_span); one query."""
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for d in defs:
        spans[d.document_id].append((d.start_line, d.end_line))
    out: dict[int, dict[int, str]] = defaultdict(dict)
    rows = Chunk.objects.filter(document_id__in=sorted(spans), kind="code").values_list(
        "document_id", "start_line", "end_line", "text")
    for doc, start, end, text in rows.iterator():
        if not any(start <= e and s <= end for s, e in spans[doc]):
            continue
        for i, line in enumerate(text.split("\n")):
            out[doc].setdefault(start + i, line)
    return out


@dataclass(frozen=True)
class Window:
    start_line: int
    end_line: int
    text: str


@dataclass(frozen=True)
class WindowMatch:
    """A definition's best window and its cosine with the task (the evidence `locate` lists)."""

    similarity: float
    start_line: int
    end_line: int


def windows_of(*, d: Def, lines: dict[int, str], skip: Collection[tuple[int, int]] = ()) -> list[Window]:
    """The definition's windows over its lines less those in the `skip` spans, each window headed by its path and
    qualified name (a window of a method's body names neither); a definition shorter than a window is one window."""
    numbers = [n for n in range(d.start_line, d.end_line + 1) if not any(s <= n <= e for s, e in skip)]
    head = f"{d.path} {d.qualname}\n"
    out = []
    for i in range(0, max(1, len(numbers) - WINDOW_LINES + WINDOW_STEP), WINDOW_STEP):
        part = numbers[i:i + WINDOW_LINES]
        body = "\n".join(lines.get(n, "") for n in part)
        if part and body.strip():
            out.append(Window(part[0], part[-1], head + body))
    return out


def nested_spans(*, classes: list[Def]) -> dict[int, list[tuple[int, int]]]:
    """Class id -> the spans of the definitions inside it. A class is read by its own lines only (its header, its
    docstring, the statements between its methods): they are what make a class the place of a change (the
    definitions a chunk names, locate.innermost_overlapping), its methods are listed and read on their own, and a
    large class read whole would cost more windows than every method beside it; one query."""
    if not classes:
        return {}
    out: dict[int, list[tuple[int, int]]] = {c.id: [] for c in classes}
    by_doc: dict[int, list[Def]] = defaultdict(list)
    for c in classes:
        by_doc[c.document_id].append(c)
    rows = Symbol.objects.filter(document_id__in=sorted(by_doc), kind__in=FUNCTION_KINDS).values_list(
        "document_id", "start_line", "end_line")
    for doc, start, end in rows.iterator():
        for c in by_doc[doc]:
            if c.start_line <= start and end <= c.end_line and (start, end) != (c.start_line, c.end_line):
                out[c.id].append((start, end))
    return out


def window_similarity(*, task: str, defs: list[Def]) -> dict[int, WindowMatch]:
    """Definition id -> its best window and that window's cosine with the task (definitions without stored lines
    are left out), each dataset's definitions read by the model that searched it, a class by its own lines
    (nested_spans)."""
    lines = definition_lines(defs=defs)
    inside = nested_spans(classes=[d for d in defs if d.kind == "class"])
    out: dict[int, WindowMatch] = {}
    groups = serving_groups(dataset_ids={d.dataset_id for d in defs})
    for name, ids in groups.items():
        model = model_arg(name)
        wanted = set(ids)
        windows = [(d.id, w) for d in defs if d.dataset_id in wanted
                   for w in windows_of(d=d, lines=lines.get(d.document_id, {}), skip=inside.get(d.id, ()))]
        if not windows:
            continue
        deadlines.check()
        q = embed_query(task, model=model)
        sims = np.asarray(window_vectors(texts=[w.text for _, w in windows], model=model) @ q, dtype=np.float64)
        for (key, w), sim in zip(windows, sims, strict=True):
            if key not in out or sim > out[key].similarity:
                out[key] = WindowMatch(float(sim), w.start_line, w.end_line)
    return out


_cache: OrderedDict[tuple[str, bytes], np.ndarray] = OrderedDict()
_lock = threading.Lock()
embedded = 0  # windows this process has embedded (cache misses), for the cache's tests and a profile


def window_vectors(*, texts: list[str], model: str | None) -> np.ndarray:
    """The windows' vectors, from this process's LRU of LOCATE_WINDOW_CACHE where it holds them: the definitions a
    project's tasks reach recur from call to call, and a code base changes a few files at a time, so a second look
    at the same code embeds only what changed. Misses are embedded WINDOW_BATCH at a time, the request's deadline
    checked before each batch. In memory, not the embedding cache's table: a read never writes."""
    model_id = dense_model_id(model=model)
    keys = [(model_id, hashlib.blake2b(t.encode(), digest_size=16).digest()) for t in texts]
    with _lock:
        found = {k: _cache[k] for k in keys if k in _cache}
    todo = list(dict.fromkeys(k for k in keys if k not in found))
    text = dict(zip(keys, texts, strict=True))
    global embedded  # a process-wide count, like the cache whose misses it counts
    for i in range(0, len(todo), WINDOW_BATCH):
        deadlines.check()
        part = todo[i:i + WINDOW_BATCH]
        found.update(zip(part, embed_texts([text[k] for k in part], model=model), strict=True))
    with _lock:
        embedded += len(todo)
        for k in keys:
            _cache[k] = found[k]
            _cache.move_to_end(k)
        while len(_cache) > settings.LOCATE_WINDOW_CACHE:
            _cache.popitem(last=False)
    if not keys:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([found[k] for k in keys])
