"""The Qdrant collection behind context search: one narrow interface, two adapters.

Why two adapters: the embedded engine (qdrant-edge-py) needs no setup and
answers a filtered hybrid query in milliseconds, while a Qdrant server or
cluster (qdrant-client, QDRANT_URL) scales out. Both keep, per embedding model,
one collection per kind of content (`code_context`,
`web_context`, `rules_context`; other prose kinds go with web), each with a
named dense vector (cosine) and a named sparse vector, keyed by the chunk id
(deterministic point ids make upserts and deletes idempotent). A query reads
only the collections of the kinds it can return and merges them by score: the
dense scores are cosines, and the sparse query carries its IDF over the
searched datasets (search.engine.term_stats), so both are comparable across
collections. There is no IDF modifier: a collection-wide IDF would let one
tenant's or an evaluation's corpus move everyone's scores.

Postgres is the truth; this index is a projection written only by
`apply_outbox()`. The embedded store admits one open handle, so the process
that owns it (the web process, or a command with its own `path=`) applies the
outbox; Celery workers only write Postgres.
"""
from __future__ import annotations

import logging
import re
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from tqdm import tqdm

from config.errors import DependencyDown
from search.engine.dataset_models import CONFIGURED, dim_of, model_id_of, models_in_use
from search.engine.encoders import dense_model_id, embedding_dim
from search.engine.sparse import SparseVec, encode_document, sparse_document_text
from search.models import Chunk, EmbeddingCache, IndexOutbox, IndexWatermark

if TYPE_CHECKING:
    import qdrant_edge as qe
    from qdrant_client import models as qm

    from search.models import Chunk

log = logging.getLogger(__name__)
_T = TypeVar("_T")

DENSE = "dense"
SPARSE = "sparse"
KEYWORD_FIELDS = ("repo", "path", "lang", "kind", "book_id", "ruleset_id")
INTEGER_FIELDS = ("dataset_id", "project_id")
# payload key -> the Chunk lookup that fills it; chunk_payload() and the reconciler read the same map
PAYLOAD_LOOKUPS = {"dataset_id": "dataset_id", "project_id": "dataset__project_id", "repo": "repo", "path": "path",
                   "lang": "lang", "kind": "kind", "book_id": "book_id", "ruleset_id": "ruleset_id"}
SCROLL_BATCH = 1000
APPLY_BATCH = 512
# Migration 0006 NOTIFYs this channel on every committed outbox insert; search/engine/applier.py listens.
OUTBOX_CHANNEL = "search_index_outbox"
# A gap in outbox ids younger than this may be a transaction still in flight: hold the watermark before it.
GAP_GRACE_S = 30.0


@dataclass
class IndexFilter:
    """Payload filter shared by both legs. dataset_ids is mandatory: access is resolved in SQL first."""

    dataset_ids: list[int]
    repo: list[str] | None = None
    lang: list[str] | None = None
    path_prefix: str | None = None
    paths: list[str] | None = None  # exact paths (a glob resolved in SQL)
    kind: list[str] | None = None
    book_id: list[str] | None = None
    ruleset_id: list[str] | None = None


@dataclass
class IndexPoint:
    id: int
    dense: list[float]
    sparse: SparseVec
    payload: dict[str, Any] = field(default_factory=dict)


class VectorIndex(Protocol):
    model_id: str
    store_key: str
    def upsert(self, points: list[IndexPoint]) -> None: ...
    def delete(self, ids: list[int]) -> None: ...
    def set_payload(self, ids: list[int], payload: dict[str, Any]) -> None: ...
    def iter_payloads(self, *, batch: int = SCROLL_BATCH) -> Iterator[list[tuple[int, dict[str, Any]]]]: ...
    def search_dense(self, vector: list[float], *, flt: IndexFilter, limit: int) -> list[tuple[int, float]]: ...
    def search_sparse(self, vector: SparseVec, *, flt: IndexFilter, limit: int) -> list[tuple[int, float]]: ...
    def count(self) -> int: ...
    def counts(self) -> dict[str, int]: ...
    def optimize(self) -> float: ...
    def drop(self) -> None: ...
    def health(self) -> str: ...
    def close(self) -> None: ...
    def for_model(self, *, model_id: str, dim: int) -> VectorIndex: ...


PARTITIONS = ("code", "web", "rules")


def partition_of(kind: str | None) -> str:
    """The collection a chunk of this kind lives in: code and rules have their own, every prose kind goes with
    web (a BEIR abstract is analysed like a web page)."""
    return kind if kind in ("code", "rules") else "web"


def partitions_for(flt: IndexFilter) -> tuple[str, ...]:
    """The collections a filter can find anything in: those of its kinds, or all of them."""
    if flt.kind:
        return tuple(p for p in PARTITIONS if p in {partition_of(k) for k in flt.kind})
    return PARTITIONS


