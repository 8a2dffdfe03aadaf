"""Web sources: saved HTML pages (or Markdown) -> readable Markdown (trafilatura) -> chunks by heading.

Why Markdown as the intermediate: trafilatura drops navigation and boilerplate
and keeps headings as `#` lines, so start_line/end_line refer to lines of the
extracted text (kept as the chunk text), which is what a reader of the context
pack sees.

Why the heading path is checked against the page's own headings: documentation
generators decorate headings (Sphinx and MkDocs end each with a `¶` permalink,
Docusaurus with a `#` hash link), and trafilatura does not always fence a code
sample, so a comment line in one (`# Test code`) looks like a heading. So the
permalink anchors are removed before extraction, and for HTML a `#` line is a
heading only when its text is one of the page's real <h1>..<h6>; in Markdown
sources, lines inside a code fence are never headings.

Why a census of the markup before the reader: the reader builds lxml trees (the permalink pass, then
trafilatura's), whose cost is quadratic in the attributes of one element (libxml2 appends each attribute by
walking the element's list: 50,000 on one element, 400 KB, took over a minute) and about a third of a
millisecond per element in trafilatura (1 MB of `<p>` elements, 90,000 of them, took 25 s). A page is counted
first by libxml2's tokenizer with a target (callbacks per tag, no tree: linear), and refused, with its reason,
past MAX_ATTRIBUTES_PER_ELEMENT or WEB_READER_MAX_ELEMENTS. Every entry point (saved files, uploads, pushes, git
sources, the crawler) reads pages through `web_document_from_bytes`, so every one is bounded.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings

from search.ingest import summaries
from search.ingest.base import ChunkDraft, DocumentDraft, line_windows
from search.ingest.code import MAX_FILE_BYTES, SKIP_DIRS

WEB_EXTS = {".html", ".htm", ".xhtml", ".md", ".markdown"}
MAX_SECTION_LINES = 60
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
_PERMALINK_MARKS = "¶#🔗\u200b \t"
# Attributes of one element the reader accepts (its trees are quadratic in them); real pages have a few dozen.
MAX_ATTRIBUTES_PER_ELEMENT = 256
# permalink anchors by generator: Sphinx and MkDocs `headerlink`, Docusaurus `hash-link`, others `anchor-link`
_PERMALINK_XPATH = "//a[" + " or ".join(
    f'contains(concat(" ", normalize-space(@class), " "), " {c} ")'
    for c in ("headerlink", "hash-link", "anchor-link", "anchorjs-link", "permalink")) + "]"


def walk(root: Path, *, also: frozenset[str] = frozenset(),
         limit: Callable[[str], int] | None = None) -> Iterator[tuple[str, Path, str]]:
    """(relative posix path, absolute path, skip reason or '') for every page (and, with `also`, every file with
    one of those suffixes: the document formats, read by their bytes), sorted. `limit(rel)`: a file's most bytes
    (search.ingest.formats.registry.max_bytes), else MAX_FILE_BYTES."""
    root = root.resolve()
    if root.is_file():
        yield root.name, root, ""
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not skip_web_dir(d))
        for name in sorted(filenames):
            if is_web_file(name, also=also):
                p = Path(dirpath) / name
                rel = p.relative_to(root).as_posix()
                yield rel, p, "oversized" if p.stat().st_size > (limit(rel) if limit else MAX_FILE_BYTES) else ""


def skip_web_dir(name: str) -> bool:
    """Vendored and hidden directories hold no pages of the site (the same rule for a folder and a git tree)."""
    return name in SKIP_DIRS or name.startswith(".")


def is_web_file(name: str, *, also: frozenset[str] = frozenset()) -> bool:
    suffix = os.path.splitext(name)[1].lower()
    return suffix in WEB_EXTS or suffix in also or "*" in also


def _plain(text: str) -> str:
    """A Markdown heading's text as the page shows it: no code ticks or bold marks, escapes undone."""
    text = text.replace("`", "").replace("**", "")
    return re.sub(r"\\([\\`*_{}\[\]()#+\-.!|])", r"\1", text).strip()


def heading_key(text: str) -> str:
    """A heading's text as compared between the HTML and the Markdown: no inline formatting, no permalink
    marks, whitespace collapsed, lower case."""
    text = _plain(text).replace("*", "").strip(_PERMALINK_MARKS)
    return " ".join(text.split()).lower()


class MarkupRefused(ValueError):
    """The page's markup would cost the reader more than it may spend on one page; the message says why."""


class _StartTags:
    """lxml's parser target that hands each start tag to a callback and builds nothing (no tree, no text)."""

    def __init__(self, on_start: Callable[[str, dict[str, str]], None]) -> None:
        self.start = on_start

    def end(self, tag: str) -> None:
        pass

    def data(self, data: str) -> None:
        pass

    def comment(self, text: str) -> None:
        pass

    def close(self) -> None:
        return None


