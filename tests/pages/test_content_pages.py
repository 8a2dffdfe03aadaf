"""Content pages: add a dataset, upload into it, see the progress bar and the documents, delete one."""
from __future__ import annotations

import io
import zipfile

import pytest
from django.test import Client

from search.models import Document, IngestJob
from tests.search.ctx_fixtures import LEDGER_PY, ROUTES_JS, edge_index  # noqa: F401

pytestmark = pytest.mark.django_db


def _zip() -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("shop/billing/ledger.py", LEDGER_PY)
        zf.writestr("shop/web/routes.js", ROUTES_JS)
    buf.seek(0)
    buf.name = "shop.zip"
    return buf


@pytest.fixture
def pages(make_user, make_project, edge_index, monkeypatch):
    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    owner, viewer = make_user("owner@example.com"), make_user("viewer@example.com")
    make_project("team", owner)
    make_project("team", viewer, role="viewer")
    a, b = Client(), Client()
    a.force_login(owner)
    b.force_login(viewer)
    return a, b


def test_an_editor_adds_a_dataset_uploads_a_zip_and_sees_progress_then_documents(pages):
    from search.ingest.jobs import run_job

    owner, _ = pages
    resp = owner.post("/projects/team/datasets/new", {"name": "shop", "kind": "code"})
    assert resp.status_code == 302
    page_url = resp["Location"]
    resp = owner.post(page_url + "upload", {"file": _zip()})
    assert resp.status_code == 302 and resp["Location"] == page_url
    html = owner.get(page_url).content.decode()
    job = IngestJob.objects.get()
    assert job.status == "pending" and f'data-job="{job.pk}"' in html and "<progress" in html
    assert 'http-equiv="refresh"' in html  # no-JS fallback while a job runs
    run_job(job=job)
    html = owner.get(page_url).content.decode()
    assert 'value="100"' in html and "billing/ledger.py" in html and "web/routes.js" in html
    assert 'http-equiv="refresh"' not in html
    resp = owner.post(page_url + "documents/delete", {"path": "web/routes.js"})
    assert resp.status_code == 302
    assert list(Document.objects.values_list("path", flat=True)) == ["billing/ledger.py"]


def test_a_viewer_sees_no_upload_form_and_cannot_post_one(pages):
    owner, viewer = pages
    page_url = owner.post("/projects/team/datasets/new", {"name": "shop", "kind": "code"})["Location"]
    html = viewer.get(page_url).content.decode()
    assert 'type="file"' not in html
    assert viewer.post(page_url + "upload", {"file": _zip()}).status_code == 403
    assert viewer.post("/projects/team/datasets/new", {"name": "x", "kind": "code"}).status_code == 302
    assert not IngestJob.objects.exists()


def test_a_refused_archive_shows_its_reason_with_its_status(pages):
    owner, _ = pages
    page_url = owner.post("/projects/team/datasets/new", {"name": "shop", "kind": "code"})["Location"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../../etc/evil.py", "x = 1")
    buf.seek(0)
    buf.name = "evil.zip"
    resp = owner.post(page_url + "upload", {"file": buf})
    assert resp.status_code == 422 and "leaves the archive root" in resp.content.decode()
    assert not IngestJob.objects.exists()


def test_upload_and_delete_forms_need_csrf(make_user, make_project):
    from search.models import Dataset

    owner = make_user("owner@example.com")
    project = make_project("team", owner)
    ds = Dataset.objects.create(project=project, name="shop", kind="code")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(f"/projects/team/datasets/{ds.pk}/upload", {"file": _zip()}).status_code == 403
    assert strict.post(f"/projects/team/datasets/{ds.pk}/documents/delete", {"path": "x"}).status_code == 403
    assert strict.post("/projects/team/datasets/new", {"name": "x", "kind": "code"}).status_code == 403
    assert not IngestJob.objects.exists() and Dataset.objects.count() == 1


def test_strangers_get_404_for_a_dataset_page(pages, make_user):
    owner, _ = pages
    page_url = owner.post("/projects/team/datasets/new", {"name": "shop", "kind": "code"})["Location"]
    stranger = Client()
    stranger.force_login(make_user("x@example.com"))
    assert stranger.get(page_url).status_code == 404
    assert stranger.post(page_url + "upload", {"file": _zip()}).status_code == 404
