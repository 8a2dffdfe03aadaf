"""API keys with scopes, project limits and expiry, against the real services."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.views import APIView

from accounts.apikeys import issue_api_key
from accounts.models import SCOPES, ApiKey
from accounts.permissions import KeyScopePermission, is_valid_declaration

pytestmark = pytest.mark.django_db


def _client(secret: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return c


def _key(user, **kw) -> APIClient:
    return _client(issue_api_key(user=user, **kw).secret)


def _refused(resp, scope: str) -> None:
    assert resp.status_code == 403, resp.content
    body = resp.json()
    assert body["code"] == "insufficient_scope" and body["required_scope"] == scope
    assert scope in body["detail"]


@pytest.fixture
def alpha(user, make_project):
    return make_project("alpha", user)


# one representative endpoint per scope, with the status it answers when the scope is there
ENDPOINTS = {
    "query": ("get", "/api/projects/alpha", None, 200),
    "ingest": ("post", "/api/projects/alpha/ingest", {}, 400),  # reaches the view: the empty body is refused
    "people": ("get", "/api/people", None, 200),
    "manage": ("get", "/api/keys", None, 200),
}


@pytest.mark.parametrize("key_scope", SCOPES)
@pytest.mark.parametrize("endpoint_scope", SCOPES)
def test_each_scope_allows_its_endpoints_and_refuses_the_others(user, alpha, key_scope, endpoint_scope):
    method, url, body, ok_status = ENDPOINTS[endpoint_scope]
    client = _key(user, scopes=[key_scope])
    resp = getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)
    if key_scope == endpoint_scope:
        assert resp.status_code == ok_status, resp.content
    else:
        _refused(resp, endpoint_scope)


def test_method_dependent_scope(user, alpha):
    query = _key(user, scopes=["query"])
    assert query.get("/api/projects/alpha/datasets").status_code == 200
    _refused(query.post("/api/projects/alpha/datasets", {"name": "d", "kind": "code"}, format="json"), "manage")
    manage = _key(user, scopes=["manage"])
    assert manage.post("/api/projects/alpha/datasets", {"name": "d", "kind": "code"}, format="json").status_code == 201
    _refused(manage.get("/api/projects/alpha/datasets"), "query")


def test_any_key_reads_me_and_credits(user, alpha):
    issued = issue_api_key(user=user, name="ing", scopes=["ingest"], projects=[alpha])
    client = _client(issued.secret)
    me = client.get("/api/me")
    assert me.status_code == 200
    assert me.json()["key"] == {"prefix": issued.api_key.prefix, "name": "ing", "scopes": ["ingest"],
                                "projects": ["alpha"], "expires_at": None}
    assert client.get("/api/credits").status_code == 200
    session = APIClient()
    session.force_login(user)
    assert session.get("/api/me").json()["key"] is None


def test_refused_people_search_charges_nothing(user):
    from credits.ledger import get_balance, ledger_sum
    from people.models import Search

    before = get_balance(user=user)
    resp = _key(user, scopes=["query", "ingest", "manage"]).post(
        "/api/search", {"query": "backend engineers in Bangalore"}, format="json", HTTP_IDEMPOTENCY_KEY="scope-1")
    _refused(resp, "people")
    assert get_balance(user=user) == before == ledger_sum(user=user)
    assert not Search.objects.filter(searcher=user).exists()
    from credits.models import IdempotencyKey

    assert not IdempotencyKey.objects.filter(user=user).exists()  # refused before the key was reserved


def test_session_has_every_scope(user, alpha):
    client = APIClient()
    client.force_login(user)
    for _, url, _, _ in [ENDPOINTS["query"], ENDPOINTS["people"], ENDPOINTS["manage"]]:
        assert client.get(url).status_code == 200


def test_legacy_key_can_do_everything(user, alpha):
    """A key issued with no scopes (every key before this change: the migration gave them all four)."""
    issued = issue_api_key(user=user)
    assert issued.api_key.scopes == list(SCOPES)
    assert issued.api_key.project_ids is None and issued.api_key.expires_at is None
    client = _client(issued.secret)
    for scope, (method, url, body, ok_status) in ENDPOINTS.items():
        resp = getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)
        assert resp.status_code == ok_status, (scope, resp.content)


def test_migration_gives_existing_keys_every_scope_no_limit_no_expiry():
    from importlib import import_module

    from accounts.models import all_scopes

    migration = import_module("accounts.migrations.0002_api_key_scopes_expiry").Migration
    fields = {op.name: op.field for op in migration.operations}
    assert fields["scopes"].default is all_scopes and all_scopes() == list(SCOPES)
    assert fields["project_ids"].null and fields["expires_at"].null


# ---- project limits -------------------------------------------------------------------------------------------

@pytest.fixture
def two_projects(user, make_project):
    return make_project("alpha", user), make_project("beta", user)


def test_project_limited_key_sees_only_its_projects(user, two_projects):
    alpha, beta = two_projects
    client = _key(user, projects=[alpha])
    assert [p["slug"] for p in client.get("/api/projects").json()] == ["alpha"]
    assert [p["slug"] for p in client.get("/api/me").json()["projects"]] == ["alpha"]
    assert client.get("/api/projects/alpha").status_code == 200
    for resp in (client.get("/api/projects/beta"), client.get("/api/projects/beta/datasets"),
                 client.post("/api/projects/beta/query", {"q": "x"}, format="json"),
                 client.post("/api/projects/beta/rules/search", {"q": "x"}, format="json"),
                 client.post("/api/projects/beta/datasets", {"name": "d", "kind": "code"}, format="json")):
        assert resp.status_code == 404, resp.content
        assert resp.json()["code"] == "not_found"
    # the same 404 as a project that does not exist: no existence leak
    assert client.get("/api/projects/nowhere").json() == client.get("/api/projects/beta").json()
    # an unlimited key of the same user sees both
    assert [p["slug"] for p in _key(user).get("/api/projects").json()] == ["alpha", "beta"]


def test_project_limited_key_cannot_share_out_of_another_project(user, two_projects):
    from search.ingest.sharing import create_dataset

    alpha, beta = two_projects
    ds = create_dataset(user=user, project=beta, name="notes", kind="web")
    resp = _key(user, projects=[alpha]).post("/api/projects/alpha/shares", {"dataset_id": ds.pk}, format="json")
    assert resp.status_code == 404 and resp.json()["field"] == "dataset_id"
    assert _key(user).post("/api/projects/alpha/shares", {"dataset_id": ds.pk}, format="json").status_code == 201


def test_project_limited_key_cannot_read_jobs_or_sessions_of_other_projects(user, two_projects):
    from search.models import Dataset, IngestJob, QuerySession

    alpha, beta = two_projects
    ds = Dataset.objects.create(project=beta, name="code", kind="code")
    job = IngestJob.objects.create(dataset=ds, kind="code", source="/tmp/x")
    limited, full = _key(user, projects=[alpha]), _key(user)
    assert full.get(f"/api/ingest-jobs/{job.pk}").status_code == 200
    assert limited.get(f"/api/ingest-jobs/{job.pk}").status_code == 404
    session = QuerySession.objects.create(project=beta, user=user, query="q")
    resp = limited.post(f"/api/query-sessions/{session.pk}/feedback", {"chunk_id": 1, "relevance": 1}, format="json")
    assert resp.status_code == 404


def test_deleted_project_keeps_the_limit(user, two_projects):
    alpha, beta = two_projects
    issued = issue_api_key(user=user, projects=[beta])
    beta.delete()
    client = _client(issued.secret)
    assert client.get("/api/projects").json() == []  # not "every project"
    assert client.get("/api/projects/alpha").status_code == 404
    assert client.get("/api/keys").json()["results"][0]["projects"] == []


# ---- expiry ---------------------------------------------------------------------------------------------------

def test_expired_key_is_401_key_expired(user):
    issued = issue_api_key(user=user, expires_at=timezone.now() + timedelta(days=1))
    client = _client(issued.secret)
    assert client.get("/api/me").status_code == 200
    ApiKey.objects.filter(pk=issued.api_key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    resp = client.get("/api/me")
    assert resp.status_code == 401 and resp.json()["code"] == "key_expired"
    assert resp["WWW-Authenticate"].startswith("Bearer")
    listed = _key(user).get("/api/keys").json()["results"]
    row = next(k for k in listed if k["id"] == issued.api_key.pk)
    assert row["is_expired"] is True and row["is_active"] is False


# ---- creating keys --------------------------------------------------------------------------------------------

def test_create_key_with_scopes_projects_and_expiry(user, two_projects, api):
    resp = api.post("/api/keys", {"name": "ci", "scopes": ["query", "ingest"], "projects": ["alpha"],
                                  "expires_in_days": 30}, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["scopes"] == ["query", "ingest"] and body["projects"] == ["alpha"]
    assert body["last_used_at"] is None and body["secret"].startswith("sk_")
    expires = ApiKey.objects.get(pk=body["id"]).expires_at
    assert timedelta(days=29) < expires - timezone.now() <= timedelta(days=30)
    new = _client(body["secret"])
    assert new.get("/api/projects/alpha").status_code == 200
    assert new.get("/api/projects/beta").status_code == 404
    _refused(new.get("/api/keys"), "manage")
    listed = api.get("/api/keys").json()["results"]
    row = next(k for k in listed if k["id"] == body["id"])
    assert row["last_used_at"] is not None and row["projects"] == ["alpha"] and "secret" not in row


def test_create_key_with_expires_at(user, api):
    when = (timezone.now() + timedelta(days=3)).replace(microsecond=0)
    resp = api.post("/api/keys", {"expires_at": when.isoformat()}, format="json")
    assert resp.status_code == 201, resp.content
    assert ApiKey.objects.get(pk=resp.json()["id"]).expires_at == when


@pytest.mark.parametrize("body,field", [
    ({"scopes": []}, "scopes"),
    ({"scopes": ["query", "root"]}, "scopes"),
    ({"scopes": "query"}, "scopes"),
    ({"scopes": [1]}, "scopes"),
    ({"projects": ["nowhere"]}, "projects"),
    ({"projects": ["other"]}, "projects"),  # exists, but the caller is not a member
    ({"projects": []}, "projects"),
    ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ({"expires_at": "9999-12-31T23:59:59-14:00"}, "expires_at"),
    ({"expires_at": "soon"}, "expires_at"),
    ({"expires_at": "0001-01-01T00:00:00+01:00"}, "expires_at"),
    ({"expires_at": ""}, "expires_at"),
    ({"expires_at": None}, "expires_at"),
    ({"expires_at": 1e308}, "expires_at"),
    ({"expires_at": ["2101-01-01T00:00:00Z"]}, "expires_at"),
    ({"expires_at": "2101-01-01T00:00:00\u0000Z"}, "expires_at"),
    ({"expires_in_days": True}, "expires_in_days"),
    ({"expires_in_days": 1.5}, "expires_in_days"),
    ({"projects": "alpha"}, "projects"),
    ({"projects": [None]}, "projects"),
    ({"scopes": None}, "scopes"),
    ({"scopes": ["query"] * 9}, "scopes"),
    ({"expires_in_days": 0}, "expires_in_days"),
    ({"expires_in_days": 3651}, "expires_in_days"),
    ({"expires_in_days": "7"}, "expires_in_days"),
    ({"expires_in_days": 7, "expires_at": "2101-01-01T00:00:00Z"}, "expires_in_days"),
    ({"scope": ["query"]}, "scope"),
])
def test_create_key_validation(user, api, make_user, make_project, body, field):
    make_project("alpha", user)
    make_project("other", make_user())
    before = ApiKey.objects.count()
    resp = api.post("/api/keys", body, format="json")
    assert resp.status_code == 400, resp.content
    assert resp.json()["code"] in ("invalid", "invalid_character") and resp.json()["field"].split(".")[0] == field
    assert ApiKey.objects.count() == before


def test_only_manage_keys_or_sessions_create_keys(user):
    _refused(_key(user, scopes=["query", "ingest", "people"]).post("/api/keys", {}, format="json"), "manage")
    session = APIClient()
    session.force_login(user)
    assert session.post("/api/keys", {"scopes": ["people"]}, format="json").status_code == 201


def test_a_key_cannot_issue_a_wider_key(user, two_projects):
    alpha, _ = two_projects
    expires = timezone.now() + timedelta(days=5)
    creator = _key(user, scopes=["manage", "query"], projects=[alpha], expires_at=expires)
    _refused(creator.post("/api/keys", {"scopes": ["people"]}, format="json"), "people")
    resp = creator.post("/api/keys", {"projects": ["beta"]}, format="json")
    assert resp.status_code == 400 and resp.json()["field"] == "projects"
    resp = creator.post("/api/keys", {"expires_in_days": 30}, format="json")
    assert resp.status_code == 400 and resp.json()["field"] == "expires_in_days"
    resp = creator.post("/api/keys", {"name": "child"}, format="json")  # inherits scopes, limit and expiry
    assert resp.status_code == 201, resp.content
    child = ApiKey.objects.get(pk=resp.json()["id"])
    assert child.scopes == ["query", "manage"] and child.project_ids == [alpha.pk] and child.expires_at == expires
    resp = creator.post("/api/keys", {"scopes": ["query"], "expires_in_days": 1}, format="json")
    assert resp.status_code == 201 and resp.json()["scopes"] == ["query"]


# ---- the contract: every API view declares its scope ----------------------------------------------------------

def _drf_views(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _drf_views(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            cls = getattr(p.callback, "cls", None)
            if isinstance(cls, type) and issubclass(cls, APIView):
                yield prefix + str(p.pattern), cls


SCHEMA_VIEWS = {"SpectacularAPIView", "SpectacularSwaggerView", "SpectacularRedocView"}  # public docs, AllowAny


def test_every_api_view_declares_a_valid_required_scope():
    views = list(_drf_views(get_resolver().url_patterns))
    checked = 0
    for route, cls in views:
        if cls.__name__ in SCHEMA_VIEWS:
            continue
        assert any(isinstance(p, KeyScopePermission) for p in cls().get_permissions()), \
            f"{route} ({cls.__name__}): permission_classes leave out KeyScopePermission"
        assert "required_scope" in dir(cls), f"{route} ({cls.__name__}) does not declare required_scope"
        value = cls.required_scope
        assert is_valid_declaration(value), f"{route} ({cls.__name__}): invalid required_scope {value!r}"
        if isinstance(value, dict):
            handlers = {m.upper() for m in cls.http_method_names if hasattr(cls, m) and m not in ("head", "options")}
            assert handlers <= set(value), f"{route} ({cls.__name__}): no scope for {sorted(handlers - set(value))}"
        checked += 1
    assert checked >= 20


def test_undeclared_view_needs_every_scope():
    from accounts.permissions import scope_for

    class Bare(APIView):
        def get(self, request):
            return None

    class ByMethod(APIView):
        required_scope = {"GET": "query"}

        def get(self, request):
            return None

        def post(self, request):
            return None

    assert scope_for(Bare(), "GET") == SCOPES
    assert scope_for(ByMethod(), "GET") == scope_for(ByMethod(), "HEAD") == "query"
    assert scope_for(ByMethod(), "POST") == SCOPES  # a handler the mapping forgot: every scope
    assert scope_for(ByMethod(), "DELETE") is None  # no handler: the 405 follows
    assert not is_valid_declaration("admin") and not is_valid_declaration({}) and not is_valid_declaration(
        {"get": "query"})


def test_project_limited_key_lists_and_revokes_only_keys_within_its_projects(user, two_projects):
    alpha, beta = two_projects
    limited = issue_api_key(user=user, name="limited", projects=[alpha])
    inside = issue_api_key(user=user, name="inside", projects=[alpha])
    outside = issue_api_key(user=user, name="outside", projects=[beta])
    unlimited = issue_api_key(user=user, name="unlimited")
    client = _client(limited.secret)
    assert {k["name"] for k in client.get("/api/keys").json()["results"]} == {"limited", "inside"}
    assert client.delete(f"/api/keys/{outside.api_key.pk}").status_code == 404
    assert client.delete(f"/api/keys/{unlimited.api_key.pk}").status_code == 404
    assert client.delete(f"/api/keys/{inside.api_key.pk}").status_code == 200
    assert {k["name"] for k in _client(unlimited.secret).get("/api/keys").json()["results"]} == {
        "limited", "inside", "outside", "unlimited"}


def test_create_api_key_command_takes_scopes_projects_and_expiry(user, alpha, capsys):
    from django.core.management import CommandError, call_command

    call_command("create_api_key", user.email, "--name", "ci", "--scopes", "query,ingest", "--project", "alpha",
                 "--expires-in-days", "3")
    secret = capsys.readouterr().out.strip()
    key = ApiKey.objects.get(user=user, name="ci")
    assert key.scopes == ["query", "ingest"] and key.project_ids == [alpha.pk] and key.expires_at is not None
    assert _client(secret).get("/api/projects/alpha").status_code == 200
    call_command("create_api_key", user.email, "--name", "all")
    assert ApiKey.objects.get(user=user, name="all").scopes == list(SCOPES)
    with pytest.raises(CommandError, match="scopes"):
        call_command("create_api_key", user.email, "--scopes", "query,root")
    with pytest.raises(CommandError, match="projects"):
        call_command("create_api_key", user.email, "--project", "nowhere")
