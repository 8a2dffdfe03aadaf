"""The one applier: it carries the outbox into the index, keeps each store's watermark, and answers waits.

Postgres is the truth and the index its projection (docs/architecture.md, Data ownership): every write commits
its chunks and an IndexOutbox row together, and only this module writes the index. `apply_outbox` re-reads each
pending chunk and writes its current state (present -> upsert, gone -> delete), so replays and out-of-order rows
converge; each store's IndexWatermark says how far it got, which is all `wait_until_indexed` reads.

Why a thread here and not on the query path: applying the outbox writes the index and may take seconds (a
10k-chunk ingest) behind a lock; a query that applied first would write, and wait on another query's write. The
embedded store (qdrant-edge-py) admits one open handle, so only the process that owns it (the web process:
console/wsgi.py and console/asgi.py start the BackgroundApplier) can apply. With a Qdrant server (QDRANT_URL)
Celery applies instead (search.tasks), and the thread is not started. Queries count themselves in READ_GATE, so
the thread steps aside for them between batches.

How it wakes: migration 0006 makes every committed INSERT into the outbox send a Postgres NOTIFY on
`search_index_outbox`; the thread LISTENs on its own connection and also polls every INDEX_APPLIER_POLL_S, so a
notification lost to a dropped connection only delays an update. Clients that must read their own writes call
`wait_until_indexed`, which only reads.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from tqdm import tqdm

from config.errors import DependencyDown
from config.gcpolicy import bulk_work
from inference.encoders import cached_vectors
from search.engine.dataset_models import models_in_use
from search.engine.index import VectorIndex, get_index, model_index
from search.engine.index_schema import PAYLOAD_LOOKUPS, IndexPoint
from search.engine.sparse import SparseVec, encode_document, sparse_document_text
from search.models import Chunk, IndexOutbox, IndexWatermark

log = logging.getLogger(__name__)

APPLY_BATCH = 512
# Migration 0006 NOTIFYs this channel on every committed outbox insert; the background applier listens.
OUTBOX_CHANNEL = "search_index_outbox"
# A gap in outbox ids younger than this may be a transaction still in flight: hold the watermark before it.
GAP_GRACE_S = 30.0

_SLICE_S = 0.25  # how often a waiting thread looks at its stop/wake flags
# Small batches, each waiting up to YIELD_S for the queries in flight (READ_GATE): the embedded
# engine holds the GIL while it upserts, so a 512-point batch would stall every query of this process behind it.
BATCH = 128
YIELD_S = 0.2


_apply_lock = threading.Lock()


class ReadGate:
    """The index reads in flight in this process, so that a background apply can step aside for them.

    Why: the embedded engine's binding holds the GIL while it upserts, and building points is Python work, so an
    applier thread draining a large ingest makes every query in the same process wait behind it. Between batches
    the background applier waits (bounded) until no read is in flight: queries go first, the applier still moves
    at least one batch per wait, and nothing is ever skipped. A read only counts itself; it never waits here.
    """

    def __init__(self) -> None:
        self._n = 0
        self._cv = threading.Condition()

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cv:
            self._n += 1
        try:
            yield
        finally:
            with self._cv:
                self._n -= 1
                if not self._n:
                    self._cv.notify_all()

    def wait_idle(self, *, timeout: float) -> bool:
        """True once no read is in flight; False when `timeout` passed first (the caller goes on anyway)."""
        with self._cv:
            return self._cv.wait_for(lambda: self._n == 0, timeout)


READ_GATE = ReadGate()


@contextmanager
def hold_applier() -> Iterator[None]:
    """Keep this process's applier out while the reconciler repairs the index, so neither writes an older state
    over the other's newer one."""
    with _apply_lock:
        yield


def chunk_payload(chunk: Chunk) -> dict[str, Any]:
    def follow(obj: object, lookup: str) -> object:
        for part in lookup.split("__"):
            obj = getattr(obj, part)
        return obj

    return {key: follow(chunk, lookup) for key, lookup in PAYLOAD_LOOKUPS.items()}


