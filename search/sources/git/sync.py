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

Every cost is bounded whatever the repository holds (docs/security.md, "Hostile git repositories"): the fetch
counts pack bytes as they arrive, keeps a deadline and refuses an object declaring more than allowed before
dulwich inflates it; the tree walk counts entries and depth as it goes and refuses past its limits (a truncated
tree would be recorded as synced, and later diffs would never bring what was cut); a blob is judged by the size
its header declares before its content is read; the previous commit is looked for within a bounded number of
ancestors; and documents are written past the project's quotas by nobody (search.ingest.writer). What a sync
leaves out is listed in its job's result by path and reason.
"""
from __future__ import annotations

import base64
import hashlib
import logging
import re
import shutil
import socket
import stat
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import SpooledTemporaryFile
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import certifi
from django.conf import settings
from dulwich.client import HttpGitClient, HTTPUnauthorized, LocalGitClient, SSHGitClient, SubprocessSSHVendor
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.objects import Commit, Tag
from dulwich.repo import Repo
from urllib3 import PoolManager, Retry, Timeout
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util import connection as urllib3_connection

from config.errors import ApiError, BadInput
from search.ingest.code import MAX_FILE_BYTES, SKIP_DIRS, gitignore_spec_from, skip_dir, wanted_file
from search.ingest.formats import registry
from search.ingest.reader_pool import ToRead, read_files, reader_processes
from search.ingest.web import is_web_file, refused_report, skip_web_dir
from search.ingest.writer import Skip, delete_documents, sync_documents
from search.models import Document, IngestJob
from search.sources import netguard
from search.sources.git import commit_memory
from search.sources.git.objects import PackScanner, bounded_writer, declared_size, read_blob
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


class FetchTimeout(ApiError):
    status_code = 504
    code = "git_fetch_timeout"


class TreeTooLarge(ApiError):
    """The synced tree passes a walking limit; the job fails and the dataset stays as the last sync left it."""

    status_code = 413
    code = "git_tree_too_large"

# a tree object declaring more bytes than this per entry still allowed is refused before it is read: a tree entry
# is its mode, name and id (about 30 bytes plus the name)
TREE_BYTES_PER_ENTRY = 300
COMMIT_MAX_BYTES = 1024 * 1024  # a larger commit ends the search for the previous synced commit


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

    Only objects the mirror lacks are transferred; an unchanged ref transfers nothing. The whole fetch has
    SOURCES_GIT_FETCH_TIMEOUT_S (checked at the refs and at every piece of pack data or progress that arrives;
    each read also times out after SOURCES_REQUEST_TIMEOUT_S), and receives at most SOURCES_GIT_MAX_FETCH_BYTES."""
    client, path = _client(url, token)
    store = mirror.object_store
    picked: dict[str, Any] = {}
    limit_s = settings.SOURCES_GIT_FETCH_TIMEOUT_S
    ends = time.monotonic() + limit_s

    def deadline() -> None:
        if time.monotonic() > ends:
            raise FetchTimeout(f"The fetch took longer than {limit_s:g} s (SOURCES_GIT_FETCH_TIMEOUT_S); nothing of it "
                               "was stored.")

    def wants(refs: dict[bytes, bytes | None], depth: int | None = None) -> list[bytes]:
        deadline()
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

    result = _bounded_fetch(client=client, path=path, mirror=mirror, wants=wants, deadline=deadline)
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


