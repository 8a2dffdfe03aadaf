"""Postgres array literals for the bulk writes of long number arrays (vectors, sparse term ids, trigrams).

Why: Django talks to Postgres through psycopg with client-side binding, which quotes a Python list one element
at a time in Python: a 384-float vector or a file's few thousand trigram ids cost milliseconds each, and the
ingest writer spent most of its time there. A literal built by one `join` is the same value to Postgres (an
array column parses it), written at C speed. Numbers only: they need no quoting.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from django.db import connection, transaction
from psycopg.adapt import Dumper
from psycopg.pq import Format


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


class Float8Vector:
    """A vector to send to a float8[] column in Postgres's binary array format (with a cursor that binds its
    parameters on the server: `insert_float8_vectors`).

    Why: the text literal costs a `repr` per number here and a float parse per number in the server; the binary
    form is the doubles' bytes, built by numpy in one step. The same doubles arrive: a float32 widened exactly."""

    __slots__ = ("data",)

    def __init__(self, values: Any) -> None:
        v = np.asarray(values, dtype=">f8").ravel()
        cells = np.empty(len(v), dtype=[("size", ">i4"), ("value", ">f8")])
        cells["size"] = 8
        cells["value"] = v
        # ndim 1, no nulls, element type float8 (oid 701), then the dimension's length and lower bound 1
        self.data = struct.pack(">iiiii", 1, 0, FLOAT8_OID, len(v), 1) + cells.tobytes() if len(v) else \
            struct.pack(">iii", 0, 0, FLOAT8_OID)


FLOAT8_OID = 701
FLOAT8_ARRAY_OID = 1022


class _Float8VectorDumper(Dumper):
    format = Format.BINARY
    oid = FLOAT8_ARRAY_OID

    def dump(self, obj: Float8Vector) -> bytes:
        return obj.data


def insert_float8_vectors(*, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run `sql` (an INSERT whose float8[] placeholders are `%b`) once per row through the default database's
    connection, in its current transaction, pipelined; the rows' Float8Vector values go in binary."""
    if not rows:
        return
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:  # server-side binding: Django's own cursor quotes text
        cursor.adapters.register_dumper(Float8Vector, _Float8VectorDumper)
        cursor.executemany(sql, rows)


def copy_float8_vectors(*, table: str, columns: Sequence[str], types: Sequence[str],
                        rows: Sequence[Sequence[Any]]) -> bool:
    """COPY `rows` into `table` (`columns`, of the Postgres `types` such as "text", "int2", "float8[]",
    "timestamptz") through the default database's connection, in Postgres's binary format; a float8[] value is a
    Float8Vector. -> False, with nothing written and the caller's transaction usable, if a row breaks a unique
    constraint (the COPY runs in a savepoint); the caller then writes its way (an INSERT ... ON CONFLICT).

    Why: an INSERT per row costs a bind and an execute on both sides, the database's part four times that of one
    stream; the vectors' bytes are already the binary form, so COPY sends them as they are."""
    if not rows:
        return True
    quote = connection.ops.quote_name
    sql = f"COPY {quote(table)} ({', '.join(map(quote, columns))}) FROM STDIN (FORMAT BINARY)"
    vector_at = [i for i, t in enumerate(types) if t == "float8[]"]
    wire = ["bytea" if t == "float8[]" else t for t in types]  # a vector's field is its bytes (array_send's form)
    try:
        with transaction.atomic():
            connection.ensure_connection()
            with psycopg.Cursor(connection.connection) as cursor, cursor.copy(sql) as copy:
                copy.set_types(wire)
                for row in rows:
                    values = list(row)
                    for i in vector_at:
                        values[i] = values[i].data
                    copy.write_row(values)
    except psycopg.errors.UniqueViolation:
        return False
    return True


def float8_array_values(data: bytes | memoryview) -> list[float]:
    """The numbers of a one-dimensional float8[] without nulls in Postgres's binary form (`array_send(column)`).

    Why: read as text, every element is parsed on its own; the binary form is the doubles' bytes, which numpy
    reads in one step. The same Python floats come back as psycopg's text reading gives."""
    ndim, _flags, _oid = struct.unpack_from(">iii", data, 0)
    if ndim == 0:
        return []
    if ndim != 1:
        raise ValueError(f"a vector has one dimension, not {ndim}")
    cells = np.frombuffer(data, dtype=[("size", ">i4"), ("value", ">f8")], offset=20)
    return cells["value"].astype(np.float64).tolist()
