"""Rulebook chunks written before pages existed held the book's file name as their `page`; the migration clears it
and leaves a printed page, and every other kind's row, as it was. The database is left at the latest state."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("search", "0021_project_ranking")


def _migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def test_a_rules_chunk_keeps_its_printed_page_and_loses_its_file_name() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        apps = _migrate([node for node in latest if node[0] != "search"] + [BEFORE])
        project = apps.get_model("projects", "Project").objects.create(slug="book", name="Book")
        dataset = apps.get_model("search", "Dataset").objects.create(project=project, name="rules", kind="rules")
        document = apps.get_model("search", "Document").objects.create(dataset=dataset, path="Conditions.md",
                                                                        content_hash="c" * 64)
        chunk = apps.get_model("search", "Chunk")
        rows = {page: chunk.objects.create(document=document, dataset=dataset, path="Conditions.md", kind=kind, ordinal=i,
                                           text=page or "x", text_hash=(page or "x").ljust(64, "0")[:64],
                                           page=page).pk
                for i, (page, kind) in enumerate([("Conditions.md", "rules"), ("spells.JSON", "rules"), ("p. 112", "rules"),
                                   ("notes.md", "web")])}
        apps = _migrate(latest)
        pages = dict(apps.get_model("search", "Chunk").objects.values_list("pk", "page"))
        assert pages[rows["Conditions.md"]] == ""
        assert pages[rows["spells.JSON"]] == ""
        assert pages[rows["p. 112"]] == "p. 112"
        assert pages[rows["notes.md"]] == "notes.md"  # not a rulebook chunk: left alone
    finally:
        _migrate(latest)
