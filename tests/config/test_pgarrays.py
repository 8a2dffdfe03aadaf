"""Array literals for bulk writes: Postgres reads back exactly the numbers a list would have written, float32
vectors included (the embedding cache, a chunk's term ids and a file's trigrams are written through them)."""
from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from config.pgarrays import float_array, int_array

pytestmark = pytest.mark.django_db


def _read(literal: str, cast: str) -> list:
    with connection.cursor() as cur:
        cur.execute(f"SELECT %s::{cast}", [literal])
        return cur.fetchone()[0]


def test_a_float32_vector_reads_back_as_the_same_doubles_a_list_of_floats_writes():
    v = np.random.default_rng(3).standard_normal(384).astype(np.float32)
    v[:4] = [0.0, -0.0, 1e-38, 3.4028235e38]
    assert _read(float_array(v), "float8[]") == [float(x) for x in v]


def test_int_arrays_take_python_and_numpy_integers_and_the_empty_list():
    ids = [0, 1, 2**32 - 1, 2**62]
    assert _read(int_array(ids), "bigint[]") == ids
    assert _read(int_array(np.array(ids, dtype=np.int64)), "bigint[]") == ids
    assert _read(int_array([]), "bigint[]") == []
    assert float_array([]) == "{}"


def test_a_binary_float8_vector_stores_the_same_doubles_as_its_text_literal():
    from config.pgarrays import Float8Vector, insert_float8_vectors

    v = np.random.default_rng(5).standard_normal(384).astype(np.float32)
    v[:4] = [0.0, -0.0, 1e-38, 3.4028235e38]
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE vec_in (k int PRIMARY KEY, v float8[] NOT NULL)")
    insert_float8_vectors(sql="INSERT INTO vec_in (k, v) VALUES (%s, %b) ON CONFLICT DO NOTHING",
                          rows=[(1, Float8Vector(v)), (2, Float8Vector([])), (1, Float8Vector(v[:3]))])
    with connection.cursor() as cur:
        cur.execute("SELECT k, v FROM vec_in ORDER BY k")
        stored = cur.fetchall()
    assert stored[0] == (1, _read(float_array(v), "float8[]"))  # the text literal's doubles, bit for bit
    assert str(stored[0][1][1]) == "-0.0" and stored[0][1][3] == float(np.float32(3.4028235e38))
    assert stored[1] == (2, [])
    assert len(stored) == 2  # a conflicting row is left out, as bulk_create(ignore_conflicts=True) left it


def test_a_vector_read_in_binary_gives_the_floats_the_text_reading_gives():
    from config.pgarrays import float8_array_values

    v = np.random.default_rng(9).standard_normal(384).astype(np.float32)
    v[:3] = [-0.0, 1e-38, 3.4028235e38]
    with connection.cursor() as cur:
        cur.execute("SELECT array_send(%s::float8[]), array_send('{}'::float8[])", [float_array(v)])
        raw, empty = cur.fetchone()
    assert float8_array_values(raw) == _read(float_array(v), "float8[]")
    assert str(float8_array_values(raw)[0]) == "-0.0" and float8_array_values(empty) == []


def test_a_binary_copy_stores_the_same_doubles_and_a_conflicting_batch_writes_nothing():
    from config.pgarrays import Float8Vector, copy_float8_vectors

    v = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    v[:4] = [0.0, -0.0, 1e-38, 3.4028235e38]
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE vec_copy (k text PRIMARY KEY, n int2 NOT NULL, v float8[] NOT NULL)")
    columns, types = ("k", "n", "v"), ("text", "int2", "float8[]")
    assert copy_float8_vectors(table="vec_copy", columns=columns, types=types,
                               rows=[("a", 384, Float8Vector(v)), ("b", 0, Float8Vector([]))])
    # a batch holding a key already there fails as a whole; the transaction goes on
    assert not copy_float8_vectors(table="vec_copy", columns=columns, types=types,
                                   rows=[("c", 1, Float8Vector(v[:1])), ("a", 1, Float8Vector(v[:1]))])
    with connection.cursor() as cur:
        cur.execute("SELECT k, n, v FROM vec_copy ORDER BY k")
        stored = cur.fetchall()
    assert stored == [("a", 384, _read(float_array(v), "float8[]")), ("b", 0, [])]
    assert str(stored[0][2][1]) == "-0.0"
