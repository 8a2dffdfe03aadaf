"""Where content enters: a file's bytes and name in, the draft its dataset kind makes of it out (or None and why).

Why one function: folders, uploads, archives, pushes, git sources and crawls used to choose a reader each (by
suffix, by Content-Type); now each asks the registry (search.ingest.formats.registry), which decides from the
bytes. A document format (PDF, DOCX, EPUB) becomes a web-like document chunked by its Markdown headings in a code
or a web dataset alike, each chunk carrying the pages of its line span ("p. 12", "pp. 12–13"); the text kinds go
to the dataset kind's own chunker, as before (code by its language, HTML and Markdown by the web reader).
Rulebooks read their files through the same detection (search.ingest.rules.read_rulebook).
"""
from __future__ import annotations

import hashlib

from search.engine.pages import label_of
from search.ingest.base import DocumentDraft
from search.ingest.code import code_document
from search.ingest.formats import registry
from search.ingest.formats.originals import original_to_keep
from search.ingest.formats.text_layer import Refused, TextLayer
from search.ingest.web import markdown_draft, web_document_from_bytes


def read_document(*, kind: str, data: bytes, name: str, repo: str = "", url: str = "", media_type: str = "",
                  encoding: str = "utf-8") -> tuple[DocumentDraft | None, str]:
    """One file of a code or web dataset -> its draft, or (None, why) for the job's report of files left out.

    `name`: the document's path (or a crawl's URL); it and `media_type` only break ties between text kinds.
    `encoding`: a crawled page's charset, for the text kinds."""
    found = registry.detect(data=data, name=name, media_type=media_type)
    if not found.format:
        return None, found.reason
    if registry.is_document(found.format):
        try:
            layer = registry.read(data=data, name=name, fmt=found.format)
        except Refused as exc:
            return None, exc.reason
        draft, why = layer_document(layer=layer, rel=name, data=data, repo=repo, url=url)
        if draft is not None:
            draft.original = original_to_keep(fmt=found.format, data=data, pages=layer.pages, url=url)
        return draft, why
    if kind == "code":
        return code_document(rel=name, data=data, repo=repo)
    if found.format == "code":  # a site's scripts and styles are not its pages
        return None, f"code: a {kind} dataset reads pages and documents, not source files"
    return web_document_from_bytes(rel=name, data=data, repo=repo, url=url, encoding=encoding,
                                   markdown=found.format != "html")


def layer_document(*, layer: TextLayer, rel: str, data: bytes, repo: str = "",
                   url: str = "") -> tuple[DocumentDraft | None, str]:
    """A document's text layer -> a web-like draft (chunks by its headings), each chunk's `page` the page label
    of its line span; the document's meta says its format and page counts (pages without a text layer are
    counted, not read)."""
    headings = layer.meta.get("headings")
    draft, why = markdown_draft(rel=rel, md=layer.markdown, title=layer.title, url=url,
                                real=set(headings) if isinstance(headings, (set, frozenset)) else None, repo=repo,
                                content_hash=hashlib.sha256(data).hexdigest())
    if draft is None:
        return None, why
    for chunk in draft.chunks:
        first, last = layer.page_span(start_line=chunk.start_line, end_line=chunk.end_line)
        chunk.page = label_of(first=first, last=last)[:50]
    draft.meta = {**draft.meta, "format": str(layer.meta.get("format") or ""),
                  **({"pages": layer.pages, "pages_without_text": layer.pages_without_text} if layer.pages else {})}
    return draft, ""
