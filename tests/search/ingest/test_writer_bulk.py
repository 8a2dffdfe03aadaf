"""The writer's bulk statements (COPY for chunks, code facts and outbox rows; one upsert for the documents) write
exactly the rows the instances hold, give back their ids in order, and keep a rewritten document's id."""
from __future__ import annotations

import pytest
from django.db import transaction

from config.pgcopy import copy_insert
from inference.encoders import text_hash
from search.engine.sparse import document_term_ids, encode_document, sparse_document_text
from search.ingest.base import ChunkDraft, DocumentDraft, embed_input
from search.ingest.writer import _CHUNK_COLUMNS, sync_documents, upsert_documents, write_documents
from search.models import Chunk, CodeFile, Dataset, Document, IndexOutbox, Symbol, SymbolRef

pytestmark = pytest.mark.django_db

AWKWARD = 'tab\there, new\nline, back\\slash, "quotes", {braces}, NULL, \\N, naïve ünïcode, emoji \U0001f600'


def _draft(path: str, text: str, *, n: int = 2) -> DocumentDraft:
    chunks = [ChunkDraft(text=f"{text}\n# part {i}", kind="code", symbol=f"f{i}", start_line=1 + 3 * i,
                         end_line=2 + 3 * i, heading_path=["A", 'b "c"'], tags=["x", "y z"], meta={"k": [1, "v"]})
              for i in range(n)]
    return DocumentDraft(path=path, repo="r", lang="python", title="T", content_hash=path + text, chunks=chunks,
                         meta={"format": "code", "nested": {"a": None}})


def test_copied_rows_hold_exactly_the_instances_values_and_ids_come_back_in_order(make_user, make_project):
    ds = Dataset.objects.create(project=make_project("bulk", make_user()), name="code", kind="code")
    doc = Document.objects.create(dataset=ds, path="a.py", content_hash="h")
    objs = [Chunk(document=doc, dataset=ds, ordinal=i, path="a.py", text=f"{AWKWARD} {i}", text_hash=f"{i:064d}",
                  heading_path=["h1", AWKWARD], tags=[], traits={"t": AWKWARD}, meta={"n": i, "l": [1.5, None]},
                  terms="{3,1,2}") for i in range(5)]
    copy_insert(model=Chunk, objs=objs, with_ids=True)
    ids = [o.pk for o in objs]
    assert ids == sorted(ids) and len(set(ids)) == 5
    stored = {c.pk: c for c in Chunk.objects.filter(document=doc)}
    assert set(stored) == set(ids)
    for o in objs:
        row = stored[o.pk]
        assert (row.ordinal, row.text, row.heading_path, row.tags, row.traits, row.meta, row.terms) == \
            (o.ordinal, o.text, ["h1", AWKWARD], [], {"t": AWKWARD}, {"n": o.ordinal, "l": [1.5, None]}, [3, 1, 2])
        assert row.created_at is not None and row.kind == "code" and row.is_rule_bearing is False


def test_a_rewritten_document_keeps_its_id_and_only_new_ones_count_as_new(make_user, make_project):
    ds = Dataset.objects.create(project=make_project("bulk-upsert", make_user()), name="code", kind="code")
    first = write_documents(dataset=ds, drafts=[_draft("a.py", "def a(): pass"), _draft("b.py", "def b(): pass")])
    assert first["chunks"] == 4
    a_id = Document.objects.get(dataset=ds, path="a.py").pk
    created_at = Document.objects.get(pk=a_id).created_at
    with pytest.raises(RuntimeError), transaction.atomic():
        docs = upsert_documents(dataset=ds, drafts=[_draft("a.py", "def a2(): pass"), _draft("c.py", "x = 1")])
        assert docs["a.py"][0].pk == a_id and docs["a.py"][1] is False and docs["c.py"][1] is True
        raise RuntimeError("roll back")  # a failed batch leaves no row behind
    assert not Document.objects.filter(dataset=ds, path="c.py").exists()
    write_documents(dataset=ds, drafts=[_draft("a.py", "def a2(): pass", n=3)])
    a = Document.objects.get(dataset=ds, path="a.py")
    assert a.pk == a_id and a.content_hash == "a.pydef a2(): pass" and a.created_at == created_at
    assert a.updated_at > created_at and a.meta == {"format": "code", "nested": {"a": None}}
    assert list(Chunk.objects.filter(document=a).order_by("ordinal").values_list("ordinal", flat=True)) == [0, 1, 2]
    # one upsert row per chunk, naming chunks that exist; the symbol graph follows the rewritten file
    live = set(Chunk.objects.filter(dataset=ds).values_list("pk", flat=True))
    queued = set(IndexOutbox.objects.filter(op="upsert", chunk_id__in=live).values_list("chunk_id", flat=True))
    assert queued == live
    assert CodeFile.objects.filter(document=a).count() == 1
    assert set(Symbol.objects.filter(document=a).values_list("name", flat=True)) == {"a2"}
    assert SymbolRef.objects.filter(document__dataset=ds).exclude(document__in=Document.objects.filter(dataset=ds)) \
        .count() == 0


