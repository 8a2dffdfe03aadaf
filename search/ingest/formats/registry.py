"""The one registry of readers, keyed by format, and the one detection of a format from a file's bytes.

Why the bytes and not the name: a name is what someone typed; a PDF saved as `notes.txt` is still a PDF, and an
HTML error page saved as `manual.pdf` is HTML. So detection runs the formats' own tests on the bytes, in the order
registered here: magic numbers (PDF, DOCX, EPUB), then structure (HTML, JSON rule records); bytes no reader accepts
and that are not text are refused ("binary: no reader"). Only then does the name (or a crawl's Content-Type) break
the tie between the text kinds: Markdown, code by its language, plain text.

A new format is one module exporting `FORMAT = Format(...)` (search.ingest.formats.base) plus one `register` line
below; every entry point (folders, uploads, archives, pushes, git, crawls, rulebooks) then reads it, through
search.ingest.formats.documents.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from django.conf import settings

from search.ingest.code import MAX_FILE_BYTES
from search.ingest.formats import docx, epub, pdf, text
from search.ingest.formats.base import Format
from search.ingest.formats.text_layer import Refused, TextLayer
from search.ingest.web import MarkupRefused, html_to_markdown

FORMATS: dict[str, Format] = {}
BINARY = "binary: no reader"
_BINARY_PROBE = 8192  # a NUL in the first bytes: not text (search.ingest.code.is_binary reads as many)


def register(fmt: Format) -> Format:
    """Add a format; detection tries formats in the order they were registered."""
    FORMATS[fmt.name] = fmt
    return fmt


class Detected(NamedTuple):
    """A format name ("" when no reader accepts the bytes) and why, in words for the job's report."""

    format: str
    reason: str


def detect(*, data: bytes, name: str, media_type: str = "") -> Detected:
    """The format of these bytes (module docstring). `name` and `media_type` only break a tie between text kinds."""
    for fmt in FORMATS.values():
        if fmt.sniff(data):
            return Detected(fmt.name, f"{fmt.name}: recognised by its bytes")
    if b"\x00" in data[:_BINARY_PROBE]:
        return Detected("", BINARY)
    text_kinds = [f for f in FORMATS.values() if not f.is_document]
    for fmt in text_kinds:
        if media_type and media_type in fmt.media_types:
            return Detected(fmt.name, f"{fmt.name}: text, by its Content-Type")
    base = name.rstrip("/").rsplit("/", 1)[-1]
    suffix = os.path.splitext(base)[1].lower()
    for fmt in text_kinds:
        if (suffix and suffix in fmt.suffixes) or base in fmt.suffixes:
            return Detected(fmt.name, f"{fmt.name}: text, by its name")
    return Detected("text", "text: no other reader accepts it")


def is_document(fmt: str) -> bool:
    """Whether `fmt` is read into a text layer by its own reader (PDF, DOCX, EPUB...), not by a dataset's chunker."""
    return fmt in FORMATS and FORMATS[fmt].is_document


def document_suffixes() -> frozenset[str]:
    """The names a tree walk takes as candidates beyond the text kinds' (the bytes still decide the reader)."""
    return frozenset(s for f in FORMATS.values() if f.is_document for s in f.suffixes)


def max_bytes(name: str) -> int:
    """The most bytes a walk reads of one file: a text file's MAX_FILE_BYTES, a document's (PDF, DOCX, EPUB, by its
    name) what an upload takes as one file (UPLOAD_MAX_FILE_BYTES), since a manual outweighs a source file; its
    reader then holds it to its own bounds."""
    suffix = os.path.splitext(name.rsplit("/", 1)[-1])[1].lower()
    if suffix in document_suffixes():
        return max(MAX_FILE_BYTES, settings.UPLOAD_MAX_FILE_BYTES)
    return MAX_FILE_BYTES


def media_types() -> frozenset[str]:
    """The Content-Types a crawl accepts: every registered format's."""
    return frozenset(t for f in FORMATS.values() for t in f.media_types)


def read(*, data: bytes, name: str, fmt: str = "") -> TextLayer:
    """Any accepted file as a text layer: a document format through its reader, HTML through the web reader,
    the other text kinds as their text. Raises Refused (with the reason) when no reader accepts the bytes."""
    fmt = fmt or detect(data=data, name=name).format
    if not fmt:
        raise Refused(BINARY)
    if is_document(fmt):
        reader = FORMATS[fmt].read
        assert reader is not None  # is_document
        try:
            return reader(data=data, name=name)
        except Refused as exc:  # one shape for every reader: "<FORMAT> refused: why", counted by its first words
            label = f"{fmt.upper()} refused"
            why = exc.reason.removeprefix(f"{name}: ")
            raise Refused(why if why.startswith(label) else f"{label}: {why}") from exc
    decoded = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    if fmt == "html":
        try:
            md, title, url, headings = html_to_markdown(decoded)
        except MarkupRefused as exc:
            raise Refused(str(exc)) from exc
        return TextLayer(markdown=md, title=title, meta={"format": "html", "url": url, "headings": headings})
    return TextLayer(markdown=decoded.replace("\r\n", "\n"), meta={"format": fmt})


# Bytes first: the magic numbers, then structure; the text kinds after, tied by name.
register(pdf.FORMAT)
register(docx.FORMAT)
register(epub.FORMAT)
register(text.HTML)
register(text.JSON_RULES)
register(text.MARKDOWN)
register(text.CODE)
register(text.TEXT)
