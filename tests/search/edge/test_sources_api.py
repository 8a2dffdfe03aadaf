"""Dataset sources through the API: set, show (never the token), sync now, history, remove; who
may do what; unsafe addresses and local paths refused before anything is stored; a followed dataset refuses
pushes and uploads.

Jobs are run with search.ingest.jobs.run_job, what the Celery worker calls (a request's on_commit hook never
fires inside a test transaction). A sync that must fail points at a closed port on 127.0.0.1 (allowed by the
test's SOURCES_ALLOWED_NETWORKS), so it fails fast whatever the git fetcher does."""
from __future__ import annotations

import io
import json
import socket

import pytest

from search.models import Chunk, Document, IngestJob, Source, StagedContent
from tests.search.sources.git_fixtures import git_remote  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db
TOKEN = "ghp_very-secret-token-123"
PUBLIC_GIT = "https://93.184.216.34/org/repo.git"  # a public address literal: passes the guard, never fetched here


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def team(make_user, make_project, client_for, settings):
    from search.models import Dataset

    settings.SOURCES_ALLOWED_NETWORKS = []
    owner, editor, viewer = (make_user(f"{r}@example.com") for r in ("owner", "editor", "viewer"))
    project = make_project("team", owner)
    make_project("team", editor, role="editor")
    make_project("team", viewer, role="viewer")
    code = Dataset.objects.create(project=project, name="code", kind="code")
    return {"owner": client_for(owner), "editor": client_for(editor), "viewer": client_for(viewer),
            "stranger": client_for(make_user("stranger@example.com")), "project": project, "code": code,
            "owner_user": owner, "base": f"/api/projects/team/datasets/{code.pk}"}


def _put(client, base: str, source: dict, **extra):
    return client.put(f"{base}/source", {"source": source, **extra}, format="json")


def _run(job_id: str) -> IngestJob:
    from search.ingest.jobs import run_job

    try:
        run_job(job=IngestJob.objects.get(pk=job_id))
    except Exception:  # noqa: BLE001 - a failed sync is recorded on the job and the source; read there
        pass
    return IngestJob.objects.get(pk=job_id)


# --------------------------------------------------------------------------- set, show, remove
def test_an_editor_sets_a_git_source_and_the_dataset_shows_it_without_ever_the_token(team):
    resp = _put(team["editor"], team["base"], {"type": "git", "url": PUBLIC_GIT, "ref": "main"},
                interval_s=3600, token=TOKEN)
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["type"] == "git" and body["config"] == {"url": PUBLIC_GIT, "ref": "main", "subdir": ""}
    assert body["has_token"] is True and body["interval_s"] == 3600 and body["next_sync_at"] is not None
    assert body["commit"] is None and body["last_sync_at"] is None and body["active_sync_id"] is None
    shown = team["viewer"].get(team["base"])
    assert shown.status_code == 200 and shown.json()["source"]["url"] == PUBLIC_GIT
    for raw in (resp.content, shown.content, team["viewer"].get(f"{team['base']}/syncs").content):
        assert TOKEN.encode() not in raw
    source = Source.objects.get(dataset=team["code"])
    assert TOKEN.encode() not in bytes(source.secret)  # encrypted at rest
    from search.sources.secrets import source_token

    assert source_token(source) == TOKEN


def test_a_token_left_out_is_kept_and_an_empty_one_clears_it(team):
    _put(team["owner"], team["base"], {"type": "git", "url": PUBLIC_GIT}, token=TOKEN)
    again = _put(team["owner"], team["base"], {"type": "git", "url": PUBLIC_GIT, "ref": "dev"})
    assert again.json()["has_token"] is True and again.json()["config"]["ref"] == "dev"
    cleared = _put(team["owner"], team["base"], {"type": "git", "url": PUBLIC_GIT}, token="")
    assert cleared.json()["has_token"] is False and not Source.objects.get(dataset=team["code"]).has_secret


def test_a_dataset_without_a_source_shows_null(team):
    assert team["viewer"].get(team["base"]).json()["source"] is None


