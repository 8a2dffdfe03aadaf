"""Polite, SSRF-safe HTTP GETs for the web crawler: robots.txt, per-host delay and concurrency, pinned
connections, redirects checked hop by hop, size caps enforced while streaming.

Why redirects are followed here and not by httpx: each hop is a new URL that must be in the crawl's scope, allowed
by robots.txt, and resolve to an address the platform may fetch from (netguard); httpx would follow a redirect to
169.254.169.254 before anyone could look. Why the connection goes to an IP literal with the host in the Host header
(and TLS SNI): the address that was checked is the address that is connected to, so a DNS answer that changes
between the check and the connection (rebinding) changes nothing. Why `trust_env=False`: a proxy from the
environment would make the connection somewhere else than the checked address.

Why the HTTP library's lower layer (httpcore) rather than httpx's client: the body arrives as the server sent it
and is decoded here, each Content-Encoding layer counted as it is inflated (`decoding`), and every socket
operation stops at the fetch's total deadline (`transport`), so neither a compression bomb nor a server that
trickles its bytes can make one fetch unbounded.

Fetching runs in worker threads; nothing here touches the database.
"""
from __future__ import annotations

import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx
from django.conf import settings
from protego import Protego

from config.errors import BadInput
from search.ingest.formats import registry
from search.sources import netguard
from search.sources.web import transport
from search.sources.web.decoding import ACCEPT_ENCODING, BodyDecoder, TooLarge, Undecodable
from search.sources.web.urls import normalize_url, origin

MAX_REDIRECTS = 5
MAX_ROBOTS_BYTES = 500 * 1024  # what RFC 9309 asks a crawler to read at least (and what Google reads)
# An Allow or Disallow line of robots.txt (counted before the file is parsed, every group together).
_ROBOTS_RULE = re.compile(rb"^[ \t]*(?:dis)?allow[ \t]*:", re.IGNORECASE | re.MULTILINE)
MAX_CRAWL_DELAY_S = 60.0  # a site asking for more is not crawled (we will not go faster than asked)
# Pages, and every registered document format's types (PDF, DOCX, EPUB): the body's bytes then decide its reader
PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/markdown", "text/x-markdown",
                        "text/plain"}) | registry.media_types()
_ACCEPT = ",".join(["text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9",
                    *(f"{t};q=0.8" for t in sorted(registry.media_types() - {"text/html", "application/xhtml+xml",
                                                                                 "text/markdown", "text/plain"})),
                    "*/*;q=0.1"])
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


@dataclass
class Fetched:
    """What one GET (with its redirects) came to.

    outcome: ok | not_modified | gone (404/410) | robots (disallowed, at the URL or a redirect hop) |
    out_of_scope (a redirect left the crawl's scope) | too_large (declared, sent or inflated past the cap; `error`
    says which) | content_type | budget (the crawl's total bytes were spent; not requested) | error (`error` says
    why: a refused or corrupt Content-Encoding, the total deadline, the network)."""

    url: str
    outcome: str
    final_url: str = ""
    status: int = 0
    body: bytes = b""
    content_type: str = ""
    charset: str = ""
    etag: str = ""
    last_modified: str = ""
    error: str = ""
    inflated_past_cap: bool = False  # too_large because a Content-Encoding layer inflated past the cap


class _Host:
    """One origin's politeness: a semaphore for concurrency and a clock that spaces requests by the delay (the
    larger of the setting and robots.txt's Crawl-delay).

    The clock is the moment a request's headers were handed to the socket (httpcore's trace hook calls `mark`), not
    the moment a thread was given its turn: opening a connection, or waiting for the GIL while the crawl embeds,
    takes time, and counting from the turn would let the next request follow closer than the delay. So one
    request at a time is "sending" (between its turn and its headers), and the next turn waits for that and then
    for the delay."""

    def __init__(self, *, delay_s: float, concurrency: int) -> None:
        self.delay_s = delay_s
        self.slots = threading.BoundedSemaphore(max(1, concurrency))
        self.clock = threading.Condition()
        self.last_start: float | None = None
        self.sending = False
        self.robots: Protego | None = None
        self.robots_lock = threading.Lock()
        self.robots_note = ""

    @contextmanager
    def slot(self) -> Iterator[None]:
        self.slots.acquire()
        try:
            with self.clock:
                while True:
                    now = time.monotonic()
                    due = now if self.last_start is None else self.last_start + self.delay_s
                    if not self.sending and now >= due:
                        self.sending, self.last_start = True, now
                        break
                    self.clock.wait(None if self.sending else due - now)
            try:
                yield
            finally:
                self._sent()  # no headers went out (refused, failed to connect): the turn still counts
        finally:
            self.slots.release()

    def _sent(self) -> None:
        with self.clock:
            if self.sending:
                self.sending, self.last_start = False, time.monotonic()
                self.clock.notify_all()

    def mark(self, event: str, _info: dict) -> None:
        if event.endswith("send_request_headers.complete"):
            self._sent()


