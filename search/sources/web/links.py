"""What a crawled page points at: links, the canonical URL, robots meta, sitemap entries.

Why libxml2's HTML parser (lxml) with a target rather than the standard library's HTMLParser: the crawler needs a
handful of attributes, on pages of any quality (unclosed tags, stray bytes), from servers it does not trust. The
standard library's tokenizer on this interpreter rescans an unfinished tag from its start on every feed, so `<a
x='` repeated took 16 s for 36 KB and 175 s for 144 KB; libxml2's tokenizer is linear (a 1 MB page of it takes
milliseconds). With a target, the parser calls back per tag and builds no tree: libxml2's tree appends each
attribute by walking the element's list, which is quadratic in the attributes of one element, and the target
never meets it. The parser also reports the most attributes any one element had (`max_attributes`); the
tree-building reader bounds them itself (search.ingest.web.check_markup), for every way a page reaches it.

Sitemaps are XML from a site the platform does not control: a DOCTYPE (entity definitions, the billion-laughs
family) is refused before the parser (expat, linear) sees it.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from django.conf import settings

from search.ingest.web import scan_start_tags
from search.sources.web.urls import normalize_url, unique

MAX_SITEMAP_URLS = 50_000  # the sitemaps.org limit per file


@dataclass
class PageLinks:
    """Everything the crawler reads from one HTML page, URLs already normalised against the page's base.

    `links_dropped`: links past WEB_MAX_LINKS_PER_PAGE, not followed. `max_attributes`: the most attributes one
    element of the page has."""

    links: list[str] = field(default_factory=list)
    canonical: str | None = None
    noindex: bool = False
    nofollow: bool = False
    links_dropped: int = 0
    max_attributes: int = 0


class _Collector:
    """Called once per start tag (search.ingest.web.scan_start_tags), keeps only what the crawler reads."""

    def __init__(self, *, max_links: int) -> None:
        self.max_links = max_links
        self.hrefs: list[str] = []
        self.dropped = 0
        self.base: str | None = None
        self.canonical: str | None = None
        self.robots: list[str] = []
        self.max_attributes = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.max_attributes = max(self.max_attributes, len(attrib))
        tag = tag.lower() if isinstance(tag, str) else ""
        a = {str(k).lower(): (v or "") for k, v in attrib.items()} if attrib else {}
        rel = a.get("rel", "").lower().split()
        if tag in ("a", "area") and a.get("href") and "nofollow" not in rel:
            if len(self.hrefs) < self.max_links:
                self.hrefs.append(a["href"])
            else:
                self.dropped += 1
        elif tag == "link" and "canonical" in rel and a.get("href") and self.canonical is None:
            self.canonical = a["href"]
        elif tag == "base" and a.get("href") and self.base is None:
            self.base = a["href"]
        elif tag == "meta" and a.get("name", "").lower() in ("robots", "searchplatformbot"):
            self.robots += [t.strip() for t in a.get("content", "").lower().split(",")]



def page_links(html: str, *, url: str, max_links: int | None = None) -> PageLinks:
    """Links (http/https, normalised, de-duplicated, in page order; at most WEB_MAX_LINKS_PER_PAGE), the
    canonical URL and robots meta. Linear in the page, whatever its markup."""
    collector = _Collector(max_links=settings.WEB_MAX_LINKS_PER_PAGE if max_links is None else max_links)
    scan_start_tags(html, on_start=collector.start)
    base = normalize_url(collector.base, base=url) if collector.base else url
    base = base or url
    links = unique(u for u in (normalize_url(h, base=base) for h in collector.hrefs) if u)
    canonical = normalize_url(collector.canonical, base=base) if collector.canonical else None
    robots = set(collector.robots)
    return PageLinks(links=links, canonical=canonical, noindex="noindex" in robots or "none" in robots,
                     nofollow="nofollow" in robots or "none" in robots, links_dropped=collector.dropped,
                     max_attributes=collector.max_attributes)


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
