"""Server-side request forgery guard for everything a source fetches (git over http/ssh, the web crawler).

Why resolve here and connect to the resolved address: a host name that resolves to 127.0.0.1, 10.0.0.1 or
169.254.169.254 (the cloud metadata service) would let a project member read the platform's own network. A
check on the name alone is not enough (DNS can say anything), and a check followed by a second lookup at
connect time can be raced (DNS rebinding), so callers that can pin the connection use `pinned_address`,
and every redirect is checked again before it is followed.

SOURCES_ALLOWED_NETWORKS lists the exceptions: CIDRs or host names. Nothing else is configurable: the
refused ranges are the ones no public site lives in.
"""
from __future__ import annotations

import ipaddress
import re
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

from config.errors import BadInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_HOST_NAME = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9_-]{1,63}(?<!-))*\.?$")

# Not covered by is_private/is_loopback/...: carrier-grade NAT and a few cloud metadata addresses.
_EXTRA_BLOCKED = [ipaddress.ip_network(n) for n in ("100.64.0.0/10", "fd00:ec2::254/128", "192.0.0.0/24")]


class UnsafeAddress(BadInput):
    """The URL's host is, or resolves to, an address a source may not fetch from."""

    code = "unsafe_address"


class SlowLookup(BadInput):
    """The host name did not resolve within the time its caller had left (a fetch's total deadline)."""

    code = "slow_lookup"


Lookup = Callable[..., list[Any]]  # socket.getaddrinfo's shape
# Lookups given a time limit run here, so the caller can stop waiting: getaddrinfo blocks in C, with the system
# resolver's own timeouts and retries (tens of seconds), and cannot be interrupted. A lookup past its limit keeps
# its thread until the resolver gives up; the pool's size bounds how many such threads there are (more lookups
# wait in its queue, and time out there).
LOOKUP_THREADS = 8
_lookups: ThreadPoolExecutor | None = None
_lookups_lock = threading.Lock()


def _lookup_pool() -> ThreadPoolExecutor:
    global _lookups  # one pool per process, made on the first bounded lookup
    with _lookups_lock:
        if _lookups is None:
            _lookups = ThreadPoolExecutor(max_workers=LOOKUP_THREADS, thread_name_prefix="dns")
        return _lookups


def system_lookup(*args: Any, **kwargs: Any) -> list[Any]:
    """The system resolver, looked up at each call (not bound when this module loads), so a resolver installed on
    `socket` later (a test's stand-in for DNS that answers differently on the second lookup) is the one asked."""
    return socket.getaddrinfo(*args, **kwargs)


def _getaddrinfo(host: str, port: int, *, timeout_s: float | None, lookup: Lookup, field: str) -> list[Any]:
    """lookup(host, port, proto=TCP), waited for at most `timeout_s` (None: as long as it takes)."""
    if timeout_s is None:
        return lookup(host, port, proto=socket.IPPROTO_TCP)
    if timeout_s <= 0:
        raise SlowLookup(f"No time was left to look up {host!r}.", field=field)
    future = _lookup_pool().submit(lookup, host, port, proto=socket.IPPROTO_TCP)
    try:
        return future.result(timeout=timeout_s)
    except FutureTimeout:
        future.cancel()  # still queued: never runs
        raise SlowLookup(f"Looking up {host!r} took longer than the {timeout_s:.3g} s left.", field=field) from None


def _allowed_networks() -> tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], set[str]]:
    nets, hosts = [], set()
    for item in settings.SOURCES_ALLOWED_NETWORKS:
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            hosts.add(item.lower().rstrip("."))
    return nets, hosts


