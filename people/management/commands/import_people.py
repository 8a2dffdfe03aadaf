import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from people.importing.importer import import_file
from people.models import ImportJob


class Command(BaseCommand):
    help = ("Load people from a JSONL file (one person per line) or a CSV file (one experience card per row); "
            "the schema is in README, 'Importing a directory'. Bad rows are reported (line, field, reason) and "
            "skipped; re-importing the same file changes nothing.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--format", choices=["jsonl", "csv"], default=None,
                            help="default: from the file's extension (.csv is CSV, anything else JSONL)")
        parser.add_argument("--embed", choices=["inline", "celery", "none"], default="inline",
                            help="inline: embed now with a progress bar; celery: enqueue (progress in the admin's "
                                 "Import jobs); none: skip")
        parser.add_argument("--batch-size", type=int, default=1000)
        parser.add_argument("--rebuild-index", action="store_true", help="rebuild HNSW indexes after the load")
        parser.add_argument("--report", default=None, help="also write the full report (every rejected row) as JSON")

    def handle(self, *args: object, **opts: Any) -> None:
        path = Path(opts["file"])
        fmt = opts["format"] or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
        try:
            with path.open(encoding="utf-8", newline="") as fh:
                total = sum(1 for line in fh if line.strip()) - (1 if fmt == "csv" else 0)
            with path.open(encoding="utf-8", newline="") as fh:
                job, report = import_file(lines=fh, job=ImportJob(file_format=fmt, source_name=path.name),
                                          embed=opts["embed"], batch_size=opts["batch_size"], total=max(total, 0),
                                          show_progress=True, rebuild_index=opts["rebuild_index"])
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        for err in report.errors[:50]:
            self.stderr.write(f"line {err['line']}: {err['field'] or 'record'}: {err['reason']}")
        if len(report.errors) > 50:
            self.stderr.write(f"... and {len(report.errors) - 50} more (--report FILE lists them all)")
        if opts["report"]:
            Path(opts["report"]).write_text(json.dumps(report.as_dict(), indent=2, default=str), encoding="utf-8")
        self.stdout.write(f"import job {job.pk}: {report.created} people created, {report.updated} updated, "
                          f"{report.unchanged} unchanged; {report.cards} cards, {report.children} evidence cards; "
                          f"{len(report.errors)} rows rejected")
