"""URL identity and crawl scope for web sources.

Why one normal form: the same page is linked as `HTTP://Docs.Example:80/a/./b?utm_source=x&b=2&a=1#top` and as
`http://docs.example/a/b?a=1&b=2`; a crawler that keeps both fetches and stores the page twice. Every URL the
crawler meets (seed, sitemap entry, link, redirect target, canonical link) goes through `normalize_url` before it
is compared, queued or stored, so a URL is its identity.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

from config.user_patterns import compile_user_pattern, matches

DEFAULT_PORTS = {"http": 80, "https": 443}
# Query parameters that say who sent the visitor, not what the page is (campaign and click ids).
TRACKING_PARAMS = frozenset({"gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid", "twclid",
                             "igshid", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "ref_src",
                             "oly_anon_id", "oly_enc_id", "vero_id", "wickedid"})
MAX_URL_LENGTH = 1000  # Document.path's length: a longer URL cannot be a page's identity
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


def is_tracking_param(name: str) -> bool:
    name = name.lower()
    return name.startswith("utm_") or name in TRACKING_PARAMS


def _remove_dot_segments(path: str) -> str:
    out: list[str] = []
    segments = path.split("/")[1:] if path.startswith("/") else path.split("/")
    for seg in segments:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    result = "/" + "/".join(out)
    if segments and segments[-1] in (".", "..") and not result.endswith("/"):
        result += "/"
    return result


def normalize_url(url: str, *, base: str | None = None) -> str | None:
    """The URL's normal form, or None when it is not a crawlable http(s) URL.

    Lowercase scheme and host (IDNA for non-ASCII names), no default port, no fragment, no credentials, dot
    segments resolved, unsafe path characters percent-encoded, tracking parameters dropped and the remaining
    query parameters sorted."""
    url = (url or "").strip()
    if not url:
        return None
    try:
        if base:
            url = urljoin(base, url)
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if scheme not in DEFAULT_PORTS or not host or parts.username is not None or parts.password is not None:
        return None
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        return None
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = quote(_remove_dot_segments(parts.path or "/"), safe=_PATH_SAFE)
    params = sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_tracking_param(k))
    out = urlunsplit((scheme, netloc, path, urlencode(params), ""))
    return out if len(out) <= MAX_URL_LENGTH else None


def origin(url: str) -> str:
    """scheme://host[:port] of a normalised URL: the unit of robots.txt, politeness and same-host scope."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class Scope:
    """Which URLs a web source covers.

    `contains`: the crawl's boundary (same-host: same scheme, host and port as a seed; prefix: the URL starts
    with a seed's URL up to its last "/"); nothing outside it is fetched, redirects included.
    `wanted`: the source's include/exclude regexes (searched in the URL), which decide what is fetched and
    indexed inside the boundary."""

    seeds: list[str]
    mode: str = "same-host"
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.seeds = [s for s in (normalize_url(s) for s in self.seeds) if s]
        # an http seed also covers the same host upgraded to https (sites redirect http -> https); never the
        # reverse, and not when the seed names a port (another port is another server)
        upgraded = [f"https://{s[len('http://'):]}" for s in self.seeds
                    if s.startswith("http://") and urlsplit(s).port is None]
        self.origins = {origin(s) for s in self.seeds + upgraded}
        self.prefixes = [s[:s.rfind("/") + 1]
                         for s in (urlunsplit(urlsplit(s)._replace(query="")) for s in self.seeds + upgraded)]
        # user patterns: RE2, linear in the URL (config/user_patterns.py); a stored pattern that RE2 refuses
        # (set before patterns ran in RE2) is a BadInput that fails this sync with its field named
        self._include = [compile_user_pattern(p, field=f"source.include[{i}]") for i, p in enumerate(self.include)]
        self._exclude = [compile_user_pattern(p, field=f"source.exclude[{i}]") for i, p in enumerate(self.exclude)]

    @classmethod
    def from_config(cls, config: dict) -> Scope:
        return cls(seeds=list(config.get("seeds") or []), mode=config.get("scope") or "same-host",
                   include=list(config.get("include") or []), exclude=list(config.get("exclude") or []))

    def contains(self, url: str) -> bool:
        if self.mode == "prefix":
            return any(url.startswith(p) for p in self.prefixes)
        return origin(url) in self.origins

    def wanted(self, url: str) -> bool:
        if self._include and not any(matches(p, url) for p in self._include):
            return False
        return not any(matches(p, url) for p in self._exclude)


def unique(urls: Iterable[str]) -> list[str]:
    """Order-preserving de-duplication."""
    return list(dict.fromkeys(urls))
