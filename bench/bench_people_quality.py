"""People search relevance: the graded benchmark (people/evaluation/benchmark.py) on two directories, one row per relaxation
policy and blended-score variant, the seed's policy and the code before semantic roles among them.

Why two directories: the default policy is chosen on the demo directory (people.importing.demo, seed 7) and confirmed on
one built differently and never tuned on: another seed, other companies and cities (a European directory the
curated vocabulary does not know), fewer cards per person, written to JSONL and loaded through the importer.
Counts and ratios, measured in one run; the p95 column is each variant's search latency on this (small)
directory, the 10k figure is bench_people.py's.

    .venv/bin/python bench/bench_people_quality.py [--count N] [--queries Q] [--var-dir DIR]
"""
from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, setup_django, write_result

OTHER_COMPANIES = ["zalando", "n26", "adyen", "booking", "spotify", "klarna", "delivery hero", "celonis",
                   "personio", "revolut", "mollie", "bolt", "wise", "trivago", "sap", "siemens", "bunq", "miro"]
OTHER_CITIES = {"berlin": "germany", "munich": "germany", "hamburg": "germany", "amsterdam": "netherlands",
                "rotterdam": "netherlands", "stockholm": "sweden", "lisbon": "portugal", "barcelona": "spain",
                "dublin": "ireland", "tallinn": "estonia"}
ABSENT_OTHER = ["vienna", "prague", "zurich", "copenhagen"]


def load_directory(*, name: str, count: int) -> None:
    """Empty the people tables, then load one directory (the demo generator, or a JSONL file via the importer)."""
    from django.db import connection

    from people.importing.demo import generate_records
    from people.importing.importer import import_file, import_records, rebuild_hnsw
    from people.models import ImportJob
    from people.parsing.vocabulary import rebuild_vocabulary

    with connection.cursor() as cur:
        cur.execute("TRUNCATE people_person CASCADE")
    rebuild_vocabulary()
    if name == "demo":
        import_records(((i, r) for i, r in enumerate(generate_records(count, seed=7), 1)), embed="inline",
                       total=count, show_progress=True)
    else:
        buf = io.StringIO()
        for r in generate_records(count, seed=23, cards_per_person=(2, 6), companies=OTHER_COMPANIES,
                                  cities=OTHER_CITIES):
            buf.write(json.dumps(r) + "\n")
        buf.seek(0)
        _job, report = import_file(lines=buf, job=ImportJob(file_format="jsonl", source_name="other.jsonl"),
                                    embed="inline")
        assert not report.errors, report.errors[:3]
    rebuild_hnsw()
    with connection.cursor() as cur:
        cur.execute("ANALYZE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=1000, help="size flag: people per directory")
    ap.add_argument("--queries", type=int, default=96, help="benchmark queries per directory")
    ap.add_argument("--var-dir", default=None)
    ap.add_argument("--only", default="", help="comma-separated variant labels (default: all)")
    args = ap.parse_args()
    setup_django(var_dir=args.var_dir)
    from accounts.models import User
    from credits.ledger import grant
    from inference.encoders import embed_texts
    from people.evaluation import benchmark as pb

    embed_texts(["warm up the model"])
    user, _ = User.objects.get_or_create(email="bench-quality@example.com")
    grant(user=user, amount=10_000_000, reason="bench")
    rows = {"before (seed policy, no semantic roles)": {"RELAXATION_POLICY": "seed", "SEMANTIC_ROLES": False},
            **pb.variants()}
    if args.only:
        keep = set(args.only.split(","))
        rows = {k: v for k, v in rows.items() if k in keep or k.split(": ", 1)[-1] in keep}
    reports, parts = {}, []
    for name, title, absent in (("demo", "demo directory (people.importing.demo, seed 7) — tuned on", None),
                                ("other", "other directory (seed 23, European companies and cities, 2-6 cards, "
                                          "imported from JSONL) — not tuned on", ABSENT_OTHER)):
        load_directory(name=name, count=args.count)
        truth = pb.load_truth()
        queries = pb.build_queries(truth, count=args.queries, seed=30, absent_cities=absent or ())
        report = pb.evaluate(user=user, queries=queries, rows=rows)
        reports[f"{title.split(' (')[0]} ({len(truth):,} people)"] = report
        parts.append(pb.markdown(report, title=f"{title}, {len(truth):,} people"))
        first = next(iter(report.values()))
        parts.append("Sample queries: " + "; ".join(f"`{o.query.text}` ({o.query.group})"
                                                    for o in first["outcomes"][:8]) + ".")
    png = pb.chart(reports, path=RESULTS / "people_quality.png")
    (RESULTS / "people_quality.json").write_text(json.dumps({name: pb.summaries(r) for name, r in reports.items()},
                                                            indent=2) + "\n")
    lines = [f"### People search relevance ({args.count:,} people per directory, {args.queries} queries each)", "",
             "Groups: `drawn` queries take every constraint from one card (a full match exists); `combined` mix "
             "two people's fields (often no one matches all); `absent` ask for a role or city the directory "
             "lacks; `unseen` use role words with no vocabulary entry. Gold: 3 = every constraint on one card "
             "(and the profile ones), 2 = all but one, 1 = all but two.", "", *[p + "\n" for p in parts],
             f"![people relevance]({png.relative_to(RESULTS.parent.parent)})", "", machine(), "",
             f"Reproduce: `.venv/bin/python bench/bench_people_quality.py --count {args.count} "
             f"--queries {args.queries}`"]
    write_result("people_quality", "\n".join(lines))


if __name__ == "__main__":
    main()
