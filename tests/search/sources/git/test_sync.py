"""Git sources against real repositories made here with dulwich, served over file:// and over HTTP on 127.0.0.1.

After every sync the dataset must equal a fresh folder ingest of the same tree (documents and chunks compared
row by row), only what changed is read, a pure rename embeds nothing, and the token never shows.
"""
from __future__ import annotations

import base64
import io
import logging
import shutil
import textwrap
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from dulwich import porcelain
from dulwich.repo import Repo
from dulwich.server import DictBackend
from dulwich.web import make_wsgi_chain

from config.errors import ApiError
from search.models import Chunk, Document, IngestJob
from search.sources.git import sync as gitsync
from search.sources.spec import SourceSpec
from search.sources.sync import set_source, start_sync
from tests.search.ctx_fixtures import edge_index, ingest  # noqa: F401

AUTHOR = b"Test <test@example.com>"

LEDGER = textwrap.dedent('''\
    """Money moves here: a ledger of credit changes."""


    def deduct_credits(wallet, amount):
        """Take credits from a wallet; refuse to go below zero."""
        if amount > wallet.balance:
            raise ValueError("insufficient credits")
        wallet.balance -= amount
        return wallet.balance


    def grant_bonus(wallet, amount=5):
        wallet.balance += amount
    ''')
ROUTES = textwrap.dedent('''\
    // HTTP routes for the shop
    export function listProducts(req, res) {
      res.json(products);
    }
    ''')
README = "# Shop\n\nA small shop.\n\n## Refunds\n\nRefunds take fourteen days.\n"
UTILS = textwrap.dedent('''\
    def slugify(text):
        """Lower-case words joined by dashes."""
        return "-".join(text.lower().split())


    def clamp(value, lo, hi):
        return max(lo, min(hi, value))
    ''')

FIRST_TREE = {
    "billing/ledger.py": LEDGER,
    "web/routes.js": ROUTES,
    "README.md": README,
    "util/text.py": UTILS,
    "old/legacy.py": "def legacy():\n    return 'old'\n",
    ".gitignore": "secret.py\n*.log\n",
    "secret.py": "TOKEN = 'ignored by gitignore'\n",  # ignored: committed anyway, the walker skips it
    "node_modules/lib/x.js": "function vendored() {}\n",
    "logo.png": b"\x89PNG\x00\x00binary",
    "data.bin.py": b"\x00\x01\x02 not text",  # a .py that is binary: read, then skipped
}


def write_tree(work: Path, files: dict[str, str | bytes]) -> None:
    """Make the working tree exactly `files` (the .git directory aside)."""
    for child in work.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    for rel, body in files.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body if isinstance(body, bytes) else body.encode())


class Remote:
    """A working repository and the bare repository it pushes to (the remote a source points at)."""

    def __init__(self, root: Path) -> None:
        self.work, self.bare = root / "work", root / "remote.git"
        self.work.mkdir(parents=True)
        porcelain.init(str(self.work))
        Repo.init_bare(str(self.bare), mkdir=True).refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
        self.files: dict[str, str | bytes] = {}

    def commit(self, files: dict[str, str | bytes], message: str = "change", *, force: bool = False) -> str:
        """Commit the tree `files` on main and push it; -> the commit sha."""
        with Repo(str(self.work)) as repo:
            tracked = {p.decode() for p in repo.open_index()}
        write_tree(self.work, files)
        gone = sorted(tracked - set(files))
        if gone:
            porcelain.remove(str(self.work), paths=[str(self.work / p) for p in gone], cached=True)
        porcelain.add(str(self.work), paths=[str(self.work / p) for p in files])
        sha = porcelain.commit(str(self.work), message=message.encode(), author=AUTHOR, committer=AUTHOR)
        out = io.BytesIO()
        porcelain.push(str(self.work), str(self.bare), "refs/heads/master:refs/heads/main", force=force,
                       outstream=out, errstream=out)
        self.files = dict(files)
        return sha.decode()

    def reset_hard(self, sha: str) -> None:
        porcelain.reset(str(self.work), "hard", sha.encode())

    @property
    def url(self) -> str:
        return self.bare.as_uri()


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def remote(tmp_path) -> Remote:
    return Remote(tmp_path / "remote")


