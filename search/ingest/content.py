"""A team's own content: push documents, upload files or archives, delete documents.

Why one module: the API and the pages both bring content in and take it out, and the rules must be the same:
editors and owners write; the request is checked whole (paths, duplicates, archive safety, quotas) before
anything is stored; what is accepted becomes one IngestJob (progress, errors, incremental by content hash)
that the worker runs all-or-nothing (search.ingest.staged); every delete goes through the one delete that
queues the index deletes in the same transaction.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

from config.errors import ApiError, BadInput, Conflict, NotFound
from projects import policy, quotas
from projects.access import project_for_member
from search.ingest import archives
from search.ingest.jobs import start_ingest
from search.ingest.writer import delete_documents as delete_rows
from search.models import Dataset, Document, IngestJob, Source, StagedContent

if TYPE_CHECKING:
    from accounts.models import User

PUSH_KINDS = ("code", "web")
MODES = ("merge", "mirror")


class UploadTooLarge(ApiError):
    status_code = 413
    code = "upload_too_large"


def dataset_of(*, user: User, slug: str, dataset_id: int, write: bool = False) -> Dataset:
    """A dataset of the project (404 for non-members and for another project's dataset); 403 when `write`
    and the caller only views."""
    project = project_for_member(user=user, slug=slug)
    dataset = Dataset.objects.filter(pk=dataset_id, project=project).select_related("project").first()
    if dataset is None:
        raise NotFound("Dataset not found.")
    if write:
        policy.authorize("content.write", user=user, project=project, what="Dataset")
    return dataset


def _refuse_if_followed(dataset: Dataset) -> None:
    """409 dataset_has_source: a dataset that follows a git repository or a web site takes its content from there.

    Why refuse rather than merge: the next sync makes the dataset equal to its source again, so a pushed or
    uploaded document would be overwritten or deleted without a word. Remove the source first (DELETE .../source),
    or push into another dataset."""
    if Source.objects.filter(dataset=dataset).exists():
        raise Conflict("This dataset follows a source (a git repository or a web site) and takes its content from "
                       "there; a sync would overwrite what you push or upload. Remove the source first, or use "
                       "another dataset.", code="dataset_has_source")


def _start(*, user: User, dataset: Dataset, source: str, options: dict[str, Any], filename: str = "",
           data: bytes = b"", documents: Sequence[dict[str, Any]] = ()) -> IngestJob:
    """Job and staged content in one transaction; the worker is told only after both committed."""
    kind = dataset.kind if dataset.kind in ("code", "web", "rules") else "code"
    with transaction.atomic():
        job = start_ingest(job=IngestJob(dataset=dataset, source=source, kind=kind, options=options), user=user)
        StagedContent.objects.create(job=job, filename=filename, data=data, documents=list(documents),
                                     size=len(data) or sum(len(d["text"]) for d in documents))
    return job


def push_documents(*, user: User, dataset: Dataset, documents: list[dict[str, Any]], repo: str = "") -> IngestJob:
    """Upsert a batch of documents by external_id; unchanged text re-embeds nothing. Returns the IngestJob."""
    _refuse_if_followed(dataset)
    if dataset.kind not in PUSH_KINDS:
        raise BadInput(f"Push works for code and web datasets; upload a rulebook to a {dataset.kind} dataset.",
                       field="documents")
    ids, paths = set(), set()
    for i, doc in enumerate(documents):
        if doc["external_id"] in ids:
            raise BadInput(f"external_id {doc['external_id']!r} appears twice in this batch.",
                           field=f"documents.{i}.external_id")
        if doc["path"] in paths:
            raise BadInput(f"path {doc['path']!r} appears twice in this batch.", field=f"documents.{i}.path")
        ids.add(doc["external_id"])
        paths.add(doc["path"])
    known = {row["external_id"]: row for row in Document.objects.filter(dataset=dataset, external_id__in=ids)
             .values("external_id", "size_bytes")}
    by_path = set(Document.objects.filter(dataset=dataset, path__in=paths).values_list("path", flat=True))
    new_docs = sum(1 for d in documents if d["external_id"] not in known and d["path"] not in by_path)
    add_bytes = sum(len(d["text"].encode()) for d in documents) - sum(r["size_bytes"] for r in known.values())
    quotas.check(project=dataset.project, add_documents=new_docs, add_bytes=add_bytes)
    return _start(user=user, dataset=dataset, source=f"push: {len(documents)} document(s)",
                  options={"origin": "push", "mode": "merge", "repo": repo or dataset.name}, documents=documents)


def upload(*, user: User, dataset: Dataset, filename: str, data: bytes, mode: str | None = None,
           options: dict[str, str] | None = None) -> IngestJob:
    """Stage one uploaded file or archive (checked whole first) and start its job. Returns the IngestJob."""
    _refuse_if_followed(dataset)
    if len(data) > settings.UPLOAD_MAX_BYTES:
        raise UploadTooLarge(f"The upload is {len(data)} bytes; the limit is {settings.UPLOAD_MAX_BYTES}.",
                             field="file")
    is_archive = archives.is_archive(filename)
    mode = mode or ("mirror" if is_archive else "merge")
    if mode not in MODES:
        raise BadInput(f"mode must be one of {', '.join(MODES)}.", field="mode")
    if is_archive:
        files = archives.member_files(data=data)
    else:
        if len(data) > settings.UPLOAD_MAX_FILE_BYTES:
            raise UploadTooLarge(f"The file is {len(data)} bytes; the limit is {settings.UPLOAD_MAX_FILE_BYTES}.",
                                 field="file", code="file_too_large")
        files = {str(archives.safe_member_path(filename.rsplit("/", 1)[-1] or "upload")): len(data)}
    if dataset.kind != "rules":
        existing = dict(Document.objects.filter(dataset=dataset).values_list("path", "size_bytes"))
        dropped = [p for p in existing if p not in files] if mode == "mirror" else []
        quotas.check(project=dataset.project,
                     add_documents=sum(1 for p in files if p not in existing) - len(dropped),
                     add_bytes=sum(files.values()) - sum(existing.get(p, 0) for p in [*files, *dropped]))
    return _start(user=user, dataset=dataset, source=f"upload: {filename}", filename=filename, data=data,
                  options={"origin": "upload", "mode": mode, **(options or {})})


def delete_documents(*, user: User, dataset: Dataset, external_ids: list[str] | None = None,
                     paths: list[str] | None = None) -> dict[str, Any]:
    """Delete documents by external id or path; -> {"deleted": n, "missing": [...]}. Index deletes ride along."""
    wanted_ids, wanted_paths = list(external_ids or []), list(paths or [])
    found = dict(Document.objects.filter(dataset=dataset, external_id__in=wanted_ids).values_list("external_id", "path"))
    by_path = set(Document.objects.filter(dataset=dataset, path__in=wanted_paths).values_list("path", flat=True))
    missing = [e for e in wanted_ids if e not in found] + [p for p in wanted_paths if p not in by_path]
    deleted = delete_rows(dataset=dataset, paths=sorted({*found.values(), *by_path}))
    return {"deleted": deleted, "missing": missing}


def delete_document(*, user: User, dataset: Dataset, external_id: str) -> None:
    """One document by its external id (or, for files from an upload or a source, by its path)."""
    out = delete_documents(user=user, dataset=dataset, external_ids=[external_id])
    if not out["deleted"]:
        out = delete_documents(user=user, dataset=dataset, paths=[external_id])
    if not out["deleted"]:
        raise NotFound("Document not found.")