def test_removing_the_source_keeps_the_documents_and_a_second_remove_is_404_no_source(team):
    from search.ingest.base import ChunkDraft, DocumentDraft
    from search.ingest.writer import write_documents

    write_documents(dataset=team["code"], drafts=[DocumentDraft(
        path="a.py", repo="r", lang="python", title="a", content_hash="h",
        chunks=[ChunkDraft(text="def a(): pass", kind="code", start_line=1, end_line=1)])])
    _put(team["owner"], team["base"], {"type": "git", "url": PUBLIC_GIT})
    assert team["viewer"].delete(f"{team['base']}/source").status_code == 403
    assert team["editor"].delete(f"{team['base']}/source").status_code == 204
    assert not Source.objects.exists() and Document.objects.filter(dataset=team["code"]).count() == 1
    gone = team["editor"].delete(f"{team['base']}/source")
    assert gone.status_code == 404 and gone.json()["code"] == "no_source"


# --------------------------------------------------------------------------- refused before anything is stored
@pytest.mark.parametrize("url", ["https://127.0.0.1/org/repo.git", "http://10.0.0.1/org/repo.git",
                                 "http://169.254.169.254/latest/meta-data", "ssh://git@[::1]/org/repo.git",
                                 "http://localhost:8080/org/repo.git"])
def test_a_git_url_on_a_private_loopback_or_metadata_address_is_400_unsafe_address(team, url):
    resp = _put(team["owner"], team["base"], {"type": "git", "url": url})
    assert resp.status_code == 400, resp.content
    assert resp.json()["code"] == "unsafe_address" and resp.json()["field"] == "source.url"
    assert not Source.objects.exists()


def test_a_web_seed_on_a_private_address_names_the_seed(team):
    from search.models import Dataset

    web = Dataset.objects.create(project=team["project"], name="docs", kind="web")
    resp = _put(team["owner"], f"/api/projects/team/datasets/{web.pk}",
                {"type": "web", "seeds": ["https://93.184.216.34/docs/", "http://192.168.1.10/"]})
    assert resp.status_code == 400 and resp.json()["field"] == "source.seeds[1]"
    assert resp.json()["code"] == "unsafe_address" and not Source.objects.exists()


def test_a_local_path_is_for_staff_only(team, make_user, client_for, tmp_path):
    refused = _put(team["owner"], team["base"], {"type": "git", "url": str(tmp_path)})
    assert refused.status_code == 403 and refused.json()["field"] == "source.url"
    assert "staff" in refused.json()["detail"] and not Source.objects.exists()
    staff = make_user("ops@example.com", staff=True)
    from projects.models import Membership

    Membership.objects.create(project=team["project"], user=staff, role="editor")
    ok = _put(client_for(staff), team["base"], {"type": "git", "url": str(tmp_path)})
    assert ok.status_code == 200 and ok.json()["url"] == tmp_path.as_uri()


@pytest.mark.parametrize("body,field", [
    ({"source": {"type": "svn", "url": PUBLIC_GIT}}, "source.type"),
    ({"source": {"type": "git"}}, "source.url"),
    ({"source": {"type": "git", "url": "https://93.184.216.34/\ud800.git"}}, "source.url"),
    ({"source": {"type": "git", "url": PUBLIC_GIT, "ref": "../../etc"}}, "source.ref"),
    ({"source": {"type": "git", "url": PUBLIC_GIT, "branch": "x"}}, "source.branch"),
    ({"source": {"type": "git", "url": "https://user:pw@93.184.216.34/r.git"}}, "source.url"),
    ({"source": {"type": "git", "url": PUBLIC_GIT}, "interval_s": 5}, "interval_s"),
    ({"source": {"type": "git", "url": PUBLIC_GIT}, "token": "a\nb"}, "token"),
    ({"source": "https://93.184.216.34/r.git"}, "source"),
    ({"source": {"type": "web", "seeds": [PUBLIC_GIT]}}, "source.type"),  # a web source needs a web dataset
])
def test_a_bad_source_is_a_400_naming_the_field_and_stores_nothing(team, body, field):
    # sent as ASCII JSON, so a lone surrogate travels as the "\\ud800" escape a hostile client would send
    resp = team["owner"].put(f"{team['base']}/source", json.dumps(body), content_type="application/json")
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == field, resp.json()
    assert not Source.objects.exists()


