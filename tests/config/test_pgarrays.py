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
