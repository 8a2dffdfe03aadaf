"""Rulebook ingest: chunk and enrich a book, persist it, then refresh its traversal config and chunk graph.

Why in rules/ and not ingest/: the reader (search.ingest.rules) stays pure, text in and drafts out, and the graph
and traversal config this step builds belong to the rules lawyer.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from django.db import transaction

from projects import quotas
from projects.models import Project
from search.ingest.archives import ARCHIVE_SUFFIXES
from search.ingest.formats import registry
from search.ingest.jobs import register
from search.ingest.rules import read_rulebook
from search.ingest.staged import register_tree_upload
from search.ingest.web import refused_report
from search.ingest.writer import Progress, Skip, sync_documents
from search.models import Document
from search.rules.graph import build_graph
from search.rules.traversal import build_default_config

if TYPE_CHECKING:
    from search.ingest.base import DocumentDraft
    from search.models import Dataset, IngestJob, StagedContent

log = logging.getLogger(__name__)


@register("rules")
def run_rules(*, job: IngestJob, progress: Progress | None) -> None:
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
    ruleset_id = ruleset_id or options.get("ruleset") or dataset.name
    book_id = book_id or options.get("book") or Path(path).stem
    if not Path(path).exists():
        raise FileNotFoundError(f"rulebook source {path} does not exist")
    refused: dict[str, str] = {}  # files no reader took: reported by name and reason, never left out silently
    prefix = f"{book_id}/"
    stored = {p.removeprefix(prefix): h for p, h in Document.objects.filter(
        dataset=dataset, path__startswith=prefix).values_list("path", "content_hash")}
    kept: list[str] = []  # unchanged files: skipped by their hash before they are read
    drafts = read_rulebook(path=path, ruleset_id=ruleset_id, book_id=book_id, refused=refused, stored=stored,
                           kept=kept)
    entries = [*drafts, *(Skip(rel, keep=True) for rel in kept)]
    stats = ingest_rulebook_documents(dataset=dataset, drafts=entries, ruleset_id=ruleset_id, book_id=book_id, job=job,
                                      graph=graph, progress=progress)
    if refused and job is not None:
        type(job).objects.filter(pk=job.pk).update(result=refused_report(refused))
    return stats


def ingest_rulebook_documents(*, dataset: Dataset, drafts: Sequence[DocumentDraft | Skip], ruleset_id: str,
                              book_id: str, job: IngestJob | None = None, graph: bool = True,
                              progress: Progress | None = None) -> dict[str, Any]:
    """Persist a book's read documents (search.ingest.rules, whatever format each file was read from), then
    refresh the ruleset's traversal config and the book's graph: the one write path every rulebook takes.
    Paths are the book's own (prefixed with `book_id` here). A Skip with keep=True is one of the book's files found
    unchanged by its hash before reading: it counts as skipped, in sync_documents' own vocabulary."""
    entries: list[DocumentDraft | Skip] = []
    for d in drafts:
        if isinstance(d, Skip):
            entries.append(Skip(f"{book_id}/{d.path}", keep=d.keep))
        else:
            d.path = f"{book_id}/{d.path}"
            entries.append(d)
    if job is not None:
        type(job).objects.filter(pk=job.pk).update(files_total=len(entries))
    stats: dict[str, Any] = dict(sync_documents(dataset=dataset, drafts=entries, job=job, delete_missing=False,
                                                progress=progress))
    if graph:
        config = build_default_config(ruleset_id=ruleset_id)
        stats["graph_edges"] = build_graph(dataset_id=dataset.pk, ruleset_id=ruleset_id, book_id=book_id,
                                           config=config).edges
        stats["traversal_config_version"] = config.version
    stats.update(ruleset_id=ruleset_id, book_id=book_id)
    return stats


def uploaded_book_name(*, filename: str) -> str:
    """The book an upload names when the request gives none: the uploaded file's name without its extension
    (`srd.tar.gz` -> `srd`), in the characters a book id may hold.

    Why: the upload is read from a private staging folder; a book named after that folder would show the
    server's temporary path (`ingest-staged-…`) in every citation, and a second upload of the same book would
    become another book instead of replacing it."""
    name = PurePosixPath(filename.replace("\\", "/")).name
    lower = name.lower()
    for suffix in (*ARCHIVE_SUFFIXES, ".md", ".markdown", ".json", ".txt", *sorted(registry.document_suffixes())):
        if lower.endswith(suffix):
            name = name[:-len(suffix)]
            break
    return _NOT_IN_BOOK_ID.sub("-", name).strip("-.")[:100] or "book"


_NOT_IN_BOOK_ID = re.compile(r"[^\w.:-]+")


@register_tree_upload("rules")
def run_rules_upload(*, job: IngestJob, root: Path, staged: StagedContent,
                      progress: Progress | None) -> dict[str, Any]:
    """A rulebook (markdown tree or JSON) goes through the rulebook chunker and graph, in one transaction.

    Its chunk count is known only once enriched, so the quota is checked after writing, inside the
    transaction: past a quota, the raise rolls the whole book back."""
    options = {k: v for k, v in job.options.items() if k not in ("origin", "mode", "repo")}
    options.setdefault("book", uploaded_book_name(filename=staged.filename))
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=job.dataset.project_id)
        stats = ingest_rulebook(dataset=job.dataset, path=root, job=job, progress=progress, **options)
        if stats.get("refused_quota"):  # the writer left sections out at a quota: a book is whole or nothing
            raise quotas.QuotaExceeded(f"This rulebook would pass the project's quota ({stats['refused_quota']} "
                                       "files did not fit).", field="documents")
        usage, limits = quotas.usage_of(project), quotas.limits_of(project)
        for name in ("documents", "chunks", "bytes"):
            if getattr(usage, name) > getattr(limits, name):
                raise quotas.QuotaExceeded(f"This rulebook brings the project to {getattr(usage, name)} {name}; "
                                           f"its quota is {getattr(limits, name)}.", field=name)
        staged.delete()
    return stats
