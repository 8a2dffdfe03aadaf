"""Links, canonical URL and robots meta read from a crawled page; entries read from a sitemap."""
from __future__ import annotations

from search.sources.web.links import page_links, sitemap_entries

PAGE = """<html><head><base href="/docs/"><link rel="Canonical" href="guide.html?utm_source=x">
<meta name="robots" content="index, follow"></head><body>
<a href="a.html#part">A</a> <a href="a.html">A again</a> <a href="https://other.example/x">out</a>
<a href="mailto:x@y.z">mail</a> <a href="javascript:void(0)">js</a> <a rel="nofollow" href="/paid">ad</a>
<map><area href="/area.html"></map><a>no href</a><a href="http://h:bad/">broken</a></body></html>"""


def test_links_are_normalised_against_the_base_and_deduplicated_in_page_order():
    found = page_links(PAGE, url="http://h/index.html")
    assert found.links == ["http://h/docs/a.html", "https://other.example/x", "http://h/area.html"]
    assert found.canonical == "http://h/docs/guide.html"
    assert not found.noindex and not found.nofollow


def test_robots_meta_noindex_and_nofollow_are_read():
    found = page_links('<meta name="robots" content="NOINDEX, nofollow"><a href="/x">x</a>', url="http://h/")
    assert found.noindex and found.nofollow
    assert page_links('<meta name="robots" content="none">', url="http://h/").noindex


def test_broken_markup_still_yields_what_was_read():
    found = page_links('<a href="/one">1<div><a href="/two"<<<>>><p', url="http://h/")
    assert "http://h/one" in found.links


def test_a_sitemap_lists_pages_and_an_index_lists_sitemaps():
    urlset = b"""<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
    <url><loc> http://h/a.html </loc><lastmod>2026-01-01</lastmod></url><url><loc>http://h/b.html</loc></url>
    </urlset>"""
    assert sitemap_entries(urlset) == (["http://h/a.html", "http://h/b.html"], [])
    index = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
    <sitemap><loc>http://h/s1.xml</loc></sitemap></sitemapindex>"""
    assert sitemap_entries(index) == ([], ["http://h/s1.xml"])


def test_a_sitemap_with_entity_definitions_or_bad_xml_is_ignored():
    bomb = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>
    <urlset><url><loc>http://h/&lol2;</loc></url></urlset>"""
    assert sitemap_entries(bomb) == ([], [])
    assert sitemap_entries(b"<urlset><url><loc>http://h/a") == ([], [])