def model_slug(model_id: str, dim: int) -> str:
    return re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_") + f"_{dim}"


def collection_name(model_id: str, dim: int, *, partition: str) -> str:
    return f"{partition}_context_{model_slug(model_id, dim)}"


def merge_hits(per_partition: list[list[tuple[int, float]]], *, limit: int) -> list[tuple[int, float]]:
    """The best `limit` hits over several collections (scores on one scale), best first, ties by id."""
    hits = [h for part in per_partition for h in part]
    return sorted(hits, key=lambda h: (-h[1], h[0]))[:limit]


# --------------------------------------------------------------------------- embedded (qdrant-edge-py)
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


# --------------------------------------------------------------------------- server (qdrant-client)
class ClientIndex:
    """A Qdrant server or cluster through qdrant-client (one collection per partition);
    `location=":memory:"`/`path=` is its local mode."""

    def __init__(self, *, model_id: str, dim: int, url: str | None = None, path: str | None = None,
                 location: str | None = None, api_key: str | None = None, timeout: float = 5.0,
                 prefix: str = "", _share: ClientIndex | None = None) -> None:
        """`prefix` names a throwaway family on a shared server (evaluation); the vectors' model id stays
        `model_id`. `_share`: another model's family on the same client (for_model)."""
        from qdrant_client import QdrantClient, models  # noqa: PLC0415 - optional adapter: the client loads only with a QDRANT_URL

        self.m = models
        self.model_id = model_id
        self.dim = dim
        self.prefix = prefix
        self.collections = {p: collection_name(prefix + model_id, dim, partition=p) for p in PARTITIONS}
        self.collection = f"context_{model_slug(prefix + model_id, dim)}"  # the family's name, for health and store keys
        self._siblings: dict[str, ClientIndex] = {}
        self._parent: ClientIndex | None = None
        if _share is not None:
            self.client = _share.client
            self._store_base = _share._store_base
        elif url:
            self.client = QdrantClient(url=url, api_key=api_key, timeout=int(max(1, timeout)))
            self._store_base = f"qdrant:{url}"
        elif path:
            self.client = QdrantClient(path=path)
            self._store_base = f"qdrant-local:{Path(path).resolve()}"
        else:
            self.client = QdrantClient(location=location or ":memory:")
            self._store_base = f"qdrant-memory:{id(self)}"
        self.store_key = f"{self._store_base}/{self.collection}"
        self._ensured = False

    def for_model(self, *, model_id: str, dim: int) -> ClientIndex:
        """The same store's collections for another model (a dataset searched with an adapted model)."""
        if self._parent is not None:
            return self._parent.for_model(model_id=model_id, dim=dim)
        if model_id == self.model_id:
            return self
        if model_id not in self._siblings:
            sibling = ClientIndex(model_id=model_id, dim=dim, prefix=self.prefix, _share=self)
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


# --------------------------------------------------------------------------- the process singleton
_singleton: VectorIndex | None = None
_singleton_lock = threading.Lock()


def open_index(*, path: str | Path | None = None, url: str | None = None, location: str | None = None,
               model_id: str | None = None, dim: int | None = None, prefix: str = "") -> VectorIndex:
    """A fresh index handle (not the singleton): benches/evaluation open their own store with `path=`, or a
    `prefix`ed family of collections on the server."""
    model_id = model_id or dense_model_id()
    dim = dim or embedding_dim()
    if url:
        return ClientIndex(url=url, api_key=settings.QDRANT_API_KEY, timeout=settings.QDRANT_TIMEOUT_S,
                           model_id=model_id, dim=dim, prefix=prefix)
    if location:
        return ClientIndex(location=location, model_id=model_id, dim=dim)
    try:
        return EdgeIndex(path=Path(path or settings.QDRANT_PATH), model_id=model_id, dim=dim)
    except DependencyDown:
        raise
    except Exception as exc:
        log.warning("could not open the embedded Qdrant store: %r", exc)
        raise DependencyDown("qdrant", "The embedded vector index (qdrant) could not be opened; see the server log."
                             ) from exc


def get_index() -> VectorIndex:
    """The process-wide index: QDRANT_URL if set, else the embedded store under QDRANT_PATH."""
    global _singleton
    with _singleton_lock:
        if _singleton is None:
            _singleton = open_index(url=settings.QDRANT_URL or None)
        return _singleton


def close_index() -> None:
    global _singleton
    with _singleton_lock:
        if _singleton is not None:
            _singleton.close()
            _singleton = None


def set_index(index: VectorIndex | None) -> None:
    """Install an index as the process singleton (tests, commands that own their own store)."""
    global _singleton
    with _singleton_lock:
        _singleton = index


