"""`manage.py reindex`: drop and rebuild the Qdrant collection from Postgres (no re-embedding), then optimize."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import DependencyDown
from search.engine.applier import rebuild
from search.engine.index import get_index, open_index


class Command(BaseCommand):
    help = "Rebuild the chunk index from Postgres without re-embedding; reports optimize (HNSW build) time."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--path", default="", help="rebuild a separate embedded store at this path")

    def handle(self, *args: object, **opts: Any) -> None:
        try:
            index = open_index(path=opts["path"]) if opts["path"] else get_index()
        except DependencyDown as exc:
            raise CommandError(
                f"{exc.detail}\nWhile `make run` serves, its web process owns the embedded store: use the admin "
                "action 'Reindex Qdrant from Postgres' on Datasets, or stop the server first.") from exc
        stats = rebuild(index=index, progress=True)
        self.stdout.write(f"reindexed {int(stats['points'])} points into {index.store_key}: upsert "
                          f"{stats['upsert_s']:.1f}s, optimize {stats['optimize_s']:.1f}s")
        index.close()
