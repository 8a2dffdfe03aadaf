"""People search: import throughput of the synthetic directory, then search latency and tier reached.

Why: seed 001 sets latency targets for run_search over a directory with
fallback tiers; this measures the real path (deterministic parser, embedding,
pgvector HNSW tiers, lexical bonus, ranking, persistence + debit) on private
services. Each search runs inside transaction.atomic like the view does.

    .venv/bin/python bench/bench_people.py [--count N] [--repeat R]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, p50, pct, setup_django, table, write_result

QUERIES = [
    "senior backend engineer with kafka experience in bangalore",
    "react frontend developers who worked at flipkart",
    "data engineers with spark and airflow",
    "machine learning engineer pytorch llm",
    "devops engineer kubernetes terraform aws open to work",
    "android engineers kotlin at swiggy",
    "staff engineer payments razorpay",
    "site reliability engineer on-call go linux",
    "product manager growth fintech mumbai",
    "security engineer appsec",
    "sdet selenium automation pune",
    "full stack django react hyderabad",
    "engineering manager ecommerce 10 years",
    "data analyst tableau sql",
    "java spring boot microservices developers",
    "flutter developer open to work remote",
    "people who cut cloud spend",
    "recommendation systems at myntra",
    "junior python developer chennai",
    "lead engineer who reduced p99 latency",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=1000, help="size flag: people to generate and import")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the 20 queries (first pass = cold)")
    args = ap.parse_args()
    setup_django()
    from django.db import connection, transaction

    from accounts.models import User
    from credits.ledger import grant
    from people.demo import generate_records
    from people.importer import import_records, rebuild_hnsw
    from people.models import Person
    from people.service import run_search
    from search.encoders import embed_texts

    embed_texts(["warm up the model"])  # model load is not import throughput
    t0 = time.perf_counter()
    records = list(generate_records(args.count, seed=7))
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = import_records(((i, r) for i, r in enumerate(records, 1)), embed="inline", total=args.count,
                         show_progress=False)
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    rebuild_hnsw()
    t_hnsw = time.perf_counter() - t0
    n_people = Person.objects.count()
    with connection.cursor() as cur:
        cur.execute("ANALYZE")

    user = User.objects.create_user(email="bench@example.com", password="x" * 12)
    grant(user=user, amount=10_000_000, reason="bench")

    per_q: dict[str, list[float]] = {q: [] for q in QUERIES}
    stages: dict[str, list[float]] = {}
    tiers: dict[str, int | None] = {}
    counts: dict[str, int] = {}
    cold: list[float] = []
    warm: list[float] = []
    for r in range(args.repeat):
        for q in QUERIES:
            timings: dict[str, float] = {}
            t = time.perf_counter()
            with transaction.atomic():
                out = run_search(user=user, query=q, timings=timings)
            ms = (time.perf_counter() - t) * 1000
            per_q[q].append(ms)
            (cold if r == 0 else warm).append(ms)
            if r > 0:
                for k, v in timings.items():
                    stages.setdefault(k, []).append(float(v))
            from people.models import Search

            tiers[q] = (Search.objects.filter(pk=out["search_id"]).values_list("extra", flat=True).first()
                        or {}).get("fallback_tier")
            counts[q] = len(out["people"])

    allms = warm or cold
    tier_hist = Counter(tiers.values())
    lines = [
        f"## People search — {n_people:,} people imported ({rep.cards:,} cards, {rep.children:,} evidence cards)", "",
        "### Import", "",
        table(["step", "seconds", "throughput"], [
            ["generate records", round(t_gen, 2), f"{args.count / max(t_gen, 1e-9):,.0f} people/s"],
            ["import_records (inline embeddings)", round(t_import, 2),
             f"{rep.people / t_import:,.1f} people/s; {(rep.cards + rep.children) / t_import:,.1f} cards/s"],
            ["rebuild_hnsw", round(t_hnsw, 2), ""],
        ]), "",
        f"Embeddings computed during import: {rep.embedded:,} (templated texts dedupe through EmbeddingCache).", "",
        f"### run_search latency ({len(QUERIES)} queries x {args.repeat} passes; pass 1 is cold)", "",
        table(["set", "n", "p50 ms", "p95 ms", "max ms"], [
            ["cold (pass 1)", len(cold), round(p50(cold), 1), round(pct(cold, 95), 1), round(max(cold), 1)],
            ["warm (passes 2+)", len(warm), round(p50(warm), 1), round(pct(warm, 95), 1),
             round(max(warm), 1) if warm else 0],
        ]), "",
        "Per stage (warm passes; `timings` from run_search):", "",
        table(["stage", "p50 ms", "p95 ms", "share of p50 total"],
              [[k, round(p50(v), 2), round(pct(v, 95), 2),
                f"{p50(v) / max(p50(allms), 1e-9):.0%}"] for k, v in stages.items()]), "",
        "### Per query (median ms, tier reached, people returned)", "",
        table(["query", "median ms", "tier", "people"],
              [[q, round(p50(v), 1), tiers[q], counts[q]] for q, v in per_q.items()]), "",
        "Tier histogram: " + ", ".join(f"tier {k}: {v}" for k, v in sorted(tier_hist.items(), key=lambda x: str(x[0]))),
        "", machine(), "",
        f"Reproduce: `.venv/bin/python bench/bench_people.py --count {args.count}`",
    ]
    write_result("people", "\n".join(lines))


if __name__ == "__main__":
    main()
