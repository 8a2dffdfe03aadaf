"""Every way chunks leave Postgres queues their index deletes, so the applied index holds exactly the rest.

Each test starts from a small corpus in three datasets of two projects, projected into a private
embedded store, deletes by one path, applies the outbox and checks the store point by point.
"""
from __future__ import annotations

import pytest
from django.urls import reverse

from search.engine.applier import apply_outbox
from search.models import Chunk, Document, IndexOutbox
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401

pytestmark = pytest.mark.django_db


def _point_ids(index) -> set[int]:
    return {pid for batch in index.iter_payloads() for pid, _ in batch}


def _chunk_ids(**filters) -> set[int]:
    return set(Chunk.objects.filter(**filters).values_list("pk", flat=True))


@pytest.fixture
def corpus(make_user, make_project, code_repo, edge_index, tmp_path, monkeypatch):
    """acme owns 'src' (the shop repo) and 'docs'; beta owns 'lib'. All applied to the private store."""
    # Sequence ids of rolled-back earlier tests are "young gaps" to the applier, which would hold its watermark
    # and replay from 0 on every call (repairing what a test planted); a settled applier has no young gaps.
    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    owner = make_user("owner@example.com")
    acme = make_project("acme", owner)
    beta = make_project("beta", owner)
    src, _ = ingest(acme, "src", code_repo, repo="shop")
    docs_dir = tmp_path / "docs"
    docs_dir.mkdir()
    (docs_dir / "guide.py").write_text('def guide():\n    """How the shop works."""\n    return "guide"\n')
    (docs_dir / "faq.py").write_text('def faq():\n    """Questions people ask."""\n    return "faq"\n')
    docs, _ = ingest(acme, "docs", docs_dir, repo="docs")
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    (lib_dir / "util.py").write_text('def util():\n    """A helper in another project."""\n    return 0\n')
    lib, _ = ingest(beta, "lib", lib_dir, repo="lib")
    apply_outbox(index=edge_index)
    assert _point_ids(edge_index) == _chunk_ids() and len(_chunk_ids(dataset=src)) >= 4
    return {"acme": acme, "beta": beta, "src": src, "docs": docs, "lib": lib, "index": edge_index}


def _assert_exact_after_delete(index, gone: set[int]) -> None:
    """The deleted chunks had points and now have none; every remaining chunk has exactly one."""
    from inference.encoders import dense_model_id
    from search.engine.reconcile import reconcile

    assert gone, "the delete removed no chunks: the test proves nothing"
    assert not gone & _chunk_ids()
    queued = set(IndexOutbox.objects.filter(op="delete", chunk_id__in=gone, model_id=dense_model_id())
                 .values_list("chunk_id", flat=True))
    assert queued == gone  # one delete per removed chunk for the configured model, written with the delete
    assert gone <= _point_ids(index)  # still in the index until the applier runs
    report = reconcile(index=index, record=False)  # applies the outbox first
    assert report.applied >= len(gone)
    assert report.found.counts() == {"orphans": 0, "missing": 0, "stale": 0}, report.as_dict()
    assert report.pending == 0
    assert _point_ids(index) == _chunk_ids() and not gone & _point_ids(index)
    assert index.count() == Chunk.objects.count()


def test_document_instance_delete(corpus):
    doc = Document.objects.get(dataset=corpus["src"], path="billing/ledger.py")
    gone = _chunk_ids(document=doc)
    doc.delete()
    _assert_exact_after_delete(corpus["index"], gone)


def test_chunk_instance_delete(corpus):
    chunk = Chunk.objects.filter(dataset=corpus["src"]).first()
    pk = chunk.pk
    chunk.delete()
    _assert_exact_after_delete(corpus["index"], {pk})


def test_queryset_bulk_delete_of_documents(corpus):
    docs = Document.objects.filter(dataset__project=corpus["acme"], path__endswith=".py")
    gone = _chunk_ids(document__in=docs)
    assert docs.count() >= 3
    docs.delete()
    _assert_exact_after_delete(corpus["index"], gone)
    assert _chunk_ids(dataset=corpus["lib"])  # beta untouched


def test_dataset_delete(corpus):
    gone = _chunk_ids(dataset=corpus["docs"])
    corpus["docs"].delete()
    _assert_exact_after_delete(corpus["index"], gone)
    assert _chunk_ids(dataset=corpus["src"])


def test_project_delete_cascades(corpus):
    gone = _chunk_ids(dataset__project=corpus["acme"])
    corpus["acme"].delete()
    _assert_exact_after_delete(corpus["index"], gone)
    assert _chunk_ids() == _chunk_ids(dataset=corpus["lib"]) != set()


