"""Exact lines of indexed files, read back from Postgres within a project's access (the MCP server's read_span).

Why from chunks: Postgres keeps no other copy of a file's text. A chunk's text is its lines start_line..end_line
exactly (search.packing merges spans the same way), so the lines an agent reads here are the lines that search
returned, from the same indexed version. Access is resolved in SQL first (projects.access), like every query: a
path in a dataset the project cannot see is answered exactly like a path that does not exist.
"""
from __future__ import annotations

from typing import Any

from config.errors import BadInput, NotFound
from projects.access import accessible_dataset_ids
from projects.models import Project
from search.models import Chunk, Document

MAX_SPAN_LINES = 2000  # one read_span call
NO_FILE = "No indexed file at this path in this project."


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
