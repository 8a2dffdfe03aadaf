"""What a format module declares: its name, how its bytes are recognised, and (for documents) its reader.

Why a declaration and not a class hierarchy: a new format is one module exporting `FORMAT = Format(...)` plus one
line in search/ingest/formats/registry.py, as a source type is (search/sources/registry.py). The module never
imports the registry, so the registry can import every format module without a cycle.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from search.ingest.formats.text_layer import TextLayer

# (*, data: bytes, name: str) -> TextLayer; raises text_layer.Refused with a reason a user can act on
Reader = Callable[..., TextLayer]


@dataclass(frozen=True)
class Format:
    """One format the platform reads.

    `sniff(data)`: whether these bytes are this format, from their magic number or structure (never the name).
    `read`: a document format's reader, bytes in and a TextLayer out; None for the text kinds (code, markdown, html,
    text, json-rules), which each dataset kind's own chunker reads from the bytes as it always did.
    `suffixes`: for a document format, the names a tree walk takes as candidates (the bytes still decide the
    reader); for a text kind, the names that break a tie between text kinds."""

    name: str
    sniff: Callable[[bytes], bool]
    read: Reader | None = None
    suffixes: tuple[str, ...] = ()
    media_types: tuple[str, ...] = ()  # Content-Types a crawl accepts for it (documents)

    @property
    def is_document(self) -> bool:
        return self.read is not None
