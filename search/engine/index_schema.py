"""What every index adapter stores and is asked: points, payload filters, and the store's layout.

Why a module of its own: both adapters (search.engine.index_embedded, search.engine.index_server) and the
interface (search.engine.index) speak these types, so they sit below all three. The layout: per embedding model,
one collection per kind of content (`code_context`, `web_context`, `rules_context`; other prose kinds go with
web), each with a named dense vector and a named sparse vector, its payload fields indexed; a query reads only the
collections of the kinds it can return and merges their hits by score.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from search.engine.sparse import SparseVec

DENSE = "dense"
SPARSE = "sparse"
KEYWORD_FIELDS = ("repo", "path", "lang", "kind", "book_id", "ruleset_id")
INTEGER_FIELDS = ("dataset_id", "project_id")
# payload key -> the Chunk lookup that fills it; chunk_payload() and the reconciler read the same map
PAYLOAD_LOOKUPS = {"dataset_id": "dataset_id", "project_id": "dataset__project_id", "repo": "repo", "path": "path",
                   "lang": "lang", "kind": "kind", "book_id": "book_id", "ruleset_id": "ruleset_id"}
SCROLL_BATCH = 1000




@dataclass
class IndexFilter:
    """Payload filter shared by both legs. dataset_ids is mandatory: access is resolved in SQL first."""

    dataset_ids: list[int]
    repo: list[str] | None = None
    lang: list[str] | None = None
    path_prefix: str | None = None
    paths: list[str] | None = None  # exact paths (a glob resolved in SQL)
    kind: list[str] | None = None
    book_id: list[str] | None = None
    ruleset_id: list[str] | None = None

    @property
    def reads_code(self) -> bool:
        """Whether code chunks can pass: not where a kind filter leaves code out or a rulebook's filter applies.
        What `locate` reads beside the index (the history vote's files, the definitions a task names) is code, so a
        filter that passes no code passes none of it."""
        return not (self.kind and "code" not in self.kind) and not self.book_id and not self.ruleset_id

    def admit(self, rows: Any, *, repo: str = "repo") -> Any:
        """`rows` (a QuerySet of rows with `path` and `lang`, and a repository at `repo`) narrowed to what this
        filter's repositories, languages, path prefix and paths admit: rows read beside the index (the history
        vote's files, the definitions a task names) obey the request as the chunks do."""
        if self.repo:
            rows = rows.filter(**{f"{repo}__in": self.repo})
        if self.lang:
            rows = rows.filter(lang__in=self.lang)
        if self.path_prefix:
            rows = rows.filter(path__startswith=self.path_prefix)
        if self.paths is not None:
            rows = rows.filter(path__in=self.paths)
        return rows


@dataclass
class IndexPoint:
    id: int
    dense: list[float]
    sparse: SparseVec
    payload: dict[str, Any] = field(default_factory=dict)


PARTITIONS = ("code", "web", "rules")


def partition_of(kind: str | None) -> str:
    """The collection a chunk of this kind lives in: code and rules have their own, every prose kind goes with
    web (a BEIR abstract is analysed like a web page)."""
    return kind if kind in ("code", "rules") else "web"


def partitions_for(flt: IndexFilter) -> tuple[str, ...]:
    """The collections a filter can find anything in: those of its kinds, or all of them."""
    if flt.kind:
        return tuple(p for p in PARTITIONS if p in {partition_of(k) for k in flt.kind})
    return PARTITIONS


def model_slug(model_id: str, dim: int) -> str:
    return re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_") + f"_{dim}"


def collection_name(model_id: str, dim: int, *, partition: str) -> str:
    return f"{partition}_context_{model_slug(model_id, dim)}"


def merge_hits(per_partition: list[list[tuple[int, float]]], *, limit: int) -> list[tuple[int, float]]:
    """The best `limit` hits over several collections (scores on one scale), best first, ties by id."""
    hits = [h for part in per_partition for h in part]
    return sorted(hits, key=lambda h: (-h[1], h[0]))[:limit]
