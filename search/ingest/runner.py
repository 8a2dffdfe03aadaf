"""Persist documents: chunks + cached vectors + index outbox in one transaction per file batch.

Why this shape: Postgres is the truth and Qdrant a projection (DESIGN.md), so
ingestion never talks to Qdrant. A crash between batches leaves whole files
written or not at all; re-running the job skips what is already there by
content hash and finishes with no duplicates. Vectors are cached by
(model id, text hash), so a moved or renamed file re-embeds nothing.
"""
from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from search.ingest.base import DocumentDraft, embed_input

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Dataset
    from search.models import IngestJob

log = logging.getLogger(__name__)

FILE_BATCH = 32
KINDS = ("code", "web", "rules")
Progress = Callable[[dict[str, Any]], None]


def cache_vectors(*, drafts: list[DocumentDraft]) -> dict[str, int]:
    """Embed the chunks whose vectors are not cached yet and cache them; -> {"embedded", "cached"}.

    Separate from writing so a job can do the slow part first, with progress, and then write a whole
    upload in one short transaction (search.ingest.staged): the cache is shared and changes no dataset."""
    from search.engine.encoders import fill_embedding_cache

    return fill_embedding_cache([embed_input(c) for d in drafts for c in d.chunks])


def write_documents(*, dataset: Dataset, drafts: list[DocumentDraft], job: IngestJob | None = None) -> dict[str, int]:
    """Replace these documents' chunks (by path) in one transaction; embed only cache misses.

    The rules chunker and the BEIR loader call this too: any ChunkDraft list works.
    """
    from search.engine.encoders import dense_model_id, text_hash
    from search.engine.sparse import document_term_ids, sparse_document_text
    from search.engine.term_stats import lock_dataset_writes
    from search.models import Chunk, Document, IndexOutbox

    model_id = dense_model_id()
    stats = {"chunks": 0, **cache_vectors(drafts=drafts)}
    with transaction.atomic():
        lock_dataset_writes(dataset_id=dataset.pk)  # writers of one dataset take turns (search.engine.term_stats)
        paths = [d.path for d in drafts]
        # The search_chunk trigger (migration 0002) queues the index deletes for these rows.
        Chunk.objects.filter(dataset=dataset, path__in=paths).delete()
        new_chunks = []
        for d in drafts:
            doc, _ = Document.objects.update_or_create(
                dataset=dataset, path=d.path,
                defaults={"repo": d.repo, "url": d.url, "lang": d.lang, "title": d.title[:500],
                          "content_hash": d.content_hash, "macro_summary": d.macro_summary, "meta": d.meta,
                          "external_id": d.external_id,
                          "size_bytes": d.size_bytes or sum(len(c.text.encode()) for c in d.chunks)})
            for ordinal, c in enumerate(d.chunks):
                new_chunks.append(Chunk(
                    document=doc, dataset=dataset, ordinal=ordinal, kind=c.kind, repo=d.repo, path=d.path,
                    lang=d.lang, symbol=c.symbol[:500], heading_path=[h[:500] for h in c.heading_path],
                    start_line=c.start_line, end_line=c.end_line, text=c.text, micro_summary=c.micro_summary,
                    text_hash=text_hash(embed_input(c)), ruleset_id=c.ruleset_id, book_id=c.book_id,
                    section_path=[s[:500] for s in c.section_path], page=c.page, content_kind=c.content_kind,
                    tags=c.tags, traits=c.traits, is_rule_bearing=c.is_rule_bearing, meta=c.meta,
                    terms=document_term_ids(sparse_document_text(text=c.text, path=d.path, symbol=c.symbol[:500],
                                                                 heading_path=[h[:500] for h in c.heading_path]),
                                           kind=c.kind)))
        created = Chunk.objects.bulk_create(new_chunks, batch_size=500)
        IndexOutbox.objects.bulk_create(
            [IndexOutbox(op=IndexOutbox.Op.UPSERT, chunk_id=c.pk, model_id=model_id) for c in created],
            batch_size=1000)
        stats["chunks"] = len(created)
        if job is not None:
            type(job).objects.filter(pk=job.pk).update(
                files_done=F("files_done") + len(drafts), chunks_written=F("chunks_written") + len(created),
                embeddings_computed=F("embeddings_computed") + stats["embedded"],
                embeddings_cached=F("embeddings_cached") + stats["cached"])
    return stats


def delete_documents(*, dataset: Dataset, paths: Iterable[str]) -> int:
    """Remove documents (and their chunks) in one transaction.

    The index deletes are queued by the search_chunk trigger (migration 0002) in
    this same transaction, as for every other way a chunk leaves.
    """
    from search.models import Chunk, Document

    paths = list(paths)
    if not paths:
        return 0
    with transaction.atomic():
        Chunk.objects.filter(dataset=dataset, path__in=paths).delete()
        Document.objects.filter(dataset=dataset, path__in=paths).delete()
    return len(paths)


@dataclass(frozen=True)
class Skip:
    """A source entry that yields no draft. `keep`: its stored document stays (its content is unchanged);
    otherwise (ignored, unreadable, not parseable) it counts as gone, and a sync with delete_missing removes it."""

    path: str
    keep: bool = False