@dataclass(frozen=True)
class FetchPolicy:
    """How one crawl fetches: the user agent it names itself with, how long it waits, how gently it treats each
    host and how much it reads.

    Why one value: the crawler takes every one of these from the settings at once (`from_settings`), and a test or
    a benchmark states its own in one place, instead of a constructor with ten parameters."""

    user_agent: str
    timeout_s: float  # per socket operation
    delay_s: float  # between two requests to one host (a robots.txt Crawl-delay may raise it)
    per_host: int  # requests in flight to one host
    max_page_bytes: int  # one response body, decoded
    max_total_bytes: int = 0  # the whole crawl's bodies; 0: no limit
    # per fetch: every exchange of it (redirects too), headers and body; None: WEB_FETCH_TOTAL_TIMEOUT_S
    total_timeout_s: float | None = None

    @classmethod
    def from_settings(cls) -> FetchPolicy:
        """The platform's crawl policy (SOURCES_* settings)."""
        return cls(user_agent=settings.SOURCES_USER_AGENT, timeout_s=settings.SOURCES_REQUEST_TIMEOUT_S,
                   delay_s=settings.SOURCES_CRAWL_DELAY_S, per_host=settings.SOURCES_PER_HOST_CONCURRENCY,
                   max_page_bytes=settings.SOURCES_MAX_PAGE_BYTES, max_total_bytes=settings.SOURCES_MAX_TOTAL_BYTES)