@dataclass(frozen=True)
class StoreRef:
    """The names of a store another process holds: what wait_until_indexed reads (its watermark row and model)."""

    model_id: str
    store_key: str


def live_store_ref(*, name: str) -> StoreRef:
    """The live store of the dataset model `name` without opening it (the web process holds the embedded one)."""
    model_id, dim = model_id_of(name), dim_of(name)
    family = f"context_{model_slug(model_id, dim)}"
    if settings.QDRANT_URL:
        return StoreRef(model_id=model_id, store_key=f"qdrant:{settings.QDRANT_URL}/{family}")
    return StoreRef(model_id=model_id, store_key=f"edge:{Path(settings.QDRANT_PATH).resolve()}/{family}")


def searchable_here() -> bool:
    """Whether this process may search the live index without opening a handle another process holds: a Qdrant
    server serves every process; the embedded store only the process that already holds it (the web process)."""
    return bool(settings.QDRANT_URL) or _singleton is not None


def index_status() -> str:
    """Whether this process can query its index, without opening or warming it: /healthz calls this for a load
    balancer that polls, and opening the embedded store loads the embedding model and the segments (seconds).

    Embedded store: ready once the process holds the handle (the web process's applier thread opens it at start;
    otherwise the first query does). A process that holds none says so (DependencyDown) rather than opening one,
    which a second process could not do anyway: the store admits one handle. With QDRANT_URL: the server's
    /readyz, one short GET. Reads `_singleton` without its lock, so a probe never waits behind an opening."""
    if settings.QDRANT_URL:
        return _probe_server(url=settings.QDRANT_URL, api_key=settings.QDRANT_API_KEY)
    index = _singleton
    if index is None:
        raise DependencyDown("qdrant", "the embedded index is not open in this process yet (the web process opens "
                                       "it at start, or the first query does)")
    name = getattr(index, "collection", None) or index.store_key.rsplit("/", 1)[-1]
    return f"{index.store_key.split(':', 1)[0]} {name}: open"


def _probe_server(*, url: str, api_key: str | None, timeout_s: float = 1.0) -> str:
    request = urllib.request.Request(url.rstrip("/") + "/readyz", headers={"api-key": api_key} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # the configured server, not user input
            return f"qdrant server ready ({resp.status})"
    except (urllib.error.URLError, OSError) as exc:
        raise DependencyDown("qdrant", f"the Qdrant server at QDRANT_URL is not ready: {exc}") from exc


# --------------------------------------------------------------------------- the one applier
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
    chunks = list(qs.select_related("dataset"))
    vectors = dict(EmbeddingCache.objects.filter(model_id=model_id, text_hash__in={c.text_hash for c in chunks})
                   .values_list("text_hash", "vector"))
    points, missing = [], []
    for c in chunks:
        vec = vectors.get(c.text_hash)
        if vec is None:  # never embedded for this model: the ingest runner writes the cache first
            missing.append(c.pk)
            continue
        sparse = encode_document(sparse_document_text(text=c.text, path=c.path, symbol=c.symbol,
                                                      heading_path=c.heading_path), kind=c.kind)
        points.append(IndexPoint(id=c.pk, dense=vec, sparse=sparse, payload=chunk_payload(c)))
    if missing:
        log.warning("apply_outbox: %d chunks have no %s vector; run ingest again to embed them", len(missing),
                    model_id)
    present = {c.pk for c in chunks}
    return points, [i for i in chunk_ids if i not in present]


def model_index(index: VectorIndex, *, name: str) -> VectorIndex:
    """`index`'s store for the dataset model `name` ("" is the configured model: `index` itself)."""
    if name == CONFIGURED:
        return index
    return index.for_model(model_id=model_id_of(name), dim=dim_of(name))


def apply_outbox(*, index: VectorIndex | None = None, max_rows: int | None = None,
                 wait_s: float = 60.0, batch: int = APPLY_BATCH, yield_to_reads_s: float = 0.0) -> int:
    """Apply pending outbox rows to `index` (default: the process singleton) and to the same store's collections
    of every adapted model a dataset is searched or written with (search.engine.dataset_models). Returns rows read.

    A model whose folder is gone is logged and skipped, so it never holds up the configured model's collections."""
    index = index or get_index()
    kw = {"max_rows": max_rows, "wait_s": wait_s, "batch": batch, "yield_to_reads_s": yield_to_reads_s}
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
                safe = _safe_watermark(cursor, rows)
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


def _safe_watermark(last: int, rows: list[tuple[int, int, Any]]) -> int:
    expected = last + 1
    now = timezone.now()
    for pk, _, created in rows:
        if pk != expected and (now - created).total_seconds() < GAP_GRACE_S:
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
