"""EPUB -> Markdown: the spine's XHTML documents in reading order, each read by the web reader.

Why the web reader: an EPUB chapter is an XHTML page, so it goes through search.ingest.web.html_to_markdown (the
markup census, the permalink pass, trafilatura), and its headings are its real <h1>..<h6>, as a saved page's are.
Why the spine: it is the book's reading order (the manifest is only a list of parts).

Bounds: the package is checked as an upload archive is and members are counted while inflating
(search.ingest.formats.package); each chapter is held to the web reader's bounds (MAX_FILE_BYTES,
WEB_READER_MAX_ELEMENTS), the whole book to BOOK_PAGES_OF_ELEMENTS times that cap, counted by the same linear
tokenizer before a chapter is read, and its text to what one uploaded file may hold (UPLOAD_MAX_FILE_BYTES
characters), its chapters to MAX_CHAPTERS and their declared bytes to BOOK_BYTES_OF_FILES uploaded files; the package
document is read whole only up to PACKAGE_XML_BYTES. The cheap bounds (counts, declared sizes, the element scan of
every chapter) are all checked before the web reader's costly pass reads the first chapter.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import unquote

from django.conf import settings

from search.ingest.code import MAX_FILE_BYTES
from search.ingest.formats.base import Format
from search.ingest.formats.package import ZIP_MAGIC, Package, attr, iterparse, local_name, max_text_chars, xml_errors
from search.ingest.formats.text_layer import Refused, TextLayer
from search.ingest.web import MarkupRefused, html_to_markdown, scan_start_tags

# The most elements a whole book may hold, in web pages' worth (a 300-page novel is about 2 pages' worth): the web
# reader spends about a third of a millisecond per element, so this bounds a book's reading time as a few pages'.
BOOK_PAGES_OF_ELEMENTS = 5
# Spine documents read (the reader's cost per chapter is about 10 ms whatever its size; books have a few hundred)
MAX_CHAPTERS = 1_000
# The chapters' declared bytes together, in uploaded files' worth (UPLOAD_MAX_FILE_BYTES): they are held at once
BOOK_BYTES_OF_FILES = 4
PACKAGE_XML_BYTES = 4_000_000  # container.xml and the package document (a real one is a few hundred KB at most)
_CHAPTER_TYPES = ("application/xhtml+xml", "text/html")
_XML_DECLARATION = re.compile(r"^\ufeff?\s*<\?xml[^>]*\?>")


def sniff_epub(data: bytes) -> bool:
    """An OCF zip: its first member is the stored `mimetype` whose content is application/epub+zip."""
    return data.startswith(ZIP_MAGIC) and data[30:38] == b"mimetype" and b"application/epub+zip" in data[38:120]


def _parse(package: Package, name: str) -> list[Any]:
    """Every element of a small XML member, in document order (container.xml, the package document), refused by its
    declared size past PACKAGE_XML_BYTES before it is inflated (a tree of it is held whole)."""
    if package.sizes.get(name, 0) > PACKAGE_XML_BYTES:
        raise Refused(f"EPUB refused: {name[:100]!r} declares {package.sizes[name]:,} bytes (at most "
                      f"{PACKAGE_XML_BYTES:,} are read)")
    out: list[Any] = []
    with package.open(name) as src:
        try:
            for _event, el in iterparse(src, events=("end",)):
                out.append(el)
        except xml_errors() as exc:
            raise Refused(f"EPUB refused: {name[:100]!r} is not well-formed XML") from exc
    return out


def _spine(package: Package) -> tuple[str, list[str]]:
    """(title, the member names of the spine's chapters in reading order)."""
    rootfile = next((attr(el, "full-path") for el in _parse(package, "META-INF/container.xml")
                     if local_name(el.tag) == "rootfile" and attr(el, "full-path")), "")
    if not rootfile:
        raise Refused("EPUB refused: META-INF/container.xml names no package document")
    base = posixpath.dirname(rootfile)
    title, manifest, order = "", {}, []
    for el in _parse(package, rootfile):
        local = local_name(el.tag)
        if local == "title" and not title and el.text:
            title = " ".join(el.text.split())
        elif local == "item" and attr(el, "id"):
            manifest[attr(el, "id")] = (attr(el, "href"), attr(el, "media-type"))
        elif local == "itemref" and attr(el, "linear") != "no":
            order.append(attr(el, "idref"))
    chapters = []
    for idref in order:
        href, media_type = manifest.get(idref, ("", ""))
        if href and media_type in _CHAPTER_TYPES:
            chapters.append(posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0]))))
    return title, chapters


class _Count:
    def __init__(self) -> None:
        self.n = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.n += 1


def _chapters(package: Package, members: list[str]) -> list[tuple[str, str]]:
    """(member, XHTML) of each chapter, after the book's bounds that cost nothing to check: the chapter count and
    their declared sizes (before a byte is inflated), then the elements of all of them together (a linear scan),
    so a book past a bound is refused before the web reader's costly pass reads any chapter."""
    present = [m for m in members if package.has(m)]  # a spine entry the package lacks has nothing to read
    if len(present) > MAX_CHAPTERS:
        raise Refused(f"EPUB refused: {len(present):,} chapters (at most {MAX_CHAPTERS:,} are read)")
    declared = sum(package.sizes[m] for m in present)
    if declared > BOOK_BYTES_OF_FILES * max_text_chars():
        raise Refused(f"EPUB refused: its chapters declare {declared:,} bytes (at most "
                      f"{BOOK_BYTES_OF_FILES * max_text_chars():,} are read)")
    book_cap = settings.WEB_READER_MAX_ELEMENTS * BOOK_PAGES_OF_ELEMENTS
    counted = _Count()
    out: list[tuple[str, str]] = []
    for member in present:
        raw = package.read(member, limit=MAX_FILE_BYTES)  # a chapter is held to a saved page's size
        # without its XML declaration: lxml refuses a declared encoding in a str, and the bytes are decoded here
        html = _XML_DECLARATION.sub("", raw.decode("utf-8", errors="replace"), count=1)
        scan_start_tags(html, on_start=counted.start)
        if counted.n > book_cap:
            raise Refused(f"EPUB refused: more than {book_cap} elements in the book "
                          f"({BOOK_PAGES_OF_ELEMENTS} x WEB_READER_MAX_ELEMENTS)")
        out.append((member, html))
    return out


def read_epub(*, data: bytes, name: str) -> TextLayer:
    """A book's chapters as one Markdown text (EPUB has no fixed pages: a reader's pages follow its screen)."""
    package = Package(data=data, what="EPUB")
    parts: list[str] = []
    headings: set[str] = set()
    chars = 0
    try:
        title, members = _spine(package)
        chapters = _chapters(package, members)
    finally:
        package.close()
    for member, html in chapters:
        try:
            md, _title, _url, real = html_to_markdown(html)
        except MarkupRefused as exc:
            raise Refused(f"EPUB refused: {member[:100]}: {exc}") from exc
        if md.strip():
            parts.append(md.strip("\n"))
            headings |= real
            chars += len(md)
            if chars > max_text_chars():
                raise Refused(f"EPUB refused: more than {max_text_chars():,} characters of text")
    if not parts:
        raise Refused("EPUB refused: it has no text")
    return TextLayer(markdown="\n\n".join(parts), title=title, meta={"format": "epub", "headings": headings})


FORMAT = Format(name="epub", sniff=sniff_epub, read=read_epub, suffixes=(".epub",),
                media_types=("application/epub+zip",))
