"""Query latency while a 10k-chunk ingest runs: query-time outbox apply (before) vs the background applier (after).

Why: `run_query` used to apply the index outbox on every query
(and could wait up to 60 s for the applier lock), so queries during an ingest
paid for the ingest's index writes. Now the process that owns the embedded
store applies in a background thread woken by Postgres NOTIFY
(search/engine/applier.py) and a query only reads; between batches it waits (bounded)
for the queries in flight. Three modes (query-time apply; the applier without
yielding, in 512-point batches; the applier as shipped) run in the same run on
the same corpus, through the real runner: the ingest runs in its own process
(`manage.py ingest --sync --no-apply`, as a Celery worker would: it writes
Postgres only), while this process owns the index and queries it.

The embedding cache is filled first (one untimed ingest of the same corpus),
so each measured ingest is chunking + Postgres writes + index application,
not MiniLM on a shared CPU; the table says so.

    .venv/bin/python bench/bench_query_during_ingest.py [--chunks 10000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, p50, pct, setup_django, table, write_result

INTERVAL_S = 0.1  # 10 queries/s during the ingest: about a third of what this process serves when idle


def cpu_flags() -> str:
    """The CPU features that decide embedding speed on these machines, present or not."""
    flags: set[str] = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    return ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in wanted)


def ingest_process(*, project: str, dataset: str, source: Path) -> subprocess.Popen:
    """The writer: a separate process that writes chunks and outbox rows to Postgres and never opens the index."""
    cmd = [sys.executable, "manage.py", "ingest", "--project", project, "--dataset", dataset, "--kind", "code",
           "--repo", "bench", "--sync", "--no-apply", str(source)]
    return subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def drain(index) -> None:
    from search.engine.applier import apply_outbox, pending_outbox

    while apply_outbox(index=index) or pending_outbox(index=index):
        time.sleep(0.05)


def measure(*, mode: str, project, source: Path, index, queries: list[str]) -> dict:
    """Queries at a fixed rate while one ingest runs; mode "before" applies the outbox inside each query's time."""
    from search.engine.applier import APPLY_BATCH, BackgroundApplier, apply_outbox, wait_until_indexed
    from search.engine.pipeline import QuerySpec, run_query
    from search.models import Chunk

    applier = None
    if mode == "after":
        applier = BackgroundApplier(index=index).start()
    elif mode == "ungated":  # the first background applier: 512-point batches, queries wait behind them
        applier = BackgroundApplier(index=index, batch=APPLY_BATCH, yield_s=0.0).start()
    lat, applied_in_query = [], 0
    t0 = time.perf_counter()
    proc = ingest_process(project=project.slug, dataset=f"during-{mode}", source=source)
    i, ingest_end = 0, None
    while True:
        # Open loop: queries are due every INTERVAL_S whatever happened before, and each one's latency runs from
        # when it was due, so a stall counts once for every query that arrived during it (as it would for the
        # clients of a server), not once for the one query that happened to be running. Every query due before
        # the ingest ended is served and counted, also when the ingest ended while this loop was stalled.
        if ingest_end is None and proc.poll() is not None:
            ingest_end = time.perf_counter()
        due = t0 + i * INTERVAL_S
        if ingest_end is not None and due >= ingest_end:
            break
        q = queries[i % len(queries)]
        i += 1
        if (wait := due - time.perf_counter()) > 0:
            time.sleep(wait)
        if mode == "before":  # what run_query did before: apply_outbox(index) first, under the applier lock
            applied_in_query += apply_outbox(index=index)
        run_query(user=None, project=project, spec=QuerySpec(q=q, include_global=False, rerank=False, log=False, kind="bench"))
        lat.append((time.perf_counter() - due) * 1000)
    ingest_s = ingest_end - t0
    if proc.returncode:
        raise SystemExit(f"ingest failed: {proc.stderr.read().decode()[-2000:]}")
    t = time.perf_counter()
    if applier is not None:
        assert wait_until_indexed(index=index, timeout=600)
        applier.stop()
    else:
        drain(index)
    catch_up_s = time.perf_counter() - t
    chunks = Chunk.objects.filter(dataset__name=f"during-{mode}").count()
    return {"mode": mode, "lat": lat, "ingest_s": ingest_s, "catch_up_s": catch_up_s, "chunks": chunks,
            "applied_in_query": applied_in_query,
            "applied_bg": applier.stats["applied"] if applier else 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=10_000, help="target chunk count of the ingested corpus")
    args = ap.parse_args()
    setup_django()
    from bench_context import QUERIES, build_corpus
    from django.conf import settings

    from inference.encoders import embed_query, resolve_precision
    from projects.models import Project
    from search.engine.index import get_index
    from search.engine.pipeline import QuerySpec, run_query
    from search.models import Dataset

    tmp = Path(tempfile.mkdtemp(prefix="bench-during-"))
    build_corpus(target_chunks=args.chunks, dest=tmp)
    project = Project.objects.create(slug="bench", name="Bench")
    index = get_index()
    embed_query("warm the model up")

    # untimed: fill the embedding cache (and give queries a corpus to hit), then index it
    t = time.perf_counter()
    warm = ingest_process(project=project.slug, dataset="warm", source=tmp)
    if warm.wait():
        raise SystemExit(f"warm-up ingest failed: {warm.stderr.read().decode()[-2000:]}")
    warm_s = time.perf_counter() - t
    drain(index)
    idle = []
    for r in range(3):
        for q in QUERIES:
            t = time.perf_counter()
            run_query(user=None, project=project, spec=QuerySpec(q=q, include_global=False, rerank=False, log=False, kind="bench"))
            if r:
                idle.append((time.perf_counter() - t) * 1000)

    runs = [measure(mode=m, project=project, source=tmp, index=index, queries=QUERIES) for m in ("before", "ungated", "after")]
    Dataset.objects.filter(project=project).delete()
    drain(index)
    shutil.rmtree(tmp, ignore_errors=True)

    rows = [["idle (no ingest running)", len(idle), round(p50(idle), 1), round(pct(idle, 95), 1),
             round(max(idle), 1), "", "", ""]]
    for r in runs:
        label = {"before": "before: query applies the outbox (old run_query)",
                 "ungated": "background applier, 512-point batches, no yield to queries",
                 "after": "after: background applier, 128-point batches, yields to queries in flight"}[r["mode"]]
        rows.append([label, len(r["lat"]), round(p50(r["lat"]), 1), round(pct(r["lat"], 95), 1),
                     round(max(r["lat"]), 1), f"{r['chunks']:,} in {r['ingest_s']:.0f} s",
                     f"{r['applied_in_query']:,}" if r["mode"] == "before" else "0",
                     round(r["catch_up_s"], 2)])
    text = "\n".join([
        f"## Query latency during a {runs[0]['chunks']:,}-chunk ingest (run_query, hybrid, no reranker)", "",
        table(["mode", "queries", "p50 ms", "p95 ms", "max ms", "ingest (other process)",
               "outbox rows applied inside queries", "index caught up s after ingest"], rows), "",
        f"Queries are due every {INTERVAL_S * 1000:.0f} ms (open loop): a query's latency runs from when it was "
        f"due, so one that waits behind a stall counts the wait. "
        f"The ingest runs through the real runner in its own process (`manage.py ingest --sync --no-apply`, "
        f"as a Celery worker would); this process owns the embedded Qdrant store and queries it. "
        f"The embedding cache was filled first by an untimed ingest of the same corpus ({warm_s:.0f} s), so "
        f"each measured ingest re-embeds nothing: it is chunking, Postgres writes and index application. "
        f"Embedding precision {resolve_precision(settings.EMBEDDING_PRECISION)}.", "",
        f"CPU flags: {cpu_flags()}.", "",
        machine(), "", f"Reproduce: `.venv/bin/python bench/bench_query_during_ingest.py --chunks {args.chunks}`",
    ])
    write_result("query-during-ingest", text)


if __name__ == "__main__":
    main()