def _bounded_fetch(*, client: GitClient, path: str, mirror: Repo, wants: Callable[..., list[bytes]],
                   deadline: Callable[[], None]) -> Any:
    """dulwich's fetch (GitClient.fetch), with the pack data counted, its objects' declared sizes checked and
    the deadline kept as the bytes arrive; only a pack that passed all of it is indexed into the mirror (which
    inflates each object). The pack spools to the mirror's folder past 16 MiB."""
    with SpooledTemporaryFile(max_size=16 * 1024 * 1024, prefix="incoming-",
                              dir=getattr(mirror.object_store, "path", None)) as incoming:
        pack_data = bounded_writer(write=incoming.write, deadline=deadline,
                                   scanner=PackScanner(max_object=settings.SOURCES_GIT_MAX_OBJECT_BYTES),
                                   max_bytes=settings.SOURCES_GIT_MAX_FETCH_BYTES)
        result = client.fetch_pack(path, wants, mirror.get_graph_walker(), pack_data,
                                   progress=lambda _message: deadline())
        if incoming.tell():
            incoming.seek(0)
            mirror.object_store.add_thin_pack(incoming.read, None)
    return result


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
    (code), the language or page suffix or a document format's (PDF, DOCX, EPUB); symlinks and submodules are not
    files. The size cap, the format and binary or minified content are judged when a blob is read, as the walker's
    reader does.

    The walk counts every entry it reads and the depth it is at, and stops with TreeTooLarge past
    SOURCES_GIT_MAX_TREE_ENTRIES or SOURCES_GIT_MAX_DEPTH (trees may all name one subtree, so a few hundred
    bytes can list a million files), and past SOURCES_GIT_MAX_FILES ingestible files; a tree object is refused
    by its declared size before it is read when it could not fit in the entries left."""
    if tree_id is None:
        return {}
    files, dirs = _walk(store, tree_id)
    documents = registry.document_suffixes()  # PDF, DOCX, EPUB...: candidates by name, read by their bytes
    if kind == "code":
        spec = gitignore_spec_from((rel, data.decode("utf-8", errors="replace"))
                                   for rel, data in _gitignores(store, files))

        def pruned_dir(name: str, rel: str) -> bool:
            return skip_dir(name, rel, spec)

        def wanted(rel: str) -> bool:
            return wanted_file(rel, spec, also=documents)
    else:
        def pruned_dir(name: str, rel: str) -> bool:
            return skip_web_dir(name)

        def wanted(rel: str) -> bool:
            return is_web_file(rel.rsplit("/", 1)[-1], also=documents)

    pruned: set[str] = set()
    for rel in dirs:  # parents come before their children
        parent, _, name = rel.rpartition("/")
        if (parent and parent in pruned) or pruned_dir(name, rel):
            pruned.add(rel)
    taken = {rel: sha for rel, sha in files if rel.rpartition("/")[0] not in pruned and wanted(rel)}
    if len(taken) > settings.SOURCES_GIT_MAX_FILES:
        raise TreeTooLarge(f"The repository's tree has {len(taken):,} files to ingest, more than "
                           f"{settings.SOURCES_GIT_MAX_FILES:,} (SOURCES_GIT_MAX_FILES); the sync wrote nothing. "
                           "Point the source at a smaller folder (subdir).", code="git_too_many_files")
    return taken


def _walk(store: Any, tree_id: bytes) -> tuple[list[tuple[str, bytes]], list[str]]:
    """(regular files with their blob ids, folders outside SKIP_DIRS, parents before children), counting every
    entry read and the depth, within SOURCES_GIT_MAX_TREE_ENTRIES and SOURCES_GIT_MAX_DEPTH (else TreeTooLarge)."""
    max_entries, max_depth = settings.SOURCES_GIT_MAX_TREE_ENTRIES, settings.SOURCES_GIT_MAX_DEPTH
    files: list[tuple[str, bytes]] = []
    dirs: list[str] = []
    walked = 0
    stack: list[tuple[bytes, str, int]] = [(tree_id, "", 0)]

    def too_large(why: str) -> TreeTooLarge:
        return TreeTooLarge(f"The repository's tree {why}; the sync stopped after walking {walked:,} entries and "
                            "wrote nothing. Point the source at a smaller folder (subdir).")

    while stack:  # depth-first, pre-order: parents before their children, as the pruning below needs
        tid, prefix, depth = stack.pop()
        if depth > max_depth:
            raise too_large(f"is deeper than {max_depth} folders (SOURCES_GIT_MAX_DEPTH)")
        size = declared_size(store, tid)
        if size is not None and size > TREE_BYTES_PER_ENTRY * max(max_entries - walked, 1):
            raise too_large(f"has more than {max_entries:,} entries (SOURCES_GIT_MAX_TREE_ENTRIES)")
        children: list[tuple[bytes, str, int]] = []
        for entry in store[tid].iteritems():
            walked += 1
            if walked > max_entries:
                raise too_large(f"has more than {max_entries:,} entries (SOURCES_GIT_MAX_TREE_ENTRIES)")
            try:
                name = entry.path.decode()
            except UnicodeDecodeError:  # a name Postgres text cannot hold: the walker's path would not store either
                continue
            rel = prefix + name
            if stat.S_ISDIR(entry.mode):
                if name not in SKIP_DIRS:
                    dirs.append(rel)
                    children.append((entry.sha, rel + "/", depth + 1))
            elif stat.S_ISREG(entry.mode):
                files.append((rel, entry.sha))
        stack.extend(reversed(children))
    dirs.sort(key=lambda rel: rel.count("/"))
    return files, dirs


def _gitignores(store: Any, files: list[tuple[str, bytes]]) -> Iterator[tuple[str, bytes]]:
    """The .gitignore files of the tree that are at most MAX_FILE_BYTES by their declared size (each blob read
    once, however many paths name it)."""
    read: dict[bytes, bytes | None] = {}
    for rel, sha in files:
        if rel.rsplit("/", 1)[-1] != ".gitignore":
            continue
        if sha not in read:
            read[sha] = read_blob(store, sha, limit=MAX_FILE_BYTES)[0]
        if read[sha] is not None:
            yield rel, read[sha]


# --------------------------------------------------------------------------- the sync
@dataclass
class _Plan:
    """What one sync does: the paths to (re)read, to delete, and what to report."""

    mode: str
    write: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    renamed: list[list[str]] = field(default_factory=list)


def diff_plan(store: Any, old_tree: bytes | None, new_tree: bytes, *, kind: str) -> _Plan:
    """Changed, renamed and deleted ingestible files between two trees, from both trees' bounded file lists.

    Comparing the ingestible sets (not the raw trees) also catches an edited .gitignore, which changes which
    unchanged files the walker takes. A rename is a deleted path whose blob a new path holds: its text is
    unchanged, so it embeds nothing (the cache is keyed by text)."""
    old, new = tree_files(store, old_tree, kind=kind), tree_files(store, new_tree, kind=kind)
    write = sorted(p for p, sha in new.items() if old.get(p) != sha)
    delete = sorted(set(old) - set(new))
    gone_by_blob: dict[bytes, list[str]] = {}
    for p in delete:
        gone_by_blob.setdefault(old[p], []).append(p)
    renamed = [[gone_by_blob[new[p]].pop(0), p] for p in write if p not in old and gone_by_blob.get(new[p])]
    return _Plan(mode="diff", write=write, delete=delete, renamed=sorted(renamed))


def descends_from(store: Any, *, new: bytes, old: bytes, limit: int) -> bool:
    """Whether `old` is among the first `limit` ancestors of `new` (breadth-first from `new`): a fast-forward.
    Past the limit, or at a commit the mirror lacks or too large to read, the answer is no and the sync
    compares the whole tree instead, which is always correct; deep history is never walked whole."""
    queue, seen = deque([new]), {new}
    while queue and len(seen) <= limit:
        sha = queue.popleft()
        if sha == old:
            return True
        size = declared_size(store, sha)
        if size is None or size > COMMIT_MAX_BYTES:
            continue
        commit = store[sha]
        for parent in getattr(commit, "parents", []):
            if parent not in seen:
                seen.add(parent)
                queue.append(parent)
    return False


def _repo_name(url: str) -> str:
    name = Path(unquote(urlsplit(url).path).rstrip("/")).name
    return name[:-4] if name.endswith(".git") else name


@dataclass(frozen=True)
class _Checkout:
    """The commit one sync reads: the mirror's object store, the commit's ingestible files (path -> blob id), its
    sha, and the repository name and dataset kind every draft is read with.

    Why one value: these only make sense together (a blob id means something in this store only, and every draft
    read from it is stamped with this commit), and reading any path needs all of them."""

    store: Any
    files: dict[str, bytes]
    commit: str
    repo: str
    kind: str


@dataclass
class _Outcome:
    """What reading the files came to, filled in while sync_documents consumes the drafts: the paths written, the
    paths that yield no document (binary, minified, oversized, nothing readable), which the caller deletes, and
    each left-out path's reason (the job's report)."""

    written: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _drafts(*, checkout: _Checkout, paths: list[str], stored: dict[str, str] | None,
            outcome: _Outcome) -> Iterator[DocumentDraft | Skip]:
    """Drafts for `paths` of `checkout`; with `stored` (full mode) a blob whose sha256 is the stored content hash is
    kept without being parsed. What each path came to is collected in `outcome`. Many files are read in reader
    processes ahead of the writer (search.ingest.reader_pool), in the same order."""
    written, unreadable, skipped = outcome.written, outcome.unreadable, outcome.skipped
    processes = reader_processes() if len(paths) >= settings.INGEST_READER_MIN_FILES else 0
    for read in read_files(items=_blobs(checkout=checkout, paths=paths, stored=stored, outcome=outcome),
                           kind=checkout.kind, repo=checkout.repo, processes=processes):
        if not isinstance(read.item, ToRead):
            yield read.item
            continue
        rel, draft = read.item.name, read.draft
        if draft is None:
            skipped[rel] = read.why or "nothing readable"
            unreadable.append(rel)
            yield Skip(rel)
            continue
        draft.size_bytes = len(read.item.data)
        draft.meta = {**draft.meta, "commit": checkout.commit}
        written.append(rel)
        yield draft


def _blobs(*, checkout: _Checkout, paths: list[str], stored: dict[str, str] | None,
           outcome: _Outcome) -> Iterator[ToRead | Skip]:
    """Each path's blob to read, or its Skip: too large or unreadable (noted in `outcome`), or unchanged (kept).

    A blob's size is read from its header first: one over MAX_FILE_BYTES is skipped without being inflated."""
    for rel in paths:
        data, size = read_blob(checkout.store, checkout.files[rel], limit=registry.max_bytes(rel))
        if data is None:
            outcome.skipped[rel] = f"too large ({size:,} bytes; the limit is {registry.max_bytes(rel):,})" \
                if size is not None else "unreadable"
            outcome.unreadable.append(rel)
            yield Skip(rel)
            continue
        if stored is not None and stored.get(rel) == hashlib.sha256(data).hexdigest():
            yield Skip(rel, keep=True)
            continue
        yield ToRead(rel, data)


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
        _report(job, result | _remember(source=source, store=store, head=new_sha, kind=kind),
                _Plan(mode="unchanged"), files_total=0)
        return state

    repo = job.options.get("repo") or _repo_name(url)
    old_commit = store[old_sha.encode()] if old_sha and _SHA.match(old_sha) and old_sha.encode() in store else None
    if isinstance(old_commit, Commit) and descends_from(store, new=new_sha.encode(), old=old_commit.id,
                                                        limit=settings.SOURCES_GIT_MAX_HISTORY):
        plan = diff_plan(store, _subtree(store, old_commit.tree, subdir), new_tree, kind=kind)
        files = tree_files(store, new_tree, kind=kind)
        stored = None
    else:  # no commit yet, one the mirror does not know, or a force-push: compare the whole tree by content hash
        files = tree_files(store, new_tree, kind=kind)
        plan = _Plan(mode="full", write=sorted(files))
        stored = dict(Document.objects.filter(dataset=job.dataset).values_list("path", "content_hash"))
    IngestJob.objects.filter(pk=job.pk).update(files_total=len(plan.write))
    outcome = _Outcome()
    written, unreadable, skipped = outcome.written, outcome.unreadable, outcome.skipped
    refused: list[str] = []
    checkout = _Checkout(store=store, files=files, commit=new_sha, repo=repo, kind=kind)
    drafts = _drafts(checkout=checkout, paths=plan.write, stored=stored, outcome=outcome)
    if plan.mode == "full":
        sync_documents(dataset=job.dataset, drafts=drafts, job=job, delete_missing=True, progress=progress,
                       refused=refused)
        plan.delete = sorted(set(stored or {}) - set(files) | (set(unreadable) & set(stored or {})))
    else:
        sync_documents(dataset=job.dataset, drafts=drafts, job=job, delete_missing=False, progress=progress,
                       refused=refused)
        gone = set(Document.objects.filter(dataset=job.dataset, path__in=unreadable).values_list("path", flat=True))
        plan.delete = sorted(set(plan.delete) | gone)  # a changed file that is now binary, minified or too big
        delete_documents(dataset=job.dataset, paths=plan.delete)
        IngestJob.objects.filter(pk=job.pk).update(files_deleted=len(plan.delete))
    skipped.update(dict.fromkeys(refused, "refused by the project's quota"))
    not_written = set(refused)
    plan.write = [p for p in written if p not in not_written]
    if refused:  # the dataset is not the new tree yet: the next sync diffs from the same commit and retries them
        state = {"commit": old_sha, "ref": ref_name}
    else:
        result |= _remember(source=source, store=store, head=new_sha, kind=kind)
    _report(job, result | {"mode": plan.mode} | _skipped_report(skipped), plan, files_total=None)
    log.info("git sync of source %s: %s %s..%s, %d written, %d deleted", source.pk, plan.mode, old_sha[:12] or "-",
             new_sha[:12], len(written), len(plan.delete))
    return state


