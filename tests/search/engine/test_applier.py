"""Reads do not write: queries never apply the outbox; the background applier and the writers do. The applier
projects Postgres into an index (either adapter), and a rebuild reuses the cached vectors."""
from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from search.engine.applier import apply_outbox, rebuild
from search.engine.index_schema import IndexFilter, IndexPoint
from search.engine.index_server import ClientIndex
from search.engine.sparse import encode_document, encode_query
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401

WRITES = ("INSERT", "UPDATE", "DELETE")


def _watermark(index) -> int:
    from search.models import IndexWatermark

    return IndexWatermark.objects.filter(store=index.store_key).values_list("last_outbox_id", flat=True).first() or 0


def _ingest_unapplied(project, code_repo):
    """An ingest whose outbox is still pending (what a Celery worker leaves behind for the applier)."""
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    ds = Dataset.objects.create(project=project, name="shop", kind="code")
    return start_ingest(job=IngestJob(dataset=ds, source=str(code_repo), kind="code"), sync=True, apply_index=False)


def test_a_query_performs_no_write_and_leaves_the_outbox_pending(make_user, make_project, code_repo, edge_index):
    from search.engine.applier import pending_outbox
    from search.engine.pipeline import QuerySpec, run_query

    alice = make_user()
    project = make_project("shop", alice)
    _ingest_unapplied(project, code_repo)
    pending, mark = pending_outbox(index=edge_index), _watermark(edge_index)
    assert pending > 0

    with CaptureQueriesContext(connection) as ctx:
        result = run_query(user=alice, project=project, spec=QuerySpec(q="where are credits deducted", log=False))
    statements = [q["sql"].lstrip().split()[0].upper() for q in ctx.captured_queries]
    assert statements and set(statements) == {"SELECT"}, statements
    assert result.results == []  # nothing applied yet, so nothing found: the query did not apply it
    assert "outbox_ms" not in result.timings
    assert (pending_outbox(index=edge_index), _watermark(edge_index), edge_index.count()) == (pending, mark, 0)

    # with logging on, the only writes are the query log itself
    with CaptureQueriesContext(connection) as ctx:
        run_query(user=alice, project=project, spec=QuerySpec(q="where are credits deducted"))
    written = {q["sql"].split('"')[1] for q in ctx.captured_queries if q["sql"].lstrip().upper().startswith(WRITES)}
    assert written == {"search_querysession"}, written  # no candidates yet: no RerankResult rows either
    assert (pending_outbox(index=edge_index), edge_index.count()) == (pending, 0)


def test_a_query_does_not_wait_for_an_apply_in_progress(make_user, make_project, code_repo, edge_index):
    from search.engine.applier import hold_applier, pending_outbox
    from search.engine.pipeline import QuerySpec, run_query

    alice = make_user()
    project = make_project("shop", alice)
    ingest(project, "old", code_repo)  # applied by its (sync) writer
    _ingest_unapplied(project, code_repo)
    pending, mark = pending_outbox(index=edge_index), _watermark(edge_index)
    assert pending > 0

    held, release = threading.Event(), threading.Event()
    out: dict = {}

    def big_apply() -> None:  # an apply that holds the applier lock until the query is back (or a 45 s guard)
        with hold_applier():
            held.set()
            out["query_waited"] = not release.wait(45)  # the former query-time apply waited up to 60 s for it

    holder = threading.Thread(target=big_apply, daemon=True)
    holder.start()
    assert held.wait(10)
    try:
        result = run_query(user=alice, project=project, spec=QuerySpec(q="deduct credits", log=False))
    finally:
        release.set()
        holder.join(10)
    assert out["query_waited"] is False
    assert result.results and result.results[0]["path"] == "billing/ledger.py"
    assert (pending_outbox(index=edge_index), _watermark(edge_index)) == (pending, mark)


def test_the_pass_reads_past_a_young_gap_and_wait_until_indexed_sees_it(make_user, make_project, code_repo,
                                                                         edge_index):
    from search.engine.applier import _db_clock, apply_outbox, is_indexed, last_outbox_id, wait_until_indexed
    from search.models import Chunk, IndexOutbox, IndexWatermark

    project = make_project("shop", make_user())
    _ingest_unapplied(project, code_repo)
    rows = list(IndexOutbox.objects.order_by("pk"))
    assert len(rows) >= 3
    IndexOutbox.objects.filter(pk=rows[1].pk).delete()  # a gap: looks like a transaction still in flight
    Chunk.objects.filter(pk=rows[1].chunk_id).delete()  # (its trigger queues a delete row at the end)

    assert not wait_until_indexed(index=edge_index, timeout=0.2)  # nothing applies it but the applier
    through, since = last_outbox_id(index=edge_index), _db_clock()
    assert not is_indexed(through=through, since=since, index=edge_index)
    apply_outbox(index=edge_index)
    wm = IndexWatermark.objects.get(store=edge_index.store_key)
    assert wm.last_outbox_id < rows[-1].pk  # held before the young gap ...
    assert wm.scanned_id >= through  # ... but the pass read on to the end
    assert is_indexed(through=through, since=since, index=edge_index)
    assert not is_indexed(through=through, since=_db_clock(), index=edge_index)  # a later write needs a later pass
    assert edge_index.count() == Chunk.objects.count()


