"""`manage.py evaluate_people`: the people relevance benchmark over the directory that is loaded.

Why a command of its own and not `manage.py evaluate --people`: evaluate belongs to search, and search may not
import people (the layers contract in pyproject.toml: config <- accounts <- projects <- credits <- search <- people).
"""
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from people.evaluation import benchmark as pb
from people.retrieval.tiers import POLICIES


class Command(BaseCommand):
    help = ("Graded people-search benchmark from the loaded directory's own records: nDCG@6, P@6 of fully matching "
            "people and how often a full match is left out, one row per relaxation policy (and score weights).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queries", type=int, default=96, help="queries to generate from the directory")
        parser.add_argument("--seed", type=int, default=30, help="the generator's seed")
        parser.add_argument("--policies", default="", help=f"comma-separated, of: {', '.join(POLICIES)} (default all)")
        parser.add_argument("--no-weights", action="store_true", help="leave out the blended-score weight rows")
        parser.add_argument("--absent-cities", default="", help="comma-separated cities the directory lacks")
        parser.add_argument("--report-dir", default="", help="write people_eval.md, .json and .png here")

    def handle(self, *args: object, **opts: Any) -> None:
        policies = [p.strip() for p in opts["policies"].split(",") if p.strip()] or list(POLICIES)
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise CommandError(f"unknown policy {', '.join(unknown)}; known: {', '.join(POLICIES)}")
        if opts["queries"] < 1:
            raise CommandError("--queries must be at least 1")
        rows = pb.variants(policies=policies, weights=not opts["no_weights"])
        absent = [c.strip().lower() for c in opts["absent_cities"].split(",") if c.strip()]
        queries, report = pb.evaluate_directory(count=opts["queries"], seed=opts["seed"], rows=rows,
                                                absent_cities=absent, show_progress=True)
        if not queries:
            raise CommandError("the directory has no public cards to write queries from")
        md = pb.markdown(report, title=f"people search, {len(queries)} queries from the loaded directory")
        self.stdout.write(md)
        if opts["report_dir"]:
            out = Path(opts["report_dir"])
            out.mkdir(parents=True, exist_ok=True)
            (out / "people_eval.md").write_text(md + "\n")
            (out / "people_eval.json").write_text(json.dumps(pb.summaries(report), indent=2))
            png = pb.chart({"loaded directory": report}, path=out / "people_eval.png")
            self.stdout.write(f"\nwrote {out / 'people_eval.md'}, .json and {png}")