def payloads_for(chunk_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The payload each chunk the live index should hold carries, read in one query (no model instances).
    Evaluation datasets' chunks are not among them: in the live store their points are orphans."""
    rows = (Chunk.objects.filter(pk__in=chunk_ids, dataset__is_evaluation=False)
            .values_list("pk", *PAYLOAD_LOOKUPS.values()))
    return {r[0]: dict(zip(PAYLOAD_LOOKUPS, r[1:], strict=True)) for r in rows}


def build_points(chunk_ids: list[int], *, model_id: str,
                 evaluation: bool = False) -> tuple[list[IndexPoint], list[int]]:
    """Points for the chunks that exist now (with their cached vectors); ids that no longer exist.

    An evaluation dataset's chunks count as gone (the live store drops them) unless `evaluation`: only the
    throwaway store an evaluation builds for itself (search.quality.runs.throwaway_index) holds them."""
    qs = Chunk.objects.filter(pk__in=chunk_ids)
    if not evaluation:
        qs = qs.filter(dataset__is_evaluation=False)
    # the columns a point needs, as values: a model instance per chunk cost more than the rest of its point
    rows = list(qs.values_list("pk", "text_hash", "terms", "term_weights", *PAYLOAD_LOOKUPS.values()))
    vectors = cached_vectors(model_id=model_id, hashes={r[1] for r in rows})
    points, missing, unweighted = [], [], []
    for pk, hash_, terms, weights, *payload_values in rows:
        vec = vectors.get(hash_)
        if vec is None:  # never embedded for this model: the ingest runner writes the cache first
            missing.append(pk)
            continue
        payload = dict(zip(PAYLOAD_LOOKUPS, payload_values, strict=True))  # what chunk_payload(chunk) gives
        point = IndexPoint(id=pk, dense=vec, sparse=SparseVec(terms, weights), payload=payload)
        if weights is None or len(weights) != len(terms):
            unweighted.append(point)
        points.append(point)
    _analyse(unweighted)
    if missing:
        log.warning("apply_outbox: %d chunks have no %s vector; run ingest again to embed them", len(missing),
                    model_id)
    present = {r[0] for r in rows}
    return points, [i for i in chunk_ids if i not in present]


def _analyse(points: list[IndexPoint]) -> None:
    """Give these points (rows without stored weights: written before chunk rows kept them) the sparse vector their
    row's text analyses to, as the writer stores it (search.ingest.base.row_sparse), read in one more query."""
    if not points:
        return
    texts = {pk: (text, symbol, heading_path) for pk, text, symbol, heading_path in
             Chunk.objects.filter(pk__in=[p.id for p in points]).values_list("pk", "text", "symbol", "heading_path")}
    for p in points:
        text, symbol, heading_path = texts.get(p.id, ("", "", []))
        p.sparse = encode_document(sparse_document_text(text=text, path=p.payload["path"], symbol=symbol,
                                                        heading_path=heading_path), kind=p.payload["kind"])


def apply_outbox(*, index: VectorIndex | None = None, max_rows: int | None = None,
                 wait_s: float = 60.0, batch: int = APPLY_BATCH, yield_to_reads_s: float = 0.0) -> int:
    """Apply pending outbox rows to `index` (default: the process singleton) and to the same store's collections
    of every adapted model a dataset is searched or written with (search.engine.dataset_models). Returns rows read.

    A model whose folder is gone is logged and skipped, so it never holds up the configured model's collections."""
    index = index or get_index()
    kw = {"max_rows": max_rows, "wait_s": wait_s, "batch": batch, "yield_to_reads_s": yield_to_reads_s}
    with bulk_work():  # the collector's bulk policy (config/gcpolicy.py)
        total = apply_store_outbox(index=index, **kw)
        for name in models_in_use():
            try:
                sibling = model_index(index, name=name)
            except DependencyDown as exc:
                log.warning("apply_outbox: skipping the adapted model %r: %s", name, exc.detail)
                continue
            total += apply_store_outbox(index=sibling, **kw)
    return total


def apply_store_outbox(*, index: VectorIndex, max_rows: int | None = None,
                       wait_s: float = 60.0, batch: int = APPLY_BATCH, yield_to_reads_s: float = 0.0) -> int:
    """Apply pending IndexOutbox rows of this store's model past its watermark. Idempotent; returns rows read.

    Each pending chunk id is re-read from Postgres and written in its current
    state (present -> upsert, gone -> delete), so replays and out-of-order
    rows converge on the truth. Only writers and the applier call this; a query
    never does (it would make a read wait on a write).

    A young gap in the ids (a transaction that may still commit) holds the
    watermark before it, but the pass still reads on to the end, so every row
    committed before the pass began is applied; `scanned_id`/`scanned_at`
    record that, which is what `wait_until_indexed` checks.

    `yield_to_reads_s` > 0 (the background applier): before each batch's Python work and before its write, wait
    up to that long for this process's queries in flight to finish (READ_GATE), so a query never queues behind
    a whole batch of index writes.
    """
    if not _apply_lock.acquire(timeout=wait_s):
        return 0
    try:
        started = _db_clock()
        # every row visible now (any model's) is read or known to be another model's by the end of a drained pass:
        # what a waiter on another model's rows, or on rows interleaved with them, needs (is_indexed)
        top = IndexOutbox.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        wm, _ = IndexWatermark.objects.get_or_create(store=index.store_key)
        safe = cursor = wm.last_outbox_id
        held = False  # a young gap was seen: the safe watermark stays where it is for this pass
        total = 0
        while max_rows is None or total < max_rows:
            rows = list(IndexOutbox.objects.filter(pk__gt=cursor, model_id=index.model_id)
                        .order_by("pk").values_list("pk", "chunk_id", "created_at")[:batch])
            if not rows:
                if not held:  # other models' rows past the watermark are nothing for this store
                    other_max = (IndexOutbox.objects.filter(pk__gt=safe).exclude(model_id=index.model_id)
                                 .order_by("-pk").values_list("pk", flat=True).first())
                    safe = max(safe, other_max or 0)
                break
            ids = sorted({r[1] for r in rows})
            if yield_to_reads_s:
                READ_GATE.wait_idle(timeout=yield_to_reads_s)
            points, gone = build_points(ids, model_id=index.model_id)
            if yield_to_reads_s:
                READ_GATE.wait_idle(timeout=yield_to_reads_s)
            index.upsert(points)
            index.delete(gone)
            total += len(rows)
            if not held:
                safe = _safe_watermark(cursor, rows, model_id=index.model_id)
                held = safe < rows[-1][0]
            cursor = rows[-1][0]
            IndexWatermark.objects.filter(pk=wm.pk).update(last_outbox_id=safe)
        if total and hasattr(index, "flush"):
            index.flush()
        drained = max_rows is None or total < max_rows
        update: dict[str, Any] = {"last_outbox_id": safe}
        if drained:  # everything committed before `started` is in the index now
            update.update(scanned_id=max(cursor, safe, top), scanned_at=started)
        IndexWatermark.objects.filter(pk=wm.pk).update(**update)
        return total
    finally:
        _apply_lock.release()


def _db_clock() -> Any:
    """Postgres's clock: the applier and a waiter in another process compare instants on one clock."""
    with connection.cursor() as cur:
        cur.execute("SELECT clock_timestamp()")
        return cur.fetchone()[0]


def _safe_watermark(last: int, rows: list[tuple[int, int, Any]], *, model_id: str) -> int:
    """How far this store's watermark may move past `last` after reading `rows` (its model's, in id order): up to the
    first young gap, an id no visible row holds, which may be a transaction still in flight.

    Another model's rows (a dataset written with two models while it switches) fill ids between this model's: they
    are visible, so they are no gap, and holding the watermark before them made every pass of the next 30 s read
    those rows again."""
    expected = last + 1
    now = timezone.now()
    others: set[int] | None = None
    for pk, _, created in rows:
        if pk != expected and (now - created).total_seconds() < GAP_GRACE_S:
            if others is None:  # read once, at the first gap: a store with one model in use never reads it
                others = set(IndexOutbox.objects.filter(pk__gt=last, pk__lt=rows[-1][0])
                             .exclude(model_id=model_id).values_list("pk", flat=True))
            if not all(i in others for i in range(expected, pk)):
                return expected - 1
        expected = pk + 1
    return rows[-1][0]


def last_outbox_id(*, index: VectorIndex | None = None) -> int:
    """The newest outbox row for this store's model: what a writer waits for to read its own writes."""
    index = index or get_index()
    return IndexOutbox.objects.filter(model_id=index.model_id).order_by("-pk").values_list("pk", flat=True).first() or 0


def is_indexed(*, through: int, since: Any, index: VectorIndex | None = None) -> bool:
    """True once every outbox row up to `through` that was committed before `since` is in the index."""
    index = index or get_index()
    wm = IndexWatermark.objects.filter(store=index.store_key).values("last_outbox_id", "scanned_id",
                                                                      "scanned_at").first()
    if wm is None:
        return through <= 0
    if wm["last_outbox_id"] >= through:
        return True
    return wm["scanned_id"] >= through and wm["scanned_at"] is not None and wm["scanned_at"] >= since


def wait_until_indexed(*, through: int | None = None, index: VectorIndex | None = None, timeout: float = 30.0,
                       poll_s: float = 0.05) -> bool:
    """Read-your-writes without making reads write: block until the applier has carried the outbox (up to
    `through`, default: everything committed now) into the index. Only reads Postgres; returns False on timeout.

    Call it after the write has committed. It never applies anything itself: it NOTIFYs the applier that owns
    the store (the background thread; with a Qdrant server, Celery beat's next run) and waits for a pass that
    began after the call.
    """
    index = index or get_index()
    since = _db_clock()
    through = last_outbox_id(index=index) if through is None else through
    if not is_indexed(through=through, since=since, index=index):
        with connection.cursor() as cur:  # ask the owner's applier thread for a pass that starts after `since`
            cur.execute("SELECT pg_notify(%s, '')", [OUTBOX_CHANNEL])
    deadline = time.monotonic() + timeout
    while True:
        if is_indexed(through=through, since=since, index=index):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def apply_until_indexed(*, index: VectorIndex, store: VectorIndex, through: int, timeout: float = 60.0) -> bool:
    """For the process that owns the store and runs no applier thread (a command, a test): apply passes until
    `store` (index or one of its model stores) holds every row up to `through`; False on timeout."""
    since = _db_clock()
    deadline = time.monotonic() + timeout
    while True:
        apply_outbox(index=index)
        if is_indexed(through=through, since=since, index=store):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def pending_outbox(*, index: VectorIndex | None = None) -> int:
    index = index or get_index()
    last = IndexWatermark.objects.filter(store=index.store_key).values_list("last_outbox_id", flat=True).first() or 0
    return IndexOutbox.objects.filter(pk__gt=last, model_id=index.model_id).count()


def rebuild(*, index: VectorIndex | None = None, batch: int = 2000, progress: bool = False) -> dict[str, float]:
    """Drop and rebuild the collection from Postgres (no re-embedding), then optimize. Returns timings (s)."""
    index = index or get_index()
    t0 = time.perf_counter()
    with transaction.atomic():
        top = IndexOutbox.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    index.drop()
    ids = list(Chunk.objects.filter(dataset__is_evaluation=False).order_by("pk").values_list("pk", flat=True))
    bar = tqdm(total=len(ids), desc="reindex", unit="chunk", disable=not progress)
    for i in range(0, len(ids), batch):
        points, _ = build_points(ids[i:i + batch], model_id=index.model_id)
        index.upsert(points)
        bar.update(len(ids[i:i + batch]))
    bar.close()
    IndexWatermark.objects.update_or_create(store=index.store_key, defaults={"last_outbox_id": top})
    for name in models_in_use():  # each adapted model's collections: the chunks of the datasets that use it
        sibling = model_index(index, name=name)
        sibling.drop()
        used = Q(dataset__embedding_model=name) | Q(dataset__embedding_model_next=name)
        ids = list(Chunk.objects.filter(used, dataset__is_evaluation=False).order_by("pk").values_list("pk", flat=True))
        for i in range(0, len(ids), batch):
            sibling.upsert(build_points(ids[i:i + batch], model_id=sibling.model_id)[0])
        IndexWatermark.objects.update_or_create(store=sibling.store_key, defaults={"last_outbox_id": top})
        sibling.optimize()
    t1 = time.perf_counter()
    opt = index.optimize()
    apply_outbox(index=index)  # whatever arrived during the rebuild
    return {"points": float(index.count()), "upsert_s": t1 - t0, "optimize_s": opt}


# --------------------------------------------------------------------------- the background thread
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
            raw.execute(f"LISTEN {OUTBOX_CHANNEL}")
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
