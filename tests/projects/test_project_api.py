"""The project and member endpoints: status codes, error codes, role rules, and an exact index after a delete."""
from __future__ import annotations

import pytest

from projects.models import Membership, Project
from search.models import Dataset, ProjectShare
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401

pytestmark = pytest.mark.django_db


def _err(resp, status: int, code: str | None = None, field: str | None = None) -> dict:
    assert resp.status_code == status, resp.content
    body = resp.json()
    assert body["detail"]
    if code:
        assert body["code"] == code, body
    if field:
        assert body.get("field") == field, body
    return body


@pytest.fixture
def team(make_user, client_for):
    """An owner who created 'team' through the API, with an editor and a viewer, and an outsider."""
    users = {r: make_user(f"{r}@api.example") for r in ("owner", "editor", "viewer", "outsider")}
    clients = {r: client_for(u) for r, u in users.items()}
    resp = clients["owner"].post("/api/projects", {"name": "Team"}, format="json")
    assert resp.status_code == 201, resp.content
    project = Project.objects.get(slug="team")
    ids = {"owner": Membership.objects.get(project=project, user=users["owner"]).pk}
    for role in ("editor", "viewer"):
        ids[role] = Membership.objects.create(project=project, user=users[role], role=role).pk
    return {"users": users, "c": clients, "project": project, "ids": ids}


# ---- projects -----------------------------------------------------------------------------------------------------

def test_create_returns_the_project_with_the_caller_as_owner(make_user, client_for):
    c = client_for(make_user())
    resp = c.post("/api/projects", {"name": "Search Team", "slug": "search-team"}, format="json")
    assert resp.status_code == 201
    body = resp.json()
    assert body["slug"] == "search-team" and body["name"] == "Search Team" and body["role"] == "owner"
    assert [p["slug"] for p in c.get("/api/projects").json()] == ["search-team"]
    assert c.get("/api/projects/search-team").json()["role"] == "owner"


def test_create_derives_the_slug_and_refuses_a_taken_one(make_user, client_for):
    c = client_for(make_user())
    assert c.post("/api/projects", {"name": "Docs Site"}, format="json").json()["slug"] == "docs-site"
    _err(c.post("/api/projects", {"name": "Docs Site"}, format="json"), 409, "project_exists", "slug")
    _err(c.post("/api/projects", {"name": "x", "slug": "docs-site"}, format="json"), 409, "project_exists", "slug")


@pytest.mark.parametrize("body,field", [
    ({"name": "x", "slug": "global"}, "slug"),
    ({"name": "x", "slug": "no/slash"}, "slug"),
    ({"name": "x", "slug": "../up"}, "slug"),
    ({"name": "x", "slug": "Caps"}, "slug"),
    ({"name": "???"}, "slug"),
    ({"slug": "noname"}, "name"),
    ({"name": 7}, "name"),
    ({"name": "x", "owner": "me"}, "owner"),
])
def test_create_with_bad_input_is_400_naming_the_field(make_user, client_for, body, field):
    _err(client_for(make_user()).post("/api/projects", body, format="json"), 400, field=field)
    assert not Project.objects.exists()


def test_owner_renames_others_get_403_and_outsiders_404(team):
    for role in ("editor", "viewer"):
        _err(team["c"][role].patch("/api/projects/team", {"name": "Mine"}, format="json"), 403, "forbidden")
    _err(team["c"]["outsider"].patch("/api/projects/team", {"name": "Mine"}, format="json"), 404, "not_found")
    resp = team["c"]["owner"].patch("/api/projects/team", {"name": "Renamed"}, format="json")
    assert resp.status_code == 200 and resp.json()["name"] == "Renamed" and resp.json()["slug"] == "team"
    _err(team["c"]["owner"].patch("/api/projects/team", {"slug": "new"}, format="json"), 400, field="slug")
    assert Project.objects.get(slug="team").name == "Renamed"


def test_owner_deletes_with_204_others_cannot(team):
    for role in ("editor", "viewer"):
        _err(team["c"][role].delete("/api/projects/team"), 403, "forbidden")
    _err(team["c"]["outsider"].delete("/api/projects/team"), 404, "not_found")
    assert Project.objects.filter(slug="team").exists()
    resp = team["c"]["owner"].delete("/api/projects/team")
    assert resp.status_code == 204 and not resp.content
    assert not Project.objects.filter(slug="team").exists()
    _err(team["c"]["owner"].get("/api/projects/team"), 404)


