"""Self-serve content: push, upload, delete, jobs, quotas — through the API as a team would.

Jobs are run with search.ingest.jobs.run_job, which is what the Celery worker calls (the request's
on_commit hook never fires inside a test transaction)."""
from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from search.engine.applier import apply_outbox
from search.models import Chunk, Document, IngestJob, StagedContent
from tests.search.ctx_fixtures import LEDGER_PY, ROUTES_JS, edge_index  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(make_user, make_project, client_for, edge_index, monkeypatch):
    from search.models import Dataset

    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    owner, viewer = make_user("owner@example.com"), make_user("viewer@example.com")
    project = make_project("team", owner)
    make_project("team", viewer, role="viewer")
    ds = Dataset.objects.create(project=project, name="code", kind="code")
    web = Dataset.objects.create(project=project, name="docs", kind="web")
    return {"owner": client_for(owner), "viewer": client_for(viewer), "project": project, "code": ds, "web": web,
            "index": edge_index, "base": f"/api/projects/team/datasets/{ds.pk}"}


def _run(resp) -> IngestJob:
    from search.ingest.jobs import run_job

    assert resp.status_code == 202, resp.content
    job = IngestJob.objects.get(pk=resp.json()["id"])
    try:
        run_job(job=job)
    except Exception:  # noqa: BLE001 - a failed job is recorded on the row; the test reads it there
        pass
    job.refresh_from_db()
    return job


def _exact(index) -> None:
    from search.engine.reconcile import reconcile

    apply_outbox(index=index)
    report = reconcile(index=index)
    assert report.exact, report.as_dict()
    points = {pid for batch in index.iter_payloads() for pid, _ in batch}
    assert points == set(Chunk.objects.values_list("pk", flat=True))


def _docs(**extra) -> list[dict]:
    return [{"external_id": "ledger", "path": "billing/ledger.py", "text": LEDGER_PY, **extra},
            {"external_id": "routes", "path": "web/routes.js", "text": ROUTES_JS}]


def _zip(files: dict[str, bytes], *, root: str = "shop-main/") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(root + name, data)
    return buf.getvalue()


def _upload(client, url: str, name: str, data: bytes, **fields):
    f = io.BytesIO(data)
    f.name = name
    return client.post(url, {"file": f, **fields}, format="multipart")


# --------------------------------------------------------------------------- push
def test_pushed_documents_become_searchable_and_a_repush_of_unchanged_text_embeds_nothing(team):
    job = _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json"))
    assert job.status == "done" and job.files_total == 2 and job.chunks_written > 0, job.error
    doc = Document.objects.get(dataset=team["code"], external_id="ledger")
    assert doc.path == "billing/ledger.py" and doc.lang == "python" and doc.size_bytes == len(LEDGER_PY.encode())
    _exact(team["index"])
    found = team["viewer"].post("/api/projects/team/query", {"q": "deduct credits from a wallet", "top_k": 3},
                                format="json").json()["results"]
    assert found[0]["symbol"] == "deduct_credits" and found[0]["path"] == "billing/ledger.py"

    again = _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs(title="Ledger")},
                                   format="json"))
    assert again.status == "done" and again.embeddings_computed == 0 and again.chunks_written == 0
    assert Document.objects.get(external_id="ledger").title == "Ledger"  # metadata still applies


def test_a_push_under_a_new_path_moves_the_document_and_its_points(team):
    _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json"))
    moved = [{"external_id": "ledger", "path": "money/ledger.py", "text": LEDGER_PY}]
    job = _run(team["owner"].put(f"{team['base']}/documents", {"documents": moved}, format="json"))
    assert job.status == "done" and job.files_deleted == 1 and job.embeddings_computed == 0
    assert list(Document.objects.filter(external_id="ledger").values_list("path", flat=True)) == ["money/ledger.py"]
    _exact(team["index"])


def test_documents_are_listed_and_deleted_one_by_one_or_in_batches_with_the_index_kept_exact(team):
    _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json"))
    page = team["viewer"].get(f"{team['base']}/documents").json()
    assert page["count"] == 2 and {d["external_id"] for d in page["results"]} == {"ledger", "routes"}
    assert all(d["chunk_count"] > 0 for d in page["results"])
    assert team["viewer"].delete(f"{team['base']}/documents/ledger").status_code == 403
    assert team["owner"].delete(f"{team['base']}/documents/ledger").status_code == 204
    assert team["owner"].delete(f"{team['base']}/documents/ledger").status_code == 404
    _exact(team["index"])
    out = team["owner"].delete(f"{team['base']}/documents", {"external_ids": ["routes", "nope"]}, format="json")
    assert out.json() == {"deleted": 1, "missing": ["nope"]}
    assert not Document.objects.filter(dataset=team["code"]).exists()
    _exact(team["index"])