def test_members_write_by_role_and_strangers_get_404(team):
    src = {"type": "git", "url": PUBLIC_GIT}
    assert _put(team["viewer"], team["base"], src).status_code == 403
    assert _put(team["stranger"], team["base"], src).status_code == 404
    assert team["stranger"].get(f"{team['base']}/syncs").status_code == 404
    assert team["stranger"].post(f"{team['base']}/sync").status_code == 404
    assert _put(team["editor"], team["base"], src).status_code == 200
    assert team["viewer"].post(f"{team['base']}/sync").status_code == 403
    assert team["viewer"].get(f"{team['base']}/syncs").status_code == 200
    assert not IngestJob.objects.exists()


def test_a_key_needs_the_ingest_scope_to_set_or_sync_and_query_to_read(team, client):
    from accounts.apikeys import issue_api_key

    def keyed(scopes):
        secret = issue_api_key(user=team["owner_user"], name="k", scopes=scopes).secret
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return client

    from rest_framework.test import APIClient

    client = APIClient()
    query = keyed(["query"])
    refused = _put(query, team["base"], {"type": "git", "url": PUBLIC_GIT})
    assert refused.status_code == 403 and refused.json()["required_scope"] == "ingest"
    assert query.post(f"{team['base']}/sync").json()["required_scope"] == "ingest"
    assert query.get(f"{team['base']}/syncs").status_code == 200
    ingest = keyed(["ingest"])
    assert _put(ingest, team["base"], {"type": "git", "url": PUBLIC_GIT}).status_code == 200
    assert ingest.post(f"{team['base']}/sync").status_code == 202


def test_setting_sources_and_syncing_are_rate_limited_like_other_writes(team, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "ingest": "2/m"}
    src = {"type": "git", "url": PUBLIC_GIT}
    assert [_put(team["owner"], team["base"], src).status_code for _ in range(2)] == [200, 200]
    limited = team["owner"].post(f"{team['base']}/sync")
    assert limited.status_code == 429 and int(limited["Retry-After"]) >= 1
    assert not IngestJob.objects.exists()


# --------------------------------------------------------------------------- sync now, history
def test_sync_without_a_source_is_404_no_source(team):
    resp = team["owner"].post(f"{team['base']}/sync")
    assert resp.status_code == 404 and resp.json()["code"] == "no_source"


def test_sync_now_queues_one_job_and_a_second_request_is_409_sync_running(team):
    _put(team["owner"], team["base"], {"type": "git", "url": PUBLIC_GIT})
    first = team["editor"].post(f"{team['base']}/sync")
    assert first.status_code == 202, first.content
    job = IngestJob.objects.get(pk=first.json()["id"])
    assert job.status == "pending" and job.options == {"origin": "sync", "trigger": "manual", "source_type": "git"}
    assert job.source == PUBLIC_GIT and first.json()["result"] == {}
    second = team["owner"].post(f"{team['base']}/sync")
    assert second.status_code == 409 and second.json()["code"] == "sync_running"
    assert second.json()["job_id"] == str(job.pk)
    assert team["viewer"].get(team["base"]).json()["source"]["active_sync_id"] == str(job.pk)
    assert IngestJob.objects.count() == 1


def test_a_failed_sync_is_in_the_history_and_on_the_source_and_the_next_one_can_start(team, settings):
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    url = f"http://127.0.0.1:{closed_port()}/org/repo.git"
    assert _put(team["owner"], team["base"], {"type": "git", "url": url}, interval_s=600).status_code == 200
    job = _run(team["owner"].post(f"{team['base']}/sync").json()["id"])
    assert job.status == "failed" and job.error
    history = team["viewer"].get(f"{team['base']}/syncs").json()
    assert [h["id"] for h in history] == [str(job.pk)]
    assert history[0]["status"] == "failed" and history[0]["error"] == job.error
    assert history[0]["trigger"] == "manual" and history[0]["finished_at"] is not None
    source = team["viewer"].get(team["base"]).json()["source"]
    assert source["last_error"] == job.error[:2000] and source["consecutive_failures"] == 1
    assert source["last_sync_at"] is not None and source["last_success_at"] is None
    assert source["active_sync_id"] is None
    assert team["owner"].post(f"{team['base']}/sync").status_code == 202  # a failed sync does not block the next


