"""Access control as a property, at scale: >= 500 generated worlds, 0 leaks expected.

Why a bench as well as a test: `make test` runs a bounded number of worlds; this runs the same
property (tests/hardening/access_world.py) over many more, on private embedded services, and writes
the counts. A pool of datasets (code, web, two rulebooks) is ingested once; every world rewrites
owners, global flags, shares (granted and revoked) and document placement in Postgres only — the
outbox is not written, so the Qdrant payload is stale in every world — inside a savepoint rolled
back after the world. Each world then queries through the real API (context query, rules search,
rules answer SSE; members and non-members) and every result, why, pack span, candidate id,
citation and QuerySession/RerankResult row is checked against the accessible set computed from the
generated world. People search (no datasets: card visibility is its access rule) runs its own worlds.

    .venv/bin/python bench/access_property.py [--worlds 500] [--people-worlds 100] [--seed 0]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, setup_django, table, write_result


def run(worlds_target: int, people_target: int, seed: int) -> str:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    from tests.hardening.access_world import (
        Stats,
        build_people_pool,
        build_pool,
        check_people_world,
        check_world,
        people_worlds,
        worlds,
    )

    t0 = time.perf_counter()
    pool = build_pool(Path(tempfile.mkdtemp(prefix="access-pool-")))
    people_pool = build_people_pool()
    t_pool = time.perf_counter() - t0
    total, failures = Stats(), []

    def drive(strategy, check, target: int, label: str) -> float:
        t = time.perf_counter()
        ran = {"n": 0}
        rounds = 0
        while ran["n"] < target and rounds < 10:
            @hseed(seed + rounds)
            @settings(max_examples=target - ran["n"], deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(world=strategy)
            def prop(world):
                try:
                    stats = check(world)
                except AssertionError as exc:  # a non-leak failure (e.g. a completeness miss): record, go on
                    failures.append(f"{label}: {str(exc)[:300]}")
                    stats = Stats(worlds=1)
                total.merge(stats)
                ran["n"] += 1
                if ran["n"] % 50 == 0:
                    print(f"  {label}: {ran['n']} worlds, {len(total.leaks)} leaks, "
                          f"{time.perf_counter() - t:.0f} s", file=sys.stderr)

            prop()
            rounds += 1
        return time.perf_counter() - t

    t_ctx = drive(worlds, lambda w: check_world(pool, w), worlds_target, "projects")
    ctx = Stats()
    ctx.merge(total)
    t_people = drive(people_worlds, lambda w: check_people_world(people_pool, w), people_target, "people")
    people_worlds_run = total.worlds - ctx.worlds

    rows = [
        ["projects / datasets (context query, rules search, rules answer)", ctx.worlds, ctx.mutations, ctx.queries,
         ctx.non_member_queries, ctx.pages_opened, ctx.results_checked, ctx.log_rows_checked, ctx.completeness_checks,
         len(ctx.leaks), f"{t_ctx:.0f}"],
        ["people search (card visibility)", people_worlds_run, people_worlds_run, total.people_searches,
         0, 0, total.results_checked - ctx.results_checked, total.log_rows_checked - ctx.log_rows_checked, 0,
         len(total.leaks) - len(ctx.leaks), f"{t_people:.0f}"],
    ]
    out = [
        "# Access control as a property",
        "",
        f"Command: `.venv/bin/python bench/access_property.py --worlds {worlds_target} "
        f"--people-worlds {people_target} --seed {seed}`",
        "",
        "Each world: 1-4 projects, 1-3 users with random memberships, 8 pooled datasets (4 code, 2 web, 2 rulebooks) "
        "with random owners (or an outside project) and global flags, random shares; then rounds of Postgres-only "
        "mutations (grant, revoke, change owner, toggle global, move a document to another dataset) each followed "
        "by one API query by a random user (a non-member must get 404 and nothing logged) and sometimes by opening "
        "the cited-section page /rules/chunk/<id> of a random pooled chunk (200 exactly when one of the user's "
        "projects may see it, else 404). The Qdrant payload is "
        "never updated, so every world is a stale-payload world. Checked per query: every result and its why, every "
        "pack file and span, every rules candidate id and query-named book filter, every answer context chunk and "
        "citation, and every QuerySession/RerankResult row; for context queries with top_k=50 also completeness "
        "(results = chunks accessible both in Postgres and in their indexed payload). The expected accessible set "
        "is computed from the generated world (own, plus global unless include_global=false, plus active shares), "
        "not from projects/access.py.",
        "",
        table(["property", "worlds", "mutations", "queries", "non-member queries", "cited pages opened",
               "results checked",
               "log rows checked", "completeness checks", "leaks", "time (s)"], rows),
        "",
        f"Leaks: **{len(total.leaks)}** (target 0). Other failures (completeness misses, errors): {len(failures)}. "
        f"Pool ingest (real chunker, MiniLM, outbox, embedded Qdrant; people cards embedded): {t_pool:.1f} s.",
    ]
    if total.leaks:
        out += ["", "First leaks:", ""] + [f"- {x}" for x in total.leaks[:10]]
    if failures:
        out += ["", "First failures:", ""] + [f"- {x}" for x in failures[:10]]
    out += ["", machine()]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=500)
    ap.add_argument("--people-worlds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    setup_django()
    from django.conf import settings

    if "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the in-process API client's host
    write_result("access_property", run(args.worlds, args.people_worlds, args.seed))


if __name__ == "__main__":
    main()
