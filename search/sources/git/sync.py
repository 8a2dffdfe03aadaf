"""Git sources: fetch, then ingest only what changed between the commit the dataset reflects and the new one.

Why a bare mirror per source (SOURCES_GIT_DIR/<source id>.git): a fetch then transfers only new objects, and
the old commit's tree is at hand to diff against. The mirror is a cache, not state: a worker on another machine
(or after a wipe) re-creates it, finds the old commit unknown, and falls back to the full comparison.

Why dulwich and not the git binary: no subprocess, no git config or credential helper of the server leaks into
a fetch, and the HTTP connections go through our own connection class, which runs the SSRF guard on the address
it is about to connect to (also for every redirect and after DNS), so DNS rebinding cannot slip past a check.

What is ingested is exactly what the folder walker would ingest from a checkout of the same tree (the same
SKIP_DIRS, .gitignore files of the tree, languages, size cap and chunkers: search/ingest/code.py and web.py),
so a synced dataset equals a fresh ingest of that tree. Diff mode reads and chunks only changed blobs; the full
comparison (no stored commit, commit unknown to the mirror, force-push) hashes every blob and re-chunks only
those whose sha256 differs from Document.content_hash. Nothing unchanged is re-embedded either way, and a
renamed file hits the embedding cache (keyed by text hash).

The token (for http(s)) is sent as basic auth (user "x-access-token", which GitHub, GitLab and Gitea accept)
only to the source's own origin; it is scrubbed from every error that leaves this module.
"""
from __future__ import annotations

import base64
import hashlib
import logging
import re
import shutil
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import certifi
from django.conf import settings
from dulwich.client import HttpGitClient, HTTPUnauthorized, LocalGitClient, SSHGitClient, SubprocessSSHVendor
from dulwich.diff_tree import CHANGE_COPY, CHANGE_RENAME, RenameDetector, tree_changes
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.graph import can_fast_forward
from dulwich.objects import Commit, Tag
from dulwich.repo import Repo
from urllib3 import PoolManager, Retry, Timeout
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util import connection as urllib3_connection

from config.errors import ApiError, BadInput
from search.ingest.code import MAX_FILE_BYTES, SKIP_DIRS, code_document, gitignore_spec_from, skip_dir, wanted_file
from search.ingest.web import is_web_file, skip_web_dir, web_document
from search.ingest.writer import Skip, delete_documents, sync_documents
from search.models import Document, IngestJob
from search.sources import netguard
from search.sources.secrets import source_token

if TYPE_CHECKING:
    from dulwich.client import GitClient
    from dulwich.repo import Repo

    from search.ingest.base import DocumentDraft
    from search.ingest.progress import Progress
    from search.ingest.writer import Skip
    from search.models import IngestJob, Source

log = logging.getLogger(__name__)

RESULT_CAP = 200  # paths listed per kind in job.result; the *_total counts say how many there were
TOKEN_USER = "x-access-token"
MIRROR_REF = b"refs/heads/synced"  # the last fetched commit: the "have" a later fetch negotiates from
_SHA = re.compile(r"^[0-9a-f]{40}$")


class GitSyncError(ApiError):
    """The remote could not be read (unreachable host, protocol error); the job fails with this sentence."""

    status_code = 502
    code = "git_fetch_failed"


class RefNotFound(BadInput):
    code = "ref_not_found"


class RepositoryNotFound(BadInput):
    code = "repository_not_found"


class AuthFailed(BadInput):
    code = "git_auth_failed"


# --------------------------------------------------------------------------- connections
class _GuardedConnectionMixin:
    """Checks the address it is about to connect to with netguard, then connects to that very address.

    Every connection urllib3 opens goes through here, including those for redirects, so a redirect (or a DNS
    answer) to a loopback, private or metadata address is refused before a byte is sent. TLS still verifies
    the certificate against the host name (urllib3 uses `self.host` for SNI and hostname checks)."""

    def _new_conn(self) -> socket.socket:
        addresses = netguard.check_host(self._dns_host, port=self.port)  # type: ignore[attr-defined]
        try:
            return urllib3_connection.create_connection(
                (str(addresses[0]), self.port), self.timeout,  # type: ignore[attr-defined]
                source_address=self.source_address, socket_options=self.socket_options)  # type: ignore[attr-defined]
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out.") from exc  # type: ignore[attr-defined]
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc  # type: ignore[arg-type]