@pytest.fixture
def git_settings(settings, tmp_path):
    settings.SOURCES_GIT_DIR = tmp_path / "mirrors"
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    return settings


@pytest.fixture
def http_remote(remote):
    """The remote served over smart HTTP by dulwich's WSGI app on 127.0.0.1; `seen` records each request, and
    `token` (when set) is required as basic auth, as a private repository would."""
    state: dict = {"token": "", "seen": [], "redirect_to": ""}
    git_app = make_wsgi_chain(DictBackend({"/repo.git": Repo(str(remote.bare))}))
    expected = lambda: "Basic " + base64.b64encode(f"x-access-token:{state['token']}".encode()).decode()  # noqa: E731

    def app(environ, start_response):
        state["seen"].append((environ["PATH_INFO"], environ.get("HTTP_AUTHORIZATION", "")))
        if environ["PATH_INFO"].startswith("/moved.git"):
            start_response("302 Found", [("Location", state["redirect_to"] + environ["PATH_INFO"][10:] + "?"
                                          + environ.get("QUERY_STRING", ""))])
            return [b""]
        if state["token"] and environ.get("HTTP_AUTHORIZATION") != expected():
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"no"]
        return git_app(environ, start_response)

    server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    state["port"] = server.server_address[1]
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def dataset(make_project, edge_index, git_settings):
    from search.models import Dataset

    project = make_project("gitshop")
    return Dataset.objects.create(project=project, name="repo", kind="code")


def attach(dataset, url: str, *, ref: str = "main", subdir: str = "", token: str | None = None):
    spec = SourceSpec(type="git", config={"url": url, "ref": ref, "subdir": subdir}, local=url.startswith("file:"))
    return set_source(user=None, dataset=dataset, spec=spec, interval_s=None, token=token)


def sync(dataset) -> IngestJob:
    """Run a sync here, as the worker would; a failed sync comes back as its failed job row."""
    try:
        return start_sync(dataset=dataset, run_now=True)
    except ApiError:
        return IngestJob.objects.filter(dataset=dataset).latest("created_at")


def rows(dataset) -> tuple[list, list]:
    docs = sorted(Document.objects.filter(dataset=dataset).values_list(
        "path", "repo", "lang", "title", "content_hash", "macro_summary", "url", "size_bytes"))
    chunks = sorted(Chunk.objects.filter(dataset=dataset).values_list(
        "path", "ordinal", "kind", "symbol", "start_line", "end_line", "text", "text_hash", "micro_summary",
        "heading_path", "lang", "repo"))
    return docs, chunks


_fresh = {"n": 0}


def assert_equals_fresh_ingest(dataset, tree_dir: Path) -> None:
    """The synced dataset holds exactly what a fresh folder ingest of the same tree produces (the repo name is
    the URL's last segment, as a sync names it)."""
    from search.models import Source

    repo = Source.objects.get(dataset=dataset).config["url"].rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    _fresh["n"] += 1
    fresh, job = ingest(dataset.project, f"fresh-{_fresh['n']}", tree_dir, repo=repo, kind=dataset.kind)
    assert job.status == "done", job.error
    synced_docs, synced_chunks = rows(dataset)
    fresh_docs, fresh_chunks = rows(fresh)
    assert [d[0] for d in synced_docs] == [d[0] for d in fresh_docs]
    assert synced_docs == fresh_docs
    assert synced_chunks == fresh_chunks
    assert len(fresh_chunks) > 0


