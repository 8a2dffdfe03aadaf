import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from people.importing.demo import generate_records
from people.importing.importer import import_records


class Command(BaseCommand):
    help = "Generate a realistic synthetic directory of Indian tech professionals (deterministic per --seed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, default=200)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--embed", choices=["inline", "celery", "none"], default="inline")
        parser.add_argument("--jsonl", help="write the records to this file instead of loading them")

    def handle(self, *args: object, **opts: Any) -> None:
        records = generate_records(opts["count"], seed=opts["seed"])
        if opts["jsonl"]:
            with open(opts["jsonl"], "w", encoding="utf-8") as fh:
                for r in records:
                    fh.write(json.dumps(r) + "\n")
            self.stdout.write(f"wrote {opts['count']} people to {opts['jsonl']}")
            return
        report = import_records(((i, r) for i, r in enumerate(records, 1)), embed=opts["embed"],
                                total=opts["count"], rebuild_index=opts["count"] >= 2000)
        self.stdout.write(f"loaded {report.people} people, {report.cards} cards, {report.children} evidence cards")
