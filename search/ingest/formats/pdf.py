"""PDF in, a text layer out: read as a person reads it, in a process that a hostile file cannot take down.

Why a child process (search.ingest.formats.pdf_child): PDFium parses in C, where no Python check runs; the child
caps its own memory (PDF_MAX_MEMORY_MB, RLIMIT_AS) and CPU, and this side kills it at the wall deadline
(PDF_MAX_SECONDS), so a bomb, a cycle or a page of a million objects
costs one bounded failure and the rest of the job goes on. Page count, characters per page and characters in all
are checked inside the child's page loop (PDF_MAX_PAGES, PDF_MAX_PAGE_CHARS, PDF_MAX_CHARS); the answer is JSON.
Why PDFium (pypdfium2, Apache-2.0/BSD): the fastest of the permissive readers measured, with character boxes,
font sizes and the outline (docs/documents.md).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from search.ingest.formats.base import Format
from search.ingest.formats.text_layer import Refused, TextLayer

ROOT = Path(__file__).resolve().parents[3]  # where `search` is importable from, for the child
CHILD = "search.ingest.formats.pdf_child"
HEADER_WINDOW = 1024  # PDF readers accept a %PDF- header this far in


def is_pdf(data: bytes) -> bool:
    return b"%PDF-" in data[:HEADER_WINDOW]


def limits() -> dict[str, int]:
    return {"max_pages": settings.PDF_MAX_PAGES, "max_page_chars": settings.PDF_MAX_PAGE_CHARS,
            "max_chars": settings.PDF_MAX_CHARS, "max_outline": settings.PDF_MAX_OUTLINE,
            "max_seconds": settings.PDF_MAX_SECONDS, "max_memory_mb": settings.PDF_MAX_MEMORY_MB}


def read_pdf(*, data: bytes, name: str) -> TextLayer:
    """The PDF's text in reading order as Markdown with a page per line; Refused(reason) for one it will not
    read (encrypted, damaged beyond repair, over a limit), the reason naming the document."""
    if len(data) > settings.PDF_MAX_BYTES:
        raise Refused(f"{name}: {len(data)} bytes is more than the {settings.PDF_MAX_BYTES} a PDF may have here")
    if not is_pdf(data):
        raise Refused(f"{name}: not a PDF (no %PDF- header)")
    lim = limits()
    wall = float(lim["max_seconds"])
    proc = subprocess.Popen(  # our own interpreter and module; the PDF goes in on stdin
        [sys.executable, "-E", "-s", "-m", CHILD, json.dumps(lim)], cwd=ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    try:
        out, _ = proc.communicate(input=data, timeout=wall + 5)  # its own clock stops it first; this is the fence
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Refused(f"{name}: reading it took longer than {lim['max_seconds']} s and was stopped") from None
    if proc.returncode != 0 or not out:
        if proc.returncode in (-9, -24, 137):  # killed by its CPU limit
            raise Refused(f"{name}: reading it took longer than {lim['max_seconds']} s and was stopped")
        raise Refused(f"{name}: the PDF reader stopped on it: it needed more than the {lim['max_memory_mb']} MB "
                      f"a PDF may use here, or holds a structure the reader cannot read (exit {proc.returncode})")
    try:
        answer = json.loads(out)
    except ValueError:
        raise Refused(f"{name}: the PDF reader gave no readable answer") from None
    if not answer.get("ok"):
        raise Refused(f"{name}: {answer.get('reason', 'it could not be read')}")
    markdown = str(answer["markdown"])
    line_pages = tuple(int(p) for p in answer["line_pages"])
    if len(line_pages) != markdown.count("\n") + 1 and markdown:
        raise Refused(f"{name}: the PDF reader gave an inconsistent answer")
    meta = dict(answer.get("meta") or {})
    meta["format"] = "pdf"
    return TextLayer(markdown=markdown, line_pages=line_pages if markdown else (), pages=int(answer["pages"]),
                     pages_without_text=int(answer["pages_without_text"]), title=str(answer.get("title") or ""),
                     meta=meta)


FORMAT = Format(name="pdf", sniff=is_pdf, read=read_pdf, suffixes=(".pdf",), media_types=("application/pdf",))
