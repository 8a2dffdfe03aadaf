"""People search: how many queries find anyone with the optional intent/domain/seniority tier off and on.

Why: the default tiers never relax intent, domain and seniority, so a query for a role or level the directory lacks
returns nobody; PEOPLE_SEARCH["RELAX_INTENT_TIER"] adds a last tier that drops them (and says so in
`relaxation.dropped`). This counts, on the synthetic directory, the benchmark queries of bench_people.py and a
few queries for roles and levels it has no cards for. Counts, not timings: the load on the machine does not
change them.

    .venv/bin/python bench/bench_people_relaxation.py [--count N]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, table, write_result
from bench_people import QUERIES

# roles and levels the demo directory has no cards for
HARD_QUERIES = [
    "staff designers in pune",
    "embedded firmware engineers",
    "research scientists working on nlp",
    "intern security engineers",
    "principal data engineers at flipkart",
    "vp of engineering in fintech",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=200, help="size flag: people to generate and import")
    args = ap.parse_args()
    setup_django()
    from django.db import transaction
    from django.test import override_settings

    from accounts.models import User
    from credits.ledger import grant
    from people.importing.demo import generate_records
    from people.importing.importer import import_records, rebuild_hnsw
    from people.service.searches import SearchRequest, run_search

    import_records(((i, r) for i, r in enumerate(generate_records(args.count, seed=7), 1)), embed="inline",
                   total=args.count, show_progress=False)
    rebuild_hnsw()
    user = User.objects.create_user(email="bench@example.com", password="x" * 12)
    grant(user=user, amount=10_000_000, reason="bench")
    rows, per_query = [], []
    for name, qs in (("benchmark queries (bench_people.py)", QUERIES), ("roles/levels absent from the directory",
                                                                         HARD_QUERIES)):
        found: dict[bool, int] = {}
        for on in (False, True):
            found[on] = 0
            for q in qs:
                with override_settings(PEOPLE_SEARCH={"RELAX_INTENT_TIER": on}), transaction.atomic():
                    out = run_search(user=user, asked=SearchRequest(query=q))
                found[on] += bool(out["people"])
                if on and out["relaxation"]["dropped"] and any(d["constraint"] == "intent"
                                                              for d in out["relaxation"]["dropped"]):
                    per_query.append([q, out["relaxation"]["tier"], len(out["people"]), out["relaxation"]["notice"]])
        rows.append([name, len(qs), found[False], found[True]])
    lines = [
        f"## People search — queries that find anyone, intent tier off and on ({args.count} people)", "",
        table(["queries", "n", "RELAX_INTENT_TIER off (default)", "on"], rows), "",
        "Queries that reached the intent tier with it on (tier 4), with the notice the page shows:", "",
        table(["query", "tier", "people", "notice"], per_query), "",
        machine(), "",
        f"Reproduce: `.venv/bin/python bench/bench_people_relaxation.py --count {args.count}`",
    ]
    write_result("people-relaxation", "\n".join(lines))


if __name__ == "__main__":
    main()