def test_another_models_rows_between_this_stores_are_no_gap_and_do_not_hold_its_watermark(
        make_user, make_project, code_repo, edge_index):
    from search.models import IndexOutbox, IndexWatermark

    _ingest_unapplied(make_project("shop", make_user()), code_repo)
    rows = list(IndexOutbox.objects.order_by("pk"))
    assert len(rows) >= 4
    # two of the ids now hold another model's rows, as a dataset written with two models interleaves them
    IndexOutbox.objects.filter(pk__in=[rows[1].pk, rows[2].pk]).update(model_id="another-model")
    # everything before this ingest's rows was applied (ids other tests' rolled-back rows took are no business here)
    IndexWatermark.objects.update_or_create(store=edge_index.store_key, defaults={"last_outbox_id": rows[0].pk - 1})
    apply_outbox(index=edge_index)
    assert _watermark(edge_index) == rows[-1].pk
    # a real gap (an id no visible row holds, young) still holds it, right before the gap
    IndexOutbox.objects.filter(pk=rows[1].pk).delete()
    IndexWatermark.objects.filter(store=edge_index.store_key).update(last_outbox_id=rows[0].pk)
    apply_outbox(index=edge_index)
    assert _watermark(edge_index) == rows[0].pk


@pytest.mark.slow
def test_background_applier_indexes_what_a_worker_writes_without_any_query(
        transactional_db, celery_worker_proc, make_user, make_project, code_repo, edge_index):
    from search.engine.applier import BackgroundApplier, wait_until_indexed
    from search.engine.pipeline import QuerySpec, run_query
    from search.ingest.jobs import start_ingest
    from search.models import Chunk, Dataset, IngestJob

    alice = make_user()
    project = make_project("shop", alice)
    ds = Dataset.objects.create(project=project, name="shop", kind="code")
    # polling far slower than the test: only the outbox NOTIFY can wake it in time
    applier = BackgroundApplier(index=edge_index, poll_s=600).start()
    try:
        job = start_ingest(job=IngestJob(dataset=ds, source=str(code_repo), kind="code"))  # enqueued: the worker writes
        deadline = time.time() + 180
        while IngestJob.objects.get(pk=job.pk).status not in ("done", "failed") and time.time() < deadline:
            time.sleep(0.2)
        assert IngestJob.objects.get(pk=job.pk).status == "done"
        assert wait_until_indexed(index=edge_index, timeout=60)
        assert applier.stats["notified"] >= 1 and applier.stats["errors"] == 0
        assert edge_index.count() == Chunk.objects.filter(dataset=ds).count() > 0
        result = run_query(user=alice, project=project, spec=QuerySpec(q="deduct credits from a wallet", log=False))
        assert result.results[0]["path"] == "billing/ledger.py"
    finally:
        applier.stop()
    assert not applier.alive


def test_a_background_apply_writes_no_batch_while_a_query_is_in_flight(transactional_db, make_user, make_project,
                                                                        code_repo, edge_index):
    """The applier steps aside for this process's queries (READ_GATE): the engine's upsert holds the GIL."""
    from search.engine.applier import READ_GATE, apply_outbox
    from search.models import Chunk

    project = make_project("shop", make_user())
    _ingest_unapplied(project, code_repo)
    expected = Chunk.objects.count()
    assert expected > 1 and edge_index.count() == 0

    done = threading.Event()

    def apply() -> None:
        try:
            apply_outbox(index=edge_index, batch=1, yield_to_reads_s=60.0)
        finally:
            connection.close()
            done.set()

    with READ_GATE.reading():  # a query in flight
        worker = threading.Thread(target=apply)
        worker.start()
        assert not done.wait(1.0)
        assert edge_index.count() == 0  # it waited for the query instead of writing behind its back
    assert done.wait(60)  # the query finished: the applier goes on at once, well before its 60 s bound
    worker.join()
    assert edge_index.count() == expected


