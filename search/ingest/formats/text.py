"""The text kinds: HTML and JSON rule records (known by their bytes), then Markdown, code and plain text (text
whose name breaks the tie). Their bytes are read by each dataset kind's own chunker, as they always were.
"""
from __future__ import annotations

import json

from search.ingest.code import LANGS, NAMED_FILES
from search.ingest.formats.base import Format

_BOM = b"\xef\xbb\xbf"
_SNIFF_BYTES = 1024


def looks_html(data: bytes) -> bool:
    """A document that says it is HTML in its first bytes: a doctype, an <html> element, or XHTML after an XML
    declaration (leading whitespace, a byte-order mark and comments aside)."""
    head = data[:_SNIFF_BYTES].removeprefix(_BOM).lstrip().lower()
    while head.startswith(b"<!--") and b"-->" in head:
        head = head.split(b"-->", 1)[1].lstrip()
    if head.startswith(b"<?xml"):
        return b"<html" in head
    return head.startswith((b"<!doctype html", b"<html"))


def looks_json_rules(data: bytes) -> bool:
    """JSON rule records by structure: a list of objects with a `text`, or an object whose `chunks` or `records`
    is one (search.ingest.rules.chunk_json_records reads them)."""
    if not data[:_SNIFF_BYTES].removeprefix(_BOM).lstrip().startswith((b"{", b"[")):
        return False
    try:
        doc = json.loads(data.removeprefix(_BOM))
    except (ValueError, RecursionError):
        return False
    records = doc.get("chunks", doc.get("records")) if isinstance(doc, dict) else doc
    return isinstance(records, list) and bool(records) and all(isinstance(r, dict) and "text" in r for r in records)


def _never(data: bytes) -> bool:
    return False


HTML = Format(name="html", sniff=looks_html, suffixes=(".html", ".htm", ".xhtml"),
              media_types=("text/html", "application/xhtml+xml"))
JSON_RULES = Format(name="json-rules", sniff=looks_json_rules)
MARKDOWN = Format(name="markdown", sniff=_never, suffixes=(".md", ".markdown"),
                  media_types=("text/markdown", "text/x-markdown"))
# code IS text: its language comes from its name (search.ingest.code.detect_lang), as an editor's does
CODE = Format(name="code", sniff=_never,
              suffixes=tuple(sorted(s for s, lang in LANGS.items() if lang not in ("markdown", "html", "text")))
              + tuple(NAMED_FILES))
TEXT = Format(name="text", sniff=_never, suffixes=(".txt",), media_types=("text/plain",))