def test_first_sync_over_file_url_equals_a_fresh_ingest_and_records_the_commit(dataset, remote):
    sha = remote.commit(FIRST_TREE, "first")
    source = attach(dataset, remote.url)
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["mode"] == "full" and job.result["from"] is None and job.result["to"] == sha
    paths = {"billing/ledger.py", "web/routes.js", "README.md", "util/text.py", "old/legacy.py"}
    assert set(job.result["changed"]) == paths
    assert set(Document.objects.filter(dataset=dataset).values_list("path", flat=True)) == paths
    assert {d.meta["commit"] for d in Document.objects.filter(dataset=dataset)} == {sha}
    source.refresh_from_db()
    assert source.state == {"commit": sha, "ref": "refs/heads/main"}
    assert source.last_error == "" and source.consecutive_failures == 0
    assert (gitsync.mirror_path(source) / "objects").is_dir()
    assert_equals_fresh_ingest(dataset, remote.work)


def test_a_sync_that_reads_in_reader_processes_equals_a_fresh_ingest_read_in_one(dataset, remote, settings):
    settings.INGEST_READER_PROCESSES, settings.INGEST_READER_MIN_FILES = 2, 1  # every sync reads in the pool
    remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    tree = dict(FIRST_TREE)
    tree["billing/ledger.py"] = LEDGER.replace("wallet.balance -= amount", "wallet.balance -= amount  # debit")
    tree["billing/blob.py"] = bytes(range(256)) * 4  # binary under a source name: no reader takes it
    remote.commit(tree, "edit and a binary file")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["changed"] == ["billing/ledger.py"] and "billing/blob.py" in str(job.result["skipped"])
    settings.INGEST_READER_PROCESSES = 0  # the fresh ingest reads in its own process
    assert_equals_fresh_ingest(dataset, remote.work)


def test_a_commit_that_edits_renames_and_deletes_is_applied_as_a_diff(dataset, remote):
    first = remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    tree = dict(FIRST_TREE)
    tree["billing/ledger.py"] = LEDGER.replace("wallet.balance -= amount", "wallet.balance -= amount  # debit")
    tree["util/strings.py"] = tree.pop("util/text.py")  # renamed, unchanged
    del tree["old/legacy.py"]
    tree["docs/guide.md"] = "# Guide\n\nHow to refund.\n"
    second = remote.commit(tree, "edit, rename, delete")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["mode"] == "diff" and job.result["from"] == first and job.result["to"] == second
    assert job.result["changed"] == ["billing/ledger.py", "docs/guide.md", "util/strings.py"]
    assert job.result["deleted"] == ["old/legacy.py", "util/text.py"]
    assert job.result["renamed"] == [["util/text.py", "util/strings.py"]]
    assert job.files_total == 3 and job.files_deleted == 2
    assert Document.objects.get(dataset=dataset, path="billing/ledger.py").meta["commit"] == second
    assert Document.objects.get(dataset=dataset, path="web/routes.js").meta["commit"] == first  # untouched
    assert_equals_fresh_ingest(dataset, remote.work)


def test_a_pure_rename_re_embeds_nothing(dataset, remote):
    remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url)
    assert sync(dataset).embeddings_computed > 0
    tree = dict(FIRST_TREE)
    tree["lib/ledger.py"] = tree.pop("billing/ledger.py")
    remote.commit(tree, "move")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["renamed"] == [["billing/ledger.py", "lib/ledger.py"]]
    assert job.embeddings_computed == 0 and job.embeddings_cached > 0
    assert_equals_fresh_ingest(dataset, remote.work)


def test_a_force_push_falls_back_to_a_full_comparison_that_rewrites_only_what_differs(dataset, remote):
    first = remote.commit(FIRST_TREE, "first")
    tree = dict(FIRST_TREE, **{"extra.py": "def extra():\n    return 1\n"})
    remote.commit(tree, "second")
    attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    remote.reset_hard(first)  # rewrite history: a different second commit, pushed with force
    rewritten = dict(FIRST_TREE, **{"util/text.py": UTILS + "\n\ndef shout(text):\n    return text.upper()\n"})
    forced = remote.commit(rewritten, "rewritten", force=True)
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["mode"] == "full" and job.result["to"] == forced
    assert job.result["changed"] == ["util/text.py"]  # the others match by content hash: not even parsed
    assert job.result["deleted"] == ["extra.py"]
    assert job.files_skipped >= 4
    assert_equals_fresh_ingest(dataset, remote.work)


