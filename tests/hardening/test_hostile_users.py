"""A signed-up user with ordinary keys, attacking: each class a security review found (docs/security.md), fixed
where it enters. The bounded-request class is tests/hardening/test_bounded_requests.py (a live server), archives
tests/search/test_archives.py, the permission table tests/projects/test_policy.py, the input classes
test_input_sweep.py (form bodies and MCP arguments included)."""
from __future__ import annotations

import io
import json

import pytest

from tests.search.sources.site_server import SiteProcess

pytestmark = pytest.mark.django_db

EVIL = "(a+)+$"
LINK = "http://127.0.0.1/" + "a" * 40 + "!"  # Python's re takes ~2^40 steps on this; RE2 a few hundred


@pytest.fixture
def team(make_user, make_project, client_for, settings):
    from search.models import Dataset

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    owner = make_user("owner@example.com")
    project = make_project("team", owner)
    web = Dataset.objects.create(project=project, name="site", kind="web")
    code = Dataset.objects.create(project=project, name="code", kind="code")
    return {"owner": owner, "api": client_for(owner), "project": project, "web": web, "code": code}


def _err(resp, status: int, code: str | None = None, field: str | None = None) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.content[:300])
    body = resp.json()
    assert body["code"] and body["detail"]
    if code:
        assert body["code"] == code, body
    if field:
        assert body["field"] == field, body
    return body


# --------------------------------------------------------------------------- 3. user patterns in shared workers
@pytest.mark.timeout(60)
def test_a_backtracking_include_pattern_runs_in_linear_time_against_every_link():
    from search.sources.web.urls import Scope

    scope = Scope(seeds=["http://127.0.0.1/"], include=[EVIL], exclude=[EVIL])
    # Python's engine would not return from this within the test's time limit (each added 'a' doubles it)
    assert scope.wanted(LINK) is False
    assert scope.wanted("http://127.0.0.1/" + "a" * 10_000) is False  # matched ("$" after a's) and excluded


@pytest.mark.timeout(120)
def test_a_crawl_whose_pattern_would_backtrack_finishes_at_the_sites_pace(team, settings):
    from search.ingest.jobs import run_job
    from search.models import IngestJob, Source
    from search.sources.sync import start_sync

    settings.SOURCES_CRAWL_DELAY_S = 0.01
    site = SiteProcess()
    try:
        page = "".join(f'<a href="/{"a" * (30 + i)}!">x</a>' for i in range(10))
        site.page("/", f"<html><body><h1>Home</h1><p>Links.</p>{page}</body></html>")
        Source.objects.create(dataset=team["web"], type="web", config={
            "seeds": [site.url("/")], "scope": "same-host", "max_pages": 20, "max_depth": 2,
            "include": [], "exclude": [EVIL]})
        job = start_sync(dataset=team["web"], trigger="manual", run_now=False)
        run_job(job=IngestJob.objects.get(pk=job.pk))
        job.refresh_from_db()
        assert job.status == "done", job.error
    finally:
        site.close()


@pytest.mark.parametrize("pattern,why", [(r"(a)\1", "backreference"), (r"(?<=/)docs", "lookbehind"),
                                        ("x" * 501, "too long"), ("(", "unbalanced")])
def test_a_pattern_re2_cannot_run_is_refused_when_the_source_is_set(team, pattern, why):
    base = f"/api/projects/team/datasets/{team['web'].pk}"
    resp = team["api"].put(f"{base}/source", {"source": {"type": "web", "seeds": ["http://127.0.0.1:9/"],
                                                         "exclude": ["ok", pattern]}}, format="json")
    _err(resp, 400, field="source.exclude[1]")


def test_a_rules_intent_pattern_runs_in_re2_and_a_backtracking_one_is_refused():
    from config.errors import BadInput
    from search.rules import traversal

    with pytest.raises(BadInput) as caught:
        traversal.save_config(ruleset_id="probe", names={}, intent_patterns={"spell": r"(?<!no )cast"})
    assert caught.value.field == "intent_patterns.spell"
    cfg = traversal.save_config(ruleset_id="probe", names={}, intent_patterns={"spell": EVIL})
    analysis = traversal.detect(query="a" * 40 + "!", config=cfg)  # returns at once in RE2
    assert "spell" not in analysis.intents


# --------------------------------------------------------------------------- 5. input that reached a 500
@pytest.mark.parametrize("url", ["http://[evil]/r.git", "ssh://[-oProxyCommand=x]/repo", "https://[::1/r.git"])
def test_a_bracketed_host_that_is_no_ip_is_a_400_from_the_api(team, url):
    base = f"/api/projects/team/datasets/{team['code'].pk}"
    _err(team["api"].put(f"{base}/source", {"source": {"type": "git", "url": url}}, format="json"), 400,
         field="source.url")


def test_a_bracketed_host_that_is_no_ip_is_a_clear_error_on_the_page_form(team, client):
    client.force_login(team["owner"])
    resp = client.post(f"/projects/team/datasets/{team['code'].pk}/source",
                       {"type": "git", "url": "http://[evil]/r.git"})
    assert resp.status_code in (200, 302, 400), resp.status_code  # the form shows the error; never a 500
    from search.models import Source

    assert not Source.objects.exists()


