"""What a hostile git repository costs a sync: the worst small repositories this script can build, fetched and
read by the git source as a sync does (fetch into a fresh mirror, list the tree, read each listed file as the
sync reads it), by the code before its bounds and by the code now, in the same run.

Each side runs in its own process, on the same repositories served over smart HTTP by a third process on
127.0.0.1 (so the server's own work is not measured), under an address-space limit (RLIMIT_AS, `--mem-gib`)
and killed after `--cap` seconds; its peak resident memory is polled from /proc. The "before" tree is a git
worktree at `--before` (default: the commit before the bounds), made here if missing. Nothing here needs the
database: the parts measured are the git source's.

    .venv/bin/python bench/bench_hostile_git.py [--cap 60] [--mem-gib 4] [--before 97d1acf]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402

FILE, FOLDER = 0o100644, 0o040000

SERVER = r'''
import sys, threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server
from dulwich.repo import Repo
from dulwich.server import DictBackend
from dulwich.web import make_wsgi_chain

class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass

root = Path(sys.argv[1])
backend = DictBackend({f"/{p.name}": Repo(str(p)) for p in root.iterdir() if p.name.endswith(".git")})
server = make_server("127.0.0.1", 0, make_wsgi_chain(backend), handler_class=Quiet)
print(server.server_address[1], flush=True)
server.serve_forever()
'''

# Run in the tree under test (old or new): fetch, list, read as the sync does; print one JSON line.
CHILD = r'''
import json, os, resource, sys, time
tree, url, mirror_dir, old_commit = sys.argv[1:5]
sys.path.insert(0, tree)
os.chdir(tree)
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
import django
django.setup()
from dulwich.repo import Repo
from config.errors import ApiError
from search.ingest.code import MAX_FILE_BYTES
from search.sources.git import sync as gs

t0 = time.perf_counter()
out = {}
def say(**kw):
    out.update(kw, s=round(time.perf_counter() - t0, 3))
    print(json.dumps(out), flush=True)
try:
    mirror = Repo.init_bare(mirror_dir, mkdir=True)
    sha, _ = gs.fetch(mirror=mirror, url=url, ref="main", token="")
    say(stage="fetched")
    store = mirror.object_store
    if old_commit:  # the history case: is the previous commit an ancestor? (the choice between diff and full)
        t1 = time.perf_counter()
        if hasattr(gs, "descends_from"):
            ff = gs.descends_from(store, new=sha.encode(), old=old_commit.encode(),
                                  limit=gs.settings.SOURCES_GIT_MAX_HISTORY)
        else:
            from dulwich.graph import can_fast_forward
            ff = can_fast_forward(mirror, old_commit.encode(), sha.encode())
        took = time.perf_counter() - t1
        say(stage="done", outcome=("diff: previous commit found" if ff else "full comparison: not searched further")
            + f", the search took {took:.2f} s")
        sys.exit(0)
    files = gs.tree_files(store, store[sha.encode()].tree, kind="code")
    say(stage="listed", outcome=f"listed {len(files):,} files")
    read = large = 0
    for rel in sorted(files):
        if hasattr(gs, "read_blob"):
            data, size = gs.read_blob(store, files[rel], limit=MAX_FILE_BYTES)
        else:
            data = store[files[rel]].as_raw_string()
            data = data if len(data) <= MAX_FILE_BYTES else None
        read += 1
        large += data is None
        if read % 1000 == 0:
            say(outcome=f"listed {len(files):,} files, read {read:,}")
    say(stage="done", outcome=f"listed {len(files):,}, read {read:,}, {large:,} skipped as too large")
except ApiError as exc:
    say(stage="done", outcome=f"{exc.status_code} {exc.code}")
except RecursionError:
    say(stage="done", outcome="RecursionError (the job fails as internal_error)")
except MemoryError:
    say(stage="done", outcome="MemoryError")
'''


def _tree(entries: dict[str, tuple[int, bytes]]):
    from dulwich.objects import Tree

    tree = Tree()
    for name, (mode, sha) in entries.items():
        tree.add(name.encode(), mode, sha)
    return tree


def _repo(path: Path, objects: list, root, *, parents: int = 0) -> tuple[int, str]:
    """A bare repository whose main is a commit of `root` (on top of `parents` empty-change commits from a first
    one); -> (bytes on disk, the first commit's id)."""
    from dulwich.objects import Commit
    from dulwich.repo import Repo

    repo = Repo.init_bare(str(path), mkdir=True)
    repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
    commits, parent = [], None
    for i in range(parents + 1):
        c = Commit()
        c.tree, c.message = root.id, f"commit {i}".encode()
        c.author = c.committer = b"Bench <bench@example.com>"
        c.author_time = c.commit_time = 1_700_000_000 + i
        c.author_timezone = c.commit_timezone = 0
        c.parents = [parent] if parent else []
        commits.append(c)
        parent = c.id
    repo.object_store.add_objects([(o, None) for o in [*objects, root, *commits]])
    repo.refs[b"refs/heads/main"] = parent
    size = sum(f.stat().st_size for f in (path / "objects").rglob("*") if f.is_file())
    return size, commits[0].id.decode()


def build(dest: Path, *, only: str = "") -> list[tuple[str, str, str]]:
    """(label, repository name, first commit for the history case or ""), for the names containing `only`."""
    from dulwich.objects import Blob

    cases = []
    blob = Blob.from_string(b"x = 1\n")
    if only not in "bomb.git":
        return cases + _rest(dest, blob=blob, only=only)
    level = _tree({f"f{i}.py": (FILE, blob.id) for i in range(100)})
    objects = [blob, level]
    for _ in range(2):
        level = _tree({f"d{i}": (FOLDER, level.id) for i in range(100)})
        objects.append(level)
    size, _ = _repo(dest / "bomb.git", objects, _tree({"bomb": (FOLDER, level.id)}))
    cases.append((f"tree bomb: 1,000,000 files named by 300 entries ({size:,} bytes)", "bomb.git", ""))
    return cases + _rest(dest, blob=blob, only=only)


def _rest(dest: Path, *, blob, only: str) -> list[tuple[str, str, str]]:
    from dulwich.objects import Blob

    cases = []
    if only in "deep.git":
        cases += _deep(dest, blob=blob)
    for mb in (300, 48):
        if only not in f"blob{mb}.git":
            continue
        big = Blob.from_string(b"\0" * (mb * 1000 * 1000))
        size, _ = _repo(dest / f"blob{mb}.git", [big, blob], _tree({"big.py": (FILE, big.id),
                                                                  "small.py": (FILE, blob.id)}))
        cases.append((f"a {mb} MB file of zeros ({size:,} bytes)", f"blob{mb}.git", ""))
        del big
    if only in "history.git":
        small = Blob.from_string(b"def f():\n    return 1\n")
        size, first = _repo(dest / "history.git", [small], _tree({"app.py": (FILE, small.id)}), parents=30_000)
        cases.append((f"30,000 commits since the synced one ({size:,} bytes)", "history.git", first))
    return cases


def _deep(dest: Path, *, blob) -> list[tuple[str, str, str]]:
    level = _tree({"deep.py": (FILE, blob.id)})
    objects = [blob, level]
    for _ in range(5000):
        level = _tree({"a": (FOLDER, level.id)})
        objects.append(level)
    size, _ = _repo(dest / "deep.git", objects, _tree({"nest": (FOLDER, level.id)}))
    return [(f"folders nested 5,000 deep ({size:,} bytes)", "deep.git", "")]


def run_side(*, tree: Path, url: str, old_commit: str, cap_s: float, mem_gib: float) -> list[str]:
    """[time, peak memory, outcome] of one side, killed after cap_s."""
    limit = int(mem_gib * 2**30)

    def rlimit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, SOURCES_ALLOWED_NETWORKS="127.0.0.1/32", HF_HUB_OFFLINE="1",
               SOURCES_REQUEST_TIMEOUT_S="120")  # the test server packs a long history slowly
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as tmp, open(Path(tmp) / "err", "w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tree), url, str(Path(tmp) / "m.git"), old_commit],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                preexec_fn=rlimit)
        peak = 0
        killed = False
        while proc.poll() is None:
            try:
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
            if time.perf_counter() - started > cap_s:
                proc.kill()
                killed = True
                break
            time.sleep(0.05)
        stdout = proc.communicate()[0]
        err.seek(0)
        last_error = ([x for x in err.read().splitlines() if x and not x.startswith(" ")] or [""])[-1][:160]
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    last = lines[-1] if lines else {}
    elapsed = last.get("s", 0.0)  # from the fetch's start (the process's start-up is not counted)
    if killed:
        return [f"> {cap_s:g} s (killed)", f"{peak / 1024:,.0f} MB", f"killed: {last.get('outcome', 'fetching')}"]
    outcome = last.get("outcome", f"exit {proc.returncode}")
    if proc.returncode not in (0, None) and last.get("stage") != "done":
        outcome = f"crashed (exit {proc.returncode}): {last_error}"
    return [f"{elapsed:.1f} s", f"{peak / 1024:,.0f} MB", outcome]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=60.0, help="seconds before a side is killed")
    ap.add_argument("--mem-gib", type=float, default=4.0, help="address-space limit of each side")
    ap.add_argument("--before", default="97d1acf", help="the commit measured as before")
    ap.add_argument("--only", default="", help="only the repositories whose name contains this (bomb, deep, blob300, blob48, history)")
    args = ap.parse_args()
    before = Path(tempfile.gettempdir()) / f"bench-hostile-git-{args.before}"
    if not (before / "search").is_dir():
        subprocess.run(["git", "worktree", "add", "-f", str(before), args.before], cwd=ROOT, check=True,
                       capture_output=True)
    with tempfile.TemporaryDirectory(prefix="bench-hostile-git-") as tmp:
        repos = Path(tmp)
        print("building repositories ...", file=sys.stderr)
        cases = build(repos, only=args.only)
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(repos)], stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline())
            rows = []
            for label, name, old_commit in cases:
                url = f"http://127.0.0.1:{port}/{name}"
                print(f"{label} ...", file=sys.stderr)
                old = run_side(tree=before, url=url, old_commit=old_commit, cap_s=args.cap, mem_gib=args.mem_gib)
                new = run_side(tree=ROOT, url=url, old_commit=old_commit, cap_s=args.cap, mem_gib=args.mem_gib)
                rows.append([label, *old, *new])
        finally:
            server.kill()
    text = "\n".join([
        "# Hostile git repositories (`bench/bench_hostile_git.py`)",
        "",
        "Each repository is fetched over smart HTTP from a server process on 127.0.0.1 into a fresh mirror, its "
        "tree listed and each listed file read as a sync reads it, by the code before the bounds "
        f"({args.before}) and by the code now, each in its own process under a {args.mem_gib:g} GiB address-space "
        f"limit, killed after {args.cap:g} s (times from the fetch's start, the process's start-up not counted). Memory is the process's peak resident set (a Django process with "
        "nothing loaded is about 100 MB). Defaults: 200,000 tree entries, depth 64, 64 MiB per object, "
        "512 MiB per fetch, 10,000 commits searched; files over 1,000,000 bytes are skipped by declared size.",
        "",
        table(["repository", "before: time", "before: peak", "before: outcome", "now: time", "now: peak",
               "now: outcome"], rows),
        "",
        machine(),
    ])
    write_result("hostile_git", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
