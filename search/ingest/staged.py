"""Ingest jobs for content a team brought itself: pushed documents and uploaded files or archives.

Why all-or-nothing: a failed push or upload must leave the dataset as it was. So the job first reads and
chunks everything, embeds what the cache lacks (the slow part, with progress; the embedding cache is
shared and changes no dataset), and only then writes every document in one transaction, after checking
the project's quotas with the project row locked. A failure anywhere before the commit writes nothing to
the dataset; the job records why. Index changes ride in the same transaction through the outbox (and the
search_chunk trigger for deletes), so Qdrant follows exactly what committed.

Modes: an upload of an archive mirrors it by default (files missing from the new archive are removed:
the archive is the repository); a single file or a push merges (adds or replaces by path / external id).
"""
from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, F

from projects import quotas
from projects.models import Project
from search.engine.dataset_models import writing_models
from search.ingest import archives
from search.ingest.base import DocumentDraft
from search.ingest.code import ANY_SUFFIX, walk
from search.ingest.formats import registry
from search.ingest.formats.documents import read_document
from search.ingest.jobs import register
from search.ingest.web import refused_report
from search.ingest.web import walk as web_walk
from search.ingest.writer import FILE_BATCH, Progress, cache_vectors, delete_documents, write_documents
from search.models import Document, IngestJob, StagedContent

if TYPE_CHECKING:
    from projects.models import Project
    from search.models import Dataset, IngestJob

log = logging.getLogger(__name__)

# Upload readers for dataset kinds whose files are read as one tree, registered by the job that owns the kind
# (search.rules.ingest registers "rules"), so this module needs no import from above it.
_TREE_UPLOADS: dict[str, Callable[..., dict[str, Any]]] = {}