def test_a_query_that_never_ends_cannot_starve_the_applier(make_user, make_project, code_repo, edge_index):
    """The wait is bounded per batch: with a read held throughout, every row is still applied."""
    from search.engine.applier import READ_GATE, apply_outbox
    from search.models import Chunk

    project = make_project("shop", make_user())
    _ingest_unapplied(project, code_repo)
    assert Chunk.objects.count() > 2 and edge_index.count() == 0
    with READ_GATE.reading():
        applied = apply_outbox(index=edge_index, batch=2, yield_to_reads_s=0.01)
    assert applied >= Chunk.objects.count()
    assert edge_index.count() == Chunk.objects.count()


# --------------------------------------------------------------------------------- projecting Postgres into an index, and rebuilding it
@pytest.mark.django_db
def test_applier_projects_postgres_into_a_client_index(make_project, code_repo):
    from inference.encoders import dense_model_id, embedding_dim
    from search.models import Chunk

    project = make_project("shop")
    ds, _ = ingest(project, "src", code_repo, repo="shop")
    index = ClientIndex(location=":memory:", model_id=dense_model_id(), dim=embedding_dim())
    try:
        applied = apply_outbox(index=index)
        chunk_ids = set(Chunk.objects.filter(dataset=ds).values_list("pk", flat=True))
        assert applied == len(chunk_ids) and index.count() == len(chunk_ids)
        apply_outbox(index=index)  # a replay (the watermark may hold before a young id gap) changes nothing
        assert index.count() == len(chunk_ids)
        deduct = Chunk.objects.get(dataset=ds, symbol="deduct_credits")
        hits = index.search_sparse(encode_query("deduct_credits", kinds=("code",)), flt=IndexFilter(dataset_ids=[ds.pk]), limit=5)
        assert hits[0][0] == deduct.pk  # the point id is the chunk id
    finally:
        index.close()


@pytest.mark.django_db
def test_a_points_sparse_vector_is_its_rows_stored_weights_and_a_row_without_them_is_analysed_alike(
        make_project, code_repo):
    """The writer stores each row's sparse weights beside its term ids, so the applier analyses no text; a row
    written before rows kept them (null weights) gets the very vector its text analyses to."""
    from inference.encoders import dense_model_id
    from search.engine.applier import build_points
    from search.models import Chunk

    ds, _ = ingest(make_project("shop"), "src", code_repo, repo="shop")
    ids = sorted(Chunk.objects.filter(dataset=ds).values_list("pk", flat=True))
    rows = {pk: (terms, weights) for pk, terms, weights in
            Chunk.objects.filter(pk__in=ids).values_list("pk", "terms", "term_weights")}
    assert len(ids) > 3 and all(weights and len(weights) == len(terms) for terms, weights in rows.values())
    stored, gone = build_points(ids, model_id=dense_model_id())
    assert gone == [] and [(p.sparse.indices, p.sparse.values) for p in stored] == [rows[p.id] for p in stored]
    Chunk.objects.filter(pk__in=ids[::2]).update(term_weights=None)
    analysed, _ = build_points(ids, model_id=dense_model_id())
    assert sorted((p.id, p.sparse.indices, p.sparse.values) for p in analysed) == \
        sorted((p.id, p.sparse.indices, p.sparse.values) for p in stored)


@pytest.mark.django_db
def test_rebuild_reuses_cached_vectors_and_reports_optimize_time(make_project, code_repo, tmp_path):
    from django.core.management import call_command

    from inference.encoders import dense_model_id, embedding_dim
    from inference.models import EmbeddingCache
    from search.engine.index import open_index
    from search.models import Chunk

    project = make_project("shop")
    ingest(project, "src", code_repo, repo="shop")
    cached = EmbeddingCache.objects.count()
    index = ClientIndex(location=":memory:", model_id=dense_model_id(), dim=embedding_dim())
    try:
        index.upsert([IndexPoint(id=999999, dense=[0.1] * embedding_dim(), sparse=encode_document("stale"),
                                 payload={"dataset_id": 1})])
        stats = rebuild(index=index)
        assert stats["points"] == Chunk.objects.count()  # the stale point is gone, every chunk is there
        assert stats["optimize_s"] >= 0.0
    finally:
        index.close()
    assert EmbeddingCache.objects.count() == cached  # nothing re-embedded

    from io import StringIO

    out = StringIO()
    call_command("reindex", path=str(tmp_path / "rebuilt"), stdout=out)
    assert f"reindexed {Chunk.objects.count()} points" in out.getvalue() and "optimize" in out.getvalue()
    assert EmbeddingCache.objects.count() == cached
    reopened = open_index(path=tmp_path / "rebuilt")
    try:
        assert reopened.count() == Chunk.objects.count()
    finally:
        reopened.close()