def test_admin_bulk_delete_selected_datasets(corpus, client, make_user):
    from search.models import Dataset

    client.force_login(make_user("staff@example.com", staff=True))
    selected = [corpus["src"].pk, corpus["lib"].pk]
    gone = _chunk_ids(dataset_id__in=selected)
    url = reverse("admin:search_dataset_changelist")
    confirm = client.post(url, {"action": "delete_selected", "_selected_action": selected})
    assert confirm.status_code == 200 and b"Are you sure" in confirm.content
    resp = client.post(url, {"action": "delete_selected", "_selected_action": selected, "post": "yes"})
    assert resp.status_code == 302, resp.content[:2000]
    assert set(Dataset.objects.values_list("pk", flat=True)) == {corpus["docs"].pk}
    _assert_exact_after_delete(corpus["index"], gone)


def test_admin_single_delete_of_a_project(corpus, client, make_user):
    client.force_login(make_user("staff@example.com", staff=True))
    gone = _chunk_ids(dataset__project=corpus["beta"])
    url = reverse("admin:projects_project_delete", args=[corpus["beta"].pk])
    resp = client.post(url, {"post": "yes"})
    assert resp.status_code == 302, resp.content[:2000]
    _assert_exact_after_delete(corpus["index"], gone)


def test_raw_sql_delete_is_covered_too(corpus):
    from django.db import connection

    gone = _chunk_ids(dataset=corpus["lib"])
    with connection.cursor() as cur:
        cur.execute("DELETE FROM search_feedback WHERE chunk_id IN (SELECT id FROM search_chunk WHERE dataset_id = %s)",
                    [corpus["lib"].pk])
        cur.execute("DELETE FROM search_chunk WHERE dataset_id = %s", [corpus["lib"].pk])
    _assert_exact_after_delete(corpus["index"], gone)


def test_a_rolled_back_delete_queues_nothing(corpus):
    from django.db import transaction

    before = IndexOutbox.objects.count()
    points = _point_ids(corpus["index"])

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        corpus["src"].delete()
        assert IndexOutbox.objects.count() > before  # queued inside the transaction...
        raise Abort
    assert IndexOutbox.objects.count() == before  # ...and gone with it
    apply_outbox(index=corpus["index"])
    assert _point_ids(corpus["index"]) == points == _chunk_ids()


def test_reingest_of_a_changed_file_leaves_no_orphans(corpus, code_repo):
    """The runner no longer writes deletes itself; the trigger must cover it."""
    ledger = code_repo / "billing" / "ledger.py"
    gone = _chunk_ids(dataset=corpus["src"], path="billing/ledger.py")
    ledger.write_text(ledger.read_text() + '\n\ndef refund(wallet, amount):\n    """Give credits back."""\n'
                      "    wallet.balance += amount\n")
    (code_repo / "web" / "routes.js").unlink()
    gone |= _chunk_ids(dataset=corpus["src"], path="web/routes.js")
    ingest(corpus["acme"], "src", code_repo, repo="shop", apply_index=False)  # as a worker: Postgres only
    assert _chunk_ids(dataset=corpus["src"], path="billing/ledger.py")  # re-chunked under new ids
    _assert_exact_after_delete(corpus["index"], gone)


def test_trigger_queues_a_delete_for_every_model_that_may_hold_the_point(corpus):
    """Each store applies only its own model's rows: a model with cached vectors, or one that was queued
    for this chunk, gets a delete too; one row per (chunk, model), whatever the number of earlier rows."""
    from inference.encoders import dense_model_id
    from inference.models import EmbeddingCache

    EmbeddingCache.objects.create(model_id="zz-other-model", text_hash="x" * 64, dim=2, vector=[0.0, 1.0])
    chunk = Chunk.objects.filter(dataset=corpus["lib"]).first()
    IndexOutbox.objects.create(op="upsert", chunk_id=chunk.pk, model_id="aa-retired-model")
    IndexOutbox.objects.create(op="upsert", chunk_id=chunk.pk, model_id=dense_model_id())  # a second upsert
    top = IndexOutbox.objects.order_by("-pk").values_list("pk", flat=True).first()
    Chunk.objects.filter(pk=chunk.pk).delete()
    rows = list(IndexOutbox.objects.filter(pk__gt=top).values_list("op", "chunk_id", "model_id"))
    assert sorted(rows) == sorted([("delete", chunk.pk, m) for m in
                                   ("aa-retired-model", dense_model_id(), "zz-other-model")])


def test_a_queryset_delete_queues_one_row_per_chunk_from_inside_its_delete_statement(corpus):
    """Set-based: no Python signal receiver, so Django issues one DELETE for these rows and the trigger
    writes the outbox rows within it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from inference.encoders import dense_model_id

    ids = _chunk_ids(dataset=corpus["src"])
    top = IndexOutbox.objects.order_by("-pk").values_list("pk", flat=True).first()
    with CaptureQueriesContext(connection) as ctx:
        Chunk.objects.filter(pk__in=ids).delete()
    deletes = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith('DELETE FROM "search_chunk"')]
    assert len(deletes) == 1
    assert sorted(IndexOutbox.objects.filter(pk__gt=top).values_list("chunk_id", "model_id")) == \
        sorted((i, dense_model_id()) for i in ids)
