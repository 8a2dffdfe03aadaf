"""The embedded index adapter: Qdrant's engine in-process (qdrant-edge-py), the store under QDRANT_PATH.

Why: it needs no setup and answers a filtered hybrid query in milliseconds. The store admits one open handle, so
only the process that holds it (the web process, or a command with its own `path=`) reads or writes it.
"""
from __future__ import annotations

import gc
import logging
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.errors import DependencyDown
from search.engine.index_schema import (
    DENSE,
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    PARTITIONS,
    SCROLL_BATCH,
    SPARSE,
    IndexFilter,
    IndexPoint,
    collection_name,
    merge_hits,
    model_slug,
    partition_of,
    partitions_for,
)

if TYPE_CHECKING:
    import qdrant_edge as qe

    from search.engine.sparse import SparseVec

log = logging.getLogger(__name__)


class EdgeIndex:
    """Qdrant's engine in-process: one shard per partition under the store directory, one handle each."""

    def __init__(self, *, path: Path, model_id: str, dim: int) -> None:
        import qdrant_edge as qe  # noqa: PLC0415 - optional adapter: the embedded engine loads only when no QDRANT_URL is set

        self._qe = qe
        self.model_id = model_id
        self.dim = dim
        self.root = Path(path)
        self.paths = {p: self.root / collection_name(model_id, dim, partition=p) for p in PARTITIONS}
        self.store_key = f"edge:{self.root.resolve()}/context_{model_slug(model_id, dim)}"
        self._lock = threading.RLock()
        self._shards = {p: self._open(p) for p in PARTITIONS}
        self._siblings: dict[str, EdgeIndex] = {}
        self._parent: EdgeIndex | None = None

    def for_model(self, *, model_id: str, dim: int) -> EdgeIndex:
        """The same store's shards for another model (a dataset searched with an adapted model): its own
        directories beside these, opened once by the process that holds this handle and closed with it."""
        if self._parent is not None:  # one handle per shard: a sibling's siblings are its parent's
            return self._parent.for_model(model_id=model_id, dim=dim)
        if model_id == self.model_id:
            return self
        with self._lock:
            if model_id not in self._siblings:
                sibling = EdgeIndex(path=self.root, model_id=model_id, dim=dim)
                sibling._parent = self
                self._siblings[model_id] = sibling
            return self._siblings[model_id]

    def _config(self) -> qe.EdgeConfig:
        qe = self._qe
        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams()},
        )

    def _open(self, partition: str) -> qe.EdgeShard:
        qe = self._qe
        path = self.paths[partition]
        path.mkdir(parents=True, exist_ok=True)
        if any(path.iterdir()):
            try:
                return qe.EdgeShard.load(str(path))
            except Exception as exc:
                if "WouldBlock" not in str(exc):
                    raise
                # A handle this process dropped without close() keeps the shard's WAL lock until the collector frees
                # it (a handle and its siblings refer to each other: only the cyclic collector frees them, and a
                # bulk job defers that collector: config.gcpolicy). Collect now and open once more.
                gc.collect()
                return qe.EdgeShard.load(str(path))
        shard = qe.EdgeShard.create(str(path), self._config())
        for name in KEYWORD_FIELDS:
            schema = qe.KeywordIndexParams(prefix=True) if name == "path" else qe.PayloadSchemaType.Keyword
            shard.update(qe.UpdateOperation.create_field_index(name, schema))
        for name in INTEGER_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Integer))
        return shard

    def _filter(self, flt: IndexFilter) -> qe.Filter:
        qe = self._qe
        must = [qe.FieldCondition(key="dataset_id", match=qe.MatchAny([int(x) for x in flt.dataset_ids]))]
        for key in ("repo", "lang", "kind", "book_id", "ruleset_id"):
            values = getattr(flt, key)
            if values:
                must.append(qe.FieldCondition(key=key, match=qe.MatchAny([str(v) for v in values])))
        if flt.paths is not None:
            must.append(qe.FieldCondition(key="path", match=qe.MatchAny(list(flt.paths))))
        if flt.path_prefix:
            must.append(qe.FieldCondition(key="path", match=qe.MatchPrefix(flt.path_prefix)))
        return qe.Filter(must=must)

    def upsert(self, points: list[IndexPoint]) -> None:
        qe = self._qe
        groups: dict[str, list[Any]] = {}
        for p in points:
            groups.setdefault(partition_of(p.payload.get("kind")), []).append(
                qe.Point(p.id, {DENSE: list(map(float, p.dense)),
                                SPARSE: qe.SparseVector(p.sparse.indices, p.sparse.values)}, p.payload))
        with self._lock:
            for partition, batch in groups.items():
                self._shards[partition].update(qe.UpdateOperation.upsert_points(batch))

    def delete(self, ids: list[int]) -> None:
        """A deleted chunk's kind is gone with its row, so every partition drops the ids (a miss is a no-op)."""
        if ids:
            op = self._qe.UpdateOperation.delete_points([int(i) for i in ids])
            with self._lock:
                for shard in self._shards.values():
                    shard.update(op)

    def set_payload(self, ids: list[int], payload: dict[str, Any]) -> None:
        """Replace the whole payload of these points (vectors untouched): how a stale payload is repaired."""
        if ids:
            with self._lock:
                self._shards[partition_of(payload.get("kind"))].update(
                    self._qe.UpdateOperation.overwrite_payload([int(i) for i in ids], payload))

    def iter_payloads(self, *, batch: int = SCROLL_BATCH) -> Iterator[list[tuple[int, dict[str, Any]]]]:
        """Every point as (id, payload), a batch at a time; the lock is held per batch, so queries interleave."""
        for partition in PARTITIONS:
            offset = None
            while True:
                req = self._qe.ScrollRequest(offset=offset, limit=batch, with_payload=True, with_vector=False)
                with self._lock:
                    records, offset = self._shards[partition].scroll(req)
                if records:
                    yield [(int(r.id), dict(r.payload or {})) for r in records]
                if offset is None or not records:
                    break

    def _query(self, query: qe.Query, flt: IndexFilter, limit: int) -> list[tuple[int, float]]:
        if not flt.dataset_ids or (flt.paths is not None and not flt.paths):
            return []
        req = self._qe.QueryRequest(limit=limit, query=query, filter=self._filter(flt), with_payload=False,
                                    with_vector=False)
        parts = []
        try:
            with self._lock:
                for partition in partitions_for(flt):
                    parts.append([(int(h.id), float(h.score)) for h in self._shards[partition].query(req)])
        except Exception as exc:
            log.warning("qdrant query failed: %r", exc)  # the text may name collections: log, don't return it
            raise DependencyDown("qdrant", "The vector index (qdrant) failed to answer; try again.") from exc
        return merge_hits(parts, limit=limit)

    def search_dense(self, vector: list[float], *, flt: IndexFilter, limit: int) -> list[tuple[int, float]]:
        return self._query(self._qe.Query.Nearest(list(map(float, vector)), using=DENSE), flt, limit)

    def search_sparse(self, vector: SparseVec, *, flt: IndexFilter, limit: int) -> list[tuple[int, float]]:
        if not vector.indices:
            return []
        sv = self._qe.SparseVector(vector.indices, vector.values)
        return self._query(self._qe.Query.Nearest(sv, using=SPARSE), flt, limit)

    def count(self) -> int:
        with self._lock:
            return sum(int(shard.info().points_count) for shard in self._shards.values())

    def counts(self) -> dict[str, int]:
        """Points per collection (`health` shows the split)."""
        with self._lock:
            return {collection_name(self.model_id, self.dim, partition=p): int(shard.info().points_count)
                    for p, shard in self._shards.items()}

    def optimize(self) -> float:
        t0 = time.perf_counter()
        with self._lock:
            for shard in self._shards.values():
                shard.optimize()
                shard.flush()
        return time.perf_counter() - t0

    def flush(self) -> None:
        with self._lock:
            for shard in self._shards.values():
                shard.flush()

    def drop(self) -> None:
        with self._lock:
            for partition, shard in self._shards.items():
                shard.close()
                shutil.rmtree(self.paths[partition], ignore_errors=True)
                self._shards[partition] = self._open(partition)

    def health(self) -> str:
        return "edge " + ", ".join(f"{name}: {n} points" for name, n in self.counts().items())

    def close(self) -> None:
        with self._lock:
            for sibling in self._siblings.values():
                sibling.close()
            self._siblings.clear()
            for shard in self._shards.values():
                try:
                    shard.flush()
                finally:
                    shard.close()
