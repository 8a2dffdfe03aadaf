"""Cached vectors are stored in the row as they are (no pglz, no TOAST table), read back as the same doubles, and
the migration that sets this runs backward (compressed, out of line, as before) and forward again. The database is
left at the latest state."""
from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from inference.encoders import cached_vectors

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("inference", "0001_embedding_cache_from_search")


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)


def _store(model_id: str, text_hash: str, vector: np.ndarray) -> tuple[str | None, int, list[float]]:
    """Write one cache row as the cache fill writes it; -> (its compression, its stored size, its doubles)."""
    from config.pgarrays import Float8Vector, insert_float8_vectors

    insert_float8_vectors(sql="INSERT INTO search_embeddingcache (model_id, text_hash, dim, vector, created_at) "
                              "VALUES (%s, %s, %s, %b, now())",
                          rows=[(model_id, text_hash, len(vector), Float8Vector(vector))])
    with connection.cursor() as cur:
        cur.execute("SELECT pg_column_compression(vector), pg_column_size(vector) FROM search_embeddingcache "
                    "WHERE model_id = %s AND text_hash = %s", [model_id, text_hash])
        compression, size = cur.fetchone()
    return compression, size, cached_vectors(model_id=model_id, hashes=[text_hash])[text_hash]


def _storage() -> tuple[str, list[str] | None, bool]:
    with connection.cursor() as cur:
        cur.execute("SELECT a.attstorage, c.reloptions, c.reltoastrelid <> 0 FROM pg_attribute a "
                    "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = 'search_embeddingcache' "
                    "AND a.attname = 'vector'")
        return cur.fetchone()


def test_a_cached_vector_is_stored_uncompressed_and_reads_back_as_the_same_doubles() -> None:
    v = np.random.default_rng(11).standard_normal(384).astype(np.float32)
    v[:3] = [-0.0, 1e-38, 3.4028235e38]
    compression, size, back = _store("storage-test", "a" * 64, v)
    assert compression is None  # not run through pglz
    assert size >= 384 * 8  # every double's 8 bytes, in the row
    assert back == [float(x) for x in v] and str(back[0]) == "-0.0"


def test_the_storage_migration_runs_backward_and_forward() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    v = np.random.default_rng(12).standard_normal(384).astype(np.float32)
    try:
        _migrate([node for node in latest if node[0] != "inference"] + [BEFORE])
        storage, options, _ = _storage()
        assert storage == "x" and not options  # EXTENDED, the default tuple target: compressed
        compression, size, back = _store("storage-test", "b" * 64, v)
        assert compression == "pglz" and size < 384 * 8
        assert back == [float(x) for x in v]
        _migrate(latest)
        storage, options, _ = _storage()
        assert storage == "e" and options == ["toast_tuple_target=8160"]
        assert cached_vectors(model_id="storage-test", hashes=["b" * 64])["b" * 64] == back  # an older row reads as before
        compression, _, back = _store("storage-test", "c" * 64, v)
        assert compression is None and back == [float(x) for x in v]
    finally:
        _migrate(latest)
