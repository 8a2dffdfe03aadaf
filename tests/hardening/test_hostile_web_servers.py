"""Web servers that attack the crawler, served on 127.0.0.1 by the test: a page gzipped twice that inflates to
256 MB from about 1 KB, stacked and unknown Content-Encodings, headers and bodies that trickle a byte at a time,
markup crafted to make a tokenizer quadratic, an element with thousands of attributes, a page of thousands of
links. Each fetch ends by its total deadline, each body is counted as it is inflated, each page's parse is linear,
and the crawl reports every refused page with its reason."""
from __future__ import annotations

import threading
import time
import tracemalloc

import pytest

from tests.hardening.hostile_http import (
    HostileServer,
    answer,
    gzip_layers,
    not_found,
    trickle_body,
    trickle_headers,
)

CAP = 2_000_000  # SOURCES_MAX_PAGE_BYTES's default
DEADLINE_S = 2.0  # WEB_FETCH_TOTAL_TIMEOUT_S in these tests
READ_TIMEOUT_S = 1.5  # SOURCES_REQUEST_TIMEOUT_S: longer than the trickle's pause, so it never fires by itself
TRICKLE_S = 0.3
TRICKLE_FOR_S = 30.0  # how long the server keeps trickling before it gives up
CRAFTED = "<html><body><p>A page built to stall a tokenizer.</p><a href='/from-crafted.html'>next</a>" + \
    "<a x='" * (1_000_000 // 6)  # 1 MB


def text_page(title: str, links: list[str] = ()) -> bytes:
    items = "".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
    return (f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1><p>{title} is a page "
            f"with enough plain words for the reader to keep it as text.</p></article><ul>{items}</ul>"
            "</body></html>").encode()


@pytest.fixture(scope="module")
def double_gzip() -> bytes:
    return gzip_layers(256 << 20, layers=2)


@pytest.fixture
def server():
    s = HostileServer()
    yield s
    s.close()


@pytest.fixture
def hostile_settings(settings):
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.SOURCES_CRAWL_DELAY_S = 0.01
    settings.SOURCES_PER_HOST_CONCURRENCY = 2
    settings.SOURCES_MAX_PAGE_BYTES = CAP
    settings.SOURCES_REQUEST_TIMEOUT_S = READ_TIMEOUT_S
    settings.WEB_FETCH_TOTAL_TIMEOUT_S = DEADLINE_S
    settings.WEB_MAX_LINKS_PER_PAGE = 1000
    return settings


def fetcher():
    from search.sources.web.fetcher import Fetcher, FetchPolicy

    return Fetcher(policy=FetchPolicy(user_agent="HostileTestBot/1.0", timeout_s=READ_TIMEOUT_S, delay_s=0.0,
                                      per_host=2, max_page_bytes=CAP), in_scope=lambda _u: True)


def test_a_double_gzip_page_is_refused_at_the_cap_without_being_inflated_whole(hostile_settings, server,
                                                                               double_gzip):
    server.routes["/bomb"] = answer(body=double_gzip, headers=(("Content-Encoding", "gzip, gzip"),))
    f = fetcher()
    tracemalloc.start()
    try:
        got = f.get(server.url("/bomb"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        f.close()
    assert len(double_gzip) < 2000  # about 1 KB on the wire, 256 MB inflated
    assert got.outcome == "too_large" and got.body == b""
    assert f"gzip (gzip, gzip) inflated past {CAP} bytes" in got.error
    assert f.bytes_read <= CAP  # counted as inflated: nothing past the cap was kept
    assert peak < 32 << 20, f"{peak} bytes allocated at the peak"  # the inflated 256 MB never existed


def test_stacked_and_unknown_content_encodings_are_refused_with_their_names(hostile_settings, server):
    server.routes["/five"] = answer(body=gzip_layers(1000, layers=5),
                                    headers=(("Content-Encoding", "gzip, gzip, gzip, gzip, gzip"),))
    server.routes["/br"] = answer(body=b"\x1b\x00\x00", headers=(("Content-Encoding", "br"),))
    server.routes["/corrupt"] = answer(body=b"\x1f\x8b not gzip at all", headers=(("Content-Encoding", "gzip"),))
    server.routes["/once"] = answer(body=gzip_layers(5000, layers=1), headers=(("Content-Encoding", "gzip"),))
    f = fetcher()
    try:
        five, br = f.get(server.url("/five")), f.get(server.url("/br"))
        corrupt, once = f.get(server.url("/corrupt")), f.get(server.url("/once"))
    finally:
        f.close()
    assert five.outcome == "error" and five.error.startswith("5 Content-Encoding layers")
    assert br.outcome == "error" and "Content-Encoding 'br' is not decoded" in br.error
    assert corrupt.outcome == "error" and "corrupt data" in corrupt.error
    assert once.outcome == "ok" and len(once.body) == 5000 and once.body.startswith(b"<p>aaa")
    assert server.visited("/once")[0].headers["accept-encoding"] == "gzip, deflate"  # only what is decoded


def test_trickled_headers_and_body_end_by_the_total_deadline(hostile_settings, server):
    server.routes["/slow-head"] = trickle_headers(every_s=TRICKLE_S, for_s=TRICKLE_FOR_S)
    server.routes["/slow-body"] = trickle_body(every_s=TRICKLE_S, for_s=TRICKLE_FOR_S)
    server.routes["/robots.txt"] = trickle_headers(every_s=TRICKLE_S, for_s=TRICKLE_FOR_S)
    f = fetcher()  # its total deadline: WEB_FETCH_TOTAL_TIMEOUT_S
    try:
        t0 = time.monotonic()
        head = f.get(server.url("/slow-head"))
        head_s = time.monotonic() - t0
        body = f.get(server.url("/slow-body"))
        robots = f.robots(server.url("/page.html"))
    finally:
        f.close()
    assert head.outcome == "error" and head.error == "total deadline of 2 s passed (headers still arriving)"
    assert body.outcome == "error" and body.error == "total deadline of 2 s passed (body still arriving)"
    assert head_s < 15  # 2 s, with room for a loaded machine; the server would have trickled for 30 s
    # robots.txt under the same deadline: unreachable, so nothing on the host is fetched (RFC 9309)
    assert not robots.can_fetch(server.url("/page.html"), "HostileTestBot/1.0")
    assert "total deadline" in f.host(server.url("/")).robots_note
    for path in ("/slow-head", "/slow-body", "/robots.txt"):
        visit = server.visited(path)[0]
        deadline = time.monotonic() + 5
        while not visit.left and time.monotonic() < deadline:  # the server notices at its next byte
            time.sleep(0.05)
        assert 0 < visit.left - visit.arrived < 15, path


@pytest.mark.timeout(300)
def test_links_of_a_1_mb_page_crafted_against_the_tokenizer_are_read_in_linear_time(hostile_settings):
    from search.sources.web.links import page_links

    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(found=page_links(CRAFTED, url="http://h/")), daemon=True)
    t0 = time.monotonic()
    worker.start()
    worker.join(60)  # a linear parser takes milliseconds; the quadratic one took 175 s for 144 KB
    assert "found" in out, f"still parsing after {time.monotonic() - t0:.0f} s"
    assert out["found"].links == ["http://h/from-crafted.html"]


def test_a_page_of_thousands_of_links_is_read_up_to_the_cap(hostile_settings):
    from search.sources.web.links import page_links

    html = "<html><body>" + "".join(f'<a href="/p/{i}.html">{i}</a>' for i in range(5000)) + "</body></html>"
    found = page_links(html, url="http://h/")
    assert len(found.links) == 1000 and found.links_dropped == 4000
    assert found.links[-1] == "http://h/p/999.html"


@pytest.mark.django_db
@pytest.mark.timeout(600)
def test_a_crawl_of_a_hostile_site_finishes_and_reports_each_refused_page_with_its_reason(
        hostile_settings, server, double_gzip, make_user, make_project):
    from search.models import Dataset, Document, Source
    from search.sources.sync import start_sync

    pages = ["/ok.html", "/bomb", "/five", "/br", "/slow-head", "/slow-body", "/crafted", "/attrs", "/farm"]
    server.routes.update({
        "/robots.txt": not_found,
        "/sitemap.xml": trickle_headers(every_s=TRICKLE_S, for_s=TRICKLE_FOR_S),
        "/": answer(body=text_page("Hostile home", pages)),
        "/ok.html": answer(body=text_page("Plain page")),
        "/from-crafted.html": answer(body=text_page("Reached from the crafted page")),
        "/bomb": answer(body=double_gzip, headers=(("Content-Encoding", "gzip, gzip"),)),
        "/five": answer(body=gzip_layers(1000, layers=5), headers=(("Content-Encoding", "gzip, " * 4 + "gzip"),)),
        "/br": answer(body=b"\x1b\x00\x00", headers=(("Content-Encoding", "br"),)),
        "/slow-head": trickle_headers(every_s=TRICKLE_S, for_s=TRICKLE_FOR_S),
        "/slow-body": trickle_body(every_s=TRICKLE_S, for_s=TRICKLE_FOR_S),
        "/crafted": answer(body=CRAFTED.encode()),
        "/attrs": answer(body=b"<html><body><p " + b" ".join(b"x%d=1" % i for i in range(50_000))
                         + b">Attributes</p></body></html>"),
        "/farm": answer(body=("<html><body>" + "".join(f'<a href="/f/{i}.html"></a>' for i in range(5000))
                              + "</body></html>").encode()),  # links only: nothing for the reader to embed
    })
    dataset = Dataset.objects.create(project=make_project("hostile", make_user()), name="site", kind="web")
    Source.objects.create(dataset=dataset, type="web", config={
        "seeds": [server.url("/")], "scope": "same-host", "max_pages": 30, "max_depth": 3, "include": [],
        "exclude": []})
    job = start_sync(dataset=dataset, run_now=True)
    assert job.status == "done", job.error
    indexed = set(Document.objects.filter(dataset=dataset).values_list("path", flat=True))
    assert {server.url("/ok.html"), server.url("/from-crafted.html")} <= indexed
    skipped = job.result["skipped"]
    errors = "\n".join(skipped["errors"])
    expected = {
        "/bomb": f"too large: Content-Encoding gzip (gzip, gzip) inflated past {CAP} bytes",
        "/five": "5 Content-Encoding layers",
        "/br": "Content-Encoding 'br' is not decoded",
        "/slow-head": "total deadline of 2 s passed (headers still arriving)",
        "/slow-body": "total deadline of 2 s passed (body still arriving)",
        "/sitemap.xml": "total deadline of 2 s passed (headers still arriving)",
        "/attrs": "markup refused: an element has 50000 attributes (at most 256 are read)",
    }
    for path, reason in expected.items():
        assert f"{server.url(path)}: {reason}" in errors, (path, errors)
    assert server.url("/bomb") in skipped["too_large"]
    assert server.url("/attrs") not in indexed and server.url("/bomb") not in indexed
    # the farm's links past WEB_MAX_LINKS_PER_PAGE are not read, and those past what max_pages can fetch not kept
    assert skipped["links_dropped"] == 4000 and skipped["frontier_full"] > 0
    assert job.result["requested"] <= 30
    for path in ("/slow-head", "/slow-body", "/sitemap.xml"):
        visit = server.visited(path)[0]
        deadline = time.monotonic() + 5
        while not visit.left and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0 < visit.left - visit.arrived < 15, path


def blocking_lookup(*, release: threading.Event, asked: list[str]):
    """A resolver that blocks (on a real event, like a resolver that never answers) until released, then answers
    with the loopback address, getaddrinfo's signature."""
    import socket

    def lookup(host: str, port: int, *, proto: int = 0) -> list:
        asked.append(host)
        release.wait(TRICKLE_FOR_S)
        return socket.getaddrinfo("127.0.0.1", port, proto=proto)

    return lookup


def test_a_host_name_lookup_that_blocks_past_the_deadline_ends_the_fetch(hostile_settings, server):
    from search.sources.web.fetcher import Fetcher, FetchPolicy

    server.routes["/ok.html"] = answer(body=text_page("Behind a slow resolver"))
    release, asked = threading.Event(), []
    f = Fetcher(policy=FetchPolicy(user_agent="HostileTestBot/1.0", timeout_s=READ_TIMEOUT_S, delay_s=0.0,
                                   per_host=2, max_page_bytes=CAP, total_timeout_s=DEADLINE_S),
                in_scope=lambda _u: True, lookup=blocking_lookup(release=release, asked=asked))
    try:
        started = time.monotonic()
        got = f.get(f"http://slow-resolver.example:{server.port}/ok.html")
        elapsed = time.monotonic() - started
    finally:
        release.set()
        f.close()
    assert asked == ["slow-resolver.example"]
    assert got.outcome == "error"
    assert got.error == "total deadline of 2 s passed (host name still resolving)"
    assert elapsed < TRICKLE_FOR_S / 2  # ended by the deadline, not by the resolver giving up
    assert server.visited("/ok.html") == []


def test_a_host_name_that_resolves_in_time_is_fetched_through_the_given_resolver(hostile_settings, server):
    from search.sources.web.fetcher import Fetcher, FetchPolicy

    server.routes["/ok.html"] = answer(body=text_page("Behind a resolver"))
    release, asked = threading.Event(), []
    release.set()
    f = Fetcher(policy=FetchPolicy(user_agent="HostileTestBot/1.0", timeout_s=READ_TIMEOUT_S, delay_s=0.0,
                                   per_host=2, max_page_bytes=CAP, total_timeout_s=DEADLINE_S),
                in_scope=lambda _u: True, lookup=blocking_lookup(release=release, asked=asked))
    try:
        got = f.get(f"http://resolver.example:{server.port}/ok.html")
    finally:
        f.close()
    assert asked == ["resolver.example"]
    assert got.outcome == "ok" and b"Behind a resolver" in got.body
    assert server.visited("/ok.html")[0].headers.get("host") == f"resolver.example:{server.port}"


def wildcard_robots(rules: int) -> bytes:
    """A robots.txt of wildcard rules that each search the whole URL and match none of the site's pages."""
    return ("User-agent: *\nDisallow: /private\n" + "".join(f"Disallow: /*a*a*a*z{i}\n" for i in range(rules))
            ).encode()


def test_a_robots_txt_of_more_rules_than_are_read_forbids_its_host_with_the_reason(hostile_settings, server):
    hostile_settings.WEB_ROBOTS_MAX_RULES = 2000
    body = wildcard_robots(15_000)
    assert len(body) < 500 * 1024  # within the size read: the rules, not the bytes, are what is refused
    server.routes["/robots.txt"] = answer(body=body, content_type="text/plain")
    f = fetcher()
    try:
        assert f.allowed(server.url("/page.html")) is False
        assert f.host(server.url("/")).robots_note == \
            "robots.txt has 15001 rules, more than the 2000 read; nothing fetched"
    finally:
        f.close()
    assert len(server.visited("/robots.txt")) == 1


def test_a_robots_txt_within_the_rule_cap_is_obeyed(hostile_settings, server):
    hostile_settings.WEB_ROBOTS_MAX_RULES = 2000
    server.routes["/robots.txt"] = answer(body=wildcard_robots(500), content_type="text/plain")
    f = fetcher()
    try:
        assert f.allowed(server.url("/page.html")) is True
        assert f.allowed(server.url("/private/page.html")) is False
        assert f.host(server.url("/")).robots_note == ""
    finally:
        f.close()
