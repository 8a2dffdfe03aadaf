"""The outbox applier of the process that owns the embedded index: a background thread, off the read path.

Why a thread here and not on the query path: applying the outbox writes the
index and may take seconds (a 10k-chunk ingest) behind a lock; a query that
applied first would write, and wait on another query's write. The embedded
store (qdrant-edge-py) admits one open handle, so only the process that owns it
(the web process: console/wsgi.py and console/asgi.py start this) can apply.
With a Qdrant server (QDRANT_URL) Celery applies instead (search.tasks), and
this thread is not started.

How it wakes: migration 0006 makes every committed INSERT into the outbox send
a Postgres NOTIFY on `search_index_outbox`; the thread LISTENs on its own
connection and also polls every INDEX_APPLIER_POLL_S, so a notification lost
to a dropped connection only delays an update. Clients that must read their
own writes call `search.engine.index.wait_until_indexed`, which only reads.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection

from search.engine.index import OUTBOX_CHANNEL as CHANNEL
from search.engine.index import apply_outbox

log = logging.getLogger(__name__)

_SLICE_S = 0.25  # how often a waiting thread looks at its stop/wake flags
# Small batches, each waiting up to YIELD_S for the queries in flight (search.engine.index.READ_GATE): the embedded
# engine holds the GIL while it upserts, so a 512-point batch would stall every query of this process behind it.
BATCH = 128
YIELD_S = 0.2


class BackgroundApplier:
    """One daemon thread that drains the outbox into `index` (default: the process singleton) whenever rows commit."""

    def __init__(self, *, index: Any = None, poll_s: float | None = None, batch: int = BATCH,
                 yield_s: float = YIELD_S) -> None:
        self.index = index
        self.batch, self.yield_s = batch, yield_s
        self.poll_s = float(settings.INDEX_APPLIER_POLL_S if poll_s is None else poll_s)
        self.stats = {"passes": 0, "applied": 0, "notified": 0, "errors": 0}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> BackgroundApplier:
        if not self.alive:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="index-applier", daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        """Apply now (an in-process writer that committed rows); NOTIFY does the same across processes."""
        self._wake.set()

    def stop(self, *, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        listener = None
        try:
            while not self._stop.is_set():
                if listener is None:
                    listener = self._listen()
                self._apply_pass()
                if self._wait(listener) == "broken":
                    listener = _close(listener)
        finally:
            _close(listener)
            connection.close()  # this thread's Django connection

    def _apply_pass(self) -> None:
        try:
            n = apply_outbox(index=self.index, batch=self.batch, yield_to_reads_s=self.yield_s)
            self.stats["passes"] += 1
            self.stats["applied"] += n
        except Exception:  # the store or Postgres is down: log, keep the thread, try again on the next wake
            self.stats["errors"] += 1
            log.exception("index applier pass failed; retrying in %.1f s", self.poll_s)
            connection.close()

    def _listen(self) -> Any:
        """A dedicated autocommit connection LISTENing on the outbox channel; None if it cannot connect (poll)."""
        try:
            raw = connection.get_new_connection(connection.get_connection_params())
            raw.autocommit = True
            raw.execute(f"LISTEN {CHANNEL}")
            return raw
        except (psycopg.Error, OSError) as exc:
            log.warning("index applier cannot LISTEN (%r); polling every %.1f s", exc, self.poll_s)
            return None

    def _wait(self, listener: Any) -> str:
        """Until a notification, a wake(), stop() or the poll interval; -> "notified", "woken", "poll" or "broken"."""
        waited = 0.0
        while waited < self.poll_s and not self._stop.is_set():
            if self._wake.is_set():
                self._wake.clear()
                return "woken"
            step = min(_SLICE_S, self.poll_s - waited)
            if listener is None:
                self._wake.wait(step)
            else:
                try:
                    got = list(listener.notifies(timeout=step, stop_after=1))
                except psycopg.Error as exc:
                    log.warning("index applier lost its LISTEN connection (%r); reconnecting", exc)
                    return "broken"
                if got:
                    try:  # a burst of commits is one pass
                        list(listener.notifies(timeout=0.01))
                    except psycopg.Error:
                        return "broken"
                    self.stats["notified"] += 1
                    return "notified"
            waited += step
        return "poll"


def _close(listener: Any) -> None:
    if listener is not None:
        try:
            listener.close()
        except Exception:  # noqa: BLE001 - closing a dead connection is fine
            pass


_running: BackgroundApplier | None = None
_running_lock = threading.Lock()


def start_background_applier(*, index: Any = None, poll_s: float | None = None) -> BackgroundApplier | None:
    """Start this process's applier thread once (idempotent). None with a Qdrant server: Celery applies there.

    Called by the web entry points (console/wsgi.py, console/asgi.py: runserver, gunicorn, uvicorn), which own
    the embedded store; set INDEX_APPLIER_THREAD=0 for a web process that must not open it.
    """
    global _running
    if settings.QDRANT_URL or not settings.INDEX_APPLIER_THREAD:
        return None
    with _running_lock:
        if _running is None or not _running.alive:
            _running = BackgroundApplier(index=index, poll_s=poll_s).start()
        return _running


def stop_background_applier() -> None:
    global _running
    with _running_lock:
        if _running is not None:
            _running.stop()
            _running = None


def running_applier() -> BackgroundApplier | None:
    """The applier thread of this process, if one runs (an in-process writer wakes it after committing)."""
    return _running if _running is not None and _running.alive else None
