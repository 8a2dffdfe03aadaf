"""Persist documents: chunks + cached vectors + index outbox in one transaction per file batch.

Why this shape: Postgres is the truth and Qdrant a projection
(docs/architecture.md, "Data ownership"), so ingestion never talks to Qdrant.
A crash between batches leaves whole files written or not at all; re-running
the job skips what is already there by content hash and finishes with no
duplicates. Vectors are cached by (model id, text hash), so a moved or
renamed file re-embeds nothing.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F
from django.utils import timezone

from config.errors import DependencyDown
from config.pgcopy import copy_values, next_ids
from inference.encoders import fill_embedding_cache, text_hash
from projects import quotas
from projects.models import Project
from search.engine.applier import apply_outbox
from search.engine.dataset_models import CONFIGURED, model_arg, model_id_of, writing_models
from search.engine.term_stats import lock_dataset_writes
from search.ingest.base import DocumentDraft, embed_input, row_headings, row_sparse_arrays, row_symbol
from search.ingest.code_facts import write_code_facts
from search.ingest.job_control import JobStopped
from search.ingest.maintenance import embed_missing
from search.ingest.originals import replace_originals
from search.models import Chunk, Dataset, Document, IndexOutbox, IngestJob

log = logging.getLogger(__name__)


FILE_BATCH = 32


Progress = Callable[[dict[str, Any]], None]


def cache_vectors(*, drafts: list[DocumentDraft], dataset: Dataset | None = None) -> dict[str, int]:
    """Embed the chunks whose vectors are not cached yet and cache them; -> {"embedded", "cached"}.

    With `dataset`, for every model it is written with (search.engine.dataset_models.writing_models: its serving
    model, and the one it is being switched to), else for the configured model. With `dataset`, only vectors of
    texts its project already holds count as cached (own_hashes); without one (an operator's benchmark) any.
    Separate from writing so a job can do the slow part first, with progress, and then write a whole
    upload in one short transaction (search.ingest.staged): the cache is shared and changes no dataset."""
    texts = [embed_input(c) for d in drafts for c in d.chunks]
    if dataset is None:
        return _fill(texts=texts, names=[CONFIGURED], reuse=None)
    return _fill(texts=texts, names=writing_models(dataset=dataset), reuse=own_hashes(dataset=dataset, texts=texts))


def own_hashes(*, dataset: Dataset, texts: list[str]) -> set[str]:
    """The hashes of `texts` that the dataset's project may already read: its own datasets' chunks, or a global
    dataset's (readable by every project).

    Why: the embedding cache is shared by every tenant. Reporting (or profiting in time from) a cached vector
    of a text only another tenant holds would let anyone confirm a guess of that tenant's private text by
    pushing it. So a write reuses only vectors of texts its own project holds, and embeds everything else again,
    exactly as for a text nobody has: the same count, the same work. A project re-embeds what another project
    already embedded; moved and renamed files inside a project still cost nothing."""
    hashes = sorted({text_hash(t) for t in texts})
    held: set[str] = set()
    with connection.cursor() as cursor:
        for i in range(0, len(hashes), _HELD_BATCH):
            cursor.execute(_HELD_SQL, [dataset.project_id, hashes[i:i + _HELD_BATCH]])
            held.update(h for (h,) in cursor.fetchall())
    return held


_HELD_BATCH = 5000
# the hashes as one array parameter: an IN list of thousands of placeholders cost more to compose and bind than
# the query took; the same rows (Postgres reads an IN list as = ANY)
_HELD_SQL = (f"SELECT DISTINCT c.text_hash FROM {Chunk._meta.db_table} c "
             f"JOIN {Dataset._meta.db_table} d ON d.id = c.dataset_id "
             "WHERE (d.project_id = %s OR d.is_global) AND c.text_hash = ANY(%s)")


def _fill(*, texts: list[str], names: list[str], reuse: set[str] | None) -> dict[str, int]:
    stats = {"embedded": 0, "cached": 0}
    for name in names:
        part = fill_embedding_cache(texts, model=model_arg(name), reuse=reuse)
        stats = {k: stats[k] + part[k] for k in stats}
    return stats


def write_documents(*, dataset: Dataset, drafts: list[DocumentDraft], job: IngestJob | None = None,
                    filled: list[str] | None = None, quota_refused: list[str] | None = None) -> dict[str, int]:
    """Replace these documents' chunks (by path) in one transaction; embed only cache misses.

    The rules chunker and the BEIR loader call this too: any ChunkDraft list works. The outbox gets one row per
    chunk for each model the dataset is written with, read under the dataset's write lock, so a model switch
    (search.quality.adoption, which takes the same lock) never misses a chunk written meanwhile. `filled`: the
    models whose vectors the caller already cached for these drafts (cache_vectors, by a staged job), so they
    are not embedded twice; the texts are not the project's yet, so own_hashes would not count them as cached.

    With `quota_refused` (what sync_documents passes), each document that would take the project past a quota
    is left out and its path appended there: the project row is locked first (the order staged writes take),
    so two jobs of one project cannot both squeeze under the limit. Without it the caller checked the quota
    itself (search.ingest.staged checks a whole push or upload at once).
    """
    texts = [embed_input(c) for d in drafts for c in d.chunks]
    if filled is None:
        filled = writing_models(dataset=dataset)
        stats = {"chunks": 0, **_fill(texts=texts, names=filled, reuse=own_hashes(dataset=dataset, texts=texts))}
    else:
        stats = {"chunks": 0, "embedded": 0, "cached": 0}
    with transaction.atomic():
        if quota_refused is not None:
            project = Project.objects.select_for_update().get(pk=dataset.project_id)
            drafts, refused = admit_by_quota(dataset=dataset, project=project, drafts=drafts)
            quota_refused.extend(refused)
        lock_dataset_writes(dataset_id=dataset.pk)  # writers of one dataset take turns (search.engine.term_stats)
        names = writing_models(dataset=type(dataset).objects.get(pk=dataset.pk))
        late = [n for n in names if n not in filled]  # a switch began since: its model's vectors too
        if late:
            _fill(texts=texts, names=late, reuse=own_hashes(dataset=dataset, texts=texts))
        model_ids = [model_id_of(n) for n in names]
        paths = [d.path for d in drafts]
        # The search_chunk trigger (migration 0002) queues the index deletes for these rows.
        Chunk.objects.filter(dataset=dataset, path__in=paths).delete()
        written: list[tuple[Document, bytes | None, str, bool]] = []  # what each page link opens (search.ingest.originals)
        docs = upsert_documents(dataset=dataset, drafts=drafts)
        for d in drafts:
            doc, fresh = docs[d.path]
            written.append((doc, d.original, str(d.meta.get("format") or "pdf"), fresh))
        chunk_ids = next_ids(model=Chunk, count=sum(len(d.chunks) for d in drafts))  # in order, as bulk_create
        copy_values(model=Chunk, columns=_CHUNK_COLUMNS, rows=_chunk_rows(dataset=dataset, drafts=drafts,
                                                                          docs=docs, ids=chunk_ids))
        replace_originals(written=written)
        write_code_facts(dataset=dataset, drafts=drafts)  # the symbol graph and grep's trigrams, same transaction
        copy_values(model=IndexOutbox, columns=("op", "chunk_id", "model_id", "created_at"),
                    rows=[(IndexOutbox.Op.UPSERT.value, i, m, timezone.now()) for i in chunk_ids for m in model_ids])
        stats["chunks"] = len(chunk_ids)
        if job is not None:
            type(job).objects.filter(pk=job.pk).update(
                files_done=F("files_done") + len(drafts), chunks_written=F("chunks_written") + len(chunk_ids),
                embeddings_computed=F("embeddings_computed") + stats["embedded"],
                embeddings_cached=F("embeddings_cached") + stats["cached"])
    return stats


# every column of search_chunk, in the order of _chunk_rows' values
_CHUNK_COLUMNS = ("id", "document_id", "dataset_id", "ordinal", "kind", "repo", "path", "lang", "symbol",
                  "heading_path", "start_line", "end_line", "text", "micro_summary", "text_hash", "terms",
                  "term_weights", "ruleset_id", "book_id", "section_path", "page", "content_kind", "tags", "traits",
                  "is_rule_bearing", "meta", "created_at")


def _chunk_rows(*, dataset: Dataset, drafts: list[DocumentDraft], docs: dict[str, tuple[Document, bool]],
                ids: list[int]) -> Iterator[tuple[Any, ...]]:
    """Each draft chunk's row (_CHUNK_COLUMNS), with the values `bulk_create` of Chunk instances would send: JSON as
    Django's JSONField writes it, the time for created_at (auto_now_add), `terms` and `term_weights` the sparse
    vector's literals.

    Why values, not instances: building and preparing a model instance per chunk cost more than its COPY."""
    next_id = iter(ids).__next__
    for d in drafts:
        doc_id = docs[d.path][0].pk
        for ordinal, c in enumerate(d.chunks):
            symbol, heading_path = row_symbol(c), row_headings(c)
            terms, weights = c.terms, c.weights
            if terms is None or weights is None:  # read in this process: analysed here
                terms, weights = row_sparse_arrays(chunk=c, path=d.path)
            yield (next_id(), doc_id, dataset.pk, ordinal, c.kind, d.repo, d.path, d.lang, symbol, heading_path,
                   c.start_line, c.end_line, c.text, c.micro_summary, text_hash(embed_input(c)), terms,
                   weights, c.ruleset_id, c.book_id, [s[:500] for s in c.section_path], c.page,
                   c.content_kind, c.tags, _json(c.traits), c.is_rule_bearing, _json(c.meta), timezone.now())


def _json(value: Any) -> str:
    """What Django's JSONField sends for `value` (json.dumps); the usual empty dict without encoding it."""
    return "{}" if type(value) is dict and not value else json.dumps(value)


_DOCUMENT_FIELDS = ("repo", "url", "lang", "title", "content_hash", "macro_summary", "meta", "external_id",
                    "size_bytes", "updated_at")


def upsert_documents(*, dataset: Dataset, drafts: list[DocumentDraft]) -> dict[str, tuple[Document, bool]]:
    """Each draft's Document row, created or updated in place (its id kept), by path;
    -> {path: (Document, whether it is new)}. Call in the writer's transaction, under the dataset's write lock.

    Why one statement (INSERT ... ON CONFLICT (dataset, path) DO UPDATE): a row per document through
    update_or_create cost a savepoint, a locking read and a write each. Same rows either way; a batch naming one
    path twice (ON CONFLICT may not touch a row twice) takes the row-by-row way."""
    def fields(d: DocumentDraft) -> dict[str, Any]:
        return {"repo": d.repo, "url": d.url, "lang": d.lang, "title": d.title[:500], "content_hash": d.content_hash,
                "macro_summary": d.macro_summary, "meta": d.meta, "external_id": d.external_id,
                "size_bytes": d.size_bytes or sum(len(c.text.encode()) for c in d.chunks)}

    if len({d.path for d in drafts}) < len(drafts):
        return {d.path: Document.objects.update_or_create(dataset=dataset, path=d.path, defaults=fields(d))
                for d in drafts}
    stored = set(Document.objects.filter(dataset=dataset, path__in=[d.path for d in drafts])
                 .values_list("path", flat=True))
    rows = Document.objects.bulk_create(
        [Document(dataset=dataset, path=d.path, **fields(d)) for d in drafts], update_conflicts=True,
        unique_fields=["dataset", "path"], update_fields=list(_DOCUMENT_FIELDS))
    return {doc.path: (doc, doc.path not in stored) for doc in rows}


def delete_documents(*, dataset: Dataset, paths: Iterable[str]) -> int:
    """Remove documents (and their chunks) in one transaction.

    The index deletes are queued by the search_chunk trigger (migration 0002) in
    this same transaction, as for every other way a chunk leaves.
    """
    paths = list(paths)
    if not paths:
        return 0
    with transaction.atomic():
        Chunk.objects.filter(dataset=dataset, path__in=paths).delete()
        Document.objects.filter(dataset=dataset, path__in=paths).delete()
    return len(paths)


def admit_by_quota(*, dataset: Dataset, project: Project,
                   drafts: list[DocumentDraft]) -> tuple[list[DocumentDraft], list[str]]:
    """(drafts that fit the project's quotas, in order, paths of those that do not), by projects.quotas.check
    on each draft's net change (a replaced document counts what it adds beyond its stored rows).

    Evaluation datasets (a benchmark corpus a staff command loads) are not the tenant's content: all fit."""
    if dataset.is_evaluation or not drafts:
        return drafts, []
    usage = quotas.usage_of(project)
    stored = {row["path"]: row for row in Document.objects.filter(dataset=dataset, path__in=[d.path for d in drafts])
              .values("path", "size_bytes").annotate(n=Count("chunks"))}
    admitted: list[DocumentDraft] = []
    refused: list[str] = []
    for d in drafts:
        old = stored.get(d.path, {"size_bytes": 0, "n": 0})
        size = d.size_bytes or sum(len(c.text.encode()) for c in d.chunks)
        add = {"documents": 0 if d.path in stored else 1, "chunks": len(d.chunks) - old["n"],
               "bytes": size - old["size_bytes"]}
        try:
            quotas.check(project=project, add_documents=add["documents"], add_chunks=add["chunks"],
                         add_bytes=add["bytes"], usage=usage)
        except quotas.QuotaExceeded:
            refused.append(d.path)
            continue
        admitted.append(d)
        usage = quotas.Usage(documents=usage.documents + add["documents"], chunks=usage.chunks + add["chunks"],
                             bytes=usage.bytes + add["bytes"])
    return admitted, refused


@dataclass(frozen=True)
class Skip:
    """A source entry that yields no draft. `keep`: its stored document stays (its content is unchanged);
    otherwise (ignored, unreadable, not parseable) it counts as gone, and a sync with delete_missing removes it."""

    path: str
    keep: bool = False


def sync_documents(*, dataset: Dataset, drafts: Iterable[DocumentDraft | Skip], job: IngestJob | None = None,
                   delete_missing: bool = True, progress: Progress | None = None,
                   refused: list[str] | None = None) -> dict[str, int]:
    """The one incremental sync of a whole source: unchanged documents are skipped by content hash, changed
    ones rewritten in batches of FILE_BATCH (each batch one transaction), and with `delete_missing` the
    documents the source no longer has are deleted.

    Every reader of a whole source feeds it: the file walker of code and web jobs, rulebooks and BEIR.
    With a job, its counters follow (files_done, files_skipped, files_deleted). `progress` gets
    {"path", "skipped", "files"} once per entry.

    Every document is checked against the project's quotas where it is written (write_documents, under the
    project row's lock); one that would pass a quota is not written, counted in `refused_quota` and its path
    appended to `refused`, and the sync goes on (a replaced document that does not grow may still fit). A
    batch is first checked without the lock, so a project already at its quota embeds nothing more."""
    existing = dict(Document.objects.filter(dataset=dataset).values_list("path", "content_hash"))
    seen: set[str] = set()
    batch: list[DocumentDraft] = []
    stats = {"files": 0, "skipped": 0, "deleted": 0, "chunks": 0, "embedded": 0, "cached": 0, "refused_quota": 0}
    refused = refused if refused is not None else []

    def flush() -> None:
        nonlocal batch
        if batch:
            before = len(refused)
            project = Project.objects.get(pk=dataset.project_id)
            fits, over = admit_by_quota(dataset=dataset, project=project, drafts=batch)  # before embedding
            refused.extend(over)
            _add(stats, write_documents(dataset=dataset, drafts=fits, job=job, quota_refused=refused))
            stats["refused_quota"] += len(refused) - before
            if job is not None and len(refused) > before:
                IngestJob.objects.filter(pk=job.pk).update(files_done=F("files_done") + len(refused) - before,
                                                           files_skipped=F("files_skipped") + len(refused) - before)
            batch = []

    try:
        for item in drafts:
            stats["files"] += 1
            if isinstance(item, Skip):
                unchanged, skipped = item.keep, True
            else:
                unchanged = skipped = existing.get(item.path) == item.content_hash
            if unchanged or not skipped:
                seen.add(item.path)
            if skipped:
                stats["skipped"] += 1
                if job is not None:
                    IngestJob.objects.filter(pk=job.pk).update(files_done=F("files_done") + 1,
                                                               files_skipped=F("files_skipped") + 1)
            else:
                batch.append(item)
                if len(batch) >= FILE_BATCH:
                    flush()
            if progress:
                progress({"path": item.path, "skipped": skipped, "files": stats["files"]})
    except JobStopped:
        flush()  # the whole entries read before a timeout or cancel are kept: the next run skips them by hash
        raise
    flush()
    stats["embedded"] += embed_missing(dataset=dataset)  # chunks left without a vector, e.g. by a new embed input
    if delete_missing:
        stats["deleted"] = delete_documents(dataset=dataset, paths=[p for p in existing if p not in seen])
        if job is not None:
            IngestJob.objects.filter(pk=job.pk).update(files_deleted=stats["deleted"])
    return stats


def _add(stats: dict[str, int], part: dict[str, int]) -> None:
    for k in ("chunks", "embedded", "cached"):
        stats[k] += part[k]


def apply_own_writes() -> int:
    """A writer in the process that can own the index applies what it wrote; -> rows applied.

    If another process owns the embedded store (a running web server), opening it fails: that process's
    applier thread was woken by the outbox NOTIFY and applies it instead.
    """
    try:
        return apply_outbox()
    except DependencyDown as exc:
        log.info("index not applied here (%s); its owner's applier will apply it", exc.detail)
        return 0
