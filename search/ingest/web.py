"""Web sources: saved HTML pages (or Markdown) -> readable Markdown (trafilatura) -> chunks by heading.

Why Markdown as the intermediate: trafilatura drops navigation and boilerplate
and keeps headings as `#` lines, so the heading path is exact and
start_line/end_line refer to lines of the extracted text (kept as the chunk
text), which is what a reader of the context pack sees.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from search.ingest import summaries
from search.ingest.base import ChunkDraft, DocumentDraft, line_windows
from search.ingest.code import MAX_FILE_BYTES, SKIP_DIRS

WEB_EXTS = {".html", ".htm", ".xhtml", ".md", ".markdown"}
MAX_SECTION_LINES = 60
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")


def walk(root: Path) -> Iterator[tuple[str, Path, str]]:
    root = root.resolve()
    if root.is_file():
        yield root.name, root, ""
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if os.path.splitext(name)[1].lower() in WEB_EXTS:
                p = Path(dirpath) / name
                yield p.relative_to(root).as_posix(), p, "oversized" if p.stat().st_size > MAX_FILE_BYTES else ""


def html_to_markdown(html: str) -> tuple[str, str, str]:
    """(markdown, title, url) with trafilatura; empty markdown when nothing readable is left."""
    import trafilatura

    md = trafilatura.extract(html, output_format="markdown", include_formatting=True, include_links=False,
                             include_tables=True, favor_recall=True) or ""
    meta = trafilatura.extract_metadata(html)
    return md, (getattr(meta, "title", "") or "") if meta else "", (getattr(meta, "url", "") or "") if meta else ""


def chunk_markdown(md: str) -> list[ChunkDraft]:
    lines = md.split("\n")
    sections: list[tuple[int, int, list[str]]] = []
    stack: list[tuple[int, str]] = []
    start, path = 1, []
    for i, line in enumerate(lines, start=1):
        m = _HEADING.match(line)
        if m:
            if i > start:
                sections.append((start, i - 1, list(path)))
            level = len(m.group(1))
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, m.group(2).strip("# ").strip())]
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
            if not body.strip() or all(_HEADING.match(x) or not x.strip() for x in body.split("\n")):
                continue
            chunks.append(ChunkDraft(text=body, start_line=ws, end_line=we, kind="web", heading_path=hp,
                                     symbol=hp[-1] if hp else "", micro_summary=summaries.heading_micro(hp, body)))
    return chunks


def read_web_document(*, rel: str, abs_path: Path, repo: str = "") -> tuple[DocumentDraft | None, str]:
    data = abs_path.read_bytes()
    return web_document_from_bytes(rel=rel, data=data, markdown=abs_path.suffix.lower() in {".md", ".markdown"},
                                   repo=repo)


def web_document_from_bytes(*, rel: str, data: bytes, markdown: bool, repo: str = "", url: str = "",
                            encoding: str = "utf-8") -> tuple[DocumentDraft | None, str]:
    """One page's bytes -> a draft (or None and why). Shared by saved files and the web crawler
    (search/sources/crawler.py), so a crawled page is extracted exactly like the same page saved to disk.

    `markdown`: the bytes are Markdown or plain text, kept as they are. `url`: the page's identity (a crawl's
    canonical URL), which wins over the one trafilatura reads from the page and goes on every chunk."""
    try:
        raw = data.decode(encoding, errors="replace")
    except LookupError:  # an unknown charset name in a Content-Type header
        raw = data.decode("utf-8", errors="replace")
    if markdown:
        md, title, page_url = raw.replace("\r\n", "\n"), "", ""
    else:
        md, title, page_url = html_to_markdown(raw)
    url = url or page_url
    if not md.strip():
        return None, "no readable text"
    chunks = chunk_markdown(md)
    if url:
        for c in chunks:  # results carry the page URL without a join to Document
            c.meta = {**c.meta, "url": url}
    headings = [m.group(2) for m in map(_HEADING.match, md.split("\n")) if m]
    title = title or (headings[0] if headings else rel)
    macro = (f"{title}: " + summaries.first_sentence(re.sub(r"^#.*$", "", md, flags=re.M))
             + ("\nSections: " + ", ".join(headings[:30]) if headings else ""))[:summaries.MAX_MACRO]
    return DocumentDraft(path=rel, repo=repo, url=url, lang="markdown", title=title[:500], chunks=chunks,
                         macro_summary=macro, content_hash=hashlib.sha256(data).hexdigest()), ""
