"""Prove, and on request repair, that the index holds exactly the points of the chunks in Postgres.

Why this exists: Postgres is the truth and the index a projection written by
one applier from the outbox, and every way a chunk leaves queues its delete
(the search_chunk trigger, migration 0002). That guarantee is only worth what
can check it: a store restored from an old copy, a TRUNCATE, an outbox row the
applier skipped (a gap older than GAP_GRACE_S), a point written by hand or a
bug would all go unseen, since queries re-check access in SQL and hide them.
So this module compares both sides id by id:

  orphans     points whose chunk no longer exists
  missing     chunks that have a vector for the store's model but no point
  stale       points whose payload (dataset_id, project_id and the filter
              fields) differs from what Postgres says now
  unembedded  chunks with no vector for this model: not repairable here
              (`manage.py ingest` or the admin's "Recompute embeddings")

A repair writes only what Postgres says: orphans are deleted, missing points
are built from the EmbeddingCache (never re-embedded), stale payloads are
overwritten. It runs while holding this process's applier lock, so the applier
cannot interleave an older state, and re-checks afterwards.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Q
from tqdm import tqdm

from inference.models import EmbeddingCache
from search.engine.applier import apply_outbox, build_points, hold_applier, payloads_for, pending_outbox
from search.engine.dataset_models import CONFIGURED, models_in_use
from search.engine.index import VectorIndex, get_index, model_index
from search.engine.index_schema import INTEGER_FIELDS
from search.models import Chunk, IndexOutbox, ReconcileRun

SAMPLE = 20  # ids shown per kind in a report


@dataclass
class Scan:
    """One comparison of the index with Postgres. Ids touched by outbox rows written during it are left out."""

    points: int = 0
    chunks: int = 0
    orphans: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    stale: list[int] = field(default_factory=list)
    unembedded: int = 0
    in_flight: int = 0  # discrepancies explained by a change made while the scan ran

    @property
    def dirty(self) -> bool:
        return bool(self.orphans or self.missing or self.stale)

    def counts(self) -> dict[str, int]:
        return {"orphans": len(self.orphans), "missing": len(self.missing), "stale": len(self.stale)}


@dataclass
class ReconcileReport:
    store: str
    model_id: str
    applied: int  # outbox rows the applier read before the check
    pending: int  # outbox rows still past the watermark when the run ended
    found: Scan
    fixed: bool = False
    after: Scan | None = None
    duration_s: float = 0.0
    run_id: int | None = None

    @property
    def exact(self) -> bool:
        return not (self.after or self.found).dirty

    def as_dict(self) -> dict[str, Any]:
        """Counts plus a sample of ids per kind, for `--json` and the admin."""
        def scan_dict(s: Scan) -> dict[str, Any]:
            d = asdict(s)
            for key in ("orphans", "missing", "stale"):
                d[f"{key}_sample"] = sorted(d.pop(key))[:SAMPLE]
            return {**s.counts(), **d}

        return {"store": self.store, "model_id": self.model_id, "applied": self.applied, "pending": self.pending,
                "fixed": self.fixed, "exact": self.exact, "duration_s": round(self.duration_s, 3),
                "run_id": self.run_id, "found": scan_dict(self.found),
                "after": scan_dict(self.after) if self.after else None}


def _same_payload(got: dict[str, Any], want: dict[str, Any]) -> bool:
    for key, value in want.items():
        have = got.get(key)
        if key in INTEGER_FIELDS:
            try:
                have = int(have) if have is not None else None
            except (TypeError, ValueError):
                return False
        if have != value:
            return False
    return True


def _outbox_top() -> int:
    return IndexOutbox.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def scan(*, index: VectorIndex, progress: bool = False, name: str = CONFIGURED) -> Scan:
    """Compare every point with Postgres, then every chunk with the points seen.

    `name`: the dataset model whose collections `index` is (search.engine.dataset_models); a store must hold the
    chunks of the datasets written with its model, and only those are expected there. Points the configured
    model's store keeps from before a dataset switched away are not counted as orphans: they are still that
    dataset's chunks, and a switch back rewrites them.

    Why no lock: a scan of a large store takes seconds and the web process's
    queries run the applier; instead, any id that an outbox row written after
    the scan began touches is counted as in flight, not as a discrepancy.
    """
    top = _outbox_top()
    result = Scan()
    seen: set[int] = set()
    bar = tqdm(total=index.count(), desc="reconcile: points", unit="point", disable=not progress)
    for batch in index.iter_payloads():
        expected = payloads_for([pid for pid, _ in batch])
        for pid, payload in batch:
            seen.add(pid)
            want = expected.get(pid)
            if want is None:
                result.orphans.append(pid)
            elif not _same_payload(payload, want):
                result.stale.append(pid)
        bar.update(len(batch))
    bar.close()
    has_vector = Exists(EmbeddingCache.objects.filter(model_id=index.model_id, text_hash=OuterRef("text_hash")))
    live = Chunk.objects.filter(dataset__is_evaluation=False)  # evaluation corpora never enter the live store
    # the chunks written with this store's model (search.engine.dataset_models.writing_models): a dataset searched
    # with an adapted model writes its new chunks to that model's collections only
    live = live.filter(Q(dataset__embedding_model=name) | Q(dataset__embedding_model_next=name) if name != CONFIGURED
                       else Q(dataset__embedding_model=CONFIGURED))
    rows = live.order_by().annotate(has_vector=has_vector).values_list("pk", "has_vector")
    bar = tqdm(total=live.count(), desc="reconcile: chunks", unit="chunk", disable=not progress)
    for pk, vector in rows.iterator(chunk_size=5000):
        result.chunks += 1
        bar.update(1)
        if pk in seen:
            continue
        if vector:
            result.missing.append(pk)
        else:
            result.unembedded += 1
    bar.close()
    result.points = len(seen)
    moved = set(IndexOutbox.objects.filter(pk__gt=top).values_list("chunk_id", flat=True))
    if moved:
        for key in ("orphans", "missing", "stale"):
            ids = getattr(result, key)
            kept = [i for i in ids if i not in moved]
            result.in_flight += len(ids) - len(kept)
            setattr(result, key, kept)
    return result


def repair(*, index: VectorIndex, found: Scan) -> dict[str, int]:
    """Write Postgres's current state for every discrepant id; returns what was written.

    Everything is re-read under the applier lock, so a chunk deleted since the
    scan is deleted rather than re-added, and a payload changed since is written
    as it is now. Missing points come from cached vectors only; a chunk whose
    vector is gone stays missing (reported as such) rather than being re-embedded.
    """
    done = {"deleted": 0, "upserted": 0, "payloads": 0}
    with hold_applier():
        ids = sorted(set(found.orphans) | set(found.missing))
        for i in range(0, len(ids), 1000):
            part = ids[i:i + 1000]
            points, gone = build_points(part, model_id=index.model_id)
            index.upsert(points)
            index.delete(gone)
            done["upserted"] += len(points)
            done["deleted"] += len(gone)
        for i in range(0, len(found.stale), 1000):
            part = found.stale[i:i + 1000]
            current = payloads_for(part)
            groups: dict[tuple[tuple[str, Any], ...], list[int]] = {}
            for pid, payload in current.items():
                groups.setdefault(tuple(sorted(payload.items())), []).append(pid)
            for payload_items, pids in groups.items():
                index.set_payload(pids, dict(payload_items))
                done["payloads"] += len(pids)
            gone = [pid for pid in part if pid not in current]
            index.delete(gone)
            done["deleted"] += len(gone)
        if hasattr(index, "flush"):
            index.flush()
    return done


def reconcile_all(*, index: VectorIndex | None = None, fix: bool = False, progress: bool = False,
                  record: bool = True) -> list[ReconcileReport]:
    """`reconcile` for the configured model's collections, then for each adapted model's that a dataset uses."""
    index = index or get_index()
    return [reconcile(index=index, fix=fix, progress=progress, record=record, name=name)
            for name in (CONFIGURED, *models_in_use())]


def reconcile(*, index: VectorIndex | None = None, fix: bool = False, progress: bool = False,
              record: bool = True, name: str = CONFIGURED) -> ReconcileReport:
    """Apply the pending outbox, compare the index with Postgres, optionally repair and re-check.

    The outbox goes first so that a change already queued is not reported as a
    discrepancy; what is still pending afterwards (rows held behind a young id
    gap) is reported as `pending`. Each run is stored as a ReconcileRun for the
    dashboard unless `record` is false.
    """
    root = index or get_index()
    t0 = time.perf_counter()
    applied = apply_outbox(index=root)
    index = model_index(root, name=name)
    found = scan(index=index, progress=progress, name=name)
    after = None
    if fix:
        if found.dirty:
            repair(index=index, found=found)
            after = scan(index=index, progress=progress, name=name)
        else:
            after = found
    report = ReconcileReport(store=index.store_key, model_id=index.model_id, applied=applied,
                             pending=pending_outbox(index=index), found=found, fixed=fix, after=after,
                             duration_s=time.perf_counter() - t0)
    if record:
        run = ReconcileRun.objects.create(
            store=index.store_key[:500], model_id=index.model_id, points=(after or found).points,
            chunks=found.chunks, orphans=len(found.orphans), missing=len(found.missing), stale=len(found.stale),
            unembedded=found.unembedded, pending=report.pending, fixed=fix,
            orphans_after=len(after.orphans) if after else None, missing_after=len(after.missing) if after else None,
            stale_after=len(after.stale) if after else None, duration_s=report.duration_s)
        report.run_id = run.pk
    return report

