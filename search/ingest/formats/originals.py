"""Which read files keep their bytes, so that a citation's page link can open the page they were read from.

Why here, pure (settings only): the readers decide it as they read (search.ingest.formats.documents, and the
rulebook reader search.ingest.rules, which may not import the models); the writer stores what they kept
(search.ingest.originals). Only a paged format a browser opens at a page (`#page=N`, the PDF open parameter) is
kept; a crawled document is not, since its own URL opens it."""
from __future__ import annotations

from django.conf import settings

from search.engine.pages import PAGE_LINKED


def original_to_keep(*, fmt: str, data: bytes, pages: int, url: str = "") -> bytes | None:
    """The bytes to keep for a file read as `fmt` with `pages` pages, or None: not a page-linked format, no page,
    a URL of its own (a crawl), or larger than ORIGINALS_MAX_BYTES (read, but without a link)."""
    if fmt not in PAGE_LINKED or pages <= 0 or url or len(data) > settings.ORIGINALS_MAX_BYTES:
        return None
    return data