def test_an_unchanged_re_sync_writes_nothing(dataset, remote):
    sha = remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    before = rows(dataset), list(Chunk.objects.filter(dataset=dataset).values_list("pk", flat=True))
    job = sync(dataset)
    assert job.status == "done"
    history = job.result.pop("history")  # the commit memory, brought to the same commit: nothing new
    assert job.result == {"mode": "unchanged", "from": sha, "to": sha, "changed": [], "deleted": [], "renamed": [],
                          "changed_total": 0, "deleted_total": 0, "renamed_total": 0}
    assert (history["added"], history["rebuilt"]) == (0, False)
    assert job.chunks_written == 0 and job.embeddings_computed == 0 and job.files_total == 0
    assert (rows(dataset), list(Chunk.objects.filter(dataset=dataset).values_list("pk", flat=True))) == before


def test_a_lost_mirror_is_re_created_and_the_diff_still_applies(dataset, remote):
    remote.commit(FIRST_TREE, "first")
    source = attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    shutil.rmtree(gitsync.mirror_path(source))  # e.g. the next sync runs on another worker machine
    remote.commit(dict(FIRST_TREE, **{"README.md": README + "\nMore.\n"}), "readme")
    job = sync(dataset)
    assert job.status == "done", job.error
    # the fetch into the new mirror brings the history, so the old commit is known again
    assert job.result["mode"] == "diff" and job.result["changed"] == ["README.md"]
    assert (gitsync.mirror_path(source) / "objects").is_dir()
    assert_equals_fresh_ingest(dataset, remote.work)


def test_removing_the_source_drops_its_mirror_and_keeps_the_documents(dataset, remote,
                                                                      django_capture_on_commit_callbacks):
    from search.sources.sync import remove_source

    remote.commit(FIRST_TREE, "first")
    source = attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    assert gitsync.mirror_path(source).is_dir()
    with django_capture_on_commit_callbacks(execute=True):
        remove_source(user=None, dataset=dataset)
    assert not gitsync.mirror_path(source).exists()
    assert Document.objects.filter(dataset=dataset).count() == 5


def test_a_commit_unknown_to_the_mirror_is_compared_in_full_without_re_embedding(dataset, remote):
    remote.commit(FIRST_TREE, "first")
    source = attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    remote.commit(dict(FIRST_TREE, **{"README.md": README + "\nMore.\n"}), "readme")
    type(source).objects.filter(pk=source.pk).update(state={"commit": "0" * 40, "ref": "refs/heads/main"})
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["mode"] == "full" and job.result["changed"] == ["README.md"]
    assert job.result["from"] == "0" * 40 and job.result["deleted"] == []
    assert job.embeddings_computed <= 2  # only the README's changed section can be new
    assert_equals_fresh_ingest(dataset, remote.work)


def test_an_edited_gitignore_adds_and_removes_unchanged_files(dataset, remote):
    remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    tree = dict(FIRST_TREE, **{".gitignore": "*.log\nold/\n"})  # secret.py is now in, old/ out
    remote.commit(tree, "ignore rules")
    job = sync(dataset)
    assert job.result["mode"] == "diff"
    assert job.result["changed"] == ["secret.py"] and job.result["deleted"] == ["old/legacy.py"]
    assert_equals_fresh_ingest(dataset, remote.work)


