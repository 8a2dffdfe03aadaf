"""A small web site served on 127.0.0.1 by the test itself (crawler tests, SSRF tests, bench/bench_crawl.py).

Routes are plain data the test changes between crawls; every request is logged with its arrival time, headers
and the answer, so a test asserts what the crawler actually asked for (user agent, conditional headers, delay
between requests, in-flight requests, bytes the server managed to send of a huge page).
"""
from __future__ import annotations

import hashlib
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    etag: str = ""  # answered with 304 to a matching If-None-Match
    last_modified: str = ""  # answered with 304 to an equal If-Modified-Since
    location: str = ""
    stream_bytes: int = 0  # > 0: send this many bytes without a Content-Length, in 64 KiB writes
    declared_length: int = 0  # > 0: claim this Content-Length (the body sent is still `body`)
    sleep_s: float = 0.0


@dataclass
class Hit:
    t: float
    path: str
    headers: dict[str, str]
    status: int = 0


@dataclass
class LocalSite:
    host: str = "127.0.0.1"
    routes: dict[str, Route] = field(default_factory=dict)
    log: list[Hit] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)  # path -> bytes written before the client went away
    max_in_flight: int = 0
    tls: ssl.SSLContext | None = None  # serve https with this server context
    sni: list[str | None] = field(default_factory=list)  # the server names TLS clients asked for

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                site._serve(self)

        self.server = ThreadingHTTPServer((self.host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        if self.tls is not None:
            self.tls.sni_callback = lambda sock, name, ctx: self.sni.append(name)
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- routes ----------------------------------------------------------------------------------------------
    def page(self, path: str, body: str | bytes, *, etag: bool = True, **kw) -> Route:
        data = body.encode() if isinstance(body, str) else body
        route = Route(body=data, etag=f'"{hashlib.sha256(data).hexdigest()[:16]}"' if etag else "", **kw)
        self.routes[path] = route
        return route

    def redirect(self, path: str, to: str, status: int = 301) -> None:
        self.routes[path] = Route(status=status, location=to)

    def requested(self, prefix: str = "") -> list[str]:
        return [h.path for h in self.log if h.path.startswith(prefix)]

    # --- serving ---------------------------------------------------------------------------------------------
    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        hit = Hit(t=time.monotonic(), path=h.path, headers={k.lower(): v for k, v in h.headers.items()})
        with self._lock:
            self.log.append(hit)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            route = self.routes.get(h.path) or self.routes.get(h.path.split("?")[0])
            if route is None:
                route = Route(status=404, body=b"not here", content_type="text/plain")
            if route.sleep_s:
                time.sleep(route.sleep_s)
            status = route.status
            if status == 200 and ((route.etag and hit.headers.get("if-none-match") == route.etag)
                                  or (route.last_modified and hit.headers.get("if-modified-since") == route.last_modified)):
                status = 304
            hit.status = status
            h.send_response(status)
            if route.location:
                h.send_header("Location", route.location)
            if route.etag:
                h.send_header("ETag", route.etag)
            if route.last_modified:
                h.send_header("Last-Modified", route.last_modified)
            if status == 304 or route.location:
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            h.send_header("Content-Type", route.content_type)
            if route.stream_bytes:
                h.send_header("Connection", "close")
                h.close_connection = True
                h.end_headers()
                self._stream(h, route.stream_bytes)
                return
            h.send_header("Content-Length", str(route.declared_length or len(route.body)))
            if route.declared_length:
                h.send_header("Connection", "close")
                h.close_connection = True
            h.end_headers()
            try:
                h.wfile.write(route.body)
            except OSError:
                pass
        finally:
            with self._lock:
                self._in_flight -= 1

    def _stream(self, h: BaseHTTPRequestHandler, total: int) -> None:
        block = b"<p>" + b"filler text " * 5400 + b"</p>\n"  # about 64 KiB
        sent = 0
        try:
            for chunk in _blocks(block, total):
                h.wfile.write(chunk)
                sent += len(chunk)
        except OSError:  # the crawler stopped reading and closed the connection
            pass
        self.sent[h.path] = sent


def _blocks(block: bytes, total: int) -> Iterator[bytes]:
    left = total
    while left > 0:
        yield block[:left]
        left -= len(block)


def html_page(title: str, text: str, *, links: list[str] = (), head: str = "") -> str:
    """A page with enough prose for the extractor and a list of links."""
    items = "".join(f'<li><a href="{href}">link {i}</a></li>' for i, href in enumerate(links))
    return (f"<html><head><title>{title}</title>{head}</head><body><article><h1>{title}</h1>"
            f"<p>{text} This paragraph explains {title.lower()} in enough words for the extractor to keep it.</p>"
            f"<h2>Details about {title}</h2><p>More about {title.lower()}: {text}</p></article>"
            f"<ul>{items}</ul></body></html>")


class SiteProcess:
    """A LocalSite in a process of its own, driven over a pipe, with the same methods.

    Why: a server thread inside the crawler's process waits for the GIL while the crawler extracts and embeds, so
    its arrival times (what a politeness check measures) would carry the crawler's own scheduling delays. In its
    own process the server stamps a request when it arrives. CLOCK_MONOTONIC is system-wide, so only gaps between
    its own stamps are compared anyway."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # no fork of a process that holds torch and DB threads
        self._conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve_child, args=(child, host), daemon=True)
        self.proc.start()
        self.host = host
        self.port = self._conn.recv()

    def _call(self, name: str, *args, **kwargs):
        self._conn.send((name, args, kwargs))
        ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(value)
        return value

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def page(self, path: str, body: str | bytes, **kw) -> Route:
        return self._call("page", path, body, **kw)

    def redirect(self, path: str, to: str, status: int = 301) -> None:
        self._call("redirect", path, to, status)

    def remove(self, path: str) -> None:
        self._call("remove", path)

    def clear_log(self) -> None:
        self._call("clear_log")

    @property
    def log(self) -> list[Hit]:
        return self._call("log")

    @property
    def sent(self) -> dict[str, int]:
        return self._call("sent")

    @property
    def max_in_flight(self) -> int:
        return self._call("max_in_flight")

    def requested(self, prefix: str = "") -> list[str]:
        return [h.path for h in self.log if h.path.startswith(prefix)]

    def close(self) -> None:
        try:
            self._conn.send(("close", (), {}))
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


def _serve_child(conn, host: str) -> None:
    site = LocalSite(host=host)
    conn.send(site.port)
    while True:
        name, args, kwargs = conn.recv()
        if name == "close":
            site.close()
            return
        try:
            if name == "remove":
                value = site.routes.pop(args[0], None) and None
            elif name == "clear_log":
                with site._lock:
                    site.log.clear()
                    site.max_in_flight = 0
                value = None
            elif name == "log":
                with site._lock:
                    value = list(site.log)
            elif name in ("sent", "max_in_flight"):
                value = getattr(site, name)
            else:
                value = getattr(site, name)(*args, **kwargs)
            conn.send((True, value))
        except Exception as exc:  # noqa: BLE001 (reported to the test, which raises it)
            conn.send((False, f"{type(exc).__name__}: {exc}"))
