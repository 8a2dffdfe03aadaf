"""Dataset upkeep behind the admin actions: recompute embeddings, reindex, and the per-dataset report.

Re-ingesting is search.sources.sync.reingest: a dataset that follows a source re-ingests by syncing it.

Why a module of its own: the admin, Celery and commands call the same three
operations, and each must respect "Postgres is the truth, the index a
projection" — they only ever write Postgres rows and outbox entries, and
leave applying them to the process that owns the store.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from celery import current_app
from django.conf import settings
from django.db.models import Count, Max

from search.engine.encoders import dense_model_id, fill_embedding_cache
from search.engine.index import rebuild
from search.ingest.base import ChunkDraft, embed_input
from search.models import Chunk, Document, EmbeddingCache, IndexOutbox, IngestJob

if TYPE_CHECKING:
    from projects.models import Dataset
    from search.models import Chunk, IngestJob


# The Celery task that rebuilds a Qdrant server's collection, named rather than imported (search.ingest.jobs says why)
REINDEX_TASK = "search.tasks.reindex_collection"


def last_ingest(*, dataset: Dataset) -> IngestJob | None:
    return IngestJob.objects.filter(dataset=dataset).order_by("-created_at").first()


def reembed(*, dataset_id: int, force: bool = False) -> dict[str, int]:
    """Fill (or with force, recompute) the current model's vectors for a dataset, then queue index upserts.

    Vectors are keyed by (model id, text hash), so switching EMBEDDING_MODEL and
    running this gives every chunk a vector for the new model without re-chunking.
    """
    model_id = dense_model_id()
    chunks = list(Chunk.objects.filter(dataset_id=dataset_id).only("pk", "text_hash", "text", "micro_summary"))
    stats = fill_embedding_cache([chunk_embed_input(c) for c in chunks], refresh=force)
    IndexOutbox.objects.bulk_create(
        [IndexOutbox(op=IndexOutbox.Op.UPSERT, chunk_id=c.pk, model_id=model_id) for c in chunks], batch_size=1000)
    return {"chunks": len(chunks), "embedded": stats["embedded"], "model": model_id}


def chunk_embed_input(chunk: Chunk) -> str:
    """The exact text ingestion embedded, so the recomputed vector matches the chunk's text hash (re-embedding,
    and `evaluate --model-id` embedding stored chunks with another model)."""
    return embed_input(ChunkDraft(text=chunk.text, start_line=1, end_line=1, micro_summary=chunk.micro_summary))


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