class _GuardedHTTPConnection(_GuardedConnectionMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardedConnectionMixin, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


def guarded_pool_manager() -> PoolManager:
    """A urllib3 PoolManager whose every connection (redirects included) passes the SSRF guard; no proxies from
    the environment, the platform's user agent, the configured timeout, system CA certificates."""
    timeout = settings.SOURCES_REQUEST_TIMEOUT_S
    manager = PoolManager(headers={"User-Agent": settings.SOURCES_USER_AGENT},
                          timeout=Timeout(connect=timeout, read=timeout), retries=Retry(total=2, redirect=5),
                          cert_reqs="CERT_REQUIRED", ca_certs=certifi.where())
    manager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}
    return manager


def _client(url: str, token: str) -> tuple[GitClient, str]:
    """(dulwich client, path on the remote) for a normalised source URL (search.sources.spec.git_url)."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return LocalGitClient(), unquote(parts.path)
    if parts.scheme in ("http", "https"):
        netguard.check_url(url)  # a clear refusal up front; the connection class checks again at connect time
        client = HttpGitClient(f"{parts.scheme}://{parts.netloc}/", pool_manager=guarded_pool_manager(),
                               username=TOKEN_USER if token else None, password=token or None,
                               timeout=settings.SOURCES_REQUEST_TIMEOUT_S, quiet=True)
        return client, parts.path
    if parts.scheme == "ssh":
        address = str(netguard.check_url(url)[0])
        # connect to the checked address; HostKeyAlias keeps known_hosts keyed by the name. BatchMode: a missing
        # key fails at once instead of waiting for a password prompt nobody will answer.
        command = (f"ssh -o BatchMode=yes -o ConnectTimeout={max(1, int(settings.SOURCES_REQUEST_TIMEOUT_S))} "
                   f"-o HostKeyAlias={parts.hostname}")
        client = SSHGitClient(address, port=parts.port, username=parts.username or None,
                              vendor=SubprocessSSHVendor(), ssh_command=command, quiet=True)
        return client, parts.path
    raise BadInput(f"Unsupported git URL scheme {parts.scheme!r}.", field="source.url")


# --------------------------------------------------------------------------- mirror and fetch
def mirror_path(source: Source) -> Path:
    return Path(settings.SOURCES_GIT_DIR) / f"{source.pk}.git"


def open_mirror(source: Source) -> Repo:
    """The source's bare mirror, created when missing (or when a half-created one is left)."""
    path = mirror_path(source)
    if (path / "objects" / "pack").is_dir() and (path / "HEAD").is_file():  # Repo() does not check a bare path
        try:
            return Repo(str(path), bare=True)
        except NotGitRepository:
            pass
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return Repo.init_bare(str(path), mkdir=True)


def remove_mirror(source_id: int) -> None:
    """Drop a removed source's mirror (a cache: nothing is lost, and a new source gets a new id)."""
    shutil.rmtree(Path(settings.SOURCES_GIT_DIR) / f"{source_id}.git", ignore_errors=True)


def _pick(refs: dict[bytes, bytes | None], ref: str) -> tuple[bytes, str] | None:
    """(sha, ref name) that `ref` names among the remote's refs: "" is HEAD, else a branch, a tag (peeled) or
    a full ref name; None when it names none of them."""
    if not ref:
        sha = refs.get(b"HEAD")
        return (sha, "HEAD") if sha else None
    for name in (f"refs/heads/{ref}", f"refs/tags/{ref}", ref):
        key = name.encode()
        sha = refs.get(key + b"^{}") or refs.get(key)
        if sha and name.startswith("refs/"):
            return sha, name
    return None


