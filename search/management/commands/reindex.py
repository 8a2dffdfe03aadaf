"""`manage.py reindex`: drop and rebuild the Qdrant collection from Postgres (no re-embedding), then optimize."""
from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Rebuild the chunk index from Postgres without re-embedding; reports optimize (HNSW build) time."

    def add_arguments(self, parser):  # noqa: ANN001, ANN201
        parser.add_argument("--path", default="", help="rebuild a separate embedded store at this path")

    def handle(self, *args, **opts):  # noqa: ANN002, ANN003, ANN201
        from search.index import get_index, open_index, rebuild

        index = open_index(path=opts["path"]) if opts["path"] else get_index()
        stats = rebuild(index=index, progress=True)
        self.stdout.write(f"reindexed {int(stats['points'])} points into {index.store_key}: upsert "
                          f"{stats['upsert_s']:.1f}s, optimize {stats['optimize_s']:.1f}s")
        index.close()
