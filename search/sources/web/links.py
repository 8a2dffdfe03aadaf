"""What a crawled page or sitemap points at: links, the canonical URL, robots meta, sitemap entries.

Why the standard library's HTMLParser rather than a DOM: the crawler needs a handful of attributes, on pages of
any quality (unclosed tags, stray bytes); the tokenizer never fails and never builds a tree of a 2 MB page.
Sitemaps are XML from a site the platform does not control: a DOCTYPE (entity definitions, the billion-laughs
family) is refused before the parser sees it.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser

from search.sources.web.urls import normalize_url, unique

MAX_LINKS = 5000  # per page; a page with more is a link farm, the rest are not followed
MAX_SITEMAP_URLS = 50_000  # the sitemaps.org limit per file


@dataclass
class PageLinks:
    """Everything the crawler reads from one HTML page, URLs already normalised against the page's base."""

    links: list[str] = field(default_factory=list)
    canonical: str | None = None
    noindex: bool = False
    nofollow: bool = False


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.base: str | None = None
        self.canonical: str | None = None
        self.robots: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k.lower(): (v or "") for k, v in attrs}
        rel = a.get("rel", "").lower().split()
        if tag in ("a", "area") and a.get("href") and "nofollow" not in rel:
            if len(self.hrefs) < MAX_LINKS:
                self.hrefs.append(a["href"])
        elif tag == "link" and "canonical" in rel and a.get("href") and self.canonical is None:
            self.canonical = a["href"]
        elif tag == "base" and a.get("href") and self.base is None:
            self.base = a["href"]
        elif tag == "meta" and a.get("name", "").lower() in ("robots", "searchplatformbot"):
            self.robots += [t.strip() for t in a.get("content", "").lower().split(",")]


def page_links(html: str, *, url: str) -> PageLinks:
    """Links (http/https, normalised, de-duplicated, in page order), the canonical URL and robots meta."""
    collector = _Collector()
    try:
        collector.feed(html)
        collector.close()
    except (AssertionError, ValueError):  # HTMLParser's rare give-ups on broken markup: keep what was read
        pass
    base = normalize_url(collector.base, base=url) if collector.base else url
    base = base or url
    links = unique(u for u in (normalize_url(h, base=base) for h in collector.hrefs) if u)
    canonical = normalize_url(collector.canonical, base=base) if collector.canonical else None
    robots = set(collector.robots)
    return PageLinks(links=links, canonical=canonical, noindex="noindex" in robots or "none" in robots,
                     nofollow="nofollow" in robots or "none" in robots)


def sitemap_entries(data: bytes) -> tuple[list[str], list[str]]:
    """(page URLs, nested sitemap URLs) of a sitemap or sitemap index; ([], []) for anything unreadable."""
    head = data[:4096].lower()
    if b"<!doctype" in head or b"<!entity" in data.lower():
        return [], []
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return [], []
    pages: list[str] = []
    nested: list[str] = []
    for el in root.iter():
        if not el.tag.endswith("loc") or not (el.text or "").strip():
            continue
        parent_is_sitemap = root.tag.endswith("sitemapindex")
        (nested if parent_is_sitemap else pages).append(el.text.strip())
        if len(pages) + len(nested) >= MAX_SITEMAP_URLS:
            break
    return pages, nested
