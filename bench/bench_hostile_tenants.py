"""What one tenant could learn about another, or take from everyone, with ordinary keys: confirm a guess of
another tenant's private text through the shared embedding cache, learn another tenant's project slug,
overwrite another member's feedback, create projects, datasets and keys without end, list every key at once,
and read the server's staging folder in an uploaded rulebook's names; by the code before the fixes and the code
now, in the same run.

Each side runs in its own process (its own private embedded Postgres, Redis and vector store,
bench/_common.setup_django) with Django's test client against the real views and the real embedding model,
killed after `--cap` seconds; its peak resident memory is the process's (the embedding model included). The
"before" tree is a git worktree at `--before`, made here if missing.

    .venv/bin/python bench/bench_hostile_tenants.py [--cap 300] [--before 97d1acf] [--paragraphs 120]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402

# Run in the tree under test; one JSON line per case.
CHILD = r'''
import io, json, os, resource, sys, time
tree, paragraphs = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, tree)
sys.path.insert(0, os.path.join(tree, "bench"))
os.chdir(tree)
from _common import setup_django
setup_django()
from django.conf import settings
settings.ALLOWED_HOSTS = ["*"]
settings.RATE_LIMITS = {k: "100000/m" for k in settings.RATE_LIMITS}
from django.test import Client
from accounts.apikeys import issue_api_key
from accounts.models import User
from projects.models import Project
from search.models import Dataset
from search.ingest.jobs import run_job
from search.models import Chunk, Document, Feedback, IngestJob, QuerySession, RerankResult

def say(case, **kw):
    kw["peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps({"case": case, **kw}), flush=True)

def client(user):
    return Client(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(user=user).secret}")

alice = User.objects.create_user(email="alice@example.com", password="x-secret-123")
bob = User.objects.create_user(email="bob@example.com", password="x-secret-123")
a, b = client(alice), client(bob)
urls = {}
for who, c, slug in (("a", a, "alpha"), ("b", b, "beta")):
    c.post("/api/projects", {"name": slug.title(), "slug": slug}, content_type="application/json")
    r = c.post(f"/api/projects/{slug}/datasets", {"name": "notes", "kind": "web"}, content_type="application/json")
    urls[who] = f"/api/projects/{slug}/datasets/{r.json()['id']}"

def push(c, url, text, path):
    t = time.perf_counter()
    r = c.put(f"{url}/documents", {"documents": [{"external_id": path, "path": path, "text": text}]},
              content_type="application/json")
    job = IngestJob.objects.get(pk=r.json()["id"])
    run_job(job=job)
    job.refresh_from_db()
    return time.perf_counter() - t, job

# 1. the cache oracle: Alice's private notes, then Bob pushes an exact copy (his guess), then a text nobody has.
secret = "".join(f"## Note {i}\n\nThe vault code for office {i} is {4471 * i % 10000:04d}-{9902 * i % 10000:04d}; "
                 f"the escrow account {i} holds {212 + i} million for the merger with Halcyon {i}.\n\n"
                 for i in range(paragraphs))
ta, ja = push(a, urls["a"], secret, "notes/private.md")
tb, jb = push(b, urls["b"], secret, "notes/guess.md")
tn, jn = push(b, urls["b"], secret.replace("Halcyon", "Ostrava"), "notes/unseen.md")
say("cache_oracle", s=round(tb, 2), outcome=(
    f"guess of {len(secret.encode()) // 1024} KB ({jb.chunks_written} chunks): cached {jb.embeddings_cached}, "
    f"embedded {jb.embeddings_computed} in {tb:.1f} s; a text nobody has: embedded {jn.embeddings_computed} in "
    f"{tn:.1f} s; Alice's first push {ta:.1f} s"))

# 2. a slug another tenant holds
t = time.perf_counter()
r = b.post("/api/projects", {"name": "Alpha", "slug": "alpha"}, content_type="application/json")
say("slug", s=round(time.perf_counter() - t, 3), outcome=f"{r.status_code} {r.json().get('code') or 'slug ' + r.json()['slug']}"
    + (f": {r.json()['detail']}" if r.status_code >= 400 else ""))

# 3. a viewer overwrites the owner's feedback
from projects.models import Membership
vic = User.objects.create_user(email="vic@example.com", password="x-secret-123")
project = Project.objects.get(slug="alpha")
Membership.objects.create(project=project, user=vic, role="viewer")
chunk = Chunk.objects.filter(dataset__project=project).first()
session = QuerySession.objects.create(user=alice, project=project, query="q")
RerankResult.objects.create(session=session, chunk=chunk, dataset_id=chunk.dataset_id, project_id=project.pk,
                            rank_before=1, final_rank=1, fused_score=1.0)
url = f"/api/query-sessions/{session.pk}/feedback"
a.post(url, {"chunk_id": chunk.pk, "relevance": 3}, content_type="application/json")
t = time.perf_counter()
r = client(vic).post(url, {"chunk_id": chunk.pk, "relevance": 0}, content_type="application/json")
fb = Feedback.objects.get(session=session)
say("feedback", s=round(time.perf_counter() - t, 3),
    outcome=f"{r.status_code} {r.json().get('code', '')}; stored judgment {fb.relevance} by {fb.user.email}")

# 4. 60 projects, 60 datasets and 60 keys in a loop (past every default limit), then the key list
mallory = User.objects.create_user(email="mallory@example.com", password="x-secret-123")
m = client(mallory)
t = time.perf_counter()
made = {"projects": 0, "datasets": 0, "keys": 0}
for i in range(60):
    made["projects"] += m.post("/api/projects", {"name": f"P{i}"}, content_type="application/json").status_code == 201
slugs = list(Project.objects.filter(memberships__user=mallory).values_list("slug", flat=True))
for i in range(60):
    made["datasets"] += m.post(f"/api/projects/{slugs[i % len(slugs)]}/datasets", {"name": f"d{i}"},
                               content_type="application/json").status_code == 201
for i in range(60):
    made["keys"] += m.post("/api/keys", {"name": f"k{i}"}, content_type="application/json").status_code == 201
say("caps", s=round(time.perf_counter() - t, 2),
    outcome=f"created {made['projects']} projects, {made['datasets']} datasets, {made['keys']} keys of 60 each")
t = time.perf_counter()
r = m.get("/api/keys")
body = r.json()
rows = len(body["results"]) if isinstance(body, dict) else len(body)
say("key_list", s=round(time.perf_counter() - t, 3), outcome=f"{rows} keys in {len(r.content)} bytes in one response")

# 5. an uploaded rulebook's names
r = a.post("/api/projects/alpha/datasets", {"name": "book", "kind": "rules"}, content_type="application/json")
ds = r.json()["id"]
f = io.BytesIO(b"# Conditions\n\n## Grappled\n\nA grappled creature's speed becomes 0.\n")
f.name = "house-rules.md"
t = time.perf_counter()
r = a.post(f"/api/projects/alpha/datasets/{ds}/uploads", {"file": f})
job = IngestJob.objects.get(pk=r.json()["id"])
run_job(job=job)
paths = list(Document.objects.filter(dataset_id=ds).values_list("path", flat=True))
books = sorted(set(Chunk.objects.filter(dataset_id=ds).values_list("book_id", flat=True)))
say("rulebook_names", s=round(time.perf_counter() - t, 2), outcome=f"book {books}, files {paths}")
'''

CASES = (("cache_oracle", "another tenant's exact text pushed as a guess"),
         ("slug", "create a project with a slug another tenant holds"),
         ("feedback", "a viewer judges the owner's session"),
         ("caps", "60 projects, 60 datasets, 60 keys in a loop"),
         ("key_list", "GET /api/keys after that"),
         ("rulebook_names", "upload house-rules.md to a rules dataset"))


def run_side(*, tree: Path, cap: int, paragraphs: int) -> dict[str, dict]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(paragraphs)], capture_output=True,
                              text=True, timeout=cap, env=env, cwd=tree)
        lines = proc.stdout.splitlines()
        if proc.returncode:
            sys.stderr.write(proc.stderr[-3000:])
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        lines = out.splitlines() + [json.dumps({"case": "_killed"})]
    rows: dict[str, dict] = {}
    for line in lines:
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["case"]] = row
    return rows


def _cell(row: dict | None, killed: bool, cap: int) -> str:
    if row is None:
        return f"> {cap} s (killed)" if killed else "did not run"
    return f"{row['s']} s, {row['peak_mib']} MiB peak: {row['outcome']}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cap", type=int, default=300)
    ap.add_argument("--before", default="97d1acf")
    ap.add_argument("--paragraphs", type=int, default=120, help="paragraphs of the private text (one chunk each)")
    args = ap.parse_args()
    before_tree = Path(f"/tmp/bench-before-tenants-{args.before}")
    if not before_tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(before_tree), args.before], cwd=ROOT, check=True)
    if not (before_tree / ".venv").exists():
        (before_tree / ".venv").symlink_to(ROOT / ".venv")
    before = run_side(tree=before_tree, cap=args.cap, paragraphs=args.paragraphs)
    after = run_side(tree=ROOT, cap=args.cap, paragraphs=args.paragraphs)
    rows = [[label, _cell(before.get(case), "_killed" in before, args.cap),
             _cell(after.get(case), "_killed" in after, args.cap)] for case, label in CASES]
    text = "\n".join([
        "# Nothing across tenants, and per-account limits: before and after",
        "",
        machine(),
        "",
        f"Before: {args.before}; after: the working tree. Each side one process with its own embedded services.",
        "",
        table(["case", "before (time, peak memory, outcome)", "after (time, peak memory, outcome)"], rows),
    ])
    write_result("hostile_tenants", text)


if __name__ == "__main__":
    main()
