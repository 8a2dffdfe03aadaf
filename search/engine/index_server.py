"""The server index adapter: a Qdrant server or cluster through qdrant-client (QDRANT_URL), or its local mode.

Why: a server scales out and serves every process (web, workers, commands) at once; `prefix` names a throwaway
family of collections on a shared server (evaluation snapshots).
"""
from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

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
    from qdrant_client import models as qm

    from search.engine.sparse import SparseVec

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class ClientIndex:
    """A Qdrant server or cluster through qdrant-client (one collection per partition);
    `location=":memory:"` is its local mode (the tests')."""

    def __init__(self, *, model_id: str, dim: int, url: str | None = None, location: str | None = None,
                 api_key: str | None = None, timeout: float = 5.0, prefix: str = "") -> None:
        """`prefix` names a throwaway family on a shared server (evaluation); the vectors' model id stays
        `model_id`."""
        from qdrant_client import QdrantClient, models  # noqa: PLC0415 - optional adapter: the client loads only with a QDRANT_URL

        self.m = models
        self.prefix = prefix
        if url:
            self.client = QdrantClient(url=url, api_key=api_key, timeout=int(max(1, timeout)))
            self._store_base = f"qdrant:{url}"
        else:
            self.client = QdrantClient(location=location or ":memory:")
            self._store_base = f"qdrant-memory:{id(self)}"
        self._family(model_id=model_id, dim=dim)

    def _family(self, *, model_id: str, dim: int) -> None:
        """Name this handle's collections: the family of `model_id` (under `prefix`) on its client."""
        self.model_id = model_id
        self.dim = dim
        self.collections = {p: collection_name(self.prefix + model_id, dim, partition=p) for p in PARTITIONS}
        self.collection = f"context_{model_slug(self.prefix + model_id, dim)}"  # the family's name, for health and store keys
        self._siblings: dict[str, ClientIndex] = {}
        self._parent: ClientIndex | None = None
        self.store_key = f"{self._store_base}/{self.collection}"
        self._ensured = False

    def for_model(self, *, model_id: str, dim: int) -> ClientIndex:
        """The same store's collections for another model (a dataset searched with an adapted model)."""
        if self._parent is not None:
            return self._parent.for_model(model_id=model_id, dim=dim)
        if model_id == self.model_id:
            return self
        if model_id not in self._siblings:
            sibling = copy.copy(self)  # the same client and store, another model's family of collections
            sibling._family(model_id=model_id, dim=dim)
            sibling._parent = self
            self._siblings[model_id] = sibling
        return self._siblings[model_id]

    def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        try:
            self._ensure()
            return fn(*args, **kwargs)
        except DependencyDown:
            raise
        except Exception as exc:
            log.warning("qdrant request failed: %r", exc)
            raise DependencyDown("qdrant", "The vector index (qdrant) is unreachable; try again.") from exc

    def _ensure(self) -> None:
        if self._ensured:
            return
        m = self.m
        for collection in self.collections.values():
            if self.client.collection_exists(collection):
                continue
            self.client.create_collection(
                collection,
                vectors_config={DENSE: m.VectorParams(size=self.dim, distance=m.Distance.COSINE)},
                sparse_vectors_config={SPARSE: m.SparseVectorParams()},
            )
            for name in KEYWORD_FIELDS:
                schema = (m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, prefix=True)
                          if name == "path" and hasattr(m.KeywordIndexParams, "model_fields")
                          and "prefix" in m.KeywordIndexParams.model_fields else m.PayloadSchemaType.KEYWORD)
                self.client.create_payload_index(collection, name, field_schema=schema)
            for name in INTEGER_FIELDS:
                self.client.create_payload_index(collection, name, field_schema=m.PayloadSchemaType.INTEGER)
        self._ensured = True

    def _filter(self, flt: IndexFilter) -> qm.Filter:
        m = self.m
        must = [m.FieldCondition(key="dataset_id", match=m.MatchAny(any=[int(x) for x in flt.dataset_ids]))]
        for key in ("repo", "lang", "kind", "book_id", "ruleset_id"):
            values = getattr(flt, key)
            if values:
                must.append(m.FieldCondition(key=key, match=m.MatchAny(any=[str(v) for v in values])))
        if flt.paths is not None:
            must.append(m.FieldCondition(key="path", match=m.MatchAny(any=list(flt.paths))))
        if flt.path_prefix:
            must.append(m.FieldCondition(key="path", match=m.MatchPrefix(prefix=flt.path_prefix)))
        return m.Filter(must=must)

    def upsert(self, points: list[IndexPoint]) -> None:
        m = self.m
        groups: dict[str, list[Any]] = {}
        for p in points:
            groups.setdefault(partition_of(p.payload.get("kind")), []).append(
                m.PointStruct(id=p.id, payload=p.payload,
                              vector={DENSE: list(map(float, p.dense)),
                                      SPARSE: m.SparseVector(indices=p.sparse.indices, values=p.sparse.values)}))
        for partition, batch in groups.items():
            self._call(self.client.upsert, self.collections[partition], points=batch, wait=True)

    def delete(self, ids: list[int]) -> None:
        """A deleted chunk's kind is gone with its row, so every partition drops the ids (a miss is a no-op)."""
        if ids:
            selector = self.m.PointIdsList(points=[int(i) for i in ids])
            for collection in self.collections.values():
                self._call(self.client.delete, collection, points_selector=selector, wait=True)

    def set_payload(self, ids: list[int], payload: dict[str, Any]) -> None:
        """Replace the whole payload of these points (vectors untouched): how a stale payload is repaired."""
        if ids:
            self._call(self.client.overwrite_payload, self.collections[partition_of(payload.get("kind"))],
                       payload=payload, points=[int(i) for i in ids], wait=True)

    def iter_payloads(self, *, batch: int = SCROLL_BATCH) -> Iterator[list[tuple[int, dict[str, Any]]]]:
        """Every point as (id, payload), a batch at a time (scroll pages by point id), collection by collection."""
        for collection in self.collections.values():
            offset = None
            while True:
                records, offset = self._call(self.client.scroll, collection, limit=batch, offset=offset,
                                             with_payload=True, with_vectors=False)
                if records:
                    yield [(int(r.id), dict(r.payload or {})) for r in records]
                if offset is None or not records:
                    break

    def _query(self, query: list[float] | qm.SparseVector, using: str, flt: IndexFilter,
               limit: int) -> list[tuple[int, float]]:
        if not flt.dataset_ids or (flt.paths is not None and not flt.paths):
            return []
        qfilter = self._filter(flt)
        parts = []
        for partition in partitions_for(flt):
            res = self._call(self.client.query_points, self.collections[partition], query=query, using=using,
                             query_filter=qfilter, limit=limit, with_payload=False)
            parts.append([(int(p.id), float(p.score)) for p in res.points])
        return merge_hits(parts, limit=limit)

    def search_dense(self, vector: list[float], *, flt: IndexFilter, limit: int) -> list[tuple[int, float]]:
        return self._query(list(map(float, vector)), DENSE, flt, limit)

    def search_sparse(self, vector: SparseVec, *, flt: IndexFilter, limit: int) -> list[tuple[int, float]]:
        if not vector.indices:
            return []
        return self._query(self.m.SparseVector(indices=vector.indices, values=vector.values), SPARSE, flt, limit)

    def count(self) -> int:
        return sum(self.counts().values())

    def counts(self) -> dict[str, int]:
        """Points per collection (`health` shows the split)."""
        return {c: int(self._call(self.client.count, c, exact=True).count) for c in self.collections.values()}

    def optimize(self) -> float:
        """A server builds HNSW in the background; we only wait until every collection reports green."""
        t0 = time.perf_counter()
        deadline = t0 + 600
        for collection in self.collections.values():
            while time.perf_counter() < deadline:
                info = self._call(self.client.get_collection, collection)
                if str(getattr(info, "status", "green")).lower().endswith("green"):
                    break
                time.sleep(0.5)
        return time.perf_counter() - t0

    def flush(self) -> None:
        return None

    def drop(self) -> None:
        for collection in self.collections.values():
            self._call(self.client.delete_collection, collection)
        self._ensured = False

    def health(self) -> str:
        return "qdrant " + ", ".join(f"{name}: {n} points" for name, n in self.counts().items())

    def close(self) -> None:
        self._siblings.clear()  # they share this client
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing a dead connection is fine
            pass
