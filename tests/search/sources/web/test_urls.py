"""URL normal form (one page, one identity) and the crawl scope of a web source."""
from __future__ import annotations

import pytest

from search.sources.web.urls import Scope, normalize_url


@pytest.mark.parametrize(("raw", "expected"), [
    ("HTTP://Docs.Example.COM:80/a/./b/../c.html#top", "http://docs.example.com/a/c.html"),
    ("https://docs.example.com:443", "https://docs.example.com/"),
    ("https://docs.example.com:8443/x", "https://docs.example.com:8443/x"),
    ("http://h/p?utm_source=news&b=2&gclid=abc&a=1&fbclid=z&UTM_Campaign=q", "http://h/p?a=1&b=2"),
    ("http://h/p?b=&a=1", "http://h/p?a=1&b="),
    ("http://h/a b/ü.html", "http://h/a%20b/%C3%BC.html"),
    ("http://h/a%20b", "http://h/a%20b"),
    ("http://bücher.example/", "http://xn--bcher-kva.example/"),
    ("http://[::1]:80/x", "http://[::1]/x"),
])
def test_equivalent_urls_have_one_normal_form(raw, expected):
    assert normalize_url(raw) == expected


@pytest.mark.parametrize("raw", ["mailto:a@b.c", "javascript:void(0)", "ftp://h/x", "http://user:pw@h/x",
                                 "http://h:99999/", "", "/relative/without/base", "http://h/" + "x" * 1000])
def test_what_cannot_be_crawled_has_no_normal_form(raw):
    assert normalize_url(raw) is None


def test_relative_links_resolve_against_the_page():
    assert normalize_url("../b.html?x=1#f", base="http://h/docs/a/index.html") == "http://h/docs/b.html?x=1"
    assert normalize_url("//other.example/p", base="https://h/") == "https://other.example/p"


def test_same_host_scope_is_scheme_host_and_port():
    scope = Scope(seeds=["https://Docs.example.com/guide/"], mode="same-host")
    assert scope.contains("https://docs.example.com/blog/x")
    assert not scope.contains("http://docs.example.com/guide/")  # another scheme
    assert not scope.contains("https://docs.example.com:8443/guide/")
    assert not scope.contains("https://api.docs.example.com/guide/")


def test_prefix_scope_is_the_seed_up_to_its_last_slash():
    scope = Scope(seeds=["https://h/docs/v2/index.html?lang=en"], mode="prefix")
    assert scope.contains("https://h/docs/v2/")
    assert scope.contains("https://h/docs/v2/api/ref.html")
    assert not scope.contains("https://h/docs/v1/")
    assert not scope.contains("https://h/docs/v2")  # no slash: another resource


def test_include_and_exclude_are_regexes_searched_in_the_url():
    scope = Scope(seeds=["https://h/"], include=[r"/docs/", r"/faq"], exclude=[r"\.pdf$", "draft"])
    assert scope.wanted("https://h/docs/a.html")
    assert not scope.wanted("https://h/blog/a.html")
    assert not scope.wanted("https://h/docs/draft-1.html")
    assert Scope(seeds=["https://h/"]).wanted("https://h/anything")


def test_an_http_seed_covers_its_https_upgrade_but_not_the_reverse_or_another_port():
    scope = Scope(seeds=["http://docs.example.com/guide/"], mode="same-host")
    assert scope.contains("https://docs.example.com/other")
    assert not Scope(seeds=["https://docs.example.com/"]).contains("http://docs.example.com/x")
    assert not Scope(seeds=["http://docs.example.com:8080/"]).contains("https://docs.example.com:8080/x")
    prefix = Scope(seeds=["http://h.example/docs/index.html"], mode="prefix")
    assert prefix.contains("https://h.example/docs/a") and not prefix.contains("https://h.example/blog/a")