def sync_documents(*, dataset: Dataset, drafts: Iterable[DocumentDraft | Skip], job: IngestJob | None = None,
                   delete_missing: bool = True, progress: Progress | None = None) -> dict[str, int]:
    """The one incremental sync of a whole source: unchanged documents are skipped by content hash, changed
    ones rewritten in batches of FILE_BATCH (each batch one transaction), and with `delete_missing` the
    documents the source no longer has are deleted.

    Every reader of a whole source feeds it: the file walker of code and web jobs, rulebooks and BEIR.
    With a job, its counters follow (files_done, files_skipped, files_deleted). `progress` gets
    {"path", "skipped", "files"} once per entry."""
    from search.models import Document, IngestJob

    existing = dict(Document.objects.filter(dataset=dataset).values_list("path", "content_hash"))
    seen: set[str] = set()
    batch: list[DocumentDraft] = []
    stats = {"files": 0, "skipped": 0, "deleted": 0, "chunks": 0, "embedded": 0, "cached": 0}

    def flush() -> None:
        nonlocal batch
        if batch:
            _add(stats, write_documents(dataset=dataset, drafts=batch, job=job))
            batch = []

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
    flush()
    if delete_missing:
        stats["deleted"] = delete_documents(dataset=dataset, paths=[p for p in existing if p not in seen])
        if job is not None:
            IngestJob.objects.filter(pk=job.pk).update(files_deleted=stats["deleted"])
    return stats


def _add(stats: dict[str, int], part: dict[str, int]) -> None:
    for k in ("chunks", "embedded", "cached"):
        stats[k] += part[k]


def _source_files(kind: str, root: Path) -> list[tuple[str, Path, str]]:
    if kind == "code":
        from search.ingest.code import walk

        if root.is_file():
            return [(root.name, root, "")]
        return list(walk(root))
    from search.ingest.web import walk as web_walk

    return list(web_walk(root))


def run_job(*, job: IngestJob, progress: Progress | None = None) -> IngestJob:
    """Run (or resume) one IngestJob to completion. Safe to re-run after a crash.

    The job's advisory lock is held throughout: it is how a dead runner is told
    from a live one (search.ingest.locks, search.ingest.recovery), and it keeps a second delivery of
    the same job from running alongside. Raises JobBusy if a live runner has it.
    """
    from search.ingest.locks import JobBusy, hold_job_lock
    from search.models import IngestJob

    with hold_job_lock(job.pk, wait_s=3.0) as got:
        if not got:
            raise JobBusy(f"ingest job {job.pk} is being run by another process")
        job.refresh_from_db()
        if job.status == IngestJob.Status.DONE:  # finished by an earlier delivery
            return job
        return _run_locked(job=job, progress=progress)


def _run_locked(*, job: IngestJob, progress: Progress | None) -> IngestJob:
    from search.models import IngestJob

    job.status = IngestJob.Status.RUNNING
    job.started_at = job.started_at or timezone.now()
    job.error = ""
    job.files_done = job.files_skipped = job.files_deleted = job.chunks_written = 0
    job.embeddings_computed = job.embeddings_cached = 0
    job.result = {}
    job.save()
    try:
        if job.options.get("origin") == "sync":
            from search.sources.sync import run_sync

            run_sync(job=job, progress=progress)
        elif job.options.get("origin") in ("push", "upload"):
            from search.ingest.staged import run_staged

            run_staged(job=job, progress=progress)
        elif job.kind == "rules":
            _run_rules(job=job, progress=progress)
        else:
            _run_files(job=job, progress=progress)
        job.refresh_from_db()
        job.status = IngestJob.Status.DONE
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "finished_at"])
    except Exception as exc:
        from search.models import StagedContent

        IngestJob.objects.filter(pk=job.pk).update(status=IngestJob.Status.FAILED, error=job_error_text(exc),
                                                   finished_at=timezone.now())
        StagedContent.objects.filter(job_id=job.pk).delete()  # a failed job is not retried: free its bytes
        raise
    job.refresh_from_db()
    return job


def job_error_text(exc: BaseException) -> str:
    """What a failed job tells its owner: a code and a sentence, never an exception's text.

    An ApiError's own sentence (quota, archive, source) is written for the caller; anything else is internal and
    may name server paths or hosts (a FileExistsError naming the staging folder), so the owner gets a fixed sentence
    with a reference and the exception goes to the log under that reference."""
    from config.errors import ApiError

    if isinstance(exc, ApiError):
        return f"{exc.code}: {exc.detail}"
    ref = uuid.uuid4().hex[:12]
    log.error("ingest job failed [ref %s]", ref, exc_info=exc)
    return (f"internal_error: The job failed on the server. An operator can find the cause in "
            f"the server log under reference {ref}.")


def _run_files(*, job: IngestJob, progress: Progress | None) -> None:
    root = Path(job.source).expanduser().resolve()
    if not root.exists():
        raise FileNotFoundError(f"source {root} does not exist")
    sync_documents(dataset=job.dataset, drafts=_file_drafts(job=job, root=root), job=job, progress=progress)