def fetch(*, mirror: Repo, url: str, ref: str, token: str) -> tuple[str, str]:
    """Fetch what `ref` needs into the mirror; -> (commit sha, resolved ref name).

    Only objects the mirror lacks are transferred; an unchanged ref transfers nothing."""
    client, path = _client(url, token)
    store = mirror.object_store
    picked: dict[str, Any] = {}

    def wants(refs: dict[bytes, bytes | None], depth: int | None = None) -> list[bytes]:
        picked["names"] = sorted(n.decode(errors="replace") for n in refs if n.startswith(b"refs/heads/"))
        if _SHA.match(ref):  # a commit: fetch the branches (it is on one of them, usually) and look for it
            picked["sha"], picked["name"] = ref.encode(), ref
            if ref.encode() in store:
                return []
            return sorted({sha for name, sha in refs.items() if sha and name.startswith(b"refs/heads/")
                           and sha not in store})
        found = _pick(refs, ref)
        if found is None:
            return []
        picked["sha"], picked["name"] = found
        return [] if found[0] in store else [found[0]]

    result = client.fetch(path, mirror, determine_wants=wants)
    sha = picked.get("sha")
    if sha is None or sha not in store:
        branches = ", ".join(picked.get("names", [])[:10]) or "none"
        raise RefNotFound(f"The repository has no ref or commit {ref or 'HEAD'!r} (branches: {branches}).",
                          field="source.ref")
    name = picked["name"]
    if name == "HEAD":
        name = (getattr(result, "symrefs", None) or {}).get(b"HEAD", b"HEAD").decode(errors="replace")
    obj = store[sha]
    while isinstance(obj, Tag):
        obj = store[obj.object[1]]
    if not isinstance(obj, Commit):
        raise RefNotFound(f"{ref!r} names a {obj.type_name.decode()}, not a commit.", field="source.ref")
    mirror.refs[MIRROR_REF] = obj.id
    return obj.id.decode(), name


# --------------------------------------------------------------------------- trees
def _subtree(store: Any, tree_id: bytes, subdir: str) -> bytes | None:
    """The tree id at `subdir` in the tree (the tree itself for ""); None when there is no such directory."""
    if not subdir:
        return tree_id
    tree = store[tree_id]
    try:
        mode, sha = tree.lookup_path(store.__getitem__, subdir.encode())
    except KeyError:
        return None
    return sha if stat.S_ISDIR(mode) else None


def tree_files(store: Any, tree_id: bytes | None, *, kind: str) -> dict[str, bytes]:
    """{path: blob sha} of the files the folder walker would ingest from a checkout of this tree.

    Same rules, applied to tree entries: SKIP_DIRS and hidden directories pruned, the tree's .gitignore files
    (code), the language or page suffix; symlinks and submodules are not files. The size cap and binary or
    minified content are judged when a blob is read, as the walker's reader does."""
    if tree_id is None:
        return {}
    files: list[tuple[str, bytes]] = []
    dirs: list[str] = []

    def walk(tid: bytes, prefix: str) -> None:
        for entry in store[tid].iteritems():
            try:
                name = entry.path.decode()
            except UnicodeDecodeError:  # a name Postgres text cannot hold: the walker's path would not store either
                continue
            rel = prefix + name
            if stat.S_ISDIR(entry.mode):
                if name not in SKIP_DIRS:
                    dirs.append(rel)
                    walk(entry.sha, rel + "/")
            elif stat.S_ISREG(entry.mode):
                files.append((rel, entry.sha))

    walk(tree_id, "")
    if kind == "code":
        spec = gitignore_spec_from((rel, store[sha].data.decode("utf-8", errors="replace"))
                                   for rel, sha in files if rel.rsplit("/", 1)[-1] == ".gitignore")

        def pruned_dir(name: str, rel: str) -> bool:
            return skip_dir(name, rel, spec)

        def wanted(rel: str) -> bool:
            return wanted_file(rel, spec)
    else:
        def pruned_dir(name: str, rel: str) -> bool:
            return skip_web_dir(name)

        def wanted(rel: str) -> bool:
            return is_web_file(rel.rsplit("/", 1)[-1])

    pruned: set[str] = set()
    for rel in dirs:  # parents come before their children (depth-first, pre-order)
        parent, _, name = rel.rpartition("/")
        if (parent and parent in pruned) or pruned_dir(name, rel):
            pruned.add(rel)
    return {rel: sha for rel, sha in files
            if rel.rpartition("/")[0] not in pruned and wanted(rel)}


# --------------------------------------------------------------------------- the sync
@dataclass
class _Plan:
    """What one sync does: the paths to (re)read, to delete, and what to report."""

    mode: str
    write: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    renamed: list[list[str]] = field(default_factory=list)


