"""`manage.py reconcile_code [--fix] [--json] [--dataset ID ...]`: prove the symbol graph and grep's trigrams equal
a fresh build from the chunks in Postgres (search.ingest.code_facts.check); --fix rebuilds what differs."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandParser

from search.ingest.code_facts import check
from search.management.commands._reconcile import finish

if TYPE_CHECKING:
    from collections.abc import Iterator

    from search.ingest.code_facts import CodeCheck


class Command(BaseCommand):
    help = ("Compare every document's code rows (CodeFile, Symbol, SymbolRef) with a fresh build from its chunks: "
            "drifted (rows differ), missing (no rows: e.g. documents written before the code tools existed), "
            "orphans. --fix rebuilds them and checks again. Exits 1 while not exact.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fix", action="store_true", help="rebuild drifted and missing documents' rows")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--dataset", type=int, action="append", default=None, help="only this dataset id")

    def handle(self, *args: object, **opts: Any) -> None:
        report = check(dataset_ids=opts["dataset"], fix=opts["fix"])
        finish(self, as_json=opts["json"], data=report.as_dict(), lines=self._lines(report), exact=report.exact,
               failure="the code graph is not exact: run `manage.py reconcile_code --fix`")

    def _lines(self, report: CodeCheck) -> Iterator[str]:
        yield f"{report.documents} documents, {report.definitions} definitions, {report.references} references"
        yield f"drifted {len(report.drifted)}  missing {len(report.missing)}  orphans {report.orphans}"
        if report.after is not None:
            a = report.after
            yield f"after fix: drifted {len(a.drifted)}  missing {len(a.missing)}  orphans {a.orphans}"
        yield "exact" if report.exact else "NOT exact"