def _file_drafts(*, job: IngestJob, root: Path) -> Iterator[DocumentDraft | Skip]:
    """The files of a code or web source as drafts. A file whose bytes hash to its stored content hash is
    skipped before it is parsed (parsing is the expensive part of a re-run)."""
    from search.ingest.code import read_code_document
    from search.ingest.web import read_web_document
    from search.models import Document, IngestJob

    repo = job.options.get("repo") or (root.name if root.is_dir() else root.parent.name)
    files = _source_files(job.kind, root)
    IngestJob.objects.filter(pk=job.pk).update(files_total=len(files))
    stored = dict(Document.objects.filter(dataset=job.dataset).values_list("path", "content_hash"))
    for rel, abs_path, reason in files:
        if reason:
            yield Skip(rel)
            continue
        try:
            data = abs_path.read_bytes()
        except OSError as exc:  # removed or unreadable since the walk: treat as gone, don't fail the job
            log.info("ingest: %s vanished or unreadable (%s); skipped", rel, exc)
            yield Skip(rel)
            continue
        if stored.get(rel) == hashlib.sha256(data).hexdigest():
            yield Skip(rel, keep=True)
            continue
        try:
            if job.kind == "code":
                draft, _why = read_code_document(root=root, rel=rel, abs_path=abs_path, repo=repo)
            else:
                draft, _why = read_web_document(rel=rel, abs_path=abs_path, repo=repo)
        except OSError:
            draft = None
        if draft is None:
            yield Skip(rel)
            continue
        draft.size_bytes = len(data)
        yield draft


def _run_rules(*, job: IngestJob, progress: Progress | None) -> None:
    """Rulebooks are chunked and enriched by search.ingest.rules, persisted through sync_documents."""
    ingest_rulebook(dataset=job.dataset, path=job.source, job=job, progress=progress, **dict(job.options))


def ingest_rulebook(*, dataset: Dataset, path: str | Path, ruleset_id: str = "", book_id: str = "",
                    job: IngestJob | None = None, graph: bool = True, progress: Progress | None = None,
                    **options: Any) -> dict[str, Any]:
    """Chunk, enrich and persist a rulebook, then refresh the ruleset's traversal config and the book's graph.

    Document paths are prefixed with the book id, so two books in one dataset never collide and a
    citation's file names its book. Unchanged files are skipped by content hash (sync_documents).
    Here, not in search.ingest.rules, so that module stays pure (text in, drafts out) like code.py.
    """
    from search.ingest.rules import read_rulebook
    from search.rules.graph import build_graph
    from search.rules.traversal import build_default_config

    ruleset_id = ruleset_id or options.get("ruleset") or dataset.name
    book_id = book_id or options.get("book") or Path(path).stem
    if not Path(path).exists():
        raise FileNotFoundError(f"rulebook source {path} does not exist")
    drafts = read_rulebook(path=path, ruleset_id=ruleset_id, book_id=book_id)
    for d in drafts:
        d.path = f"{book_id}/{d.path}"
    if job is not None:
        type(job).objects.filter(pk=job.pk).update(files_total=len(drafts))
    stats: dict[str, Any] = dict(sync_documents(dataset=dataset, drafts=drafts, job=job, delete_missing=False,
                                                progress=progress))
    if graph:
        config = build_default_config(ruleset_id=ruleset_id)
        stats["graph_edges"] = build_graph(dataset_id=dataset.pk, ruleset_id=ruleset_id, book_id=book_id,
                                           config=config).edges
        stats["traversal_config_version"] = config.version
    stats.update(ruleset_id=ruleset_id, book_id=book_id)
    return stats


def start_ingest(*, dataset: Dataset, source: str, kind: str, user: User | None = None,
                 options: dict[str, Any] | None = None, sync: bool = False, progress: Progress | None = None,
                 apply_index: bool = True) -> IngestJob:
    """The one entry point behind the command, the API and the admin action: create the job, run or enqueue.

    `sync=True` runs the job here and, unless `apply_index=False`, then applies its outbox to the index, so a
    caller that ingests and then queries reads its own writes (the writer applies; queries never do).
    """
    from search.models import IngestJob

    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    job = IngestJob.objects.create(dataset=dataset, source=str(source), kind=kind, options=options or {},
                                   created_by=user if getattr(user, "pk", None) else None)
    if sync:
        job = run_job(job=job, progress=progress)
        if apply_index:
            apply_own_writes()
        return job
    from search.tasks import run_ingest_job

    transaction.on_commit(lambda: run_ingest_job.delay(str(job.pk)))
    return job


def apply_own_writes() -> int:
    """A writer in the process that can own the index applies what it wrote; -> rows applied.

    If another process owns the embedded store (a running web server), opening it fails: that process's
    applier thread was woken by the outbox NOTIFY and applies it instead.
    """
    from config.errors import DependencyDown
    from search.engine.index import apply_outbox

    try:
        return apply_outbox()
    except DependencyDown as exc:
        log.info("index not applied here (%s); its owner's applier will apply it", exc.detail)
        return 0