def register_tree_upload(kind: str) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """Register how an uploaded tree of a dataset `kind` is ingested (handler(*, job, root, staged, progress))."""
    def add(handler: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        _TREE_UPLOADS[kind] = handler
        return handler
    return add


def _read(*, kind: str, rel: str, data: bytes, repo: str, refused: dict[str, str]) -> DocumentDraft | None:
    """One staged file's bytes as a draft, the reader chosen from the bytes (search.ingest.formats.documents);
    a file no reader takes goes into `refused` with the reason."""
    draft, why = read_document(kind=kind, data=data, name=rel, repo=repo)
    if draft is None:
        refused[rel] = why or "no readable text"
    return draft


def _tree_items(*, kind: str, root: Path) -> Iterator[tuple[str, Path, str]]:
    """Every file of an upload (its folders pruned as a walk prunes them), with why it is not read ('' when it
    is): the bytes decide the reader, and a file none takes is reported, so an upload's files are all read or named."""
    if kind == "code":
        return walk(root, also=ANY_SUFFIX, limit=registry.max_bytes)
    return web_walk(root, also=ANY_SUFFIX, limit=registry.max_bytes)


@register("push")
@register("upload")
def run_staged(*, job: IngestJob, progress: Progress | None = None) -> dict[str, int]:
    """Run one push/upload job to completion or to a failure that wrote nothing."""
    staged = StagedContent.objects.filter(job=job).first()
    if staged is None:
        raise FileNotFoundError("this job's staged content is gone (the job already ran?)")
    dataset = job.dataset
    repo = job.options.get("repo") or dataset.name
    existing = _existing(dataset)
    drafts: list[DocumentDraft] = []
    seen: set[str] = set()
    refused: dict[str, str] = {}  # files the reader refused: path -> why (job.result)
    meta_only: list[dict[str, Any]] = []  # pushed docs whose text is unchanged: metadata may still change
    with tempfile.TemporaryDirectory(prefix="ingest-staged-") as tmpdir:
        tmp = Path(tmpdir)
        if job.options["origin"] == "push":  # each text read by the format its bytes (then its path) say
            for doc in staged.documents:
                path, data = doc["path"], doc["text"].encode("utf-8")
                seen.add(path)
                if existing.get(path, {}).get("content_hash") == hashlib.sha256(data).hexdigest():
                    meta_only.append(doc)
                    continue
                draft = _read(kind=job.kind, rel=path, data=data, repo=repo, refused=refused)
                if draft is None:
                    continue
                _apply_push_fields(draft, doc, size=len(data))
                drafts.append(draft)
        else:

            data = bytes(staged.data)
            if archives.is_archive(staged.filename):
                archives.extract_archive(data=data, dest=tmp)
            else:
                archives.stage_single_file(data=data, filename=staged.filename, dest=tmp)
            if job.kind in _TREE_UPLOADS:  # a kind read as a whole tree (rulebooks: chunks link across files)
                return _TREE_UPLOADS[job.kind](job=job, root=tmp, staged=staged, progress=progress)
            for rel, abs_path, reason in _tree_items(kind=job.kind, root=tmp):
                if reason:  # oversized: named with its limit, not read (and, as before, not kept by a mirror)
                    refused[rel] = f"too large (over {registry.max_bytes(rel):,} bytes)"
                    continue
                seen.add(rel)
                raw = abs_path.read_bytes()
                if existing.get(rel, {}).get("content_hash") == hashlib.sha256(raw).hexdigest():
                    continue
                draft = _read(kind=job.kind, rel=rel, data=raw, repo=repo, refused=refused)
                if draft is not None:
                    draft.size_bytes = len(raw)
                    drafts.append(draft)
    IngestJob.objects.filter(pk=job.pk).update(files_total=len(seen), files_skipped=len(seen) - len(drafts),
                                               **({"result": refused_report(refused)} if refused else {}))
    mirror = job.options.get("mode") == "mirror"
    pushed_ids = {d["external_id"]: d["path"] for d in staged.documents} if job.options["origin"] == "push" else {}

    # 1. the slow part, with progress; nothing of the dataset changes
    filled = writing_models(dataset=dataset)  # what step 2 need not embed again (a switch begun since: it does)
    for i in range(0, len(drafts), FILE_BATCH):
        batch = drafts[i:i + FILE_BATCH]
        stats = cache_vectors(drafts=batch, dataset=dataset)
        IngestJob.objects.filter(pk=job.pk).update(
            files_done=F("files_done") + len(batch), embeddings_computed=F("embeddings_computed") + stats["embedded"],
            embeddings_cached=F("embeddings_cached") + stats["cached"])
        if progress:
            progress({"path": batch[-1].path, "skipped": False})

    # 2. everything at once, or nothing
    with transaction.atomic():
        # jobs of one project write one at a time (the project row is locked until commit), and what they
        # replace or remove is decided here, on the documents as they are now, not as they were when this
        # job started reading: a push that committed meanwhile is mirrored away or kept like any document
        project = Project.objects.select_for_update().get(pk=dataset.project_id)
        existing = _existing(dataset)
        moved = [p for p, row in existing.items() if row["external_id"] in pushed_ids
                 and pushed_ids[row["external_id"]] != p]
        gone = sorted({*moved, *([p for p in existing if p not in seen] if mirror else [])} - seen)
        _check_quota(project=project, drafts=drafts, existing=existing, gone=gone)
        deleted = delete_documents(dataset=dataset, paths=gone)  # first: a moved document frees its external id
        written = 0
        for i in range(0, len(drafts), FILE_BATCH):
            written += write_documents(dataset=dataset, drafts=drafts[i:i + FILE_BATCH], filled=filled)["chunks"]
        for doc in meta_only:
            Document.objects.filter(dataset=dataset, path=doc["path"]).update(**_push_columns(doc))
        IngestJob.objects.filter(pk=job.pk).update(files_done=len(seen), chunks_written=written, files_deleted=deleted)
        staged.delete()
    return {"files": len(seen), "written": len(drafts), "chunks": written, "deleted": deleted}


def _push_columns(doc: dict[str, Any]) -> dict[str, Any]:
    cols: dict[str, Any] = {"external_id": doc["external_id"]}
    for key in ("title", "url", "lang"):
        if doc.get(key):
            cols[key] = doc[key][:500] if key == "title" else doc[key]
    if doc.get("metadata") is not None:
        cols["meta"] = doc["metadata"]
    return cols


def _apply_push_fields(draft: DocumentDraft, doc: dict[str, Any], *, size: int) -> None:
    draft.size_bytes = size
    for key, value in _push_columns(doc).items():
        setattr(draft, key, value)
    if doc.get("lang"):
        draft.lang = doc["lang"]


def _existing(dataset: Dataset) -> dict[str, dict[str, Any]]:
    """The dataset's documents by path: hash, external id, size and chunk count."""
    return {row["path"]: row for row in Document.objects.filter(dataset=dataset)
            .values("path", "content_hash", "external_id", "size_bytes").annotate(n=Count("chunks"))}


def _check_quota(*, project: Project, drafts: list[DocumentDraft], existing: dict[str, dict[str, Any]],
                 gone: list[str]) -> None:
    """Net change of this job against the project's quotas (the caller holds the project row's lock)."""
    replaced = [existing[d.path] for d in drafts if d.path in existing] + [existing[p] for p in gone if p in existing]
    add_docs = sum(1 for d in drafts if d.path not in existing) - sum(1 for p in gone if p in existing)
    add_chunks = sum(len(d.chunks) for d in drafts) - sum(r["n"] for r in replaced)
    add_bytes = sum(d.size_bytes for d in drafts) - sum(r["size_bytes"] for r in replaced)
    quotas.check(project=project, add_documents=add_docs, add_chunks=add_chunks, add_bytes=add_bytes)
