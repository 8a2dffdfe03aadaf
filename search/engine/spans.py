"""Exact lines of indexed files, read back from Postgres within a project's access (the MCP server's read_span and
its `platform://` resources).

Why from chunks: Postgres keeps no other copy of a file's text. A chunk's text is its lines start_line..end_line
exactly (search.engine.packing merges spans the same way), so the lines an agent reads here are the lines that search
returned, from the same indexed version. Access is resolved in SQL first (search.engine.access), like every query: a
path in a dataset the project cannot see is answered exactly like a path that does not exist.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.errors import BadInput, NotFound
from projects.models import Project
from search.engine.access import accessible_dataset_ids
from search.models import Chunk, Dataset, Document

MAX_SPAN_LINES = 2000  # one read_span call
MAX_FILE_LINES = 20000  # one resource read; longer files come back truncated (and say so)
NO_FILE = "No indexed file at this path in this project."


@dataclass(frozen=True)
class IndexedFile:
    dataset: Dataset
    dataset_ref: str  # the dataset's name, or its id where two datasets the project sees share the name
    path: str


def _dataset_refs(datasets: list[Dataset]) -> dict[int, str]:
    names: dict[str, int] = {}
    for ds in datasets:
        names[ds.name] = names.get(ds.name, 0) + 1
    return {ds.pk: ds.name if names[ds.name] == 1 else str(ds.pk) for ds in datasets}


def _line_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInput("Must be a positive integer (lines are 1-based).", field=field)
    return value


def _lines_of(chunks: list[Chunk], lo: int, hi: int) -> dict[int, str]:
    lines: dict[int, str] = {}
    for c in chunks:
        for i, line in enumerate(c.text.split("\n")):
            n = c.start_line + i
            if lo <= n <= hi:
                lines.setdefault(n, line)
    return lines


def read_span(*, project: Project, path: str, start_line: int, end_line: int,
              dataset_id: int | None = None) -> dict[str, Any]:
    """Lines start_line..end_line (1-based, inclusive) of `path` as indexed, from a dataset the project can read.

    Where several readable datasets hold the path and `dataset_id` is not given, the project's own dataset wins,
    then the lowest id. -> {dataset_id, repo, path, start_line, end_line, span, text, missing_lines}."""
    if not isinstance(path, str) or not path.strip() or len(path) > 1000:
        raise BadInput("Must be a non-empty path of at most 1000 characters.", field="path")
    start_line, end_line = _line_int(start_line, "start_line"), _line_int(end_line, "end_line")
    if end_line < start_line:
        raise BadInput("Must not be before start_line.", field="end_line")
    if end_line - start_line + 1 > MAX_SPAN_LINES:
        raise BadInput(f"At most {MAX_SPAN_LINES} lines per call.", field="end_line")
    ids = accessible_dataset_ids(project)
    if dataset_id is not None:
        ids = ids & {dataset_id}
    docs = list(Document.objects.filter(dataset_id__in=ids, path=path).select_related("dataset"))
    if not docs:
        raise NotFound(NO_FILE, field="path")
    doc = min(docs, key=lambda d: (d.dataset.project_id != project.pk, d.dataset_id))
    last = max((c for c in Chunk.objects.filter(document=doc).values_list("end_line", flat=True)), default=0)
    if start_line > last:
        raise BadInput(f"The indexed file has {last} lines.", field="start_line")
    end_line = min(end_line, last)
    chunks = list(Chunk.objects.filter(document=doc, start_line__lte=end_line, end_line__gte=start_line)
                  .order_by("start_line", "end_line"))
    lines = _lines_of(chunks, start_line, end_line)
    return {"dataset_id": doc.dataset_id, "repo": doc.repo, "path": doc.path, "start_line": start_line,
            "end_line": end_line, "span": f"{doc.path}:{start_line}-{end_line}",
            "text": "\n".join(lines.get(n, "") for n in range(start_line, end_line + 1)),
            "missing_lines": [n for n in range(start_line, end_line + 1) if n not in lines]}


def indexed_files(*, project: Project, limit: int) -> list[IndexedFile]:
    """Up to `limit` indexed files the project can read (own datasets first, then by dataset and path)."""
    datasets = list(Dataset.objects.filter(pk__in=accessible_dataset_ids(project)))
    refs = _dataset_refs(datasets)
    by_id = {ds.pk: ds for ds in datasets}
    own_first = sorted(datasets, key=lambda ds: (ds.project_id != project.pk, ds.pk))
    out: list[IndexedFile] = []
    for ds in own_first:
        if len(out) >= limit:
            break
        for path in (Document.objects.filter(dataset=ds).order_by("path")
                     .values_list("path", flat=True)[: limit - len(out)]):
            out.append(IndexedFile(dataset=by_id[ds.pk], dataset_ref=refs[ds.pk], path=path))
    return out


def read_file(*, project: Project, dataset_ref: str, path: str) -> dict[str, Any]:
    """A whole indexed file (up to MAX_FILE_LINES) by dataset name (or id) and path. -> read_span's shape plus
    `truncated`."""
    datasets = list(Dataset.objects.filter(pk__in=accessible_dataset_ids(project)))
    refs = _dataset_refs(datasets)
    match = [ds for ds in datasets if refs[ds.pk] == dataset_ref]
    if not match:
        raise NotFound(NO_FILE, field="path")
    dataset = match[0]
    last = max(Chunk.objects.filter(dataset=dataset, path=path).values_list("end_line", flat=True), default=0)
    if not last:
        raise NotFound(NO_FILE, field="path")
    end = min(last, MAX_FILE_LINES)
    chunks = list(Chunk.objects.filter(dataset=dataset, path=path, start_line__lte=end).order_by("start_line"))
    lines = _lines_of(chunks, 1, end)
    doc = Document.objects.filter(dataset=dataset, path=path).values_list("repo", flat=True).first() or ""
    return {"dataset_id": dataset.pk, "repo": doc, "path": path, "start_line": 1, "end_line": end,
            "span": f"{path}:1-{end}", "text": "\n".join(lines.get(n, "") for n in range(1, end + 1)),
            "truncated": last > end}
