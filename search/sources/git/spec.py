"""What a git source may say: a URL this server may fetch (https, http, ssh, or a local path for staff), a ref
and a subfolder. Addresses are checked when the source is set (search.sources.netguard) and again at sync."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlunsplit

from config.errors import BadInput
from search.sources import netguard
from search.sources.base import SourceSpec, text

_REF = re.compile(r"^(?!.*\.\.)(?!/)[\w./@+-]{1,200}(?<!/)$")
_SSH_USER = re.compile(r"^[A-Za-z0-9_][\w.-]{0,63}$")
_SCP = re.compile(r"^(?P<user>[\w.-]+)@(?P<host>[\w.-]+):(?P<path>(?!//).+)$")  # git@host:org/repo.git


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


def parse(raw: dict[str, Any]) -> SourceSpec:
    url, local = git_url(text(raw.get("url"), "source.url"))
    ref = text(raw.get("ref"), "source.ref", max_len=200, required=False)
    if ref and not _REF.match(ref):
        raise BadInput("source.ref must be a branch, tag or commit name (letters, digits, . / _ - @ +).",
                       field="source.ref")
    subdir = text(raw.get("subdir"), "source.subdir", max_len=500, required=False).strip("/")
    if subdir and (".." in Path(subdir).parts or subdir.startswith("~")):
        raise BadInput("source.subdir must be a path inside the repository.", field="source.subdir")
    return SourceSpec(type="git", config={"url": url, "ref": ref, "subdir": subdir}, local=local)