@pytest.mark.parametrize("docs,field", [
    ([{"external_id": "a", "path": "a.py", "text": "x"}, {"external_id": "a", "path": "b.py", "text": "y"}],
     "documents.1.external_id"),
    ([{"external_id": "a", "path": "a.py", "text": "x"}, {"external_id": "b", "path": "a.py", "text": "y"}],
     "documents.1.path"),
    ([{"external_id": "a", "path": "a.py"}], "documents.0.text"),
    ([{"external_id": "a", "path": "a.py", "text": "x", "secret": 1}], "documents.0.secret"),
    ([], "documents"),
])
def test_a_bad_push_is_a_400_naming_the_field_and_writes_nothing(team, docs, field):
    resp = team["owner"].put(f"{team['base']}/documents", {"documents": docs}, format="json")
    assert resp.status_code == 400 and resp.json()["field"].startswith(field.split(".")[0]), resp.json()
    if "." in field:
        assert resp.json()["field"] == field
    assert not IngestJob.objects.exists() and not StagedContent.objects.exists()


def test_viewers_cannot_push_or_upload_and_strangers_get_404(team, make_user, client_for):
    assert team["viewer"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json").status_code == 403
    assert _upload(team["viewer"], f"{team['base']}/uploads", "a.py", b"x = 1\n").status_code == 403
    stranger = client_for(make_user("stranger@example.com"))
    assert stranger.get(f"{team['base']}/documents").status_code == 404
    assert stranger.put(f"{team['base']}/documents", {"documents": _docs()}, format="json").status_code == 404


# --------------------------------------------------------------------------- upload
def test_an_uploaded_zip_of_a_repository_is_ingested_and_a_second_upload_mirrors_it(team):
    data = _zip({"billing/ledger.py": LEDGER_PY.encode(), "web/routes.js": ROUTES_JS.encode(),
                 "logo.png": b"\x89PNG\x00\x00"})
    job = _run(_upload(team["owner"], f"{team['base']}/uploads", "shop.zip", data))
    assert job.status == "done", job.error
    assert set(Document.objects.filter(dataset=team["code"]).values_list("path", flat=True)) == {
        "billing/ledger.py", "web/routes.js"}  # the archive's top folder is stripped; binaries skipped
    assert not StagedContent.objects.exists()
    _exact(team["index"])
    smaller = _zip({"billing/ledger.py": LEDGER_PY.encode()})
    job = _run(_upload(team["owner"], f"{team['base']}/uploads", "shop.zip", smaller))
    assert job.status == "done" and job.files_deleted == 1 and job.embeddings_computed == 0
    assert list(Document.objects.filter(dataset=team["code"]).values_list("path", flat=True)) == ["billing/ledger.py"]
    _exact(team["index"])


def test_a_single_uploaded_file_merges_and_a_tar_gz_works_too(team):
    _run(_upload(team["owner"], f"{team['base']}/uploads", "ledger.py", LEDGER_PY.encode()))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("routes.js")
        info.size = len(ROUTES_JS.encode())
        tf.addfile(info, io.BytesIO(ROUTES_JS.encode()))
    job = _run(_upload(team["owner"], f"{team['base']}/uploads", "web.tar.gz", buf.getvalue(), mode="merge"))
    assert job.status == "done", job.error
    assert set(Document.objects.filter(dataset=team["code"]).values_list("path", flat=True)) == {"ledger.py",
                                                                                                 "routes.js"}


def _zip_raw(entries: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries:
            zf.writestr(info, data)
    return buf.getvalue()


def _symlink_zip() -> bytes:
    info = zipfile.ZipInfo("link")
    info.external_attr = (0o120777 << 16)
    return _zip_raw([(info, b"/etc/passwd")])


@pytest.mark.parametrize("name,data,status,code", [
    ("evil.zip", _zip({"../../etc/cron.d/x": b"x"}, root=""), 422, "unsafe_archive"),
    ("evil.zip", _zip({"/etc/passwd": b"x"}, root=""), 422, "unsafe_archive"),
    ("evil.zip", _symlink_zip(), 422, "unsafe_archive"),
    ("bomb.zip", _zip({"zeros.py": b"0" * 3_000_000}), 413, "compression_ratio"),
    ("many.zip", _zip({f"f{i}.py": b"x=1\n" for i in range(30)}), 413, "too_many_files"),
    ("broken.zip", b"PK\x03\x04 not really a zip", 422, "bad_archive"),
])
def test_unsafe_or_oversized_archives_are_refused_before_extraction_and_write_nothing(team, settings, name, data,
                                                                                     status, code):
    settings.UPLOAD_MAX_FILES = 20
    resp = _upload(team["owner"], f"{team['base']}/uploads", name, data)
    assert resp.status_code == status and resp.json()["code"] == code, resp.content
    assert not IngestJob.objects.exists() and not StagedContent.objects.exists() and not Document.objects.exists()


def test_a_tar_with_a_device_or_hardlink_is_refused(team):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("hard")
        info.type = tarfile.LNKTYPE
        info.linkname = "/etc/shadow"
        tf.addfile(info)
    resp = _upload(team["owner"], f"{team['base']}/uploads", "x.tar.gz", buf.getvalue())
    assert resp.status_code == 422 and resp.json()["code"] == "unsafe_archive"


def test_an_upload_over_the_request_limit_is_a_413_json_error(team, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    resp = _upload(team["owner"], f"{team['base']}/uploads", "big.py", b"x = 1\n" * 2000)
    assert resp.status_code == 413 and resp.json()["code"] in ("body_too_large", "upload_too_large")
    assert not IngestJob.objects.exists()


# --------------------------------------------------------------------------- quotas and all-or-nothing
def test_a_push_past_the_documents_quota_is_a_413_with_quota_and_usage_and_writes_nothing(team):
    team["project"].quota_documents = 1
    team["project"].save()
    resp = team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json")
    body = resp.json()
    assert resp.status_code == 413 and body["code"] == "quota_exceeded"
    assert body["quota"] == {"documents": 1} and body["usage"] == {"documents": 0}
    assert not IngestJob.objects.exists() and not Document.objects.exists()


def test_a_job_that_would_pass_the_chunk_quota_fails_and_leaves_the_dataset_as_it_was(team):
    _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()[:1]}, format="json"))
    before = set(Chunk.objects.values_list("pk", "text_hash"))
    team["project"].quota_chunks = len(before) + 1  # routes.js alone brings more than one chunk
    team["project"].save()
    job = _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()[1:]}, format="json"))
    assert job.status == "failed" and job.error.startswith("quota_exceeded:"), job.error
    assert set(Chunk.objects.values_list("pk", "text_hash")) == before
    assert not Document.objects.filter(external_id="routes").exists()
    _exact(team["index"])