class Fetcher:
    """One crawl's HTTP side. `in_scope` decides whether a redirect may be followed."""

    def __init__(self, *, policy: FetchPolicy, in_scope: Callable[[str], bool], verify: ssl.SSLContext | bool = True,
                 lookup: netguard.Lookup = netguard.system_lookup) -> None:
        self.policy = policy
        self.user_agent = policy.user_agent
        self.lookup = lookup  # the resolver; each host-name lookup runs under the fetch's remaining deadline
        self.timeout_s = policy.timeout_s  # per socket operation
        # per fetch: every exchange of it (redirects too), headers and body
        self.total_timeout_s = settings.WEB_FETCH_TOTAL_TIMEOUT_S if policy.total_timeout_s is None \
            else policy.total_timeout_s
        self.delay_s = policy.delay_s
        self.per_host = policy.per_host
        self.max_page_bytes = policy.max_page_bytes
        self.max_total_bytes = policy.max_total_bytes  # 0: no limit
        self.verify = verify  # certificates are checked against the URL's host name (sent as SNI), never the IP
        self.in_scope = in_scope
        self._hosts: dict[str, _Host] = {}
        self._clients: dict[str, httpcore.ConnectionPool] = {}
        self._ssl = httpx.create_ssl_context(verify=verify, trust_env=False)
        self._lock = threading.Lock()
        self._bytes = 0

    # --- bookkeeping ----------------------------------------------------------------------------------------
    @property
    def bytes_read(self) -> int:
        return self._bytes

    @property
    def exhausted(self) -> bool:
        """The crawl has read its SOURCES_MAX_TOTAL_BYTES: nothing more is requested."""
        return bool(self.max_total_bytes) and self._bytes >= self.max_total_bytes

    def _count(self, n: int) -> None:
        with self._lock:
            self._bytes += n

    def host(self, url: str) -> _Host:
        key = origin(url)
        with self._lock:
            if key not in self._hosts:
                self._hosts[key] = _Host(delay_s=self.delay_s, concurrency=self.per_host)
            return self._hosts[key]

    def _client(self, url: str) -> httpcore.ConnectionPool:
        """One connection pool per origin: its connections were opened to that origin's checked address with that
        origin's SNI, and must not be reused for another name that happens to share the address. No proxy (the
        environment is not read), no redirects (followed by `_get`), no decoding (`_read`)."""
        key = origin(url)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = httpcore.ConnectionPool(
                    ssl_context=self._ssl, max_connections=self.per_host, max_keepalive_connections=self.per_host,
                    network_backend=transport.DeadlineBackend())
            return self._clients[key]

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()

    # --- robots.txt -----------------------------------------------------------------------------------------
    def robots(self, url: str) -> Protego:
        """The origin's robots.txt, fetched once per crawl. Missing (4xx): everything is allowed. Unreachable
        (5xx, timeout, refused address): nothing is, as RFC 9309 asks.

        Why a cap on its rules: every URL the crawl meets is checked against them, each wildcard rule costs a
        search through the URL, and the URLs checked are not bounded by max_pages (links robots.txt turns away
        are not requested). 19,000 wildcard rules in 500 KiB cost about 0.1 s per URL; a robots.txt with more
        than WEB_ROBOTS_MAX_RULES Allow/Disallow lines forbids its host for the crawl, with that reason."""
        host = self.host(url)
        with host.robots_lock:
            if host.robots is None:
                got = self._get(origin(url) + "/robots.txt", accept=None, max_bytes=MAX_ROBOTS_BYTES,
                                follow=lambda u: origin(u) == origin(url), check_robots=False)
                rules = len(_ROBOTS_RULE.findall(got.body)) if got.outcome == "ok" else 0
                if got.outcome == "ok" and rules > settings.WEB_ROBOTS_MAX_RULES:
                    host.robots = Protego.parse("User-agent: *\nDisallow: /\n")
                    host.robots_note = (f"robots.txt has {rules} rules, more than the {settings.WEB_ROBOTS_MAX_RULES}"
                                        " read; nothing fetched")
                elif got.outcome == "ok":
                    host.robots = Protego.parse(got.body.decode("utf-8", errors="replace"))
                elif got.outcome in ("gone", "too_large", "content_type") or 400 <= got.status < 500:
                    host.robots = Protego.parse("")
                else:
                    host.robots = Protego.parse("User-agent: *\nDisallow: /\n")
                    host.robots_note = f"robots.txt unavailable ({got.error or got.outcome}); nothing fetched"
                delay = host.robots.crawl_delay(self.user_agent)
                if delay is not None:
                    host.delay_s = max(self.delay_s, float(delay))
            return host.robots

    def allowed(self, url: str) -> bool:
        """robots.txt lets this user agent fetch the URL (and the site's Crawl-delay is one we can honour)."""
        rp = self.robots(url)
        return self.host(url).delay_s <= MAX_CRAWL_DELAY_S and rp.can_fetch(url, self.user_agent)

    def sitemaps(self, url: str) -> list[str]:
        return list(self.robots(url).sitemaps)

    # --- GET ------------------------------------------------------------------------------------------------
    def get(self, url: str, *, etag: str = "", last_modified: str = "") -> Fetched:
        """A page: conditional when the stored validators are given; redirects followed within scope."""
        return self._get(url, accept=PAGE_TYPES, max_bytes=self.max_page_bytes, follow=self.in_scope,
                         etag=etag, last_modified=last_modified)

    def get_any(self, url: str) -> Fetched:
        """A sitemap (any content type, same size cap, redirects within the URL's origin)."""
        return self._get(url, accept=None, max_bytes=self.max_page_bytes, follow=lambda u: origin(u) == origin(url))

    def _get(self, url: str, *, accept: frozenset[str] | None, max_bytes: int, follow: Callable[[str], bool],
             etag: str = "", last_modified: str = "", check_robots: bool = True) -> Fetched:
        current, seen = url, set()
        if self.exhausted:  # checked here, in the thread, since fetches are queued ahead of the bytes they read
            return Fetched(url=url, final_url=url, outcome="budget")
        budget = [self.total_timeout_s]  # seconds of network time left to this fetch, spent by each exchange
        for hop in range(MAX_REDIRECTS + 1):
            if current in seen:
                return Fetched(url=url, final_url=current, outcome="error", error="redirect loop")
            seen.add(current)
            if hop and not follow(current):
                return Fetched(url=url, final_url=current, outcome="out_of_scope")
            started = time.monotonic()
            try:  # before robots.txt: an unsafe host gets no request at all, not even for its robots.txt
                address = netguard.pinned_address(current, timeout_s=budget[0], lookup=self.lookup)
            except netguard.SlowLookup:  # the resolver held the fetch until its deadline
                return Fetched(url=url, final_url=current, outcome="error",
                               error=f"total deadline of {self.total_timeout_s:g} s passed (host name still resolving)")
            except BadInput as exc:  # unsafe_address, unresolvable_host
                return Fetched(url=url, final_url=current, outcome="error", error=f"{exc.code}: {exc.detail}")
            finally:
                budget[0] -= time.monotonic() - started  # the lookup is part of the fetch's time
            if check_robots and hop and not self.allowed(current):
                return Fetched(url=url, final_url=current, outcome="robots")
            got, location = self._request(current, address=address, accept=accept, max_bytes=max_bytes,
                                          etag=etag, last_modified=last_modified, budget=budget)
            got.url = url
            if location is None:
                return got
            nxt = normalize_url(location, base=current)
            if nxt is None:
                return Fetched(url=url, final_url=current, outcome="error", status=got.status,
                               error=f"redirect to an uncrawlable URL ({location[:200]})")
            current = nxt
        return Fetched(url=url, final_url=current, outcome="error", error=f"more than {MAX_REDIRECTS} redirects")

    def _request(self, url: str, *, address: str, accept: frozenset[str] | None, max_bytes: int, etag: str,
                 last_modified: str, budget: list[float]) -> tuple[Fetched, str | None]:
        """One HTTP exchange with the pinned address; (result, redirect Location or None).

        The exchange runs under the fetch's total deadline from the moment it has its turn at the host (the
        politeness wait before it is the crawler's own and does not count); what it spends is taken off
        `budget[0]`, so the fetch's exchanges together never pass WEB_FETCH_TOTAL_TIMEOUT_S."""
        parts = urlsplit(url)
        ip = f"[{address}]" if ":" in address else address
        netloc = ip if parts.port is None else f"{ip}:{parts.port}"
        target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
        headers = [("Host", parts.netloc), ("User-Agent", self.user_agent), ("Accept-Encoding", ACCEPT_ENCODING),
                   ("Accept", _ACCEPT)]
        if etag:
            headers.append(("If-None-Match", etag))
        if last_modified:
            headers.append(("If-Modified-Since", last_modified))
        host = self.host(url)
        t = self.timeout_s
        extensions: dict = {"trace": host.mark, "timeout": {"connect": t, "read": t, "write": t, "pool": t}}
        if parts.scheme == "https":
            extensions["sni_hostname"] = parts.hostname
        client = self._client(url)
        out = Fetched(url=url, final_url=url, outcome="error")
        with host.slot():
            started = time.monotonic()
            try:
                with transport.deadline(seconds=budget[0]) as at:
                    try:
                        with client.stream("GET", target, headers=headers, extensions=extensions) as response:
                            out.status = response.status
                            location = _header(response, "location")
                            if response.status in REDIRECTS and location:
                                return out, location
                            return self._read(out, response, accept=accept, max_bytes=max_bytes, at=at), None
                    except httpcore.TimeoutException:
                        if time.monotonic() >= at:
                            out.error = (f"total deadline of {self.total_timeout_s:g} s passed "
                                         f"({'body' if out.status else 'headers'} still arriving)")
                        else:
                            out.error = f"timeout after {self.timeout_s:g} s"
                    except (httpcore.ProtocolError, httpcore.NetworkError, httpcore.UnsupportedProtocol) as exc:
                        out.error = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                budget[0] -= time.monotonic() - started
        return out, None

    def _read(self, out: Fetched, response: httpcore.Response, *, accept: frozenset[str] | None, max_bytes: int,
              at: float) -> Fetched:
        status = response.status
        if status == 304:
            out.outcome = "not_modified"
            return out
        if status in (404, 410):
            out.outcome = "gone"
            return out
        if status != 200:
            out.error = f"HTTP {status}"
            return out
        ctype, _, params = _header(response, "content-type").partition(";")
        out.content_type = ctype.strip().lower()
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k.lower() == "charset" and v:
                out.charset = v.strip("\"' ")
        out.etag = _header(response, "etag")[:500]
        out.last_modified = _header(response, "last-modified")[:100]
        if accept is not None and out.content_type not in accept:
            out.outcome = "content_type"
            return out
        declared = _header(response, "content-length")
        if declared.isdigit() and int(declared) > max_bytes:
            out.outcome = "too_large"
            out.error = f"declares {declared} bytes, more than {max_bytes}"
            return out
        try:
            decoder = BodyDecoder(content_encoding=_header(response, "content-encoding", every=True),
                                  max_bytes=max_bytes)
        except Undecodable as exc:
            out.error = str(exc)
            return out
        body = bytearray()
        raw = 0
        try:
            for chunk in response.iter_stream():  # as sent: the cap is checked on the wire and at every layer
                raw += len(chunk)
                if raw > max_bytes:
                    out.outcome, out.error = "too_large", f"sent more than {max_bytes} bytes"
                    return out
                for part in decoder.feed(chunk):
                    body += part
                    self._count(len(part))
                if time.monotonic() >= at:  # the socket stops at the deadline too; this catches a fast, long body
                    out.error = f"total deadline of {self.total_timeout_s:g} s passed (body still arriving)"
                    return out
        except TooLarge as exc:
            out.outcome, out.error, out.inflated_past_cap = "too_large", str(exc), True
            return out
        except Undecodable as exc:
            out.error = str(exc)
            return out
        out.body = bytes(body)
        out.outcome = "ok"
        return out


def _header(response: httpcore.Response, name: str, *, every: bool = False) -> str:
    """A response header as text (its first value, or every value joined with ", " as HTTP combines them)."""
    key = name.encode("ascii")
    values = [v.decode("latin-1") for k, v in response.headers if k.lower() == key]
    if every:
        return ", ".join(values)
    return values[0] if values else ""
