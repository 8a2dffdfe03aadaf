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

from search.ingest.base import DocumentDraft
from search.ingest.code import read_code_document, walk
from search.ingest.jobs import register
from search.ingest.web import read_web_document, refused_report
from search.ingest.web import walk as web_walk
from search.ingest.writer import Progress, Skip, sync_documents
from search.models import Document, IngestJob

if TYPE_CHECKING:
    from search.models import IngestJob

log = logging.getLogger(__name__)


def _source_files(kind: str, root: Path) -> list[tuple[str, Path, str]]:
    if kind == "code":

        if root.is_file():
            return [(root.name, root, "")]
        return list(walk(root))

    return list(web_walk(root))


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
    skipped before it is parsed (parsing is the expensive part of a re-run). Files the reader refuses are added
    to `refused` with the reason."""
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
                draft, why = read_web_document(rel=rel, abs_path=abs_path, repo=repo)
                if why.startswith("markup refused"):
                    refused[rel] = why
        except OSError:
            draft = None
        if draft is None:
            yield Skip(rel)
            continue
        draft.size_bytes = len(data)
        yield draft
