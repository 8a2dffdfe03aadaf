"""Context ingest API: validation and roles in-process; the accepted job runs in a real Celery worker."""
from __future__ import annotations

import time

import pytest

from tests.search.ctx_fixtures import code_repo, edge_index  # noqa: F401


@pytest.fixture
def owner_and_viewer(make_user, make_project):
    # server-path ingest through the API is for staff; the owner here is an operator
    alice, vic = make_user("owner@example.com", staff=True), make_user("viewer@example.com")
    shop = make_project("shop", alice)
    make_project("shop", vic, role="viewer")
    return alice, vic, shop


@pytest.mark.django_db
@pytest.mark.parametrize("body,field", [
    ({"kind": "code", "source": "/etc"}, "dataset"),
    ({"dataset": "src", "kind": "pdf", "source": "/etc"}, "kind"),
    ({"dataset": "src", "kind": "code", "source": "/etc"}, "source"),  # outside INGEST_ALLOWED_ROOTS
    ({"dataset": "src", "kind": "code", "source": "/nowhere/at/all"}, "source"),
])
def test_ingest_rejects_bad_input_naming_the_field(owner_and_viewer, client_for, settings, tmp_path, body, field):
    from search.models import IngestJob

    settings.INGEST_ALLOWED_ROOTS = [str(tmp_path), "/nowhere"]
    resp = client_for(owner_and_viewer[0]).post("/api/projects/shop/ingest", body, format="json")
    assert resp.status_code == 400 and resp.json()["field"] == field
    assert not IngestJob.objects.exists()


@pytest.mark.django_db
def test_viewers_cannot_ingest_and_strangers_get_404(owner_and_viewer, client_for, make_user, settings, code_repo):
    settings.INGEST_ALLOWED_ROOTS = [str(code_repo)]
    body = {"dataset": "src", "kind": "code", "source": str(code_repo)}
    assert client_for(owner_and_viewer[1]).post("/api/projects/shop/ingest", body, format="json").status_code == 403
    stranger = client_for(make_user("x@example.com"))
    assert stranger.post("/api/projects/shop/ingest", body, format="json").status_code == 404


@pytest.mark.slow
def test_accepted_ingest_runs_in_celery_and_becomes_searchable(celery_worker_proc, owner_and_viewer, client_for,
                                                              settings, code_repo, edge_index):
    alice, _, _ = owner_and_viewer
    settings.INGEST_ALLOWED_ROOTS = [str(code_repo)]
    client = client_for(alice)
    resp = client.post("/api/projects/shop/ingest", {"dataset": "src", "kind": "code", "source": str(code_repo),
                                                     "repo": "shop"}, format="json")
    assert resp.status_code == 202, resp.content
    job = resp.json()
    assert job["status"] == "pending" and job["percent"] == 0
    deadline = time.time() + 240
    while time.time() < deadline:
        job = client.get(f"/api/ingest-jobs/{job['id']}").json()
        if job["status"] in ("done", "failed"):
            break
        time.sleep(0.5)
    assert job["status"] == "done", job
    assert job["percent"] == 100 and job["files_total"] == 3 and job["files_skipped"] == 1
    assert job["chunks_written"] > 0 and job["embeddings_computed"] + job["embeddings_cached"] > 0

    found = client.post("/api/projects/shop/query", {"q": "deduct credits from a wallet", "top_k": 3},
                        format="json").json()["results"]
    assert found[0]["symbol"] == "deduct_credits" and found[0]["repo"] == "shop"
