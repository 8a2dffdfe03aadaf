"""What the code tools cost on the worst inputs of at most 1 MB this script can build, before and after the
bounds of docs/security.md ("Work that ends"), in one run.

The inputs (one project, one dataset, written as the writer writes them, without embeddings: the tools read
Postgres only):
  * find_references of `deduct` in a 1 MB file of 20,000 imports and 20,000 calls (the import of `deduct` last);
  * the graph pack (`graph: true`): resolved_uses over the top 5 results, here the 5 function chunks of a 1 MB
    file with 8,000 imports and about 45,000 uses (a use is a name on a line: each line calls 116 names), what
    graph_context runs per query;
  * outline of a 1 MB file of 45,000 one-line functions (time and the JSON answer's size);
  * grep for `[a-q][^u-z]{900}x` (RE2's DFA outgrows its memory; the NFA reads about 0.15 MB/s) over a 1 MB
    document of 100-character lines, and over a 1 MB document of one line (a page's text, not code);
  * an MCP grep call over both documents (2 MB) with MCP_REQUEST_TIMEOUT_S = 1 s and the grep budget raised to
    60 s: the call's deadline, not grep's own budget, must stop the work.

Each side runs in its own process against its own tree (`--old-tree`, default a worktree of the base commit made
for the run): it builds the inputs, then runs every case in a forked child that the parent kills after
`--cap` seconds ("> cap (killed)"). Peak memory is the child's peak resident set above what it started with.

    .venv/bin/python bench/bench_hostile_code_tools.py [--old-tree DIR] [--cap 60]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE_COMMIT = "97d1acf"
SLOW_PATTERN = "[a-q][^u-z]{900}x"
CASES = ["find_references", "graph_pack", "outline", "grep_lines", "grep_one_line", "mcp_grep"]
LABELS = {
    "find_references": "find_references, 1 MB file: 20,000 imports + 20,000 calls",
    "graph_pack": "graph pack (graph: true), top 5 chunks of a 1 MB file: 8,000 imports, 45,000 uses",
    "outline": "outline, 1 MB file of 45,000 functions",
    "grep_lines": "grep slow RE2 pattern, 1 MB document of 100-char lines",
    "grep_one_line": "grep slow RE2 pattern, 1 MB document of one line",
    "mcp_grep": "MCP grep call, 2 MB (both documents), MCP_REQUEST_TIMEOUT_S = 1 s, grep budget 60 s",
}


# --------------------------------------------------------------------------- inputs
LEDGER = "def deduct(wallet, amount):\n    return wallet - amount\n"


def many_imports(n: int) -> str:
    lines = [f"from pkg.mod{k} import helper{k}" for k in range(n)]
    lines += ["from billing.ledger import deduct", "", "", "def run(x):"]
    return "\n".join(lines + ["    deduct(x)"] * n) + "\n"


def dense_calls(n_imports: int, functions: int = 5, calls_per_line: int = 115) -> str:
    """Functions of 78 lines, each line calling `deduct` and `calls_per_line` imported helpers: a use is a name on
    a line, so each function chunk holds about 9,000 uses, each resolved against 8,000 imports before."""
    lines = [f"from pkg.mod{k} import helper{k}" for k in range(n_imports)]
    lines += ["from billing.ledger import deduct", ""]
    k = 0
    for f in range(functions):
        lines += ["", f"def run{f}(x):"]
        for _ in range(78):
            calls = [f"helper{(k + j) % n_imports}(x)" for j in range(calls_per_line)]
            k += calls_per_line
            lines.append("    " + "; ".join(["deduct(x)", *calls]))
    return "\n".join(lines) + "\n"


def wide_outline(size: int) -> str:
    out, k, total = [], 0, 0
    while total < size - 40:
        line = f"def f{k}(x): return x"
        out.append(line)
        total += len(line) + 1
        k += 1
    return "\n".join(out) + "\n"


def slow_text(size: int, *, line: int = 100, seed: int = 3) -> str:
    rnd = random.Random(seed)
    letters = "abcdefghijklmnopqrst"
    return "\n".join("".join(rnd.choice(letters) for _ in range(line)) for _ in range(size // (line + 1))) + "\n"


def push(dataset, files: dict[str, str]) -> None:
    """As tests/hardening/test_code_tool_budgets.push: chunks and code facts, no embeddings."""
    from django.db import transaction

    from search.ingest.base import ChunkDraft, DocumentDraft
    from search.ingest.code import code_document
    from search.ingest.code_facts import write_code_facts
    from search.models import Chunk, Document

    drafts = [code_document(rel=path, data=text.encode(), repo="app")[0] or
              DocumentDraft(path=path, content_hash=str(hash(text)), repo="app", lang="text",
                            chunks=[ChunkDraft(text=text, start_line=1, end_line=text.count("\n") + 1, kind="web")])
              for path, text in files.items()]
    with transaction.atomic():
        docs = Document.objects.bulk_create([Document(dataset=dataset, path=d.path, repo=d.repo, lang=d.lang,
                                                      content_hash=d.content_hash, title=d.title,
                                                      size_bytes=len(files[d.path].encode())) for d in drafts])
        Chunk.objects.bulk_create([Chunk(document=doc, dataset=dataset, ordinal=o, kind=c.kind, repo=d.repo,
                                         path=d.path, lang=d.lang, symbol=c.symbol[:500], start_line=c.start_line,
                                         end_line=c.end_line, text=c.text, micro_summary=c.micro_summary,
                                         text_hash=f"{doc.pk}-{o}")
                                   for doc, d in zip(docs, drafts, strict=True) for o, c in enumerate(d.chunks)],
                                  batch_size=2000)
        write_code_facts(dataset=dataset, drafts=drafts)


def build() -> dict:
    from accounts.apikeys import issue_api_key
    from accounts.models import User
    from projects.models import Membership, Project
    from search.models import Chunk, Dataset, SymbolRef

    user = User.objects.create_user(email="bench@example.com", password="x")
    project = Project.objects.create(name="shop", slug="shop")
    Membership.objects.create(project=project, user=user, role="owner")
    dataset = Dataset.objects.create(project=project, name="app", kind="code")
    files = {"billing/ledger.py": LEDGER, "shop/huge.py": many_imports(20_000), "shop/dense.py": dense_calls(8_000),
             "shop/wide.py": wide_outline(1_000_000), "docs/big.txt": slow_text(1_000_000),
             "docs/minified.txt": slow_text(1_000_000, line=1000).replace("\n", "") + "\n"}
    push(dataset, files)
    spans = []  # the top 5 results: the chunks with the most uses (the functions: imports are not followed)
    for ch in Chunk.objects.filter(path="shop/dense.py").order_by("start_line"):
        n = SymbolRef.objects.filter(document_id=ch.document_id, line__gte=ch.start_line, line__lte=ch.end_line,
                                     kind="call").count()
        spans.append((n, (dataset.pk, ch.document_id, ch.start_line, ch.end_line)))
    spans = [s for _, s in sorted(spans, reverse=True)[:5]]
    return {"project": project.pk, "secret": issue_api_key(user=user).secret, "spans": spans,
            "sizes": {p: len(t.encode()) for p, t in files.items()}}


# --------------------------------------------------------------------------- cases (run in a forked child)
def run_case(case: str, world: dict) -> str:
    from projects.models import Project
    from search.engine import code_graph
    from search.engine.grep import grep_project

    project = Project.objects.get(pk=world["project"])
    if case == "find_references":
        out = code_graph.find_references(project=project, symbol="deduct")
        return f"total {out['total']}, complete: {str(out.get('complete', 'n/a')).lower()}"
    if case == "graph_pack":
        spans = [code_graph.LineSpan(*s) for s in world["spans"]]
        uses = code_graph.resolved_uses(spans=spans)
        return f"{sum(len(u) for u in uses)} definitions found, {len(spans)} results"
    if case == "outline":
        out = code_graph.outline(project=project, path="shop/wide.py")
        size = len(json.dumps(out))
        return f"{len(out['symbols'])} symbols, {size / 1e6:.2f} MB JSON, complete: " \
               f"{str(out.get('complete', 'n/a')).lower()}"
    if case in ("grep_lines", "grep_one_line"):
        path = "docs/big.txt" if case == "grep_lines" else "docs/minified.txt"
        out = grep_project(project=project, pattern=SLOW_PATTERN, regex=True, path=path)
        return f"complete: {str(out['complete']).lower()}, files read {out['files_read']}"
    if case == "mcp_grep":
        return mcp_grep(world)
    raise ValueError(case)


def mcp_grep(world: dict) -> str:
    from asgiref.sync import async_to_sync
    from django.conf import settings

    from search.edge.mcp.server import caller_for_secret, in_process_client

    settings.MCP_REQUEST_TIMEOUT_S = 1.0
    settings.GREP_BUDGET_S = 60.0
    settings.RATE_LIMITS = {k: "100000/m" for k in settings.RATE_LIMITS}
    caller = caller_for_secret(world["secret"], transport="http")

    async def run():
        async with in_process_client(caller) as client:
            return await client.call_tool("grep", {"project": "shop", "pattern": SLOW_PATTERN, "regex": True,
                                                   "path": "docs/"})

    result = async_to_sync(run)()
    data = result.structured_content or {}
    if result.is_error:
        return f"error {data.get('status')} {data.get('code')}"
    return f"complete: {str(data['complete']).lower()}, files read {data['files_read']}"


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def forked(case: str, world: dict, cap: float) -> dict:
    """Run one case in a child process (its own database connection), killed after `cap` seconds."""
    from django.db import connections

    connections.close_all()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, report on the pipe, leave without running the parent's exit handlers
        os.close(read)
        code = 0
        try:
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS to the current RSS
            start = _rss_kib("VmRSS")
            t0 = time.perf_counter()
            outcome = run_case(case, world)
            took = time.perf_counter() - t0
            report = {"s": took, "mb": max(0, _rss_kib("VmHWM") - start) / 1024, "outcome": outcome}
        except BaseException as exc:  # noqa: BLE001 - a failed case is reported, never hidden
            report = {"s": None, "mb": None, "outcome": f"error: {type(exc).__name__}: {str(exc)[:120]}"}
            code = 1
        os.write(write, json.dumps(report).encode())
        os.close(write)
        os._exit(code)
    os.close(write)
    deadline = time.monotonic() + cap
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        return {"s": None, "mb": None, "outcome": f"> {cap:g} s (killed)"}
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    return json.loads(data or b'{"s": null, "mb": null, "outcome": "no report"}')


def worker(tree: Path, cap: float) -> None:
    """One side: the project code of `tree`, its own embedded services; prints one JSON line per case."""
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    sys.path.insert(1, str(ROOT / "bench"))
    sys.path.append(str(ROOT))  # _common puts its root first unless present: behind the tree, never before it
    from _common import setup_django  # after the tree is first on the path

    setup_django()
    t0 = time.perf_counter()
    world = build()
    print(json.dumps({"build_s": time.perf_counter() - t0, "sizes": world["sizes"]}), flush=True)
    for case in CASES:
        print(json.dumps({"case": case, **forked(case, world, cap)}), flush=True)


# --------------------------------------------------------------------------- the run
def side(tree: Path, cap: float) -> tuple[dict, dict]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LOG_LEVEL": "ERROR"}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(tree), "--cap", str(cap)],
                          capture_output=True, text=True, env=env, cwd=tree, timeout=cap * len(CASES) + 900)
    rows, meta = {}, {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            data = json.loads(line)
            if "case" in data:
                rows[data["case"]] = data
            else:
                meta = data
    if not rows:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
    return rows, meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-tree", default="")
    ap.add_argument("--cap", type=float, default=60.0)
    ap.add_argument("--worker", default="")
    opts = ap.parse_args()
    if opts.worker:
        worker(Path(opts.worker), opts.cap)
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from _common import machine, table, write_result  # the worker must not load them first

    made = None
    old = Path(opts.old_tree) if opts.old_tree else None
    if old is None:
        made = Path(tempfile.mkdtemp(prefix="bench-old-")) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(made), BASE_COMMIT], cwd=ROOT, check=True,
                       capture_output=True)
        old = made
    try:
        before, _ = side(old, opts.cap)
        after, meta = side(ROOT, opts.cap)
    finally:
        if made is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(made)], cwd=ROOT, capture_output=True)

    def cell(row: dict | None) -> list[str]:
        if not row:
            return ["-", "-", "no result"]
        s = "-" if row["s"] is None else f"{row['s']:.2f} s"
        mb = "-" if row["mb"] is None else f"{row['mb']:.0f} MB"
        return [s, mb, row["outcome"]]

    rows = [[LABELS[c], *cell(before.get(c)), *cell(after.get(c))] for c in CASES]
    text = "\n".join([
        "# Hostile inputs to the code tools: before and after the bounds",
        "",
        f"Before: the base commit {BASE_COMMIT}; after: this tree. One run of `bench/bench_hostile_code_tools.py` "
        f"(each case in its own process, killed after {opts.cap:g} s). Settings as shipped: GREP_BUDGET_S 2 s, "
        "CODE_REFERENCES_BUDGET_S 5 s, CODE_GRAPH_MAX_USES 500, REQUEST_DEADLINE_S 30 s, MCP_REQUEST_TIMEOUT_S "
        "60 s (1 s in the MCP case). Peak memory: the case's peak resident set above its start.",
        "",
        table(["case", "before: time", "before: peak", "before: outcome", "after: time", "after: peak",
               "after: outcome"], rows),
        "",
        f"Inputs (bytes): {', '.join(f'{p} {n:,}' for p, n in sorted(meta.get('sizes', {}).items()))}.",
        "",
        machine(),
    ])
    write_result("hostile_code_tools", text)


if __name__ == "__main__":
    main()