def scan_start_tags(html: str, *, on_start: Callable[[str, dict[str, str]], None]) -> None:
    """Each start tag of the page, in order, to `on_start`. Why libxml2's tokenizer: it is linear in the page
    whatever its markup (Python's html.parser on this interpreter is quadratic on `<a x='` repeated), and a target
    parser builds nothing. Unparseable input (an empty page) ends the scan; what was seen stands."""
    from lxml import etree  # noqa: PLC0415 - heavy: loads with the web reader only

    parser = etree.HTMLParser(target=_StartTags(on_start), encoding="utf-8", recover=True, no_network=True)
    try:
        parser.feed(html.replace("\x00", "").encode("utf-8", errors="replace"))
        parser.close()
    except (etree.LxmlError, ValueError):
        pass


class _Census:
    """Counts elements and the most attributes one element has."""

    def __init__(self) -> None:
        self.elements = 0
        self.max_attributes = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.elements += 1
        if len(attrib) > self.max_attributes:
            self.max_attributes = len(attrib)


def check_markup(html: str, *, max_elements: int | None = None) -> None:
    """Raise MarkupRefused when the page has an element with more than MAX_ATTRIBUTES_PER_ELEMENT attributes or
    more than `max_elements` (WEB_READER_MAX_ELEMENTS) elements. Linear in the page whatever its markup."""
    limit = settings.WEB_READER_MAX_ELEMENTS if max_elements is None else max_elements
    census = _Census()
    scan_start_tags(html, on_start=census.start)
    if census.max_attributes > MAX_ATTRIBUTES_PER_ELEMENT:
        raise MarkupRefused(f"markup refused: an element has {census.max_attributes} attributes "
                            f"(at most {MAX_ATTRIBUTES_PER_ELEMENT} are read)")
    if census.elements > limit:
        raise MarkupRefused(f"markup refused: {census.elements} elements (at most {limit} are read)")


def reason_kind(why: str) -> str:
    """A reason's kind, what a report counts by: its words before a colon or a parenthesis ("binary: no reader"
    -> "binary", "too large (2,000,000 bytes; ...)" -> "too large")."""
    return why.split(":", 1)[0].split(" (", 1)[0].strip()


def refused_report(refused: dict[str, str], *, cap: int = 200) -> dict[str, Any]:
    """job.result for the files no reader took (no reader for their bytes, a reader's refusal, markup past the
    web reader's bounds, nothing readable): each path with its reason (capped), and counts by kind of reason. The
    shape git syncs report their skipped files in; a file is never left out without a line here."""
    by_reason: dict[str, int] = {}
    for why in refused.values():
        by_reason[reason_kind(why)] = by_reason.get(reason_kind(why), 0) + 1
    return {"skipped": [{"path": p, "reason": why} for p, why in sorted(refused.items())[:cap]],
            "skipped_total": len(refused), "skipped_by_reason": by_reason}


def _without_permalinks(html: str) -> tuple[str, set[str]]:
    """The page without its heading permalink anchors, and the keys of its real headings (h1..h6)."""
    # lxml loads with trafilatura, on the first page a process reads (as html_to_markdown imports trafilatura)
    from lxml import etree  # noqa: PLC0415 - heavy: loads with the web reader only
    from lxml import html as lxml_html  # noqa: PLC0415 - heavy: loads with the web reader only

    try:
        # An XHTML page's `<?xml ... encoding=...?>` is refused in a str (the text is decoded already): drop it.
        doc = lxml_html.document_fromstring(_XML_DECLARATION.sub("", html, count=1))
    except (etree.ParserError, ValueError):
        return html, set()
    for anchor in doc.xpath(_PERMALINK_XPATH):
        anchor.drop_tree()
    headings = {heading_key(h.text_content()) for h in doc.iter("h1", "h2", "h3", "h4", "h5", "h6")}
    return lxml_html.tostring(doc, encoding="unicode"), headings - {""}


def html_to_markdown(html: str) -> tuple[str, str, str, set[str]]:
    """(markdown, title, url, heading keys) with trafilatura; empty markdown when nothing readable is left.
    MarkupRefused (before any tree is built) for markup past the reader's bounds (module docstring)."""
    import trafilatura  # noqa: PLC0415 - heavy: the extractor loads only when a page is read

    check_markup(html)
    cleaned, headings = _without_permalinks(html)
    md = trafilatura.extract(cleaned, output_format="markdown", include_formatting=True, include_links=False,
                             include_tables=True, favor_recall=True) or ""
    meta = trafilatura.extract_metadata(html)
    return (md, (getattr(meta, "title", "") or "") if meta else "", (getattr(meta, "url", "") or "") if meta else "",
            headings)