def test_a_second_sync_of_the_same_drafts_writes_nothing_and_duplicates_nothing(make_user, make_project):
    ds = Dataset.objects.create(project=make_project("bulk-idem", make_user()), name="code", kind="code")
    drafts = [_draft(f"m{i}.py", f"def f{i}(): return {i}") for i in range(40)]  # more than one batch
    sync_documents(dataset=ds, drafts=iter(drafts))
    rows = (Document.objects.filter(dataset=ds).count(), Chunk.objects.filter(dataset=ds).count(),
            CodeFile.objects.filter(dataset=ds).count(), IndexOutbox.objects.count())
    again = sync_documents(dataset=ds, drafts=iter(drafts))
    assert again["skipped"] == 40 and again["chunks"] == 0
    assert rows == (40, 80, 40, rows[3]) and (Document.objects.filter(dataset=ds).count(),
                                              Chunk.objects.filter(dataset=ds).count(),
                                              CodeFile.objects.filter(dataset=ds).count(),
                                              IndexOutbox.objects.count()) == rows


def test_written_chunk_rows_hold_every_draft_value_and_ids_follow_the_drafts_order(make_user, make_project):
    # the writer names every column of the table (a new field must be given its value, not left to chance)
    assert set(_CHUNK_COLUMNS) == {f.attname for f in Chunk._meta.concrete_fields}
    ds = Dataset.objects.create(project=make_project("bulk-rows", make_user()), name="rules", kind="rules")
    long = "x" * 600
    chunks = [ChunkDraft(text=f"{AWKWARD} {i}", kind="rules", symbol=long, start_line=i, end_line=i + 4,
                         heading_path=["Combat", AWKWARD, long], micro_summary=f"summary {AWKWARD}",
                         ruleset_id="srd", book_id="basic", section_path=["Ch. 1", long], page="p. 12",
                         content_kind="table", tags=["t", AWKWARD], traits={"a": [1, 2.5, None], "s": AWKWARD},
                         is_rule_bearing=True, meta={"k": AWKWARD, "n": {"deep": True}}) for i in range(3)]
    drafts = [DocumentDraft(path="rules/a.md", repo="r", lang="md", title="A", content_hash="a", chunks=chunks[:2]),
              DocumentDraft(path="rules/b.md", repo="r", lang="md", title="B", content_hash="b", chunks=chunks[2:])]
    assert write_documents(dataset=ds, drafts=drafts)["chunks"] == 3
    rows = list(Chunk.objects.filter(dataset=ds).order_by("pk"))
    assert [(r.path, r.ordinal) for r in rows] == [("rules/a.md", 0), ("rules/a.md", 1), ("rules/b.md", 0)]
    docs = dict(Document.objects.filter(dataset=ds).values_list("path", "pk"))
    for row, (d, c) in zip(rows, [(drafts[0], chunks[0]), (drafts[0], chunks[1]), (drafts[1], chunks[2])],
                           strict=True):
        heading_path = [h[:500] for h in c.heading_path]
        assert (row.document_id, row.dataset_id, row.kind, row.repo, row.lang, row.symbol, row.heading_path) == \
            (docs[d.path], ds.pk, "rules", "r", "md", long[:500], heading_path)
        assert (row.start_line, row.end_line, row.text, row.micro_summary, row.text_hash) == \
            (c.start_line, c.end_line, c.text, c.micro_summary, text_hash(embed_input(c)))
        assert (row.ruleset_id, row.book_id, row.section_path, row.page, row.content_kind, row.tags) == \
            ("srd", "basic", ["Ch. 1", long[:500]], "p. 12", "table", ["t", AWKWARD])
        assert (row.traits, row.is_rule_bearing, row.meta) == (c.traits, True, c.meta)
        sparse = encode_document(sparse_document_text(text=c.text, path=d.path, symbol=long[:500],
                                                      heading_path=heading_path), kind="rules")
        assert (row.terms, row.term_weights) == (sparse.indices, sparse.values)  # what the applier sends
        assert row.terms == document_term_ids(sparse_document_text(text=c.text, path=d.path, symbol=long[:500],
                                                                   heading_path=heading_path), kind="rules")
        assert row.created_at is not None
    queued = list(IndexOutbox.objects.filter(chunk_id__in=[r.pk for r in rows]).order_by("pk")
                  .values_list("op", "chunk_id"))
    assert queued == [("upsert", r.pk) for r in rows]  # one per chunk and model, in the chunks' order