def test_a_failing_job_writes_nothing_and_says_why_without_the_exception_text(team, monkeypatch, caplog):
    _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()[:1]}, format="json"))
    before = list(Document.objects.values_list("path", "content_hash"))

    def broken(**kw):
        raise RuntimeError("embedding backend fell over")

    monkeypatch.setattr("search.ingest.staged.cache_vectors", broken)
    changed = [{"external_id": "ledger", "path": "billing/ledger.py", "text": LEDGER_PY + "\n# more\n"},
               _docs()[1]]
    job = _run(team["owner"].put(f"{team['base']}/documents", {"documents": changed}, format="json"))
    # the owner reads a code and a fixed sentence with a reference; the exception's text (which may name server
    # paths or hosts) is in the server's log under that reference
    assert job.status == "failed" and job.error.startswith("internal_error: ") and "fell over" not in job.error
    ref = job.error.rsplit("reference ", 1)[1].rstrip(".")
    logged = [r for r in caplog.records if ref in r.getMessage()]
    assert logged and "embedding backend fell over" in str(logged[0].exc_info[1])
    assert list(Document.objects.values_list("path", "content_hash")) == before
    _exact(team["index"])


def test_project_detail_reports_usage_and_quota(team):
    from projects.quotas import report

    _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json"))
    got = report(team["project"])
    assert got["usage"]["documents"] == 2 and got["usage"]["chunks"] == Chunk.objects.count()
    assert got["usage"]["bytes"] == len(LEDGER_PY.encode()) + len(ROUTES_JS.encode())
    assert got["quota"]["documents"] == 100_000