def test_a_file_that_turns_binary_or_oversized_is_removed_by_the_diff(dataset, remote):
    from search.ingest.code import MAX_FILE_BYTES

    remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    tree = dict(FIRST_TREE, **{"util/text.py": b"\x00\x01 now binary", "old/legacy.py": "x = 1\n" * MAX_FILE_BYTES,
                               "data.bin.py": b"\x00 still binary"})
    remote.commit(tree, "binary and huge")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["mode"] == "diff" and job.result["changed"] == []
    assert job.result["deleted"] == ["old/legacy.py", "util/text.py"]  # data.bin.py was never a document
    assert_equals_fresh_ingest(dataset, remote.work)


def test_subdir_paths_are_relative_to_it(dataset, remote):
    remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url, subdir="billing")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert list(Document.objects.filter(dataset=dataset).values_list("path", flat=True)) == ["ledger.py"]
    assert_equals_fresh_ingest(dataset, remote.work / "billing")


def test_a_web_dataset_takes_the_pages_of_the_tree_like_the_web_folder_walker(dataset, remote):
    dataset.kind = "web"
    dataset.save()
    site = {"docs/index.html": "<html><head><title>Docs</title></head><body><article><h1>Docs</h1><p>Welcome to "
                               "the documentation of the shop. It explains refunds.</p></article></body></html>",
            "docs/guide.md": "# Guide\n\nHow to refund an order.\n\n## Shipping\n\nParcels ship daily.\n",
            ".hidden/notes.md": "# Hidden\n\nnot a page\n", "src/app.py": "def app():\n    return 1\n"}
    remote.commit(site, "site")
    attach(dataset, remote.url)
    job = sync(dataset)
    assert job.status == "done", job.error
    assert sorted(Document.objects.filter(dataset=dataset).values_list("path", flat=True)) == [
        "docs/guide.md", "docs/index.html"]
    assert_equals_fresh_ingest(dataset, remote.work)
    site["handbook/guide.md"] = site.pop("docs/guide.md")
    site["docs/index.html"] = site["docs/index.html"].replace("refunds", "refunds and returns")
    remote.commit(site, "move the guide")
    job = sync(dataset)
    assert job.result["mode"] == "diff" and job.result["renamed"] == [["docs/guide.md", "handbook/guide.md"]]
    assert_equals_fresh_ingest(dataset, remote.work)


def test_sync_over_http_follows_each_change_like_file_urls(dataset, remote, http_remote):
    first = remote.commit(FIRST_TREE, "first")
    attach(dataset, http_remote["url"], ref="")  # "": the remote's default branch
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.source == http_remote["url"]
    assert dataset.source.__class__.objects.get(pk=dataset.source.pk).state == {"commit": first,
                                                                                 "ref": "refs/heads/main"}
    assert_equals_fresh_ingest(dataset, remote.work)
    tree = dict(FIRST_TREE)
    tree["util/strings.py"] = tree.pop("util/text.py")
    del tree["old/legacy.py"]
    tree["web/routes.js"] = ROUTES + "export function cart() {}\n"
    remote.commit(tree, "second")
    job = sync(dataset)
    assert job.result["mode"] == "diff" and job.result["renamed"] == [["util/text.py", "util/strings.py"]]
    assert job.result["changed"] == ["util/strings.py", "web/routes.js"]
    assert_equals_fresh_ingest(dataset, remote.work)
    remote.reset_hard(first)
    forced = remote.commit(dict(FIRST_TREE, **{"README.md": "# Shop\n\nRewritten.\n"}), "forced", force=True)
    job = sync(dataset)
    assert job.result["mode"] == "full" and job.result["to"] == forced
    assert_equals_fresh_ingest(dataset, remote.work)
    n = len(http_remote["seen"])
    assert sync(dataset).result["mode"] == "unchanged"
    assert all(path.endswith("info/refs") for path, _ in http_remote["seen"][n:])  # only the ref list was read


