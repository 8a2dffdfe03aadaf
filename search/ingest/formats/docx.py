"""DOCX (Word) -> Markdown: a paragraph per line, Heading styles as `#` headings, tables as pipe tables.

Why streamed: word/document.xml is read with lxml's iterparse from a member stream whose inflated bytes are counted
(search.ingest.formats.package), each paragraph is turned into its line and then cleared, so memory follows one
paragraph, not the document, and the parse is linear in the bytes the package checks allowed. Paragraphs are capped
at WEB_READER_MAX_ELEMENTS, the web reader's element cap, and the text at what one uploaded file may hold
(UPLOAD_MAX_FILE_BYTES characters). DTDs, entities and the network are never loaded (XXE).

Why headings from styles: Word marks a heading by its paragraph style ("heading 1".."heading 9", "Title", or an
outline level), not by its looks; the heading path a chunk carries comes from them, as a web page's from <h1>..<h6>.
"""
from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from search.ingest.formats.base import Format
from search.ingest.formats.package import ZIP_MAGIC, Package, attr, iterparse, local_name, max_text_chars, xml_errors
from search.ingest.formats.text_layer import Refused, TextLayer

_HEADING_NAME = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_MARKDOWN_START = re.compile(r"^(\s*)([#>|`~*+-]|\d+[.)])")


def sniff_docx(data: bytes) -> bool:
    """A zip whose names include the OOXML content types and Word's main part (names sit in the zip directory
    as plain bytes, so this reads no member)."""
    return data.startswith(ZIP_MAGIC) and b"[Content_Types].xml" in data and b"word/document.xml" in data


def _heading_styles(package: Package) -> dict[str, int]:
    """{styleId: heading level} from word/styles.xml: "heading N" and "Title" by name, else an outline level."""
    levels: dict[str, int] = {}
    with package.open("word/styles.xml") as src:
        try:
            for _event, el in iterparse(src, events=("end",)):
                if local_name(el.tag) != "style":
                    continue
                style_id, level = attr(el, "styleId"), 0
                for child in el.iter():
                    local = local_name(child.tag)
                    if local == "name":
                        name = attr(child, "val").strip()
                        m = _HEADING_NAME.match(name)
                        level = int(m.group(1)) if m else (1 if name.lower() == "title" else level)
                    elif local == "outlineLvl" and not level and attr(child, "val").isdigit():
                        level = min(int(attr(child, "val")) + 1, 6)
                if style_id and level:
                    levels[style_id] = min(level, 6)
                el.clear()
        except xml_errors() as exc:
            raise Refused("DOCX refused: word/styles.xml is not well-formed XML") from exc
    return levels


def _paragraph(el: Any) -> tuple[str, str, int, bool]:
    """(text, style id, outline level, is a list item) of one w:p."""
    parts: list[str] = []
    style, outline, listed = "", 0, False
    for node in el.iter():
        local = local_name(node.tag)
        if local == "t" and node.text:
            parts.append(node.text)
        elif local == "tab":
            parts.append("\t")
        elif local in ("br", "cr"):
            parts.append(" ")
        elif local == "pStyle":
            style = attr(node, "val")
        elif local == "outlineLvl" and attr(node, "val").isdigit():
            outline = int(attr(node, "val")) + 1
        elif local == "numPr":
            listed = True
    return " ".join("".join(parts).split()), style, outline, listed


def _level(style: str, outline: int, styles: dict[str, int]) -> int:
    """A paragraph's heading level (0: body text): its style's, a built-in "HeadingN" id's, or its outline level."""
    m = re.match(r"^Heading([1-9])$", style)
    return styles.get(style) or (int(m.group(1)) if m else 0) or min(outline, 6)


def _line(text: str, *, level: int, listed: bool) -> str:
    """A paragraph as its Markdown line; body text that would read as Markdown syntax is escaped."""
    if level:
        return f"{'#' * level} {text}"
    body = _MARKDOWN_START.sub(r"\1\\\2", text)
    return f"- {body}" if listed else body


def _body(package: Package, styles: dict[str, int]) -> list[str]:
    cap, chars_cap = settings.WEB_READER_MAX_ELEMENTS, max_text_chars()
    chars = 0
    lines: list[str] = []
    paragraphs = 0
    table_depth = 0
    row: list[str] = []
    cell: list[str] = []
    rows = 0
    with package.open("word/document.xml") as src:
        try:
            for event, el in iterparse(src, events=("start", "end")):
                local = local_name(el.tag)
                if event == "start":
                    if local == "tbl":
                        table_depth += 1
                        if table_depth == 1:
                            rows = 0
                            lines.append("")
                    continue
                if local == "p":
                    paragraphs += 1
                    if paragraphs > cap:
                        raise Refused(f"DOCX refused: more than {cap} paragraphs (WEB_READER_MAX_ELEMENTS)")
                    text, style, outline, listed = _paragraph(el)
                    chars += len(text)
                    if chars > chars_cap:
                        raise Refused(f"DOCX refused: more than {chars_cap:,} characters of text")
                    if table_depth:
                        if text:
                            cell.append(text)
                    elif text:
                        lines += [_line(text, level=_level(style, outline, styles), listed=listed), ""]
                    if not table_depth:
                        el.clear()
                elif local == "tc" and table_depth == 1:
                    row.append(" ".join(cell).replace("|", "\\|"))
                    cell = []
                elif local == "tr" and table_depth == 1:
                    lines.append("| " + " | ".join(row) + " |")
                    if rows == 0:
                        lines.append("|" + " --- |" * len(row))
                    rows += 1
                    row = []
                elif local == "tbl":
                    table_depth -= 1
                    if table_depth == 0:
                        lines.append("")
                        el.clear()
        except xml_errors() as exc:
            raise Refused("DOCX refused: word/document.xml is not well-formed XML") from exc
    return lines


def read_docx(*, data: bytes, name: str) -> TextLayer:
    """A Word document's text as Markdown (no pages: Word lays pages out only when it prints)."""
    package = Package(data=data, what="DOCX")
    try:
        styles = _heading_styles(package) if package.has("word/styles.xml") else {}
        lines = _body(package, styles)
    finally:
        package.close()
    markdown = "\n".join(lines).strip("\n")
    if not markdown.strip():
        raise Refused("DOCX refused: it has no text")
    title = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), "")
    return TextLayer(markdown=markdown, title=title, meta={"format": "docx"})


FORMAT = Format(name="docx", sniff=sniff_docx, read=read_docx, suffixes=(".docx",),
                media_types=("application/vnd.openxmlformats-officedocument.wordprocessingml.document",))