@pytest.mark.parametrize("url,said", [
    ("ssh://-oProxyCommand=x@host.example/repo", "does not start with '-'"),
    ("ssh://%2DoProxyCommand=x@host.example/repo", "does not start with '-'"),
    ("ssh://-oProxyCommand=touch%20/tmp/x@host.example/repo", "is not a host name"),
    ("ssh://git@-oProxyCommand=x/repo", "is not a host name"),
])
def test_an_ssh_user_or_host_that_ssh_would_read_as_an_option_is_refused_when_set(team, url, said):
    base = f"/api/projects/team/datasets/{team['code'].pk}"
    body = _err(team["api"].put(f"{base}/source", {"source": {"type": "git", "url": url}}, format="json"), 400,
                field="source.url")
    assert said in body["detail"]


@pytest.mark.parametrize("path", ["/api/projects/team/datasets/{ds}/documents/%00",
                                  "/api/projects/team%00/datasets/{ds}/documents/x",
                                  "/api/projects/team/datasets/{ds}/documents/a%00b.py"])
def test_a_nul_in_a_path_parameter_is_a_400_json_error(team, path):
    resp = team["api"].delete(path.format(ds=team["code"].pk))
    _err(resp, 400, "invalid_character", "path")


@pytest.mark.parametrize("url,form", [
    ("/projects/team/datasets/new", {"name": "n\x00", "kind": "code"}),
    ("/projects/team/datasets/{ds}/documents/delete", {"path": "x\x00.py"}),
    ("/projects/new", {"name": "p\x00"}),
])
@pytest.mark.parametrize("encoding", ["urlencoded", "multipart"])
def test_a_nul_in_a_page_form_body_is_a_400_before_the_view(team, client, url, form, encoding):
    from projects.models import Project
    from search.models import Dataset

    client.force_login(team["owner"])
    before = (Dataset.objects.count(), Project.objects.count())
    url = url.format(ds=team["code"].pk)
    if encoding == "urlencoded":
        from urllib.parse import urlencode

        resp = client.post(url, urlencode(form), content_type="application/x-www-form-urlencoded")
    else:
        resp = client.post(url, form)
    assert resp.status_code == 400 and b"NUL" in resp.content
    assert (Dataset.objects.count(), Project.objects.count()) == before


def test_a_nul_in_an_mcp_tool_argument_is_the_apis_400_as_a_tool_error(team, api_key_for):
    from rest_framework.test import APIClient

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_for(team['owner'])}")
    for args in ({"project": "team\u0000"}, {"project": "team", "q": "x\u0000y"}):
        tool = "list_datasets" if "q" not in args else "search_context"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": tool, "arguments": args}})  # ASCII: \u escapes on the wire
        resp = c.post("/mcp", body, content_type="application/json",
                      HTTP_ACCEPT="application/json, text/event-stream")
        assert resp.status_code == 200, resp.content
        result = json.loads(resp.content)["result"]
        assert result["isError"] and result["structuredContent"]["code"] == "invalid_character"
        assert result["structuredContent"]["status"] == 400
    # a lone surrogate is not even valid JSON text for the protocol's parser: a JSON-RPC parse error, not a 500
    body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_datasets", ' \
           '"arguments": {"project": "x\\ud800"}}}'
    resp = c.post("/mcp", body, content_type="application/json", HTTP_ACCEPT="application/json, text/event-stream")
    assert resp.status_code == 400 and json.loads(resp.content)["error"]["code"] == -32700


def test_a_failed_job_tells_a_code_and_a_fixed_sentence_never_a_server_path(team, monkeypatch):
    from django.conf import settings as dj

    from search.ingest.jobs import run_job
    from search.models import IngestJob

    def boom(**kw):
        raise FileExistsError(17, "File exists", f"{dj.VAR_DIR}/staging/ingest-staged-x/a")

    monkeypatch.setattr("search.ingest.staged.cache_vectors", boom)
    resp = team["api"].put(f"/api/projects/team/datasets/{team['code'].pk}/documents",
                           {"documents": [{"external_id": "a", "path": "a.py", "text": "a = 1\n"}]}, format="json")
    job = IngestJob.objects.get(pk=resp.json()["id"])
    with pytest.raises(FileExistsError):
        run_job(job=job)
    job.refresh_from_db()
    assert job.error.startswith("internal_error: ") and str(dj.VAR_DIR) not in job.error
    assert "FileExistsError" not in job.error and "File exists" not in job.error
    shown = team["api"].get(f"/api/ingest-jobs/{job.pk}").json()
    assert shown["error"] == job.error


# --------------------------------------------------------------------------- 6. smaller points
def test_get_mcp_is_405_whatever_it_accepts(team, api_key_for):
    from rest_framework.test import APIClient

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_for(team['owner'])}")
    for accept in ("text/event-stream", "application/json", "*/*"):
        resp = c.get("/mcp", HTTP_ACCEPT=accept)
        assert resp.status_code == 405 and resp["Allow"] == "POST"
        assert resp.json()["code"] == "method_not_allowed"


def test_an_upload_of_a_file_and_a_folder_of_one_name_is_refused_up_front_and_starts_no_job(team):
    import tarfile

    from search.models import IngestJob

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in ("a", "a/b.py"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tf.addfile(info, io.BytesIO(b"x\n"))
    f = io.BytesIO(buf.getvalue())
    f.name = "repo.tar.gz"
    resp = team["api"].post(f"/api/projects/team/datasets/{team['code'].pk}/uploads", {"file": f},
                            format="multipart")
    _err(resp, 422, "unsafe_archive")
    assert not IngestJob.objects.exists()
