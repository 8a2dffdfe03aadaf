"""Hostile git repositories: every cost of a sync is bounded whatever the repository holds.

The repositories are built here object by object with dulwich (trees that all name one subtree, folders nested
past any real project, blobs that declare megabytes, long histories) and served as the git-source tests serve
theirs: over file:// or smart HTTP from a server on 127.0.0.1. Each sync runs through the product's entry point
(search.sources.sync.start_sync), as a worker would.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from wsgiref.simple_server import make_server

import pytest
from dulwich.object_store import PackBasedObjectStore
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo
from dulwich.server import DictBackend
from dulwich.web import make_wsgi_chain

from search.models import Document, Source
from search.sources.git import sync as gitsync
from tests.search.ctx_fixtures import edge_index  # noqa: F401
from tests.search.sources.git.test_sync import QuietHandler, attach, dataset, git_settings, sync  # noqa: F401

FILE, FOLDER = 0o100644, 0o040000
PY = b'def handler(event):\n    """Answer one event."""\n    return {"ok": True, "event": event}\n'


class BareRepo:
    """A bare repository whose branch main is set to commits made here from hand-built trees."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.repo = Repo.init_bare(str(path), mkdir=True)
        self.repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
        self.head: bytes | None = None

    def commit(self, objects: list, tree: Tree, *, message: bytes = b"change") -> bytes:
        commit = Commit()
        commit.tree, commit.message = tree.id, message
        commit.author = commit.committer = b"Test <test@example.com>"
        commit.author_time = commit.commit_time = 1_700_000_000 + len(message)
        commit.author_timezone = commit.commit_timezone = 0
        commit.parents = [self.head] if self.head else []
        self.repo.object_store.add_objects([(o, None) for o in [*objects, tree, commit]])
        self.repo.refs[b"refs/heads/main"] = self.head = commit.id
        return commit.id

    @property
    def url(self) -> str:
        return self.path.as_uri()


def tree_of(entries: dict[str, tuple[int, bytes]]) -> Tree:
    tree = Tree()
    for name, (mode, sha) in entries.items():
        tree.add(name.encode(), mode, sha)
    return tree


def tree_bomb(*, fanout: int, levels: int) -> tuple[list, Tree]:
    """Trees whose `fanout` entries all name the same subtree, `levels` deep: fanout**levels files from a few
    hundred bytes."""
    blob = Blob.from_string(b"x = 1\n")
    level = tree_of({f"f{i}.bin": (FILE, blob.id) for i in range(fanout)})
    objects: list = [blob, level]
    for _ in range(levels - 1):
        level = tree_of({f"d{i}": (FOLDER, level.id) for i in range(fanout)})
        objects.append(level)
    return objects, level


def with_main(objects: list, extra: dict[str, tuple[int, bytes]]) -> tuple[list, Tree]:
    main = Blob.from_string(PY)
    return [*objects, main], tree_of({"main.py": (FILE, main.id), **extra})


@pytest.fixture
def bare(tmp_path) -> BareRepo:
    return BareRepo(tmp_path / "hostile.git")


def test_a_tree_bomb_stops_at_the_entry_limit_with_a_clear_reason_and_writes_nothing(dataset, bare, settings):
    settings.SOURCES_GIT_MAX_TREE_ENTRIES = 2_000
    bomb, top = tree_bomb(fanout=60, levels=3)  # 216,000 files named by 181 entries
    objects, root = with_main(bomb, {"bomb": (FOLDER, top.id)})
    bare.commit(objects, root)
    attach(dataset, bare.url)
    job = sync(dataset)
    assert job.status == "failed"
    assert job.error.startswith("git_tree_too_large: ")
    assert "more than 2,000 entries (SOURCES_GIT_MAX_TREE_ENTRIES)" in job.error
    assert "after walking 2,001 entries" in job.error  # the walk stopped at the limit, not after listing all
    assert Document.objects.filter(dataset=dataset).count() == 0
    assert (Source.objects.get(dataset=dataset).state or {}).get("commit") in (None, "")


