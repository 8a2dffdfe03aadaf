"""What a dataset source may say, checked whole before anything is stored.

Why one module for both API and pages: the same source must be accepted or refused the same way from the
API, the dataset page and the admin, with the same `field` in the error (e.g. "source.seeds[2]"). Network
addresses are checked here (search.sources.netguard) so a bad URL is refused when it is set, not at 3 a.m.
by the scheduler; the sync checks again, since DNS changes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlunsplit

from django.conf import settings

from config.errors import BadInput, Forbidden
from config.text import bad_text_reason
from config.user_patterns import MAX_PATTERN_CHARS, compile_user_pattern
from search.sources import netguard

if TYPE_CHECKING:
    from accounts.models import User

TYPES = ("git", "web")
SCOPES = ("same-host", "prefix")
DEFAULT_MAX_PAGES = 200
DEFAULT_MAX_DEPTH = 5
MAX_DEPTH = 20
MAX_SEEDS = 20
MAX_PATTERNS = 50
MAX_INTERVAL_S = 30 * 24 * 3600
KINDS_FOR = {"git": ("code", "web"), "web": ("web",)}
_REF = re.compile(r"^(?!.*\.\.)(?!/)[\w./@+-]{1,200}(?<!/)$")
_SSH_USER = re.compile(r"^[A-Za-z0-9_][\w.-]{0,63}$")
_SCP = re.compile(r"^(?P<user>[\w.-]+)@(?P<host>[\w.-]+):(?P<path>(?!//).+)$")  # git@host:org/repo.git


@dataclass(frozen=True)
class SourceSpec:
    """A checked source: its type, the normalised config stored on the row, and whether it reads local disk."""

    type: str
    config: dict[str, Any]
    local: bool = False


def _str(value: Any, field: str, *, max_len: int = 2000, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BadInput(f"{field} must be a string.", field=field)
    value = value.strip()
    if required and not value:
        raise BadInput(f"{field} is required.", field=field)
    if len(value) > max_len or bad_text_reason(value):
        raise BadInput(f"{field} must be at most {max_len} characters of valid text (no NUL, no lone "
                       "surrogate).", field=field)
    return value


def _int(value: Any, field: str, *, lo: int, hi: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{field} must be an integer.", field=field)
    if not lo <= value <= hi:
        raise BadInput(f"{field} must be between {lo} and {hi}.", field=field)
    return value


def git_url(url: str, *, field: str = "source.url") -> tuple[str, bool]:
    """(normalised URL, is_local). scp-like `git@host:org/repo.git` becomes ssh://; a plain path becomes file://.
    Credentials in the URL are refused: they would be stored and shown in clear; the token field is for them."""
    m = _SCP.match(url)
    if m and "://" not in url:
        url = f"ssh://{m['user']}@{m['host']}/{m['path']}"
    if url.startswith("/"):
        url = Path(url).as_uri()
    parts = netguard.split_url(url, field=field)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise BadInput("A file:// URL names a path on this server: file:///path/to/repo.", field=field)
        return urlunsplit(("file", "", parts.path, "", "")), True
    if parts.scheme not in ("https", "http", "ssh"):
        raise BadInput("A git source URL is https://, http://, ssh://, git@host:path, file:// or an absolute path.",
                       field=field)
    if parts.password is not None or (parts.username and parts.scheme in ("http", "https")):
        raise BadInput("Do not put credentials in the URL; send them as `token` (stored encrypted).", field=field)
    if not parts.hostname or not parts.path.strip("/"):
        raise BadInput("The git URL needs a host and a repository path.", field=field)
    if parts.username is not None and not _SSH_USER.match(unquote(parts.username)):
        # ssh would read `-oProxyCommand=...` as an option: a command run on this server
        raise BadInput("The user in an ssh URL is letters, digits, '.', '_' and '-', and does not start with '-'.",
                       field=field)
    netguard.check_url(url, field=field)
    return url, False


def _git(raw: dict[str, Any]) -> SourceSpec:
    url, local = git_url(_str(raw.get("url"), "source.url"))
    ref = _str(raw.get("ref"), "source.ref", max_len=200, required=False)
    if ref and not _REF.match(ref):
        raise BadInput("source.ref must be a branch, tag or commit name (letters, digits, . / _ - @ +).",
                       field="source.ref")
    subdir = _str(raw.get("subdir"), "source.subdir", max_len=500, required=False).strip("/")
    if subdir and (".." in Path(subdir).parts or subdir.startswith("~")):
        raise BadInput("source.subdir must be a path inside the repository.", field="source.subdir")
    return SourceSpec(type="git", config={"url": url, "ref": ref, "subdir": subdir}, local=local)


def _patterns(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        raise BadInput(f"{field} must be a list of at most {MAX_PATTERNS} regular expressions.", field=field)
    out = []
    for i, item in enumerate(value):
        pattern = _str(item, f"{field}[{i}]", max_len=MAX_PATTERN_CHARS)
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


def _web(raw: dict[str, Any]) -> SourceSpec:
    seeds = raw.get("seeds")
    if isinstance(seeds, str):
        seeds = [seeds]
    if not isinstance(seeds, list) or not 1 <= len(seeds) <= MAX_SEEDS:
        raise BadInput(f"source.seeds must be a list of 1 to {MAX_SEEDS} URLs.", field="source.seeds")
    clean = [web_url(_str(s, f"source.seeds[{i}]"), field=f"source.seeds[{i}]") for i, s in enumerate(seeds)]
    scope = raw.get("scope") or "same-host"
    if scope not in SCOPES:
        raise BadInput(f"source.scope must be one of {', '.join(SCOPES)}.", field="source.scope")
    config = {
        "seeds": clean, "scope": scope,
        "max_pages": _int(raw.get("max_pages"), "source.max_pages", lo=1, hi=settings.SOURCES_MAX_PAGES,
                          default=min(DEFAULT_MAX_PAGES, settings.SOURCES_MAX_PAGES)),
        "max_depth": _int(raw.get("max_depth"), "source.max_depth", lo=0, hi=MAX_DEPTH, default=DEFAULT_MAX_DEPTH),
        "include": _patterns(raw.get("include"), "source.include"),
        "exclude": _patterns(raw.get("exclude"), "source.exclude"),
    }
    return SourceSpec(type="web", config=config)


def parse_source(raw: Any, *, user: User | None, dataset_kind: str) -> SourceSpec:
    """Check a source as sent (API body's `source`, the page's form) for a dataset of `dataset_kind`.

    Local git paths read the server's disk, so only staff may use them (or SOURCES_ALLOW_LOCAL_PATHS)."""
    if not isinstance(raw, dict):
        raise BadInput("source must be an object with a type.", field="source")
    kind = raw.get("type")
    if kind not in TYPES:
        raise BadInput(f"source.type must be one of {', '.join(TYPES)}.", field="source.type")
    unknown = set(raw) - {"type", "url", "ref", "subdir", "seeds", "scope", "max_pages", "max_depth", "include",
                          "exclude"}
    if unknown:
        name = sorted(unknown)[0]
        raise BadInput(f"source.{name} is not a field of a {kind} source.", field=f"source.{name}")
    if dataset_kind not in KINDS_FOR[kind]:
        raise BadInput(f"A {kind} source feeds a {' or '.join(KINDS_FOR[kind])} dataset, not a {dataset_kind} one.",
                       field="source.type")
    spec = _git(raw) if kind == "git" else _web(raw)
    if spec.local and not (settings.SOURCES_ALLOW_LOCAL_PATHS or getattr(user, "is_staff", False)):
        raise Forbidden("Only staff may use a path on this server as a source; use an https or ssh URL.",
                        field="source.url")
    return spec


def parse_interval(value: Any) -> int | None:
    """None (manual syncs only) or seconds between syncs, at least SOURCES_MIN_INTERVAL_S."""
    if value is None:
        return None
    return _int(value, "interval_s", lo=settings.SOURCES_MIN_INTERVAL_S, hi=MAX_INTERVAL_S, default=0)


def parse_token(value: Any) -> str | None:
    """None: keep the stored token; "": clear it; else the new token."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 4096 or any(c in value for c in "\r\n") or bad_text_reason(value):
        raise BadInput("token must be a single-line string of at most 4096 characters.", field="token")
    return value.strip()


def display_url(spec_type: str, config: dict[str, Any]) -> str:
    """What a job's `source` and the pages show: the git URL or the first seed (never a credential)."""
    return config["url"] if spec_type == "git" else config["seeds"][0]
