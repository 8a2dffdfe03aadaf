"""The source types this platform follows. A new type is a folder beside git/ and web/ exporting a SourceType
as SOURCE, plus one line here (docs/architecture.md)."""
from __future__ import annotations

from search.sources import git, web
from search.sources.base import SourceType

SOURCE_TYPES: dict[str, SourceType] = {}


def register(source_type: SourceType) -> SourceType:
    """Add a source type; a name registered twice is a programming error."""
    if SOURCE_TYPES.get(source_type.name, source_type) is not source_type:
        raise ValueError(f"source type {source_type.name!r} is already registered")
    SOURCE_TYPES[source_type.name] = source_type
    return source_type


def source_type(name: str) -> SourceType:
    """The registered type called `name` (KeyError for one that is not: a stored row always names a known type)."""
    return SOURCE_TYPES[name]


def all_fields() -> frozenset[str]:
    """Every field some type takes: a form may send the fields of every type, the chosen type reads its own."""
    return frozenset().union(*(t.fields for t in SOURCE_TYPES.values()))


register(git.SOURCE)
register(web.SOURCE)