def diff_plan(store: Any, old_tree: bytes | None, new_tree: bytes, *, kind: str) -> _Plan:
    """Changed, renamed and deleted ingestible files between two trees, by dulwich's tree diff with renames.

    The ingestible sets of both trees are also compared, because an edited .gitignore changes which unchanged
    files the walker takes (they appear or vanish without a tree change of their own)."""
    old, new = tree_files(store, old_tree, kind=kind), tree_files(store, new_tree, kind=kind)
    write: set[str] = set()
    renamed: list[list[str]] = []
    for change in tree_changes(store, old_tree, new_tree, rename_detector=RenameDetector(store)):
        old_path = change.old.path.decode(errors="replace") if change.old and change.old.path else None
        new_path = change.new.path.decode(errors="replace") if change.new and change.new.path else None
        if new_path in new:
            write.add(new_path)
            if change.type in (CHANGE_RENAME, CHANGE_COPY) and old_path in old and old_path not in new:
                renamed.append([old_path, new_path])
    write.update(p for p, sha in new.items() if old.get(p) != sha)  # ignore-rule changes; a safety net
    return _Plan(mode="diff", write=sorted(write), delete=sorted(set(old) - set(new)), renamed=sorted(renamed))


def _repo_name(url: str) -> str:
    name = Path(unquote(urlsplit(url).path).rstrip("/")).name
    return name[:-4] if name.endswith(".git") else name


def _read(*, kind: str, rel: str, data: bytes, repo: str) -> DocumentDraft | None:
    if len(data) > MAX_FILE_BYTES:
        return None
    draft, _why = (code_document if kind == "code" else web_document)(rel=rel, data=data, repo=repo)
    if draft is not None:
        draft.size_bytes = len(data)
    return draft


def _drafts(*, store: Any, files: dict[str, bytes], paths: list[str], kind: str, repo: str, commit: str,
            stored: dict[str, str] | None, written: list[str], unreadable: list[str]) -> Iterator[DocumentDraft | Skip]:
    """Drafts for `paths`; with `stored` (full mode) a blob whose sha256 is the stored content hash is kept
    without being parsed. Collects the paths written and those that yield no document (binary, minified,
    oversized, nothing readable), which the caller deletes."""
    for rel in paths:
        data = store[files[rel]].as_raw_string()
        if stored is not None and stored.get(rel) == hashlib.sha256(data).hexdigest():
            yield Skip(rel, keep=True)
            continue
        draft = _read(kind=kind, rel=rel, data=data, repo=repo)
        if draft is None:
            unreadable.append(rel)
            yield Skip(rel)
            continue
        draft.meta = {**draft.meta, "commit": commit}
        written.append(rel)
        yield draft


def sync_git(*, job: IngestJob, source: Source, progress: Progress | None = None) -> dict[str, Any]:
    """Bring the dataset to the source's ref; -> the new Source.state ({"commit": sha, "ref": ...}).

    Failures raise an ApiError whose sentence names what went wrong (unsafe address, unknown ref, missing
    repository, refused credentials, unreachable host), with the token scrubbed out."""
    token = source_token(source) if source.secret else ""
    try:
        return _sync(job=job, source=source, token=token, progress=progress)
    except ApiError as exc:
        exc.detail = scrub(exc.detail, token)
        exc.args = (exc.detail,)
        raise
    except Exception as exc:  # noqa: BLE001 - every failure leaves as a clear sentence without the token
        raise _as_api_error(exc, url=source.config.get("url", ""), token=token) from None


