"""Dataset upkeep behind the admin actions: recompute embeddings, reindex, and the per-dataset report.

Re-ingesting is search.sources.sync.reingest: a dataset that follows a source re-ingests by syncing it.

Why a module of its own: the admin, Celery and commands call the same three
operations, and each must respect "Postgres is the truth, the index a
projection" — they only ever write Postgres rows and outbox entries, and
leave applying them to the process that owns the store.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import current_app
from django.conf import settings
from django.db.models import Count, Exists, Max, OuterRef

from inference.encoders import fill_embedding_cache
from inference.models import EmbeddingCache
from search.engine.applier import rebuild
from search.engine.dataset_models import model_arg, model_id_of, writing_models
from search.ingest.base import ChunkDraft, embed_input
from search.models import Chunk, Dataset, Document, IndexOutbox, IngestJob

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from search.models import Chunk, Dataset, IngestJob


# The Celery task that rebuilds a Qdrant server's collection, named rather than imported (search.ingest.jobs says why)
REINDEX_TASK = "search.tasks.reindex_collection"


def last_ingest(*, dataset: Dataset) -> IngestJob | None:
    return IngestJob.objects.filter(dataset=dataset).order_by("-created_at").first()


# the Chunk fields embed_input reads: a query that embeds stored chunks loads these (`.only(*EMBED_FIELDS)`)
EMBED_FIELDS = ("text", "micro_summary", "kind", "heading_path")


def reembed(*, dataset_id: int, force: bool = False, model: str | None = None,
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Fill (or with force, recompute) a model's vectors for a dataset, then queue its index upserts.

    `model`: a dataset model name (search.engine.dataset_models: "" the configured model, else an adapted one);
    default: the model the dataset is searched with. Vectors are keyed by (model id, text hash), so switching
    EMBEDDING_MODEL or a dataset's model and running this gives every chunk a vector for the new model without
    re-chunking. The outbox rows carry the model's id: its applier writes that model's collections only, and an
    evaluation dataset's chunks get none (they never enter the live store). `progress(done, total)` per batch.
    """
    dataset = Dataset.objects.get(pk=dataset_id)
    name = dataset.embedding_model if model is None else model
    model_id = model_id_of(name)
    chunks = list(Chunk.objects.filter(dataset_id=dataset_id).order_by("pk").only("pk", "text_hash", *EMBED_FIELDS))
    stats = _embed_chunks(chunks, name=name, refresh=force, progress=progress)
    if not dataset.is_evaluation:
        IndexOutbox.objects.bulk_create(
            [IndexOutbox(op=IndexOutbox.Op.UPSERT, chunk_id=c.pk, model_id=model_id) for c in chunks],
            batch_size=1000)
    return {"chunks": len(chunks), "embedded": stats["embedded"], "model": model_id}


REEMBED_BATCH = 1024


def _embed_chunks(chunks: list[Chunk], *, name: str, refresh: bool = False,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Cache dataset model `name`'s vectors of stored chunks, in batches -> {"embedded", "cached"}."""
    stats = {"embedded": 0, "cached": 0}
    for i in range(0, len(chunks), REEMBED_BATCH):
        part = fill_embedding_cache([chunk_embed_input(c) for c in chunks[i:i + REEMBED_BATCH]], refresh=refresh,
                                    model=model_arg(name))
        stats = {k: stats[k] + part[k] for k in stats}
        if progress is not None:
            progress(min(i + REEMBED_BATCH, len(chunks)), len(chunks))
    return stats


def fill_missing_vectors(*, chunks: QuerySet[Chunk], name: str) -> tuple[list[int], int]:
    """Cache a vector for dataset model `name` (search.engine.dataset_models) of each of `chunks` that has none under
    its text hash; -> (their ids, vectors computed). One anti-join finds them, so it is cheap when none is missing."""
    have = EmbeddingCache.objects.filter(model_id=model_id_of(name), text_hash=OuterRef("text_hash"))
    rows = list(chunks.exclude(Exists(have)).order_by("pk").only("pk", "text_hash", *EMBED_FIELDS))
    return [c.pk for c in rows], _embed_chunks(rows, name=name)["embedded"]


def embed_missing(*, dataset: Dataset) -> int:
    """Embed the dataset's chunks that have no vector under their text hash for a model it is written with, and
    queue their index upserts; -> how many vectors it computed.

    Why: a vector is keyed by the hash of what the dense model reads (base.embed_input), so a change to that input
    (a rules section's headings, migration 0015) leaves stored chunks with a new hash and no vector, while their old
    points keep serving. Every sync of a source ends here (writer.sync_documents), so re-running an ingest, or
    `manage.py demo` at `make run`, brings them up to date without re-chunking: chunk ids, and the feedback and
    logged rankings that name them, stay as they are."""
    names = writing_models(dataset=dataset)
    missing: set[int] = set()
    embedded = 0
    for name in names:
        ids, computed = fill_missing_vectors(chunks=Chunk.objects.filter(dataset=dataset), name=name)
        missing.update(ids)
        embedded += computed
    if missing and not dataset.is_evaluation:
        IndexOutbox.objects.bulk_create([IndexOutbox(op=IndexOutbox.Op.UPSERT, chunk_id=pk, model_id=model_id_of(name))
                                         for pk in sorted(missing) for name in names], batch_size=1000)
    return embedded


def chunk_embed_input(chunk: Chunk) -> str:
    """The exact text ingestion embedded, so the recomputed vector matches the chunk's text hash (re-embedding,
    and `evaluate --model-id` embedding stored chunks with another model)."""
    return embed_input(ChunkDraft(text=chunk.text, start_line=1, end_line=1, micro_summary=chunk.micro_summary,
                                  kind=chunk.kind, heading_path=list(chunk.heading_path)))


def reindex(*, background: bool = True) -> str:
    """Rebuild the collection from Postgres: in Celery for a Qdrant server, in this process for the embedded
    store (the one process allowed to hold it)."""
    if settings.QDRANT_URL:
        current_app.send_task(REINDEX_TASK)
        return "queued in Celery"

    if not background:
        stats = rebuild()
        return f"rebuilt {int(stats['points'])} points"
    threading.Thread(target=rebuild, name="reindex", daemon=True).start()
    return "rebuilding in the web process (it owns the embedded store)"


def dataset_report(*, dataset: Dataset) -> dict[str, Any]:
    """Counts, embedding coverage per model, last ingest and its errors: the admin's per-dataset panel."""
    chunks = Chunk.objects.filter(dataset=dataset)
    n_chunks = chunks.count()
    hashes = chunks.values("text_hash")
    coverage = {}
    for row in (EmbeddingCache.objects.filter(text_hash__in=hashes).values("model_id")
                .annotate(n=Count("text_hash", distinct=True))):
        distinct = chunks.values("text_hash").distinct().count() or 1
        coverage[row["model_id"]] = round(100.0 * row["n"] / distinct, 1)
    job = last_ingest(dataset=dataset)
    return {
        "documents": Document.objects.filter(dataset=dataset).count(),
        "chunks": n_chunks,
        "last_chunk_at": chunks.aggregate(m=Max("created_at"))["m"],
        "coverage": coverage,
        "last_job": job,
    }
