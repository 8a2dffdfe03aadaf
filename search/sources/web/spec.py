"""What a web source may say: seed URLs this server may fetch, a scope, page and depth limits, and include and
exclude patterns (RE2, checked when set so a bad one never reaches the crawler)."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlunsplit

from django.conf import settings

from config.errors import BadInput
from config.user_patterns import MAX_PATTERN_CHARS, compile_user_pattern
from search.sources import netguard
from search.sources.base import SourceSpec, integer, text

SCOPES = ("same-host", "prefix")
DEFAULT_MAX_PAGES = 200
DEFAULT_MAX_DEPTH = 5
MAX_DEPTH = 20
MAX_SEEDS = 20
MAX_PATTERNS = 50


def _patterns(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        raise BadInput(f"{field} must be a list of at most {MAX_PATTERNS} regular expressions.", field=field)
    out = []
    for i, item in enumerate(value):
        pattern = text(item, f"{field}[{i}]", max_len=MAX_PATTERN_CHARS)
        compile_user_pattern(pattern, field=f"{field}[{i}]")  # refused now, not in the worker
        out.append(pattern)
    return out


def web_url(url: str, *, field: str) -> str:
    """An absolute http(s) URL whose host may be fetched, without its fragment."""
    parts = netguard.split_url(url, field=field)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{field} must be an absolute http:// or https:// URL.", field=field)
    if parts.username or parts.password:
        raise BadInput(f"{field} must not carry credentials.", field=field)
    netguard.check_url(url, field=field)
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path or "/", parts.query, ""))


def parse(raw: dict[str, Any]) -> SourceSpec:
    seeds = raw.get("seeds")
    if isinstance(seeds, str):
        seeds = [seeds]
    if not isinstance(seeds, list) or not 1 <= len(seeds) <= MAX_SEEDS:
        raise BadInput(f"source.seeds must be a list of 1 to {MAX_SEEDS} URLs.", field="source.seeds")
    clean = [web_url(text(s, f"source.seeds[{i}]"), field=f"source.seeds[{i}]") for i, s in enumerate(seeds)]
    scope = raw.get("scope") or "same-host"
    if scope not in SCOPES:
        raise BadInput(f"source.scope must be one of {', '.join(SCOPES)}.", field="source.scope")
    config = {
        "seeds": clean, "scope": scope,
        "max_pages": integer(raw.get("max_pages"), "source.max_pages", lo=1, hi=settings.SOURCES_MAX_PAGES,
                          default=min(DEFAULT_MAX_PAGES, settings.SOURCES_MAX_PAGES)),
        "max_depth": integer(raw.get("max_depth"), "source.max_depth", lo=0, hi=MAX_DEPTH, default=DEFAULT_MAX_DEPTH),
        "include": _patterns(raw.get("include"), "source.include"),
        "exclude": _patterns(raw.get("exclude"), "source.exclude"),
    }
    return SourceSpec(type="web", config=config)