def test_a_tree_with_more_ingestible_files_than_allowed_is_refused_before_any_is_written(dataset, bare, settings):
    settings.SOURCES_GIT_MAX_FILES = 50
    blob = Blob.from_string(PY)
    leaf = tree_of({f"m{i}.py": (FILE, blob.id) for i in range(10)})
    bare.commit([blob, leaf], tree_of({f"pkg{i}": (FOLDER, leaf.id) for i in range(10)}))  # 100 files
    attach(dataset, bare.url)
    job = sync(dataset)
    assert job.status == "failed"
    assert job.error.startswith("git_too_many_files: ") and "100 files to ingest, more than 50" in job.error
    assert Document.objects.filter(dataset=dataset).count() == 0


def test_a_tree_nested_past_the_depth_limit_is_refused_before_it_is_walked_whole(dataset, bare, settings):
    settings.SOURCES_GIT_MAX_DEPTH = 64
    main = Blob.from_string(PY)
    level = tree_of({"deep.py": (FILE, main.id)})
    objects: list = [main, level]
    for _ in range(200):
        level = tree_of({"a": (FOLDER, level.id)})
        objects.append(level)
    objects, root = with_main(objects, {"nest": (FOLDER, level.id)})
    bare.commit(objects, root)
    attach(dataset, bare.url)
    job = sync(dataset)
    assert job.status == "failed"
    assert job.error.startswith("git_tree_too_large: ") and "deeper than 64 folders" in job.error
    assert Document.objects.filter(dataset=dataset).count() == 0


def test_a_blob_over_the_file_size_is_skipped_by_its_declared_size_without_being_inflated(dataset, bare,
                                                                                           monkeypatch):
    big = Blob.from_string(b"x = 1\n" * 500_000)  # 3,000,000 bytes, a few KB packed
    small = Blob.from_string(PY)
    bare.commit([big, small], tree_of({"big.py": (FILE, big.id), "small.py": (FILE, small.id)}))
    source = attach(dataset, bare.url)
    mirror_dir = str(gitsync.mirror_path(source))
    inflated: list[bytes] = []
    real_get_raw = PackBasedObjectStore.get_raw

    def spy(store, name):  # what the mirror hands out whole: every read of content goes through here
        if str(getattr(store, "path", "")).startswith(mirror_dir):
            inflated.append(bytes(name))
        return real_get_raw(store, name)

    monkeypatch.setattr(PackBasedObjectStore, "get_raw", spy)
    job = sync(dataset)
    assert job.status == "done", job.error
    assert list(Document.objects.filter(dataset=dataset).values_list("path", flat=True)) == ["small.py"]
    assert job.result["skipped"] == [{"path": "big.py", "reason": "too large (3,000,000 bytes; the limit is 1,000,000)"}]
    assert job.result["skipped_by_reason"] == {"too large": 1} and job.result["skipped_total"] == 1
    assert small.id in inflated  # the spy sees the reads of content
    assert big.id not in inflated


def test_a_fetch_holding_an_object_over_the_object_limit_is_refused_and_stores_nothing(dataset, bare, settings):
    settings.SOURCES_GIT_MAX_OBJECT_BYTES = 1024 * 1024
    big = Blob.from_string(b"\0" * (8 * 1024 * 1024))  # 8 MiB of zeros: about 8 KB packed
    objects, root = with_main([big], {"video.bin": (FILE, big.id)})
    bare.commit(objects, root)
    source = attach(dataset, bare.url)
    job = sync(dataset)
    assert job.status == "failed"
    assert job.error.startswith("git_object_too_large: ") and "8,388,608 bytes" in job.error
    assert big.id not in Repo(str(gitsync.mirror_path(source))).object_store
    assert Document.objects.filter(dataset=dataset).count() == 0


def test_a_fetch_past_the_byte_limit_stops_as_the_pack_arrives(dataset, bare, settings):
    settings.SOURCES_GIT_MAX_FETCH_BYTES = 64 * 1024
    noise = Blob.from_string(os.urandom(400_000))  # does not compress: 400 KB of pack
    objects, root = with_main([noise], {"noise.bin": (FILE, noise.id)})
    bare.commit(objects, root)
    source = attach(dataset, bare.url)
    job = sync(dataset)
    assert job.status == "failed"
    assert job.error.startswith("git_fetch_too_large: ") and "65,536 bytes" in job.error
    assert noise.id not in Repo(str(gitsync.mirror_path(source))).object_store


