"""`reconcile_index` finds what drifted between the index and Postgres, repairs it from Postgres, and says so.

Discrepancies are planted in a real store (embedded edge, and qdrant-client's local mode for the server
adapter): a point deleted behind the applier's back, a bogus point, payloads rewritten in the index, and a
chunk moved in Postgres without an outbox row.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from inference.models import EmbeddingCache
from search.engine.applier import apply_outbox
from search.engine.index_schema import IndexPoint
from search.engine.sparse import encode_document
from search.models import Chunk, ReconcileRun
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401

pytestmark = pytest.mark.django_db

BOGUS_ID = 987_654_321


@pytest.fixture
def world(make_user, make_project, code_repo, edge_index, tmp_path, monkeypatch):
    # Sequence ids of rolled-back earlier tests are "young gaps" to the applier, which would hold its watermark
    # and replay from 0 on every call (repairing what a test planted); a settled applier has no young gaps.
    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    owner = make_user("owner@example.com")
    acme = make_project("acme", owner)
    beta = make_project("beta", owner)
    src, _ = ingest(acme, "src", code_repo, repo="shop")
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    (lib_dir / "util.py").write_text('def util():\n    """A helper in another project."""\n    return 0\n')
    lib, _ = ingest(beta, "lib", lib_dir, repo="lib")
    apply_outbox(index=edge_index)
    return {"acme": acme, "beta": beta, "src": src, "lib": lib, "index": edge_index}


@pytest.fixture(params=["edge", "client-local"])
def store(request, world):
    """The world's edge store, or a qdrant-client local-mode collection projected from the same Postgres."""
    if request.param == "edge":
        return world["index"]
    from inference.encoders import dense_model_id, embedding_dim
    from search.engine.index_server import ClientIndex

    index = ClientIndex(location=":memory:", model_id=dense_model_id(), dim=embedding_dim())
    apply_outbox(index=index)
    request.addfinalizer(index.close)
    return index


def _payloads(index) -> dict[int, dict]:
    return {pid: payload for batch in index.iter_payloads(batch=3) for pid, payload in batch}


def _plant(index, world) -> dict[str, set[int]]:
    """One of each kind of drift; returns the ids reconcile must report."""
    from inference.encoders import embedding_dim

    src = list(Chunk.objects.filter(dataset=world["src"]).order_by("pk"))
    lost, rewritten, moved = src[0], src[1], src[2]
    index.delete([lost.pk])  # missing: a point removed behind the applier's back
    index.upsert([IndexPoint(id=BOGUS_ID, dense=[0.5] * embedding_dim(), sparse=encode_document("ghost"),
                             payload={"dataset_id": world["src"].pk, "project_id": world["acme"].pk})])  # orphan
    index.set_payload([rewritten.pk], {**_payloads(index)[rewritten.pk], "project_id": world["beta"].pk})  # stale
    Chunk.objects.filter(pk=moved.pk).update(dataset=world["lib"])  # stale: moved in Postgres, no outbox row
    return {"orphans": {BOGUS_ID}, "missing": {lost.pk}, "stale": {rewritten.pk, moved.pk}}


def test_clean_store_is_exact_and_the_run_is_recorded(store):
    from search.engine.reconcile import reconcile

    report = reconcile(index=store)
    assert report.exact and report.found.counts() == {"orphans": 0, "missing": 0, "stale": 0}
    assert report.found.points == report.found.chunks == Chunk.objects.count() > 0
    run = ReconcileRun.objects.get(pk=report.run_id)
    assert (run.orphans, run.missing, run.stale, run.fixed, run.exact) == (0, 0, 0, False, True)
    assert run.store == store.store_key and run.points == Chunk.objects.count()


def test_reconcile_finds_planted_drift_and_fix_repairs_it_without_reembedding(store, world):
    from inference.encoders import dense_model_id
    from search.engine.reconcile import reconcile

    planted = _plant(store, world)
    report = reconcile(index=store)
    assert {k: set(getattr(report.found, k)) for k in planted} == planted
    assert not report.exact
    run = ReconcileRun.objects.get(pk=report.run_id)
    assert (run.orphans, run.missing, run.stale, run.fixed) == (1, 1, 2, False)

    cached = EmbeddingCache.objects.count()
    fixed = reconcile(index=store, fix=True)
    assert {k: set(getattr(fixed.found, k)) for k in planted} == planted
    assert fixed.after.counts() == {"orphans": 0, "missing": 0, "stale": 0} and fixed.exact
    assert EmbeddingCache.objects.count() == cached  # vectors came from the cache
    payloads = _payloads(store)
    assert set(payloads) == set(Chunk.objects.values_list("pk", flat=True))  # bogus gone, lost one back
    for chunk in Chunk.objects.filter(pk__in=planted["stale"] | planted["missing"]).select_related("dataset"):
        assert payloads[chunk.pk]["dataset_id"] == chunk.dataset_id
        assert payloads[chunk.pk]["project_id"] == chunk.dataset.project_id
    (lost,) = planted["missing"]
    chunk = Chunk.objects.get(pk=lost)
    vector = EmbeddingCache.objects.get(model_id=dense_model_id(), text_hash=chunk.text_hash).vector
    from search.engine.index_schema import IndexFilter

    hits = store.search_dense(vector, flt=IndexFilter(dataset_ids=[chunk.dataset_id]), limit=1)
    assert hits[0][0] == lost and hits[0][1] == pytest.approx(1.0, abs=1e-4)  # the cached vector, restored
    run = ReconcileRun.objects.get(pk=fixed.run_id)
    assert (run.fixed, run.orphans_after, run.missing_after, run.stale_after, run.exact) == (True, 0, 0, 0, True)
    assert reconcile(index=store).exact  # and it stays exact


