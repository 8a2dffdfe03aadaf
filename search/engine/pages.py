"""A chunk's printed pages: the label it stores ("p. 112", "pp. 112–113"), read back, merged and cited.

Why here: the context pack merges chunk spans (search.engine.packing) and the rules lawyer cites chunks
(search.rules); both sit below the readers that write the label, so the label is written and read here, once.
Why labels are checked when read: a rules chunk stored before rulebooks had pages carried its file name there
("Conditions.md", cleared by migration search/0022), which is not a page and is never cited as one.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

# The paged formats a browser opens at a page (`#page=N`, the PDF open parameter), with the media type each is
# served as; a document of any other format gets no page link (search.engine.page_links).
PAGE_LINKED: dict[str, str] = {"pdf": "application/pdf"}

_LABEL = re.compile(r"^(?:pp?\.\s*)?(\d{1,6})(?:\s*[–-]\s*(\d{1,6}))?$")


def page_range(*, label: str) -> tuple[int, int]:
    """(first, last) page of a stored label ("p. 12", "pp. 12–13", or a JSON record's bare "12"); (0, 0) for no
    page or anything that is not a page label."""
    m = _LABEL.match((label or "").strip())
    if not m:
        return (0, 0)
    first = int(m.group(1))
    last = int(m.group(2) or first)
    return (first, last) if first and last >= first else (0, 0)


def label_of(*, first: int, last: int) -> str:
    """The label for a page range, written as the readers write it ("p. 12", "pp. 12–13"); "" without a page."""
    if not first:
        return ""
    return f"p. {first}" if last in (0, first) else f"pp. {first}–{last}"


def merged_label(*, labels: Iterable[str]) -> str:
    """The page range of several chunks shown as one span (the pack merges adjacent chunks); "" if none has one."""
    ranges = [r for r in (page_range(label=s) for s in labels) if r[0]]
    if not ranges:
        return ""
    return label_of(first=min(r[0] for r in ranges), last=max(r[1] for r in ranges))


def cite(*, book: str, page: str) -> str:
    """How a citation names a passage: "core, p. 112" where its page is known, else the book alone."""
    label = label_of(first=(r := page_range(label=page))[0], last=r[1])
    return f"{book}, {label}" if book and label else (book or label)


def prompt_pages(*, page: str) -> str:
    """The page as an answer prompt quotes it ("Page 112", "Pages 112–113"); "" where unknown."""
    first, last = page_range(label=page)
    if not first:
        return ""
    return f"Page {first}" if last == first else f"Pages {first}–{last}"


def page_url(*, base: str, page: str) -> str | None:
    """The link that opens a document at the first page of `page`: `<base>#page=N`; None without a base or a page."""
    first = page_range(label=page)[0]
    return f"{base.split('#', 1)[0]}#page={first}" if base and first else None
