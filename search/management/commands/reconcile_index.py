"""`manage.py reconcile_index [--fix] [--json]`: compare the Qdrant index with Postgres, optionally repair it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import DependencyDown
from search.engine.index import get_index, open_index
from search.engine.reconcile import reconcile_all
from search.management.commands._reconcile import finish

if TYPE_CHECKING:
    from collections.abc import Iterator

    from search.engine.reconcile import ReconcileReport


class Command(BaseCommand):
    help = ("Count points without a chunk (orphans), chunks without a point (missing) and points whose payload "
            "differs from Postgres (stale); --fix repairs them from Postgres and cached vectors, then re-checks. "
            "Exits 1 while the index is not exact.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fix", action="store_true", help="delete orphans, add missing points, rewrite payloads")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--path", default="", help="check a separate embedded store at this path")

    def handle(self, *args: object, **opts: Any) -> None:
        try:
            index = open_index(path=opts["path"]) if opts["path"] else get_index()
        except DependencyDown as exc:
            raise CommandError(
                f"{exc.detail}\nWhile `make run` serves, its web process owns the embedded store: use 'Reconcile "
                "now' on the admin's Reconcile runs page (/admin/search/reconcilerun/), or stop the server "
                "first.") from exc
        try:  # the configured model's collections, then each adapted model's a dataset uses
            reports = reconcile_all(index=index, fix=opts["fix"], progress=not opts["json"])
        finally:
            if opts["path"]:
                index.close()
        report, others = reports[0], reports[1:]
        data = {**report.as_dict(), **({"models": [r.as_dict() for r in others]} if others else {})}
        finish(self, as_json=opts["json"], data=data, lines=(line for r in reports for line in self._lines(r)),
               exact=all(r.exact for r in reports),
               failure="the index is not exact: run `manage.py reconcile_index --fix`")

    def _lines(self, report: ReconcileReport) -> Iterator[str]:
        f = report.found
        yield (f"{report.store}: {f.points} points, {f.chunks} chunks (outbox: {report.applied} rows "
               f"applied first, {report.pending} pending)")
        yield (f"orphans {len(f.orphans)}  missing {len(f.missing)}  stale {len(f.stale)}"
               f"  (unembedded {f.unembedded}, in flight {f.in_flight})")
        if report.after is not None:
            a = report.after
            yield (f"after fix: orphans {len(a.orphans)}  missing {len(a.missing)}  stale {len(a.stale)}"
                   f"  ({a.points} points)")
        yield "exact" if report.exact else "NOT exact"
