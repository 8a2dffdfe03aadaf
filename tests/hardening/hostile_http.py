"""A hostile web server on 127.0.0.1, written on raw sockets so it can break HTTP the way an attacker would:
headers that trickle a byte at a time, a body that never ends, stacked Content-Encodings, bombs.

Each route is a function `(conn, send) -> None` that writes whatever bytes it likes; `send` stops quietly once
the crawler has gone away. The server logs when each request arrived and when its connection was closed by the
client, so a test can assert how long the crawler stayed.
"""
from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field


class Gone(Exception):
    """The client closed the connection (or the test is over)."""


Send = Callable[[bytes], None]
Handler = Callable[[Send], None]


@dataclass
class Visit:
    path: str
    arrived: float
    left: float = 0.0  # when the server noticed the client had gone (0: it never did, or the handler finished)
    headers: dict[str, str] = field(default_factory=dict)


class HostileServer:
    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.visits: list[Visit] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def visited(self, path: str) -> list[Visit]:
        with self._lock:
            return [v for v in self.visits if v.path == path]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()

    # --- serving -------------------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
            visit = Visit(path=path, arrived=time.monotonic(),
                          headers={k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])})
            with self._lock:
                self.visits.append(visit)

            def send(data: bytes) -> None:
                if self.stop.is_set():
                    raise Gone
                try:
                    conn.sendall(data)
                except OSError:
                    raise Gone from None

            handler = self.routes.get(path) or self.routes.get(path.split("?")[0]) or not_found
            try:
                handler(send)
            except Gone:
                visit.left = time.monotonic()
        except OSError:
            pass
        finally:
            conn.close()


# --- answers ---------------------------------------------------------------------------------------------------
def answer(*, body: bytes, content_type: str = "text/html; charset=utf-8", status: str = "200 OK",
           headers: tuple[tuple[str, str], ...] = ()) -> Handler:
    head = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers]
    raw = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body

    def handler(send: Send) -> None:
        send(raw)
    return handler


not_found = answer(body=b"not here", content_type="text/plain", status="404 Not Found")


def trickle_headers(*, every_s: float, for_s: float) -> Handler:
    """A status line, then one byte of a header every `every_s`, for up to `for_s` (then the server gives up)."""
    def handler(send: Send) -> None:
        send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: ")
        end = time.monotonic() + for_s
        while time.monotonic() < end:
            time.sleep(every_s)
            send(b"a")
        send(b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    return handler


def trickle_body(*, every_s: float, for_s: float) -> Handler:
    """Headers at once (announcing a 1 MB page), then one byte of the body every `every_s`, for up to `for_s`."""
    def handler(send: Send) -> None:
        send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n"
             b"<html><body><p>")
        end = time.monotonic() + for_s
        while time.monotonic() < end:
            time.sleep(every_s)
            send(b"x")
    return handler


def gzip_layers(data_size: int, *, layers: int) -> bytes:
    """`data_size` bytes of HTML-ish filler compressed `layers` times (built in pieces: never held inflated)."""
    inner = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = b"<p>" + b"a" * (1 << 20)
    parts, left = [], data_size
    while left > 0:
        parts.append(inner.compress(block[:left]))
        left -= len(block)
    parts.append(inner.flush())
    data = b"".join(parts)
    for _ in range(layers - 1):
        data = gzip.compress(data, 9)
    return data
