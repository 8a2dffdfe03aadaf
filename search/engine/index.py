"""The vector index behind context search: the interface every adapter implements, and this process's handle.

Why one narrow interface and two adapters: the embedded engine (search.engine.index_embedded, qdrant-edge-py)
needs no setup and answers a filtered hybrid query in milliseconds, while a Qdrant server or cluster
(search.engine.index_server, qdrant-client, QDRANT_URL) scales out. Both keep the same layout
(search.engine.index_schema), keyed by the chunk id (deterministic point ids make upserts and deletes
idempotent). The dense scores are cosines, and the sparse query carries its IDF over the searched datasets
(search.engine.term_stats), so hits of several collections compare. There is no IDF modifier: a collection-wide
IDF would let one tenant's or an evaluation's corpus move everyone's scores.

Postgres is the truth; the index is a projection written only by the applier (search.engine.applier). The
embedded store admits one open handle, so the process that owns it (the web process, or a command with its own
`path=`) applies the outbox; Celery workers only write Postgres.
"""
from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

from config.errors import DependencyDown
from inference.encoders import dense_model_id, embedding_dim
from search.engine.dataset_models import CONFIGURED, dim_of, model_id_of
from search.engine.index_embedded import EdgeIndex
from search.engine.index_schema import SCROLL_BATCH, IndexFilter, IndexPoint, model_slug
from search.engine.index_server import ClientIndex
from search.engine.sparse import SparseVec

log = logging.getLogger(__name__)


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


def model_index(index: VectorIndex, *, name: str) -> VectorIndex:
    """`index`'s store for the dataset model `name` ("" is the configured model: `index` itself)."""
    if name == CONFIGURED:
        return index
    return index.for_model(model_id=model_id_of(name), dim=dim_of(name))


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
