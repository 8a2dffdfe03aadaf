"""Sockets for the crawler whose every connect, read and write stops at the fetch's total deadline.

Why: the HTTP client's timeouts are per operation. A server that sends one header byte every few seconds never
lets a read time out, and would hold the fetch (and the worker thread the sync runs in) for ever. Here the fetch
sets a deadline for its thread (`deadline`), and each socket operation is given the time left before it (or its
own timeout, if that is shorter): at the deadline the operation times out wherever it is (connecting, the TLS
handshake, the status line, the headers, the body), however the bytes trickle.

Why a network backend of the HTTP library (httpcore) rather than a watchdog thread that closes the socket: the
socket is not known until the connection is open (or taken from the pool), and a close from another thread does
not wake a blocked read on every platform; a timeout on the read itself does, and needs no other thread.
"""
from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore

_local = threading.local()


@contextmanager
def deadline(*, seconds: float) -> Iterator[float]:
    """Every socket operation of this thread stops at now + seconds; yields that moment (time.monotonic())."""
    previous = getattr(_local, "at", None)
    _local.at = time.monotonic() + seconds
    try:
        yield _local.at
    finally:
        _local.at = previous


def time_left(timeout: float | None, *, error: type[Exception]) -> float | None:
    """The shorter of the operation's own timeout and the time left before this thread's deadline; raises
    `error` once the deadline has passed (a socket timeout of 0 would mean "do not block", not "stop")."""
    at = getattr(_local, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the fetch's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, time_left(timeout, error=httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, time_left(timeout, error=httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        # the handshake runs under one socket timeout for all of it (CPython's SSL handshake keeps a deadline)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname,
                                             time_left(timeout, error=httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's synchronous sockets, each operation bounded by the calling thread's deadline."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_tcp(host, port, time_left(timeout, error=httpcore.ConnectTimeout),
                                               local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.UnsupportedProtocol("the crawler connects over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