def test_a_dataset_is_read_renamed_and_deleted_through_the_api_with_the_index_kept_exact(team, make_user,
                                                                                      client_for):
    _run(team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json"))
    url = f"/api/projects/team/datasets/{team['code'].pk}"
    got = team["viewer"].get(url).json()
    assert got["name"] == "code" and got["document_count"] == 2 and got["chunk_count"] == Chunk.objects.count()
    assert team["viewer"].patch(url, {"name": "x"}, format="json").status_code == 403
    assert team["owner"].patch(url, {"is_global": True}, format="json").json()["code"] == "forbidden"
    assert team["owner"].patch(url, {"name": "source", "description": "our repo"}, format="json").json()[
        "name"] == "source"
    assert team["owner"].patch(url, {"name": "docs"}, format="json").json()["code"] == "dataset_exists"
    assert client_for(make_user("out@example.com")).get(url).status_code == 404
    detail = team["owner"].get("/api/projects/team").json()
    assert detail["usage"]["documents"] == 2 and detail["quota"]["documents"] == 100_000
    assert team["viewer"].delete(url).status_code == 403
    assert team["owner"].delete(url).status_code == 204
    assert team["owner"].get(url).status_code == 404
    assert not Chunk.objects.exists()
    _exact(team["index"])


def test_a_push_over_the_batch_limit_is_a_400(team, settings):
    settings.PUSH_MAX_DOCUMENTS = 1
    resp = team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json")
    assert resp.status_code == 400 and resp.json()["field"] == "documents"
    assert not IngestJob.objects.exists()


def test_staff_set_a_project_quota_in_the_admin_and_see_its_usage(team, make_user, client):
    client.force_login(make_user("staff@example.com", staff=True))
    url = f"/admin/projects/project/{team['project'].pk}/change/"
    html = client.get(url).content.decode()
    assert "Usage / quota" in html and "documents: 0 / 100,000" in html
    resp = client.post(url, {"slug": "team", "name": "Team", "quota_documents": "1", "quota_chunks": "",
                             "quota_bytes": "", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
                             "ranking-TOTAL_FORMS": "0", "ranking-INITIAL_FORMS": "0"})  # search's inline
    assert resp.status_code == 302, resp.content[:500]
    team["project"].refresh_from_db()
    assert team["project"].quota_documents == 1
    resp = team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json")
    assert resp.status_code == 413 and resp.json()["code"] == "quota_exceeded"


def test_pushes_and_uploads_are_rate_limited_before_anything_is_staged(team, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "ingest": "1/m"}
    assert team["owner"].put(f"{team['base']}/documents", {"documents": _docs()}, format="json").status_code == 202
    resp = _upload(team["owner"], f"{team['base']}/uploads", "a.py", b"x = 1\n")
    assert resp.status_code == 429 and resp["Retry-After"] and resp.json()["code"] == "rate_limited"
    assert IngestJob.objects.count() == StagedContent.objects.count() == 1


def test_an_archive_mirror_decides_what_to_remove_when_it_writes_not_when_it_started(team, monkeypatch):
    """Two jobs of one dataset in flight: a push commits while an upload is still embedding. The upload's mirror
    must see the pushed document (it is not in the archive, so it goes), not the dataset as it was."""
    from search.ingest import staged
    from search.ingest.jobs import run_job

    upload = _upload(team["owner"], f"{team['base']}/uploads", "shop.zip",
                     _zip({"billing/ledger.py": LEDGER_PY.encode()}))
    push = team["owner"].put(f"{team['base']}/documents", {"documents": _docs()[1:]}, format="json")
    push_job = IngestJob.objects.get(pk=push.json()["id"])
    real = staged.cache_vectors

    def embed_then_let_the_push_commit(**kw):
        out = real(**kw)
        if IngestJob.objects.get(pk=push_job.pk).status == "pending":
            monkeypatch.setattr(staged, "cache_vectors", real)
            run_job(job=push_job)
            monkeypatch.setattr(staged, "cache_vectors", embed_then_let_the_push_commit)
        return out

    monkeypatch.setattr(staged, "cache_vectors", embed_then_let_the_push_commit)
    job = IngestJob.objects.get(pk=upload.json()["id"])
    run_job(job=job)
    job.refresh_from_db()
    push_job.refresh_from_db()
    assert push_job.status == "done" and job.status == "done" and job.files_deleted == 1, job.error
    assert list(Document.objects.values_list("path", flat=True)) == ["billing/ledger.py"]
    _exact(team["index"])


def test_an_uploaded_rulebook_goes_through_the_rules_reader_and_its_graph(team):
    """A rules dataset's upload is read as one tree (search.rules.ingest registers it with the staged job), so
    cross-references become graph edges."""
    from search.models import Dataset, Document, GraphEdge

    rules = Dataset.objects.create(project=team["project"], name="book", kind="rules")
    book = (b"# Conditions\n\n## Grappled\n\nA grappled creature's speed becomes 0. See Escaping a Grapple.\n\n"
            b"## Escaping a Grapple\n\nA grappled creature can use its action to escape, making a Strength "
            b"(Athletics) check contested by the grappler.\n")
    job = _run(_upload(team["owner"], f"/api/projects/team/datasets/{rules.pk}/uploads", "conditions.md", book,
                       book="core"))
    assert job.status == "done", job.error
    assert Document.objects.filter(dataset=rules, path__startswith="core/").exists()
    assert GraphEdge.objects.filter(dataset=rules, book_id="core").exists()