def is_blocked_ip(ip: IPAddress) -> bool:
    """Loopback, private, link-local (metadata), multicast, reserved, unspecified, CGNAT; IPv4-mapped IPv6 too."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast or ip.is_reserved
            or ip.is_unspecified or any(ip in n for n in _EXTRA_BLOCKED if n.version == ip.version))


def _ip_allowed(ip: IPAddress, nets: list) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == n.version and ip in n for n in nets)


def resolve(host: str, port: int | None = None, *, field: str = "url", timeout_s: float | None = None,
            lookup: Lookup = system_lookup) -> list[IPAddress]:
    """Every address the host resolves to (an IP literal resolves to itself).

    `timeout_s`: the lookup ends (SlowLookup) once this much time has passed, so a slow resolver cannot hold a
    fetch past its total deadline. `lookup`: the resolver (getaddrinfo's signature).

    A name must be a host name (letters, digits, '-', '_' and dots, no label starting with '-'): a tool
    that takes a host as an argument (ssh) would read `-oProxyCommand=...` as an option."""
    host = host.strip("[]")
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        ascii_name = host.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_name = ""
    if not _HOST_NAME.match(ascii_name):
        raise BadInput(f"{host[:100]!r} is not a host name.", code="invalid_host", field=field)
    try:
        infos = _getaddrinfo(host, port or 443, timeout_s=timeout_s, lookup=lookup, field=field)
    except (socket.gaierror, UnicodeError) as exc:
        raise BadInput(f"Cannot resolve host {host!r}: {exc}", code="unresolvable_host", field=field) from None
    seen: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%")[0])
        if ip not in seen:
            seen.append(ip)
    return seen


def check_host(host: str, *, port: int | None = None, field: str = "url", timeout_s: float | None = None,
               lookup: Lookup = system_lookup) -> list[IPAddress]:
    """The host's addresses if every one of them may be fetched from; else UnsafeAddress (400).

    Every address must pass, not just the first: a name with one public and one private address would let
    the connection pick the private one."""
    if not host:
        raise BadInput("The URL has no host.", field=field)
    nets, hosts = _allowed_networks()
    name = host.lower().strip("[]").rstrip(".")
    if name in hosts:
        return resolve(name, port, field=field, timeout_s=timeout_s, lookup=lookup)
    addresses = resolve(name, port, field=field, timeout_s=timeout_s, lookup=lookup)
    if not addresses:
        raise BadInput(f"Host {host!r} has no address.", code="unresolvable_host", field=field)
    for ip in addresses:
        if is_blocked_ip(ip) and not _ip_allowed(ip, nets):
            raise UnsafeAddress(
                f"{host} resolves to {ip}, a loopback, private, link-local or metadata address; sources may not "
                "fetch from it (an operator can allow it with SOURCES_ALLOWED_NETWORKS).", field=field)
    return addresses


def split_url(url: str, *, field: str = "url") -> SplitResult:
    """urlsplit, with what it refuses as a 400: a bracketed host that is no IPv6 address (`http://[evil]/`,
    `ssh://[-oProxyCommand=x]/repo`) makes it raise ValueError, which must not become a 500."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parses the port: a bad one raises here, not later
    except ValueError:
        raise BadInput(f"{field} is not a valid URL (bad host in brackets, or bad port).", field=field) from None
    return parts


def check_url(url: str, *, field: str = "url", timeout_s: float | None = None,
              lookup: Lookup = system_lookup) -> list[IPAddress]:
    """check_host for a URL's host (http, https, ssh, git); the default port of the scheme is used."""
    parts = split_url(url, field=field)
    port = parts.port
    default = {"http": 80, "https": 443, "ssh": 22, "git": 9418}.get(parts.scheme, None)
    return check_host(parts.hostname or "", port=port or default, field=field, timeout_s=timeout_s, lookup=lookup)


def pinned_address(url: str, *, field: str = "url", timeout_s: float | None = None,
                   lookup: Lookup = system_lookup) -> str:
    """The checked address to connect to for this URL (the first of check_url's): connecting to it, with the
    original host in the Host header and TLS SNI, closes the gap between the check and the connection."""
    return str(check_url(url, field=field, timeout_s=timeout_s, lookup=lookup)[0])
