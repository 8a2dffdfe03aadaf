"""Postgres array literals for the bulk writes of long number arrays (vectors, sparse term ids, trigrams).

Why: Django talks to Postgres through psycopg with client-side binding, which quotes a Python list one element
at a time in Python: a 384-float vector or a file's few thousand trigram ids cost milliseconds each, and the
ingest writer spent most of its time there. A literal built by one `join` is the same value to Postgres (an
array column parses it), written at C speed. Numbers only: they need no quoting.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def int_array(values: Iterable[int]) -> str:
    """'{1,2,3}' for an integer array column (Python or numpy integers)."""
    return "{" + ",".join(map(str, map(int, _plain(values)))) + "}"


def float_array(values: Iterable[float]) -> str:
    """'{0.5,-1.25}' for a float8 array column: each value as a Python float's repr (numpy float32 widened
    exactly), which Postgres reads back as the same double."""
    return "{" + ",".join(map(repr, map(float, _plain(values)))) + "}"


def _plain(values: Any) -> Iterable[Any]:
    """A numpy array as Python numbers in one call (iterating it would make a numpy scalar of each)."""
    return values.tolist() if hasattr(values, "tolist") else values