def scrub(text: str, token: str) -> str:
    """The text without the token (plain, URL-quoted, or inside a basic-auth header)."""
    if not token:
        return text

    basic = base64.b64encode(f"{TOKEN_USER}:{token}".encode()).decode()
    for secret in sorted({token, quote(token, safe=""), basic}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _as_api_error(exc: Exception, *, url: str, token: str) -> ApiError:
    where = url
    if isinstance(exc, NotGitRepository):
        return RepositoryNotFound(f"There is no git repository at {where}.", field="source.url")
    if isinstance(exc, HTTPUnauthorized):
        return AuthFailed(f"{where} refused the credentials: set the source's token (one with read access).",
                          field="token")
    if isinstance(exc, (GitProtocolError, HangupException, OSError)):
        return GitSyncError(scrub(f"Cannot fetch from {where}: {exc}", token))
    return GitSyncError(scrub(f"Fetching {where} failed: {type(exc).__name__}: {exc}", token))


def _sync(*, job: IngestJob, source: Source, token: str, progress: Progress | None) -> dict[str, Any]:
    url, ref, subdir = source.config["url"], source.config.get("ref", ""), source.config.get("subdir", "")
    kind = job.dataset.kind
    mirror = open_mirror(source)
    new_sha, ref_name = fetch(mirror=mirror, url=url, ref=ref, token=token)
    store = mirror.object_store
    new_tree = _subtree(store, store[new_sha.encode()].tree, subdir)
    if new_tree is None:
        raise BadInput(f"There is no directory {subdir!r} at {ref or 'HEAD'} ({new_sha[:12]}).",
                       code="subdir_not_found", field="source.subdir")
    old_sha = (source.state or {}).get("commit") or ""
    state = {"commit": new_sha, "ref": ref_name}
    result: dict[str, Any] = {"mode": "unchanged", "from": old_sha or None, "to": new_sha}
    if old_sha == new_sha:
        _report(job, result, _Plan(mode="unchanged"), files_total=0)
        return state

    repo = job.options.get("repo") or _repo_name(url)
    old_commit = store[old_sha.encode()] if old_sha and _SHA.match(old_sha) and old_sha.encode() in store else None
    if isinstance(old_commit, Commit) and can_fast_forward(mirror, old_commit.id, new_sha.encode()):
        plan = diff_plan(store, _subtree(store, old_commit.tree, subdir), new_tree, kind=kind)
        files = tree_files(store, new_tree, kind=kind)
        stored = None
    else:  # no commit yet, one the mirror does not know, or a force-push: compare the whole tree by content hash
        files = tree_files(store, new_tree, kind=kind)
        plan = _Plan(mode="full", write=sorted(files))
        stored = dict(Document.objects.filter(dataset=job.dataset).values_list("path", "content_hash"))
    IngestJob.objects.filter(pk=job.pk).update(files_total=len(plan.write))
    written: list[str] = []
    unreadable: list[str] = []
    drafts = _drafts(store=store, files=files, paths=plan.write, kind=kind, repo=repo, commit=new_sha,
                     stored=stored, written=written, unreadable=unreadable)
    if plan.mode == "full":
        sync_documents(dataset=job.dataset, drafts=drafts, job=job, delete_missing=True, progress=progress)
        plan.delete = sorted(set(stored or {}) - set(files) | (set(unreadable) & set(stored or {})))
    else:
        sync_documents(dataset=job.dataset, drafts=drafts, job=job, delete_missing=False, progress=progress)
        gone = set(Document.objects.filter(dataset=job.dataset, path__in=unreadable).values_list("path", flat=True))
        plan.delete = sorted(set(plan.delete) | gone)  # a changed file that is now binary, minified or too big
        delete_documents(dataset=job.dataset, paths=plan.delete)
        IngestJob.objects.filter(pk=job.pk).update(files_deleted=len(plan.delete))
    plan.write = written
    _report(job, result | {"mode": plan.mode}, plan, files_total=None)
    log.info("git sync of source %s: %s %s..%s, %d written, %d deleted", source.pk, plan.mode, old_sha[:12] or "-",
             new_sha[:12], len(written), len(plan.delete))
    return state


def _report(job: IngestJob, result: dict[str, Any], plan: _Plan, *, files_total: int | None) -> None:
    """job.result: the mode, the commits, and the paths (capped at RESULT_CAP per list, with totals)."""
    result = {**result, "changed": plan.write[:RESULT_CAP], "deleted": plan.delete[:RESULT_CAP],
              "renamed": plan.renamed[:RESULT_CAP], "changed_total": len(plan.write),
              "deleted_total": len(plan.delete), "renamed_total": len(plan.renamed)}
    updates: dict[str, Any] = {"result": result}
    if files_total is not None:
        updates["files_total"] = files_total
    IngestJob.objects.filter(pk=job.pk).update(**updates)
