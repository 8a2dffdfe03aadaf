"""A document's rows (chunks, symbols, references, code files) are guarded in the database by their document's key
alone and still leave with their dataset; the rulebook indexes hold rulebook chunks only while still serving a
lookup by ruleset or book; chunk rows up to a page and trigram arrays are stored without compression."""
from __future__ import annotations

import textwrap

import pytest
from django.db import IntegrityError, connection, transaction

from search.ingest.formats.documents import read_document
from search.ingest.writer import write_documents
from search.models import Chunk, CodeFile, Dataset, Document, Symbol, SymbolRef

pytestmark = pytest.mark.django_db

TABLES = ("search_chunk", "search_symbol", "search_symbolref", "search_codefile")
SOURCE = textwrap.dedent('''\
    import os


    def helper(path):
        """Read a file."""
        return os.path.basename(path)


    class Reader:
        def read(self, path):
            return helper(path)
    ''')


def _foreign_keys() -> dict[str, set[str]]:
    """{table: the tables its foreign-key constraints point at}."""
    with connection.cursor() as cur:
        cur.execute("SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
                    "WHERE contype = 'f' AND conrelid::regclass::text = ANY(%s)", [list(TABLES)])
        out: dict[str, set[str]] = {t: set() for t in TABLES}
        for table, target in cur.fetchall():
            out[table].add(target)
        return out


def _write_code(*, make_user, make_project) -> Dataset:
    ds = Dataset.objects.create(project=make_project("rows", make_user()), name="code", kind="code")
    draft, why = read_document(kind="code", data=SOURCE.encode(), name="pkg/reader.py", repo="r")
    assert draft is not None, why
    write_documents(dataset=ds, drafts=[draft])
    return ds


def test_a_documents_rows_have_a_constraint_to_their_document_and_none_to_their_dataset() -> None:
    assert _foreign_keys() == dict.fromkeys(TABLES, {"search_document"})


def test_a_row_cannot_point_at_a_missing_document(make_user, make_project) -> None:
    ds = _write_code(make_user=make_user, make_project=make_project)
    chunk = Chunk.objects.filter(dataset=ds).first()
    missing = Document.objects.order_by("-pk").first().pk + 1000
    with pytest.raises(IntegrityError, match="foreign key"), transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # Django's keys are checked at commit otherwise
        cur.execute("UPDATE search_chunk SET document_id = %s WHERE id = %s", [missing, chunk.pk])
    assert Chunk.objects.get(pk=chunk.pk).document_id != missing


def test_deleting_a_dataset_still_deletes_its_chunks_symbols_references_and_code_files(make_user,
                                                                                        make_project) -> None:
    ds = _write_code(make_user=make_user, make_project=make_project)
    models = (Chunk, Symbol, SymbolRef, CodeFile)
    assert all(m.objects.filter(dataset_id=ds.pk).exists() for m in models)
    ds_id = ds.pk
    ds.delete()
    assert [m.objects.filter(dataset_id=ds_id).count() for m in models] == [0, 0, 0, 0]
    assert not Document.objects.filter(dataset_id=ds_id).exists()


def test_code_chunks_write_no_rulebook_index_entries_and_a_ruleset_lookup_still_uses_its_index(
        make_user, make_project) -> None:
    ds = _write_code(make_user=make_user, make_project=make_project)
    doc = Document.objects.get(dataset=ds)
    Chunk.objects.create(document=doc, dataset=ds, ordinal=99, path=doc.path, text="Grappling rules",
                         text_hash="r" * 64, kind="rules", ruleset_id="srd", book_id="phb")
    with connection.cursor() as cur:
        cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'search_chunk' "
                    "AND indexname IN ('chunk_ruleset_id', 'chunk_book_id')")
        defs = dict(cur.fetchall())
        assert "WHERE" in defs["chunk_ruleset_id"] and "WHERE" in defs["chunk_book_id"]
        cur.execute("SET LOCAL enable_seqscan = off")  # a table this small is otherwise read whole
        try:
            plans = [Chunk.objects.filter(ruleset_id="srd").explain(),
                     Chunk.objects.filter(book_id__in=["phb", "dmg"]).explain()]
        finally:
            cur.execute("RESET enable_seqscan")
    assert "chunk_ruleset_id" in plans[0] and "chunk_book_id" in plans[1]
    assert list(Chunk.objects.filter(ruleset_id="srd").values_list("ordinal", flat=True)) == [99]


def test_a_chunk_row_of_a_few_kilobytes_and_a_files_trigrams_are_stored_uncompressed(make_user, make_project) -> None:
    body = "\n".join(f"    value_{i} = compute_something_rather_long(argument_number_{i}, other_argument_{i} * {i})"
                     for i in range(30))
    source = f"def long_function():\n{body}\n    return value_0\n"
    ds = Dataset.objects.create(project=make_project("wide", make_user()), name="code", kind="code")
    draft, why = read_document(kind="code", data=source.encode(), name="pkg/wide.py", repo="r")
    assert draft is not None, why
    write_documents(dataset=ds, drafts=[draft])
    with connection.cursor() as cur:
        cur.execute("SELECT octet_length(text), pg_column_compression(text), pg_column_compression(term_weights) "
                    "FROM search_chunk WHERE dataset_id = %s", [ds.pk])
        (size, text_method, weights_method), = cur.fetchall()
        cur.execute("SELECT cardinality(trigrams), pg_column_compression(trigrams) FROM search_codefile "
                    "WHERE dataset_id = %s", [ds.pk])
        (trigrams, trigram_method), = cur.fetchall()
    assert size > 2500 and trigrams * 8 > 2100  # past the 2 KB at which Postgres compresses by default
    assert (text_method, weights_method, trigram_method) == (None, None, None)