# --------------------------------------------------------------------------- create with a source
def test_a_dataset_can_be_created_with_a_source(team):
    resp = team["owner"].post("/api/projects/team/datasets", {
        "name": "mirror", "kind": "code", "source": {"type": "git", "url": PUBLIC_GIT, "ref": "main"},
        "interval_s": 900, "token": TOKEN}, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["source"]["config"]["ref"] == "main" and body["source"]["has_token"] is True
    assert body["source"]["interval_s"] == 900 and TOKEN.encode() not in resp.content
    assert Source.objects.get(dataset_id=body["id"]).interval_s == 900


@pytest.mark.parametrize("extra,field", [
    ({"source": {"type": "git", "url": "http://10.0.0.1/r.git"}}, "source.url"),
    ({"source": {"type": "git", "url": PUBLIC_GIT}, "interval_s": 1}, "interval_s"),
    ({"token": TOKEN}, "token"),
    ({"kind": "rules", "source": {"type": "git", "url": PUBLIC_GIT}}, "source.type"),
])
def test_a_dataset_with_a_bad_source_is_not_created(team, extra, field):
    from search.models import Dataset

    before = Dataset.objects.count()
    resp = team["owner"].post("/api/projects/team/datasets", {"name": "mirror", "kind": "code", **extra},
                              format="json")
    assert resp.status_code == 400 and resp.json()["field"] == field, resp.content
    assert Dataset.objects.count() == before and not Source.objects.exists()


# --------------------------------------------------------------------------- a followed dataset takes no pushes
def test_push_and_upload_into_a_followed_dataset_are_409_dataset_has_source(team):
    _put(team["owner"], team["base"], {"type": "git", "url": PUBLIC_GIT})
    push = team["owner"].put(f"{team['base']}/documents",
                             {"documents": [{"external_id": "a", "path": "a.py", "text": "x = 1\n"}]}, format="json")
    assert push.status_code == 409 and push.json()["code"] == "dataset_has_source"
    f = io.BytesIO(b"x = 1\n")
    f.name = "a.py"
    upload = team["owner"].post(f"{team['base']}/uploads", {"file": f}, format="multipart")
    assert upload.status_code == 409 and upload.json()["code"] == "dataset_has_source"
    assert not IngestJob.objects.exists() and not StagedContent.objects.exists()
    team["owner"].delete(f"{team['base']}/source")
    assert team["owner"].put(f"{team['base']}/documents",
                             {"documents": [{"external_id": "a", "path": "a.py", "text": "x = 1\n"}]},
                             format="json").status_code == 202


def test_the_schema_documents_the_source_endpoints(team):
    schema = json.loads(team["viewer"].get("/api/schema/?format=json").content)
    paths = schema["paths"]
    base = "/api/projects/{slug}/datasets/{dataset_id}"
    assert set(paths[f"{base}/source"]) >= {"put", "delete"}
    assert "post" in paths[f"{base}/sync"] and "get" in paths[f"{base}/syncs"]
    props = schema["components"]["schemas"]["Source"]["properties"]
    assert "has_token" in props and "token" not in props and "secret" not in props


def test_a_web_site_synced_through_the_api_shows_what_the_crawl_indexed(team, settings):
    """A web dataset follows a small site served here on 127.0.0.1: the sync's job and history say what the crawl
    indexed, and the dataset holds exactly those pages."""
    from search.ingest.jobs import run_job
    from search.models import Dataset
    from tests.search.sources.site_server import LocalSite, html_page

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.SOURCES_CRAWL_DELAY_S = 0.01
    web = Dataset.objects.create(project=team["project"], name="site", kind="web")
    base = f"/api/projects/team/datasets/{web.pk}"
    site = LocalSite()
    try:
        site.page("/robots.txt", "User-agent: *\nDisallow: /private/\n", content_type="text/plain")
        site.page("/", html_page("Shop docs", "Welcome to the shop documentation.", links=["/refunds", "/private/x"]))
        site.page("/refunds", html_page("Refunds", "Refunds are issued within fourteen days of a purchase."))
        site.page("/private/x", html_page("Private", "Never crawled."))
        assert _put(team["owner"], base, {"type": "web", "seeds": [site.url("/")]}).status_code == 200
        queued = team["editor"].post(f"{base}/sync")
        assert queued.status_code == 202 and queued.json()["source"] == site.url("/")
        job = run_job(job=IngestJob.objects.get(pk=queued.json()["id"]))
    finally:
        site.close()
    assert job.status == "done", job.error
    result = team["viewer"].get(f"/api/ingest-jobs/{job.pk}").json()["result"]
    assert result["mode"] == "crawl" and sorted(result["indexed"]) == sorted([site.url("/"), site.url("/refunds")])
    assert Document.objects.filter(dataset=web).count() == 2
    assert "/private/x" not in site.requested()
    [history] = team["viewer"].get(f"{base}/syncs").json()
    assert history["status"] == "done" and history["summary"].startswith("crawl; 2 indexed")
    source = team["viewer"].get(base).json()["source"]
    assert source["last_success_at"] is not None and source["last_error"] == "" and source["commit"] is None


# --------------------------------------------------------------------------- a real repository, synced
def test_a_repository_synced_through_the_api_reingests_exactly_the_changed_file(team, git_remote, make_user,
                                                                                 client_for, settings):
    """Staff point the dataset at a file:// repository; the first sync is a full one, a commit that changes one
    file re-ingests exactly that file (the job and the history say so), and an unchanged re-sync embeds nothing."""
    from projects.models import Membership
    from search.ingest.jobs import run_job
    from tests.search.ctx_fixtures import LEDGER_PY, ROUTES_JS

    settings.SOURCES_GIT_DIR = git_remote.work.parent / "mirrors"
    staff = make_user("ops@example.com", staff=True)
    Membership.objects.create(project=team["project"], user=staff, role="editor")
    ops = client_for(staff)
    first_sha = git_remote.commit({"billing/ledger.py": LEDGER_PY, "web/routes.js": ROUTES_JS}, "first")
    assert _put(ops, team["base"], {"type": "git", "url": git_remote.url, "ref": "main"}).status_code == 200

    def sync() -> dict:
        resp = team["editor"].post(f"{team['base']}/sync")
        assert resp.status_code == 202, resp.content
        job = run_job(job=IngestJob.objects.get(pk=resp.json()["id"]))
        assert job.status == "done", job.error
        return team["viewer"].get(f"/api/ingest-jobs/{job.pk}").json()

    first = sync()
    assert first["result"]["mode"] == "full" and first["result"]["to"] == first_sha
    assert sorted(Document.objects.filter(dataset=team["code"]).values_list("path", flat=True)) == \
        ["billing/ledger.py", "web/routes.js"]
    assert team["viewer"].get(team["base"]).json()["source"]["commit"] == first_sha

    second_sha = git_remote.commit({"billing/ledger.py": LEDGER_PY.replace("insufficient credits", "not enough"),
                                    "web/routes.js": ROUTES_JS}, "one function changes")
    second = sync()
    assert second["result"]["mode"] == "diff" and second["result"]["changed"] == ["billing/ledger.py"]
    assert (second["result"]["from"], second["result"]["to"]) == (first_sha, second_sha)
    assert second["files_total"] == 1 and second["embeddings_computed"] >= 1
    texts = Chunk.objects.filter(dataset=team["code"], path="billing/ledger.py").values_list("text", flat=True)
    assert any("not enough" in t for t in texts) and not any("insufficient credits" in t for t in texts)

    third = sync()
    assert third["result"]["mode"] == "unchanged" and third["embeddings_computed"] == 0
    history = team["viewer"].get(f"{team['base']}/syncs").json()
    assert [h["id"] for h in history] == [third["id"], second["id"], first["id"]]
    assert "1 changed (billing/ledger.py)" in history[1]["summary"] and history[1]["trigger"] == "manual"
    source = team["viewer"].get(team["base"]).json()["source"]
    assert source["commit"] == second_sha and source["last_error"] == "" and source["consecutive_failures"] == 0