def test_a_chunk_without_a_vector_is_reported_not_reembedded(world):
    from search.engine.reconcile import reconcile

    index = world["index"]
    chunk = Chunk.objects.filter(dataset=world["lib"]).first()
    Chunk.objects.filter(pk=chunk.pk).update(text_hash="0" * 64)  # no cached vector for this hash
    index.delete([chunk.pk])
    report = reconcile(index=index, fix=True)
    assert report.found.unembedded == 1 and report.found.missing == []
    assert report.exact and chunk.pk not in _payloads(index)
    assert not EmbeddingCache.objects.filter(text_hash="0" * 64).exists()


def test_a_change_made_during_the_scan_is_in_flight_not_a_discrepancy(world):
    """A chunk deleted while the points are read queues its delete then: not counted as an orphan."""
    from search.engine.reconcile import scan

    index = world["index"]
    victim = Chunk.objects.filter(dataset=world["src"]).first()

    class DeletesDuringScan:
        def __getattr__(self, name):
            return getattr(index, name)

        def iter_payloads(self, **kw):
            for n, batch in enumerate(index.iter_payloads(**kw)):
                if n == 0:
                    Chunk.objects.filter(pk=victim.pk).delete()
                yield batch

    result = scan(index=DeletesDuringScan())
    assert result.orphans == [] and result.in_flight == 1
    assert scan(index=index).orphans == [victim.pk]  # a scan that starts later sees the unapplied delete


def test_command_reports_counts_exits_1_when_not_exact_and_fix_repairs(world):
    _plant(world["index"], world)
    out = StringIO()
    with pytest.raises(CommandError, match="not exact") as err:
        call_command("reconcile_index", "--json", stdout=out)
    assert err.value.returncode == 1
    report = json.loads(out.getvalue())
    assert (report["found"]["orphans"], report["found"]["missing"], report["found"]["stale"]) == (1, 1, 2)
    assert report["found"]["orphans_sample"] == [BOGUS_ID] and report["fixed"] is False

    out = StringIO()
    call_command("reconcile_index", "--fix", stdout=out)
    text = out.getvalue()
    assert "orphans 1  missing 1  stale 2" in text and "after fix: orphans 0  missing 0  stale 0" in text
    assert text.rstrip().endswith("exact")
    out = StringIO()
    call_command("reconcile_index", "--json", stdout=out)
    assert json.loads(out.getvalue())["exact"] is True
    assert ReconcileRun.objects.count() == 3


def test_command_on_a_store_held_elsewhere_says_how_to_reconcile(tmp_path):
    from search.engine.index import open_index

    held = open_index(path=tmp_path / "qdrant")
    try:
        with pytest.raises(CommandError, match="Reconcile now"):
            call_command("reconcile_index", path=str(tmp_path / "qdrant"))
    finally:
        held.close()


def test_admin_reconcile_now_and_the_dashboard_show_the_last_run(world, client, make_user):
    client.force_login(make_user("staff@example.com", staff=True))
    _plant(world["index"], world)
    changelist = reverse("admin:search_reconcilerun_changelist")
    page = client.get(changelist)
    assert page.status_code == 200 and b'id="reconcile-check"' in page.content and b'id="reconcile-fix"' in page.content
    assert client.get(reverse("admin:search_reconcilerun_run")).status_code == 405
    resp = client.post(reverse("admin:search_reconcilerun_run"), follow=True)
    assert resp.status_code == 200
    assert "Found 1 orphans, 1 missing, 2 stale" in resp.content.decode()
    assert ReconcileRun.objects.get().fixed is False

    body = client.get("/admin/dashboard/").content.decode()
    assert 'id="reconcile"' in body and "NOT exact" in body

    resp = client.post(reverse("admin:search_reconcilerun_run"), {"fix": "1"}, follow=True)
    assert "After the fix: 0 orphans, 0 missing, 0 stale." in resp.content.decode()
    last = ReconcileRun.objects.order_by("-created_at").first()
    assert last.fixed and last.exact
    body = client.get("/admin/dashboard/").content.decode()
    section = body[body.index('id="reconcile"'):]
    assert "NOT exact" not in section and "yes: 0 / 0 / 0 left" in section


def test_non_staff_cannot_run_a_reconcile(world, client, make_user):
    client.force_login(make_user("plain@example.com"))
    resp = client.post(reverse("admin:search_reconcilerun_run"))
    assert resp.status_code == 302 and "/admin/login/" in resp["Location"]
    assert not ReconcileRun.objects.exists()


def test_chunk_payload_and_the_reconciler_agree_on_the_payload(world):
    from search.engine.applier import chunk_payload, payloads_for

    chunk = Chunk.objects.select_related("dataset").filter(dataset=world["src"]).first()
    assert payloads_for([chunk.pk])[chunk.pk] == chunk_payload(chunk)