def heading_lines(lines: list[str], *, real: set[str] | None = None) -> dict[int, tuple[int, str]]:
    """{line number (1-based): (level, text)} for the lines that are headings.

    With the page's real headings (`real`, from its HTML): the `#` lines whose text is one of them. Without
    (Markdown sources): the `#` lines outside code fences. Fences are not trusted for HTML: trafilatura leaves
    some code samples unfenced, so its fences can pair wrongly and hide real headings."""
    out: dict[int, tuple[int, str]] = {}
    fenced = False
    for i, line in enumerate(lines, start=1):
        if real is None and _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m is None:
            continue
        text = _plain(m.group(2)).rstrip(_PERMALINK_MARKS).strip("# ").strip()
        if text and (real is None or heading_key(text) in real):
            out[i] = (len(m.group(1)), text)
    return out


def chunk_markdown(md: str, *, real_headings: set[str] | None = None) -> list[ChunkDraft]:
    lines = md.split("\n")
    heads = heading_lines(lines, real=real_headings)
    sections: list[tuple[int, int, list[str]]] = []
    stack: list[tuple[int, str]] = []
    start, path = 1, []
    for i in heads:
        if i > start:
            sections.append((start, i - 1, list(path)))
        level, text = heads[i]
        stack = [(lv, t) for lv, t in stack if lv < level] + [(level, text)]
        path = [t for _, t in stack]
        start = i
    sections.append((start, len(lines), list(path)))
    chunks = []
    for s0, e0, hp in sections:
        for ws, we in line_windows(s0, e0, cap=MAX_SECTION_LINES, overlap=2):
            while ws < we and not lines[ws - 1].strip():
                ws += 1
            while we > ws and not lines[we - 1].strip():
                we -= 1
            body = "\n".join(lines[ws - 1:we])
            if not body.strip() or all(n in heads or not lines[n - 1].strip() for n in range(ws, we + 1)):
                continue
            chunks.append(ChunkDraft(text=body, start_line=ws, end_line=we, kind="web", heading_path=hp,
                                     symbol=hp[-1] if hp else "", micro_summary=summaries.heading_micro(hp, body)))
    return chunks


def read_web_document(*, rel: str, abs_path: Path, repo: str = "") -> tuple[DocumentDraft | None, str]:
    return web_document(rel=rel, data=abs_path.read_bytes(), repo=repo)


def web_document(*, rel: str, data: bytes, repo: str = "") -> tuple[DocumentDraft | None, str]:
    """A file's bytes (HTML, or Markdown by its suffix) -> a draft, as the folder walker and git sources read it."""
    return web_document_from_bytes(rel=rel, data=data, repo=repo,
                                   markdown=os.path.splitext(rel)[1].lower() in {".md", ".markdown"})


def web_document_from_bytes(*, rel: str, data: bytes, markdown: bool, repo: str = "", url: str = "",
                            encoding: str = "utf-8") -> tuple[DocumentDraft | None, str]:
    """One page's bytes -> a draft (or None and why). Shared by saved files and the web crawler
    (search/sources/web/crawler.py), so a crawled page is extracted exactly like the same page saved to disk.

    `markdown`: the bytes are Markdown or plain text, kept as they are. `url`: the page's identity (a crawl's
    canonical URL), which wins over the one trafilatura reads from the page and goes on every chunk."""
    try:
        raw = data.decode(encoding, errors="replace")
    except LookupError:  # an unknown charset name in a Content-Type header
        raw = data.decode("utf-8", errors="replace")
    if markdown:
        md, title, page_url, real = raw.replace("\r\n", "\n"), "", "", None
    else:
        try:
            md, title, page_url, real = html_to_markdown(raw)
        except MarkupRefused as exc:
            return None, str(exc)
    return markdown_draft(rel=rel, md=md, title=title, url=url or page_url, real=real, repo=repo,
                          content_hash=hashlib.sha256(data).hexdigest())


def markdown_draft(*, rel: str, md: str, title: str = "", url: str = "", real: set[str] | None = None,
                   repo: str = "", content_hash: str) -> tuple[DocumentDraft | None, str]:
    """Markdown (a page's, or a document's text layer) -> a draft chunked by its headings, or None and why.
    `real`: the page's own heading keys (HTML), else every `#` line outside a fence is a heading."""
    if not md.strip():
        return None, "no readable text"
    chunks = chunk_markdown(md, real_headings=real)
    if url:
        for c in chunks:  # results carry the page URL without a join to Document
            c.meta = {**c.meta, "url": url}
    headings = [text for _, text in heading_lines(md.split("\n"), real=real).values()]
    title = title or (headings[0] if headings else rel)
    macro = (f"{title}: " + summaries.first_sentence(re.sub(r"^#.*$", "", md, flags=re.M))
             + ("\nSections: " + ", ".join(headings[:30]) if headings else ""))[:summaries.MAX_MACRO]
    return DocumentDraft(path=rel, repo=repo, url=url, lang="markdown", title=title[:500], chunks=chunks,
                         macro_summary=macro, content_hash=content_hash), ""
