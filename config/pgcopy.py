"""Bulk inserts through Postgres's COPY, for the ingest writer's many rows (chunks, code facts, outbox rows).

Why: `bulk_create` builds one INSERT with a placeholder per value (30 columns by 500 rows), which Django composes
field by field and psycopg then parses and quotes in Python on every batch (a query that long is never in its
statement cache); on a first ingest that was most of the writer's time. COPY sends the same rows as one stream
with no SQL to compose or parse, in the caller's transaction, and fires the same triggers (row and statement).
The values are what `bulk_create` would send: each field's `pre_save` and `get_db_prep_save`, skipped only for a
plain column whose value is already the Python type the column takes. A row that breaks a constraint fails the
whole COPY, as it would fail the INSERT: the caller's transaction decides what is kept.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, models

# column types whose `pre_save` returns the attribute and whose `get_db_prep_save` returns a value of this
# Python type unchanged (exact types: a subclass may convert)
_PLAIN: dict[type[models.Field], type] = {
    models.CharField: str, models.TextField: str, models.IntegerField: int, models.BigIntegerField: int,
    models.SmallIntegerField: int, models.PositiveIntegerField: int, models.PositiveBigIntegerField: int,
    models.PositiveSmallIntegerField: int, models.BooleanField: bool, models.ForeignKey: int,
    models.OneToOneField: int,
}


def copy_insert(*, model: type[models.Model], objs: Sequence[models.Model], with_ids: bool = False) -> None:
    """Insert `objs` (new instances of `model`) with one COPY. With `with_ids`, their primary keys are drawn from
    the table's sequence first and set on the instances (in list order, increasing), as `bulk_create` sets them
    from RETURNING; without, the table assigns them and the instances do not learn them."""
    if not objs:
        return
    opts = model._meta
    pk = opts.pk
    fields = [f for f in opts.concrete_fields if not f.generated and not (f is pk and isinstance(f, models.AutoField))]
    quote = connection.ops.quote_name
    if with_ids:
        for obj, new_id in zip(objs, next_ids(model=model, count=len(objs)), strict=True):
            obj.pk = new_id
        fields = [pk, *fields]
    with connection.cursor() as cursor:
        prepare = [_preparer(f) for f in fields]
        sql = f"COPY {quote(opts.db_table)} ({', '.join(quote(f.column) for f in fields)}) FROM STDIN"
        with cursor.cursor.copy(sql) as copy:
            for obj in objs:
                copy.write_row([p(obj) for p in prepare])
    for obj in objs:
        obj._state.adding = False
        obj._state.db = connection.alias


def next_ids(*, model: type[models.Model], count: int) -> list[int]:
    """`count` new primary keys from `model`'s table sequence, increasing: what `bulk_create` would have set from
    RETURNING, drawn before a COPY that writes them."""
    if count <= 0:
        return []
    opts = model._meta
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                       [opts.db_table, opts.pk.column, count])
        return sorted(new_id for (new_id,) in cursor.fetchall())


def copy_values(*, model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Insert `rows` of plain values (str, int, bool, None, a list of them for an array column, a JSON text for a
    jsonb one, an aware datetime: what the columns take as they are) into `model`'s table, the fields named by
    `columns` (every column of the table without a database default, the primary key if the caller drew it with
    `next_ids`), with one COPY.

    For many rows (the chunks, the symbol graph's, the outbox's) where building a model instance per row costs
    more than the write. The caller gives each field what `bulk_create` would send for it (its default, the time
    for an auto_now_add field)."""
    opts = model._meta
    quote = connection.ops.quote_name
    names = ", ".join(quote(opts.get_field(c).column) for c in columns)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {quote(opts.db_table)} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _preparer(field: models.Field) -> Any:
    plain = _PLAIN.get(type(field))
    attname = field.attname

    def prepare(obj: models.Model) -> Any:
        if plain is not None:
            value = getattr(obj, attname)
            if value is None or type(value) is plain:
                return value
        return field.get_db_prep_save(field.pre_save(obj, True), connection)

    return prepare
