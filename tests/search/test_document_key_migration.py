"""Chunk, symbol and reference rows reference (document, dataset) as one key: a row naming a dataset other than its
document's, or a document that does not exist, is refused by the database; deleting a dataset or a document through
the ORM still removes every row under it; and the migration runs backward (the single-column keys back) and forward."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from search.models import Chunk, Dataset, Document, Symbol, SymbolRef

BEFORE = ("search", "0024_chunk_and_symbol_indexes_without_duplicates")
TABLES = ("search_chunk", "search_symbol", "search_symbolref")


def _foreign_keys() -> dict[str, set[str]]:
    """table -> the column lists of its foreign keys, e.g. {"(document_id, dataset_id)", "(dataset_id)"}."""
    with connection.cursor() as cur:
        cur.execute("SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
                    "WHERE contype = 'f' AND conrelid::regclass::text = ANY(%s)", [list(TABLES)])
        keys: dict[str, set[str]] = {t: set() for t in TABLES}
        for table, definition in cur.fetchall():
            keys[table].add(definition.split("FOREIGN KEY ", 1)[1].split(" REFERENCES", 1)[0])
        return keys


def _two_datasets(make_user, make_project) -> tuple[Dataset, Dataset, Document]:
    project = make_project("keys", make_user())
    mine = Dataset.objects.create(project=project, name="mine", kind="code")
    other = Dataset.objects.create(project=project, name="other", kind="code")
    return mine, other, Document.objects.create(dataset=mine, path="a.py", content_hash="h")


def _checked(create) -> None:
    """Run `create` and the deferred key checks now, as a commit would."""
    with transaction.atomic():
        create()
        with connection.cursor() as cur:
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")


@pytest.mark.django_db
@pytest.mark.parametrize("row", ["chunk", "symbol", "reference"])
def test_a_row_naming_another_datasets_document_or_a_missing_one_is_refused(row, make_user, make_project):
    mine, other, doc = _two_datasets(make_user, make_project)

    def make(*, document_id: int, dataset: Dataset) -> None:
        common = {"document_id": document_id, "dataset": dataset, "path": "a.py"}
        if row == "chunk":
            Chunk.objects.create(text="x", text_hash="0" * 64, **common)
        elif row == "symbol":
            Symbol.objects.create(name="f", qualname="f", kind="function", start_line=1, end_line=2, **common)
        else:
            SymbolRef.objects.create(name="f", kind="call", line=1, **common)

    for document_id, dataset in ((doc.pk, other), (doc.pk + 10_000, mine)):
        with pytest.raises(IntegrityError):
            _checked(lambda document_id=document_id, dataset=dataset: make(document_id=document_id, dataset=dataset))
    _checked(lambda: make(document_id=doc.pk, dataset=mine))  # its own document's dataset is accepted


@pytest.mark.django_db
def test_deleting_a_document_or_a_dataset_removes_its_rows_under_the_pair_key(make_user, make_project):
    mine, _, doc = _two_datasets(make_user, make_project)
    kept = Document.objects.create(dataset=mine, path="b.py", content_hash="h")
    for d in (doc, kept):
        Chunk.objects.create(document=d, dataset=mine, path=d.path, text="x", text_hash="0" * 64)
        SymbolRef.objects.create(document=d, dataset=mine, path=d.path, name="f", kind="call", line=1)
    _checked(doc.delete)
    assert list(Chunk.objects.values_list("path", flat=True)) == ["b.py"]
    _checked(mine.delete)
    assert not Chunk.objects.exists() and not SymbolRef.objects.exists() and not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_pair_key_replaces_both_single_keys_and_the_migration_runs_both_ways() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    pair = "(document_id, dataset_id)"
    assert _foreign_keys() == {t: {pair} for t in TABLES}
    try:
        MigrationExecutor(connection).migrate([node for node in latest if node[0] != "search"] + [BEFORE])
        assert _foreign_keys() == {t: {"(document_id)", "(dataset_id)"} for t in TABLES}
        MigrationExecutor(connection).migrate(latest)
        assert _foreign_keys() == {t: {pair} for t in TABLES}
    finally:
        MigrationExecutor(connection).migrate(latest)
