"""The chunk and symbol tables keep one index per way they are read: the LIKE twins of the equality columns and the
foreign-key indexes a composite index leads with are gone, the equality indexes stay (renamed), and the migration
runs backward (every index back under its old name) and forward again. The database is left at the latest state."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("search", "0023_document_originals")
GONE = {"search_chunk_text_hash_56296be4_like", "search_chunk_ruleset_id_7dd63f68_like",
        "search_chunk_book_id_0abc0e61_like", "search_chunk_document_id_81fc35b9", "search_chunk_dataset_id_f2ecbb85",
        "search_symbol_dataset_id_0e9bc342", "search_symbol_document_id_15a366f6",
        "search_symbolref_dataset_id_5a75e24b", "search_symbolref_document_id_c707f4a7"}
RENAMED = {"chunk_text_hash": "search_chunk_text_hash_56296be4", "chunk_ruleset_id": "search_chunk_ruleset_id_7dd63f68",
           "chunk_book_id": "search_chunk_book_id_0abc0e61"}


def _indexes() -> dict[str, str]:
    with connection.cursor() as cur:
        cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
                    "('search_chunk', 'search_symbol', 'search_symbolref')")
        return dict(cur.fetchall())


def _migrate(targets: list[tuple[str, str]]) -> None:
    MigrationExecutor(connection).migrate(targets)


def test_each_chunk_and_symbol_index_is_read_by_some_query_and_the_migration_runs_both_ways() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    now = _indexes()
    assert not GONE & set(now)
    assert {name: "USING btree" in now[name] and "varchar_pattern_ops" not in now[name] for name in RENAMED} == \
        dict.fromkeys(RENAMED, True)
    # what each dropped index served is still served by an index leading with the same column
    assert "(document_id, ordinal)" in now["uniq_chunk_ordinal"]
    assert "(dataset_id, path)" in now["search_chun_dataset_305943_idx"]
    assert "(dataset_id, name)" in now["symbolref_dataset_name"] and "(document_id, kind)" in now[
        "symbolref_document_kind"]
    assert "(dataset_id, name)" in now["symbol_dataset_name"] and "(document_id, start_line)" in now[
        "symbol_document_line"]
    try:
        _migrate([node for node in latest if node[0] != "search"] + [BEFORE])
        old = _indexes()
        assert GONE <= set(old) and set(RENAMED.values()) <= set(old) and not set(RENAMED) & set(old)
        _migrate(latest)
        assert _indexes() == now
    finally:
        _migrate(latest)