@pytest.fixture
def dripping_remote(bare):
    """The repository over smart HTTP on 127.0.0.1, its pack sent 4 KB at a time, one piece every 0.3 s: each
    read gets bytes long before the socket timeout, so only a deadline on the whole fetch ends it."""
    git_app = make_wsgi_chain(DictBackend({"/repo.git": bare.repo}))

    def app(environ, start_response):
        if not environ["PATH_INFO"].endswith("git-upload-pack"):
            return git_app(environ, start_response)

        def slow_start(status, headers, exc_info=None):  # dulwich writes the pack through start_response's write
            write = start_response(status, headers, exc_info)
            return lambda data: [write(piece) for piece in drip([data])]

        return drip(git_app(environ, slow_start))

    def drip(body):
        for chunk in body:
            for i in range(0, len(chunk), 4096):
                time.sleep(0.3)
                yield chunk[i:i + 4096]

    server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    server.shutdown()
    server.server_close()


def test_a_fetch_that_drips_past_its_deadline_ends_at_the_deadline(dataset, bare, dripping_remote, settings):
    settings.SOURCES_GIT_FETCH_TIMEOUT_S = 2.0
    noise = Blob.from_string(os.urandom(300_000))  # 75 pieces: 22 s at the drip's pace
    objects, root = with_main([noise], {"noise.bin": (FILE, noise.id)})
    bare.commit(objects, root)
    attach(dataset, dripping_remote, ref="main")
    started = time.monotonic()
    job = sync(dataset)
    assert job.status == "failed"
    assert job.error.startswith("git_fetch_timeout: ") and "SOURCES_GIT_FETCH_TIMEOUT_S" in job.error
    assert time.monotonic() - started < 15  # the whole drip takes 22 s; the deadline ends it after about 2
    assert Document.objects.filter(dataset=dataset).count() == 0


def test_a_sync_into_a_project_at_its_quota_stores_up_to_it_and_reports_the_rest_refused(dataset, bare):
    project = dataset.project
    project.quota_documents = 5
    project.save(update_fields=["quota_documents"])
    blobs = [Blob.from_string(PY.replace(b"handler", f"handler_{i}".encode())) for i in range(20)]
    bare.commit(blobs, tree_of({f"mod_{i:02d}.py": (FILE, b.id) for i, b in enumerate(blobs)}))
    attach(dataset, bare.url)
    job = sync(dataset)
    assert job.status == "done", job.error
    assert Document.objects.filter(dataset__project=project).count() == 5
    assert job.result["skipped_by_reason"] == {"refused by the project's quota": 15}
    assert job.result["skipped_total"] == 15 and job.result["changed_total"] == 5
    assert {s["reason"] for s in job.result["skipped"]} == {"refused by the project's quota"}
    # the dataset is not the commit's tree yet, so the source does not record it: raising the quota and
    # syncing again brings the rest
    assert Source.objects.get(dataset=dataset).state["commit"] == ""
    project.quota_documents = 100
    project.save(update_fields=["quota_documents"])
    job = sync(dataset)
    assert job.status == "done", job.error
    assert Document.objects.filter(dataset=dataset).count() == 20
    assert job.result["skipped_total"] == 0 and Source.objects.get(dataset=dataset).state["commit"] == bare.head.decode()


def test_a_previous_commit_beyond_the_history_limit_is_not_searched_for_the_sync_compares_the_tree(dataset, bare,
                                                                                                  settings):
    settings.SOURCES_GIT_MAX_HISTORY = 50
    first = Blob.from_string(PY)
    bare.commit([first], tree_of({"app.py": (FILE, first.id)}), message=b"first")
    attach(dataset, bare.url)
    assert sync(dataset).status == "done"
    same = tree_of({"app.py": (FILE, first.id)})
    for i in range(300):  # a long history on top of the synced commit
        bare.commit([], same, message=f"touch {i}".encode())
    edited = Blob.from_string(PY + b"\n\ndef other():\n    return 2\n")
    bare.commit([edited], tree_of({"app.py": (FILE, edited.id)}), message=b"edit")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["mode"] == "full" and job.result["changed"] == ["app.py"]
    assert Document.objects.get(dataset=dataset, path="app.py").content_hash != ""