def test_deleting_a_project_removes_its_datasets_shared_into_other_projects(team, make_project):
    other = make_project("other", team["users"]["owner"])
    ds = Dataset.objects.create(project=team["project"], name="docs", kind="web")
    ProjectShare.objects.create(dataset=ds, project=other, granted_by=team["users"]["owner"])
    assert [d["name"] for d in team["c"]["owner"].get("/api/projects/other/datasets").json()] == ["docs"]
    assert team["c"]["owner"].delete("/api/projects/team").status_code == 204
    assert team["c"]["owner"].get("/api/projects/other/datasets").json() == []


def test_deleting_a_project_with_ingested_content_leaves_zero_orphan_points(team, code_repo, edge_index,
                                                                             monkeypatch, make_project):
    from search.engine.applier import apply_outbox
    from search.engine.reconcile import reconcile
    from search.models import Chunk

    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)  # earlier tests' rolled-back ids are not young gaps
    ingest(team["project"], "src", code_repo, repo="shop")
    keep = make_project("keep", team["users"]["owner"])
    ingest(keep, "kept", code_repo, repo="kept")
    apply_outbox(index=edge_index)
    doomed = set(Chunk.objects.filter(dataset__project=team["project"]).values_list("pk", flat=True))
    assert doomed and edge_index.count() == Chunk.objects.count()

    assert team["c"]["owner"].delete("/api/projects/team").status_code == 204

    report = reconcile(index=edge_index, record=False)  # applies the outbox first
    assert report.found.counts() == {"orphans": 0, "missing": 0, "stale": 0}, report.as_dict()
    assert report.pending == 0
    points = {pid for batch in edge_index.iter_payloads() for pid, _ in batch}
    assert not doomed & points
    assert points == set(Chunk.objects.values_list("pk", flat=True)) != set()


# ---- members ------------------------------------------------------------------------------------------------------

def test_any_member_lists_members_outsiders_get_404(team):
    for role in ("owner", "editor", "viewer"):
        rows = team["c"][role].get("/api/projects/team/members").json()
        assert {(r["email"], r["role"]) for r in rows} == {("owner@api.example", "owner"),
                                                          ("editor@api.example", "editor"),
                                                          ("viewer@api.example", "viewer")}
        assert {r["id"] for r in rows} == set(team["ids"].values())
    _err(team["c"]["outsider"].get("/api/projects/team/members"), 404, "not_found")


def test_owner_adds_a_member_by_email(team, make_user):
    make_user("new@api.example")
    resp = team["c"]["owner"].post("/api/projects/team/members", {"email": "NEW@api.example", "role": "editor"},
                                   format="json")
    assert resp.status_code == 201, resp.content
    assert resp.json()["email"] == "new@api.example" and resp.json()["role"] == "editor"
    assert Membership.objects.get(pk=resp.json()["id"]).project == team["project"]


def test_adding_defaults_to_viewer(team, make_user):
    make_user("plain@api.example")
    resp = team["c"]["owner"].post("/api/projects/team/members", {"email": "plain@api.example"}, format="json")
    assert resp.status_code == 201 and resp.json()["role"] == "viewer"


def test_add_member_errors(team):
    owner = team["c"]["owner"]
    _err(owner.post("/api/projects/team/members", {"email": "ghost@api.example", "role": "viewer"}, format="json"),
         404, "user_not_found", "email")
    _err(owner.post("/api/projects/team/members", {"email": "viewer@api.example"}, format="json"),
         409, "already_member", "email")
    _err(owner.post("/api/projects/team/members", {"email": "outsider@api.example", "role": "admin"},
                    format="json"), 400, field="role")
    _err(owner.post("/api/projects/team/members", {"role": "viewer"}, format="json"), 400, field="email")
    for role in ("editor", "viewer"):
        _err(team["c"][role].post("/api/projects/team/members", {"email": "outsider@api.example"}, format="json"),
             403, "forbidden")
    _err(team["c"]["outsider"].post("/api/projects/team/members", {"email": "outsider@api.example"},
                                    format="json"), 404, "not_found")
    assert Membership.objects.filter(project=team["project"]).count() == 3