def test_the_same_http_url_is_refused_with_the_default_network_setting(dataset, remote, http_remote, settings):
    remote.commit(FIRST_TREE, "first")
    attach(dataset, http_remote["url"])
    settings.SOURCES_ALLOWED_NETWORKS = []
    job = sync(dataset)
    assert job.status == "failed" and job.error.startswith("unsafe_address: 127.0.0.1 resolves to 127.0.0.1")
    assert http_remote["seen"] == []  # not one request reached the server
    assert Document.objects.filter(dataset=dataset).count() == 0
    dataset.source.refresh_from_db()
    assert dataset.source.consecutive_failures == 1 and dataset.source.last_error.startswith("unsafe_address")


def test_a_redirect_to_a_blocked_address_is_refused(dataset, remote, http_remote):
    remote.commit(FIRST_TREE, "first")
    http_remote["redirect_to"] = f"http://127.0.0.2:{http_remote['port']}/repo.git"  # not in the allowed /32
    attach(dataset, http_remote["url"].replace("/repo.git", "/moved.git"))
    job = sync(dataset)
    assert job.status == "failed" and job.error.startswith("unsafe_address: 127.0.0.2 resolves to 127.0.0.2")
    assert [p for p, _ in http_remote["seen"]] == ["/moved.git/info/refs"]


@pytest.mark.parametrize("url", ["ssh://git@10.0.0.1/org/repo.git", "https://169.254.169.254/org/repo.git"])
def test_ssh_and_https_sources_at_blocked_addresses_are_refused_before_connecting(dataset, url):
    attach(dataset, url)
    job = sync(dataset)
    assert job.status == "failed" and job.error.startswith("unsafe_address: ")
    assert "SOURCES_ALLOWED_NETWORKS" in job.error


def test_a_token_is_sent_to_its_host_and_never_shown(dataset, remote, http_remote, caplog, client_for,
                                                     make_user):
    from projects.models import Membership

    token = "ghp_S3cretTokenValue1234567890"
    http_remote["token"] = token
    remote.commit(FIRST_TREE, "first")
    attach(dataset, http_remote["url"], token=token)
    with caplog.at_level(logging.DEBUG):
        job = sync(dataset)
    assert job.status == "done", job.error
    assert any(auth for _, auth in http_remote["seen"])  # it was sent (as basic auth)
    assert token not in job.source and token not in job.error
    assert all(token not in r.getMessage() for r in caplog.records)
    dataset.source.refresh_from_db()
    assert token.encode() not in bytes(dataset.source.secret)  # stored encrypted

    attach(dataset, http_remote["url"], token="wrong-" + token)
    remote.commit(dict(FIRST_TREE, **{"README.md": "# changed\n\ntext\n"}), "second")
    with caplog.at_level(logging.DEBUG):
        job = sync(dataset)
    assert job.status == "failed" and job.error.startswith("git_auth_failed:")
    assert token not in job.error and token not in dataset.source.__class__.objects.get().last_error
    assert all(token not in r.getMessage() for r in caplog.records)

    owner = make_user()
    Membership.objects.create(project=dataset.project, user=owner, role="owner")
    client = client_for(owner)
    for url in (f"/api/projects/{dataset.project.slug}/datasets/{dataset.pk}",
                f"/api/projects/{dataset.project.slug}/datasets", f"/api/ingest-jobs/{job.pk}"):
        resp = client.get(url)
        assert resp.status_code == 200, (url, resp.content)
        assert token not in resp.content.decode()


def test_the_scrubber_removes_plain_quoted_and_basic_auth_forms():
    token = "tok/en+1"
    basic = base64.b64encode(b"x-access-token:tok/en+1").decode()
    text = f"failed for tok/en+1 at https://h/?t=tok%2Fen%2B1 with Authorization: Basic {basic}"
    assert gitsync.scrub(text, token) == "failed for *** at https://h/?t=*** with Authorization: Basic ***"


