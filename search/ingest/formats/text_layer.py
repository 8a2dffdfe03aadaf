"""What every document reader hands to the chunkers: Markdown lines, each knowing its page.

Why Markdown: the web and rules chunkers already cut Markdown by its headings, so a PDF, DOCX or EPUB read into
Markdown gets the same heading paths, enrichment, graph, chapter routing and aliases as a Markdown rulebook,
with no second chunker per format. Why a page per line: a chunk is a line span, so its page range is the pages
of its first and last line, and a citation can name the page a reader turns to.
"""
from __future__ import annotations

from dataclasses import dataclass, field


class Refused(Exception):
    """A reader will not read this document; `reason` says why in words a user can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TextLayer:
    """A document as Markdown text plus, for paged formats, the 1-based page of every line (0: no page).

    `line_pages` is empty for formats without pages, else has exactly one entry per line of `markdown`
    (`markdown.split("\\n")`)."""

    markdown: str
    line_pages: tuple[int, ...] = ()
    pages: int = 0  # pages in the document (0: not a paged format)
    pages_without_text: int = 0  # pages with no text layer (scans); counted and reported, not read
    title: str = ""
    meta: dict[str, object] = field(default_factory=dict)

    def page_span(self, *, start_line: int, end_line: int) -> tuple[int, int]:
        """First and last page of a 1-based inclusive line span; (0, 0) for formats without pages."""
        if not self.line_pages:
            return (0, 0)
        inside = [p for p in self.line_pages[max(0, start_line - 1):max(0, end_line)] if p]
        return (min(inside), max(inside)) if inside else (0, 0)
