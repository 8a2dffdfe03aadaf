"""Ingest jobs over a directory or file: a code or web source walked, each file read into drafts.

Why a job type of its own: the walk and the skip-by-hash happen before parsing (the expensive part of a
re-run), and the drafts go through the one incremental writer (search.ingest.writer.sync_documents).
"""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from search.ingest.base import DocumentDraft
from search.ingest.code import walk
from search.ingest.formats import registry
from search.ingest.jobs import register
from search.ingest.reader_pool import ToRead, read_files, reader_processes
from search.ingest.web import refused_report
from search.ingest.web import walk as web_walk
from search.ingest.writer import Progress, Skip, sync_documents
from search.models import Document, IngestJob

if TYPE_CHECKING:
    from search.models import IngestJob

log = logging.getLogger(__name__)


def _source_files(kind: str, root: Path) -> list[tuple[str, Path, str]]:
    """The walk's candidates: the kind's text files by name, and the document formats' (PDF, DOCX, EPUB) by
    theirs; which reader reads one is decided from its bytes. A source that is one file is read whatever its name."""
    if root.is_file():
        return [(root.name, root, "")]
    documents = registry.document_suffixes()
    return list(walk(root, also=documents, limit=registry.max_bytes) if kind == "code"
                else web_walk(root, also=documents, limit=registry.max_bytes))


@register("code")
@register("web")
def run_files(*, job: IngestJob, progress: Progress | None) -> None:
    """A code or web job: walk its directory (or one file) and sync the dataset to what is there."""
    root = Path(job.source).expanduser().resolve()
    if not root.exists():
        raise FileNotFoundError(f"source {root} does not exist")
    refused: dict[str, str] = {}
    sync_documents(dataset=job.dataset, drafts=_file_drafts(job=job, root=root, refused=refused), job=job,
                   progress=progress)
    if refused:
        IngestJob.objects.filter(pk=job.pk).update(result=refused_report(refused))


def _file_drafts(*, job: IngestJob, root: Path, refused: dict[str, str]) -> Iterator[DocumentDraft | Skip]:
    """The files of a code or web source as drafts. A file whose bytes hash to its stored content hash is
    skipped before it is parsed (parsing is the expensive part of a re-run). Files no reader takes (binary, too
    large, a reader's refusal, nothing readable) are added to `refused` with the reason. Many files are read in
    reader processes ahead of the writer (search.ingest.reader_pool); the drafts come in the walk's order either way."""
    repo = job.options.get("repo") or (root.name if root.is_dir() else root.parent.name)
    files = _source_files(job.kind, root)
    IngestJob.objects.filter(pk=job.pk).update(files_total=len(files))
    stored = dict(Document.objects.filter(dataset=job.dataset).values_list("path", "content_hash"))
    processes = reader_processes() if len(files) >= settings.INGEST_READER_MIN_FILES else 0
    for read in read_files(items=_to_read(files=files, stored=stored, refused=refused), kind=job.kind, repo=repo,
                           processes=processes):
        if not isinstance(read.item, ToRead):
            yield read.item
        elif read.draft is None:
            refused[read.item.name] = read.why or "no readable text"
            yield Skip(read.item.name)
        else:
            read.draft.size_bytes = len(read.item.data)
            yield read.draft


def _to_read(*, files: list[tuple[str, Path, str]], stored: dict[str, str],
             refused: dict[str, str]) -> Iterator[ToRead | Skip]:
    """Each walked file's bytes to read, or its Skip: too large, gone since the walk, or unchanged (kept)."""
    for rel, abs_path, reason in files:
        if reason:
            refused[rel] = f"too large (over {registry.max_bytes(rel):,} bytes)" if reason == "oversized" else reason
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
        yield ToRead(rel, data)