def _remember(*, source: Source, store: Any, head: str, kind: str) -> dict[str, Any]:
    """A code dataset's commit memory brought to `head` (search.sources.git.commit_memory), as the result's
    "history". The tree is synced either way: a memory that cannot be read or embedded now is said, not raised,
    and the next sync tries again."""
    if kind != "code":
        return {}
    try:
        return {"history": commit_memory.refresh(source=source, store=store, head=head)}
    except ApiError as exc:  # the encoder is down or misconfigured (DependencyDown): the sync itself succeeded
        log.warning("commit memory of source %s not refreshed: %s", source.pk, exc.detail)
        return {"history": {"error": str(exc.detail)}}


def _skipped_report(skipped: dict[str, str]) -> dict[str, Any]:
    """The files a sync left out, by path and reason (capped at RESULT_CAP), and their counts by kind of reason:
    the report every ingest makes (search.ingest.web.refused_report)."""
    return refused_report(skipped, cap=RESULT_CAP)


def _report(job: IngestJob, result: dict[str, Any], plan: _Plan, *, files_total: int | None) -> None:
    """job.result: the mode, the commits, and the paths (capped at RESULT_CAP per list, with totals)."""
    result = {**result, "changed": plan.write[:RESULT_CAP], "deleted": plan.delete[:RESULT_CAP],
              "renamed": plan.renamed[:RESULT_CAP], "changed_total": len(plan.write),
              "deleted_total": len(plan.delete), "renamed_total": len(plan.renamed)}
    updates: dict[str, Any] = {"result": result}
    if files_total is not None:
        updates["files_total"] = files_total
    IngestJob.objects.filter(pk=job.pk).update(**updates)
