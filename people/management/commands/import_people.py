from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from people.importer import import_records, read_jsonl


class Command(BaseCommand):
    help = "Load people (profile, experience cards, evidence) from a JSONL file, one person per line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--embed", choices=["inline", "celery", "none"], default="inline",
                            help="inline: embed now with a progress bar; celery: enqueue; none: skip")
        parser.add_argument("--batch-size", type=int, default=1000)
        parser.add_argument("--rebuild-index", action="store_true", help="rebuild HNSW indexes after the load")

    def handle(self, *args: object, **opts: Any) -> None:
        try:
            with open(opts["file"], encoding="utf-8") as fh:
                total = sum(1 for line in fh if line.strip())
        except OSError as exc:
            raise CommandError(f"cannot read {opts['file']}: {exc}") from exc
        report = import_records(read_jsonl(opts["file"]), embed=opts["embed"], batch_size=opts["batch_size"],
                                total=total, rebuild_index=opts["rebuild_index"])
        for err in report.errors[:50]:
            self.stderr.write(err)
        self.stdout.write(f"imported {report.people} people, {report.cards} cards, {report.children} evidence "
                          f"cards; {len(report.errors)} invalid lines skipped")
