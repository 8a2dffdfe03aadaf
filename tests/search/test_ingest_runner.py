"""The ingest runner: incremental re-ingest, embedding cache on rename, deterministic point ids, crash recovery.

Postgres and the embedded Qdrant store are real; the only fault injected is an embedding batch that raises.
"""
from __future__ import annotations

import shutil

import pytest

from search.index import IndexFilter, apply_outbox
from search.models import Chunk, Document, EmbeddingCache, IngestJob
from search.sparse import encode_query
from tests.search.ctx_fixtures import LEDGER_PY, code_repo, edge_index, ingest  # noqa: F401

pytestmark = pytest.mark.django_db


def _index_ids(index, ds, **flt) -> set[int]:
    hits = index.search_sparse(encode_query("wallet credits products checkout bonus function"),
                               flt=IndexFilter(dataset_ids=[ds.pk], **flt), limit=200)
    return {i for i, _ in hits}


def test_reingest_skips_unchanged_updates_changed_and_deletes_removed_everywhere(make_project, code_repo,
                                                                                 edge_index):
    project = make_project("shop")
    ds, first = ingest(project, "src", code_repo, repo="shop")
    assert first.status == "done" and first.files_total == 3  # ledger.py, routes.js, app.min.js (skipped)
    assert first.files_skipped == 1 and first.embeddings_computed == first.chunks_written > 0
    apply_outbox(index=edge_index)
    assert edge_index.count() == Chunk.objects.filter(dataset=ds).count()

    _, again = ingest(project, "src", code_repo, repo="shop")
    assert again.files_skipped == again.files_total and again.chunks_written == 0
    assert again.embeddings_computed == 0 and again.percent == 100

    ledger = code_repo / "billing" / "ledger.py"
    ledger.write_text(LEDGER_PY.replace("refuse to go below zero", "never below zero"))
    routes_ids = set(Chunk.objects.filter(dataset=ds, path="web/routes.js").values_list("pk", flat=True))
    (code_repo / "web" / "routes.js").unlink()
    _, third = ingest(project, "src", code_repo, repo="shop")
    assert third.files_deleted == 1
    assert third.embeddings_computed == 1  # only deduct_credits changed; the other chunks hit the cache
    assert not Document.objects.filter(dataset=ds, path="web/routes.js").exists()
    assert not Chunk.objects.filter(dataset=ds, path="web/routes.js").exists()
    deduct = Chunk.objects.get(dataset=ds, symbol="deduct_credits")
    assert "never below zero" in deduct.text and "never below zero" in deduct.micro_summary

    apply_outbox(index=edge_index)
    in_index = _index_ids(edge_index, ds)
    assert not routes_ids & in_index  # deleted from Qdrant too
    assert in_index <= set(Chunk.objects.filter(dataset=ds).values_list("pk", flat=True))
    assert edge_index.count() == Chunk.objects.filter(dataset=ds).count()


def test_renamed_file_reuses_every_embedding(make_project, code_repo, edge_index):
    project = make_project("shop")
    ds, _ = ingest(project, "src", code_repo, repo="shop")
    cached = EmbeddingCache.objects.count()
    (code_repo / "money").mkdir()
    shutil.move(code_repo / "billing" / "ledger.py", code_repo / "money" / "wallets.py")
    _, job = ingest(project, "src", code_repo, repo="shop")
    assert job.embeddings_computed == 0 and job.embeddings_cached > 0 and job.files_deleted == 1
    assert EmbeddingCache.objects.count() == cached
    assert Chunk.objects.filter(dataset=ds, path="money/wallets.py", symbol="deduct_credits").exists()
    assert not Chunk.objects.filter(dataset=ds, path="billing/ledger.py").exists()
    apply_outbox(index=edge_index)
    assert _index_ids(edge_index, ds, paths=["billing/ledger.py"]) == set()
    assert _index_ids(edge_index, ds, paths=["money/wallets.py"])


def test_point_ids_are_chunk_ids_and_replaying_the_outbox_is_idempotent(make_project, code_repo, edge_index):
    from search.models import IndexOutbox, IndexWatermark

    project = make_project("shop")
    ds, _ = ingest(project, "src", code_repo, repo="shop")
    apply_outbox(index=edge_index)
    chunk_ids = set(Chunk.objects.filter(dataset=ds).values_list("pk", flat=True))
    assert _index_ids(edge_index, ds) <= chunk_ids
    IndexWatermark.objects.filter(store=edge_index.store_key).update(last_outbox_id=0)  # replay everything
    assert apply_outbox(index=edge_index) == IndexOutbox.objects.count()
    assert edge_index.count() == len(chunk_ids)


def test_a_failed_embedding_batch_is_retried(make_project, code_repo, edge_index, monkeypatch):
    import search.encoders as encoders
    import search.ingest.runner as runner

    real, calls = encoders.embed_texts, {"n": 0}

    def flaky(texts, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("transient failure")
        return real(texts, **kw)

    monkeypatch.setattr(encoders, "embed_texts", flaky)
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    ds, job = ingest(make_project("shop"), "src", code_repo, repo="shop")
    assert job.status == "done" and calls["n"] == 2
    assert Chunk.objects.filter(dataset=ds).count() == job.chunks_written


def test_rerunning_a_crashed_ingest_finishes_without_duplicates(make_project, code_repo, edge_index, monkeypatch):
    import search.encoders as encoders
    import search.ingest.runner as runner
    from search.ingest.runner import run_job

    project = make_project("shop")
    clean_ds, _ = ingest(project, "clean", code_repo, repo="shop")  # the reference: an uninterrupted run
    expected = sorted(Chunk.objects.filter(dataset=clean_ds).values_list("path", "start_line", "end_line", "symbol"))
    EmbeddingCache.objects.all().delete()

    real, calls = encoders.embed_texts, {"n": 0}

    def dies_on_second_batch(texts, **kw):
        calls["n"] += 1
        if calls["n"] >= 2:
            raise RuntimeError("worker lost")
        return real(texts, **kw)

    monkeypatch.setattr(runner, "FILE_BATCH", 1)  # one file per transaction
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    monkeypatch.setattr(encoders, "embed_texts", dies_on_second_batch)
    with pytest.raises(RuntimeError, match="worker lost"):
        ingest(project, "crashy", code_repo, repo="shop")
    job = IngestJob.objects.get(dataset__name="crashy")
    assert job.status == "failed" and "worker lost" in job.error
    assert Document.objects.filter(dataset=job.dataset).count() == 1  # the first file's batch committed whole

    monkeypatch.setattr(encoders, "embed_texts", real)
    job = run_job(job=job)  # what the Celery retry does
    assert job.status == "done" and job.files_skipped >= 1  # the committed file is not redone
    got = sorted(Chunk.objects.filter(dataset=job.dataset).values_list("path", "start_line", "end_line", "symbol"))
    assert got == expected  # no duplicates, nothing missing
    apply_outbox(index=edge_index)
    assert edge_index.count() == 2 * len(expected)