def test_owner_changes_a_role_and_others_cannot(team):
    url = f"/api/projects/team/members/{team['ids']['viewer']}"
    _err(team["c"]["editor"].patch(url, {"role": "owner"}, format="json"), 403, "forbidden")
    _err(team["c"]["viewer"].patch(url, {"role": "owner"}, format="json"), 403, "forbidden")  # no self-promotion
    _err(team["c"]["outsider"].patch(url, {"role": "owner"}, format="json"), 404, "not_found")
    resp = team["c"]["owner"].patch(url, {"role": "editor"}, format="json")
    assert resp.status_code == 200 and resp.json()["role"] == "editor"
    _err(team["c"]["owner"].patch(url, {}, format="json"), 400, field="role")
    _err(team["c"]["owner"].patch("/api/projects/team/members/999999999", {"role": "viewer"}, format="json"), 404)


def test_owner_removes_a_member_and_members_may_leave(team):
    _err(team["c"]["editor"].delete(f"/api/projects/team/members/{team['ids']['viewer']}"), 403, "forbidden")
    assert team["c"]["viewer"].delete(f"/api/projects/team/members/{team['ids']['viewer']}").status_code == 204
    resp = team["c"]["owner"].delete(f"/api/projects/team/members/{team['ids']['editor']}")
    assert resp.status_code == 204
    assert list(Membership.objects.filter(project=team["project"]).values_list("role", flat=True)) == ["owner"]
    _err(team["c"]["editor"].get("/api/projects/team"), 404)  # a removed member no longer sees the project


def test_the_last_owner_can_neither_leave_nor_be_demoted(team):
    url = f"/api/projects/team/members/{team['ids']['owner']}"
    _err(team["c"]["owner"].patch(url, {"role": "editor"}, format="json"), 409, "last_owner")
    _err(team["c"]["owner"].delete(url), 409, "last_owner")
    promote = team["c"]["owner"].patch(f"/api/projects/team/members/{team['ids']['editor']}", {"role": "owner"},
                                       format="json")
    assert promote.status_code == 200
    assert team["c"]["owner"].delete(url).status_code == 204  # now another owner remains
    assert Membership.objects.get(project=team["project"], role="owner").user == team["users"]["editor"]
    assert not Membership.objects.filter(project=team["project"], user=team["users"]["owner"]).exists()


def test_a_member_id_of_another_project_is_404(team, make_project):
    other = make_project("elsewhere", team["users"]["owner"], team["users"]["outsider"])
    foreign = Membership.objects.get(project=other, user=team["users"]["outsider"])
    _err(team["c"]["owner"].patch(f"/api/projects/team/members/{foreign.pk}", {"role": "viewer"}, format="json"),
         404)
    _err(team["c"]["owner"].delete(f"/api/projects/team/members/{foreign.pk}"), 404)
    assert Membership.objects.filter(pk=foreign.pk).exists()


def test_a_project_limited_key_cannot_create_projects_nor_manage_members_elsewhere(team, make_project):
    from rest_framework.test import APIClient

    from accounts.apikeys import issue_api_key

    other = make_project("other", team["users"]["owner"])
    limited = APIClient()
    secret = issue_api_key(user=team["users"]["owner"], projects=[other]).secret
    limited.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    _err(limited.post("/api/projects", {"name": "Escape"}, format="json"), 403, "forbidden")
    assert not Project.objects.filter(slug="escape").exists()
    _err(limited.get("/api/projects/team/members"), 404)
    _err(limited.delete("/api/projects/team"), 404)
    assert limited.get("/api/projects/other/members").status_code == 200


def test_new_views_declare_the_manage_scope():
    from projects import api
    from search.edge.api import projects as project_api

    assert api.MemberListView.required_scope == "manage" and api.MemberDetailView.required_scope == "manage"
    assert project_api.ProjectListView.required_scope["POST"] == "manage"
    assert (project_api.ProjectDetailView.required_scope["PATCH"] == project_api.ProjectDetailView.required_scope["DELETE"]
            == "manage")