@pytest.mark.parametrize("case", ["bad_ref", "missing_repo", "missing_http_repo", "unreachable", "missing_subdir"])
def test_a_bad_ref_missing_repo_or_unreachable_host_fails_with_a_clear_error(dataset, remote, http_remote, case,
                                                                             tmp_path):
    remote.commit(FIRST_TREE, "first")
    url, ref, subdir = remote.url, "main", ""
    if case == "bad_ref":
        ref = "no-such-branch"
    elif case == "missing_repo":
        url = (tmp_path / "nowhere.git").as_uri()
    elif case == "missing_http_repo":
        url = http_remote["url"].replace("/repo.git", "/other.git")
    elif case == "unreachable":
        import socket

        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}/repo.git"
    else:
        subdir = "no/such/dir"
    attach(dataset, url, ref=ref, subdir=subdir)
    job = sync(dataset)
    assert job.status == "failed"
    expected = {"bad_ref": "ref_not_found: The repository has no ref or commit 'no-such-branch' (branches: "
                           "refs/heads/main)",
                "missing_repo": f"repository_not_found: There is no git repository at {url}",
                "missing_http_repo": f"repository_not_found: There is no git repository at {url}",
                "unreachable": f"git_fetch_failed: Cannot fetch from {url}",
                "missing_subdir": "subdir_not_found: There is no directory 'no/such/dir'"}[case]
    assert job.error.startswith(expected), job.error
    assert Document.objects.filter(dataset=dataset).count() == 0


def test_a_tag_or_a_commit_sha_can_be_the_ref(dataset, remote):
    first = remote.commit(FIRST_TREE, "first")
    porcelain.tag_create(str(remote.work), b"v1", annotated=True, message=b"release", author=AUTHOR)
    out = io.BytesIO()
    porcelain.push(str(remote.work), str(remote.bare), "refs/tags/v1:refs/tags/v1", outstream=out, errstream=out)
    remote.commit(dict(FIRST_TREE, **{"new.py": "def new():\n    return 1\n"}), "second")
    attach(dataset, remote.url, ref="v1")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["to"] == first and not Document.objects.filter(dataset=dataset, path="new.py").exists()
    attach(dataset, remote.url, ref=first)
    job = sync(dataset)
    assert job.status == "done" and job.result["to"] == first


def test_query_results_show_the_commit_the_dataset_reflects(dataset, remote, client_for, make_user):
    from projects.models import Membership
    from search.engine.pipeline import QuerySpec, run_query

    remote.commit(FIRST_TREE, "first")
    attach(dataset, remote.url)
    sync(dataset)
    second = remote.commit(dict(FIRST_TREE, **{"README.md": README + "\nShipping is free.\n"}), "second")
    sync(dataset)
    owner = make_user()
    Membership.objects.create(project=dataset.project, user=owner, role="owner")
    resp = client_for(owner).post(f"/api/projects/{dataset.project.slug}/query",
                                  {"q": "deduct credits from a wallet", "top_k": 5}, format="json")
    assert resp.status_code == 200, resp.content
    results = resp.json()["results"]
    assert results and {r["why"]["commit"] for r in results} == {second}
    # the commit costs no query per result: the same number of queries for 1 and for 5 results (after one warm
    # query: the project reads its ranking settings once and keeps them)
    run_query(user=owner, project=dataset.project, spec=QuerySpec(q="deduct credits", top_k=1, log=False))
    counts = []
    for top_k in (1, 5):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            run_query(user=owner, project=dataset.project, spec=QuerySpec(q="deduct credits", top_k=top_k, log=False))
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]



def test_deleting_the_dataset_drops_its_mirror_too(dataset, remote, django_capture_on_commit_callbacks):
    remote.commit(FIRST_TREE, "first")
    source = attach(dataset, remote.url)
    assert sync(dataset).status == "done"
    assert gitsync.mirror_path(source).is_dir()
    with django_capture_on_commit_callbacks(execute=True):
        dataset.delete()  # the Source goes by CASCADE; its mirror must not stay on disk
    assert not gitsync.mirror_path(source).exists()
