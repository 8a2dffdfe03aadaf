"""The "New project" and project settings pages: GET renders by role, every POST acts through the same services
as the API, errors show the service's detail with its status, and cross-site POSTs without a token are refused."""
from __future__ import annotations

import re

import pytest
from django.test import Client

from projects.models import Membership, Project
from search.models import Dataset, ProjectShare

pytestmark = pytest.mark.django_db


def _login(user, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def team(make_user, make_project):
    owner, editor, viewer, outsider = (make_user(f"{r}@pages.example") for r in ("owner", "editor", "viewer", "out"))
    project = make_project("crew", owner)
    Membership.objects.create(project=project, user=editor, role="editor")
    Membership.objects.create(project=project, user=viewer, role="viewer")
    ds = Dataset.objects.create(project=project, name="handbook", kind="web")
    other = make_project("partner", owner)
    share = ProjectShare.objects.create(dataset=ds, project=other, granted_by=owner)
    return {"owner": owner, "editor": editor, "viewer": viewer, "outsider": outsider, "project": project, "ds": ds,
            "share": share, "other": other}


def _mid(project: Project, user) -> int:
    return Membership.objects.get(project=project, user=user).pk


# ---- GET ------------------------------------------------------------------------------------------------------------

def test_home_links_new_project_and_each_projects_settings(team):
    body = _login(team["owner"]).get("/").content.decode()
    assert 'href="/projects/new"' in body and 'href="/projects/crew/settings"' in body


def test_owner_sees_members_datasets_shares_and_danger_zone(code_dataset, member):
    user, project = member  # a project with an ingested dataset (tests/pages/conftest.py)
    from search.models import Chunk, Document

    resp = _login(user).get(f"/projects/{project.slug}/settings")
    assert resp.status_code == 200
    body = resp.content.decode()
    docs = Document.objects.filter(dataset=code_dataset).count()
    chunks = Chunk.objects.filter(dataset=code_dataset).count()
    assert re.search(rf"<td><a href=\"/projects/\w+/datasets/\d+/\">code</a></td><td>code</td>\s*<td>{docs}</td>"
                     rf"<td>{chunks}</td>", body), body
    assert "Danger zone" in body and 'name="confirm"' in body and "Add member" in body


def test_settings_page_lists_members_and_both_directions_of_shares(team):
    body = _login(team["owner"]).get("/projects/crew/settings").content.decode()
    for email in ("owner@pages.example", "editor@pages.example", "viewer@pages.example"):
        assert email in body
    assert "handbook" in body and "partner" in body
    assert f"/projects/crew/shares/{team['share'].pk}/revoke" in body
    incoming = _login(team["owner"]).get("/projects/partner/settings").content.decode()
    assert "crew/handbook" in incoming and f"/projects/partner/shares/{team['share'].pk}/revoke" in incoming


def test_viewer_sees_a_read_only_page_and_editor_may_delete_datasets(team):
    viewer = _login(team["viewer"]).get("/projects/crew/settings").content.decode()
    assert "handbook" in viewer and "owner@pages.example" in viewer
    for owner_only in ("Danger zone", "Add member", "/role", "/revoke", "/delete", "Add dataset"):
        assert owner_only not in viewer, owner_only
    assert f"/projects/crew/datasets/{team['ds'].pk}/" in viewer  # a viewer may open the dataset page
    assert "Leave" in viewer  # but may leave
    editor = _login(team["editor"]).get("/projects/crew/settings").content.decode()
    assert f"/projects/crew/datasets/{team['ds'].pk}/delete" in editor and "Danger zone" not in editor


def test_non_members_get_404_pages(team):
    client = _login(team["outsider"])
    assert client.get("/projects/crew/settings").status_code == 404
    assert client.get("/projects/nope/settings").status_code == 404
    assert client.post("/projects/crew/settings/delete", {"confirm": "crew"}).status_code == 404
    assert client.post(f"/projects/crew/datasets/{team['ds'].pk}/delete").status_code == 404
    assert Project.objects.filter(slug="crew").exists() and Dataset.objects.filter(pk=team["ds"].pk).exists()


def test_pages_need_a_login(team):
    for path in ("/projects/new", "/projects/crew/settings"):
        resp = Client().get(path)
        assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/")


# ---- POST -----------------------------------------------------------------------------------------------------------

def test_new_project_page_creates_and_redirects_to_settings(make_user):
    user = make_user()
    client = _login(user)
    assert client.get("/projects/new").status_code == 200
    resp = client.post("/projects/new", {"name": "Launch Pad", "slug": ""})
    assert resp.status_code == 302 and resp["Location"] == "/projects/launch-pad/settings"
    assert Membership.objects.get(project__slug="launch-pad").user == user
    page = client.get(resp["Location"])
    assert "Launch Pad" in page.content.decode() and "you are owner" in page.content.decode()


@pytest.mark.parametrize("data,status,shown", [
    ({"name": "Again", "slug": "crew"}, 409, "already exists"),
    ({"name": "x", "slug": "global"}, 400, "reserved"),
    ({"name": "", "slug": ""}, 400, "name is required"),
])
def test_new_project_page_shows_errors_with_their_status(team, data, status, shown):
    resp = _login(team["viewer"]).post("/projects/new", data)
    assert resp.status_code == status and shown in resp.content.decode()
    assert Project.objects.count() == 2


def test_owner_adds_changes_and_removes_members(team, make_user):
    newcomer = make_user("new@pages.example")
    client = _login(team["owner"])
    resp = client.post("/projects/crew/members/add", {"email": "new@pages.example", "role": "editor"})
    assert resp.status_code == 302 and resp["Location"] == "/projects/crew/settings"
    assert "new@pages.example added as editor." in client.get("/projects/crew/settings").content.decode()
    mid = _mid(team["project"], newcomer)
    assert client.post(f"/projects/crew/members/{mid}/role", {"role": "owner"}).status_code == 302
    assert Membership.objects.get(pk=mid).role == "owner"
    assert client.post(f"/projects/crew/members/{mid}/remove").status_code == 302
    assert not Membership.objects.filter(pk=mid).exists()


@pytest.mark.parametrize("email,status,shown", [
    ("ghost@pages.example", 404, "No account with this email can be added."),
    ("viewer@pages.example", 409, "already a member"),
])
def test_member_add_errors_are_shown_with_their_status(team, email, status, shown):
    resp = _login(team["owner"]).post("/projects/crew/members/add", {"email": email, "role": "viewer"})
    assert resp.status_code == status and shown in resp.content.decode()
    assert f'value="{email}"' in resp.content.decode()  # the form keeps what was typed


def test_last_owner_is_refused_on_the_page_too(team):
    client = _login(team["owner"])
    mid = _mid(team["project"], team["owner"])
    resp = client.post(f"/projects/crew/members/{mid}/role", {"role": "viewer"})
    assert resp.status_code == 409 and "at least one owner" in resp.content.decode()
    resp = client.post(f"/projects/crew/members/{mid}/remove")
    assert resp.status_code == 409
    assert Membership.objects.get(pk=mid).role == "owner"


def test_viewer_cannot_manage_but_can_leave(team):
    client = _login(team["viewer"])
    resp = client.post("/projects/crew/members/add", {"email": "out@pages.example", "role": "owner"})
    assert resp.status_code == 403 and "Only owners" in resp.content.decode()
    resp = client.post(f"/projects/crew/members/{_mid(team['project'], team['editor'])}/remove")
    assert resp.status_code == 403
    resp = client.post(f"/projects/crew/members/{_mid(team['project'], team['viewer'])}/remove")
    assert resp.status_code == 302 and resp["Location"] == "/"
    assert not Membership.objects.filter(project=team["project"], user=team["viewer"]).exists()


def test_rename_by_owner_only(team):
    assert _login(team["editor"]).post("/projects/crew/settings/rename", {"name": "Mine"}).status_code == 403
    assert _login(team["owner"]).post("/projects/crew/settings/rename", {"name": "Crew Two"}).status_code == 302
    assert Project.objects.get(slug="crew").name == "Crew Two"


def test_dataset_delete_by_editor_not_viewer(team):
    url = f"/projects/crew/datasets/{team['ds'].pk}/delete"
    assert _login(team["viewer"]).post(url).status_code == 403
    assert Dataset.objects.filter(pk=team["ds"].pk).exists()
    assert _login(team["editor"]).post(url).status_code == 302
    assert not Dataset.objects.filter(pk=team["ds"].pk).exists()
    assert not ProjectShare.objects.filter(pk=team["share"].pk).exists()  # the share went with it


def test_dataset_of_another_project_is_404(team, make_project):
    foreign = Dataset.objects.create(project=make_project("foreign", team["outsider"]), name="x", kind="code")
    assert _login(team["owner"]).post(f"/projects/crew/datasets/{foreign.pk}/delete").status_code == 404
    assert Dataset.objects.filter(pk=foreign.pk).exists()


def test_share_revoke_by_owner_from_either_side(team):
    share = team["share"]
    assert _login(team["editor"]).post(f"/projects/crew/shares/{share.pk}/revoke").status_code == 403
    assert _login(team["owner"]).post(f"/projects/partner/shares/{share.pk}/revoke").status_code == 302
    share.refresh_from_db()
    assert share.revoked_at is not None


def test_project_delete_needs_the_typed_slug_and_an_owner(team):
    owner = _login(team["owner"])
    resp = owner.post("/projects/crew/settings/delete", {"confirm": "crw"})
    assert resp.status_code == 400 and "Type the project&#x27;s slug (crew) to confirm." in resp.content.decode()
    assert _login(team["editor"]).post("/projects/crew/settings/delete", {"confirm": "crew"}).status_code == 403
    assert Project.objects.filter(slug="crew").exists()
    resp = owner.post("/projects/crew/settings/delete", {"confirm": "crew"})
    assert resp.status_code == 302 and resp["Location"] == "/"
    assert not Project.objects.filter(slug="crew").exists()
    assert "Project crew deleted." in owner.get("/").content.decode()


# ---- CSRF -----------------------------------------------------------------------------------------------------------

def test_every_project_form_refuses_a_post_without_the_csrf_token(team, make_user):
    make_user("new@pages.example")
    client = _login(team["owner"], csrf=True)
    page = client.get("/projects/crew/settings")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    p, ds, share = team["project"], team["ds"], team["share"]
    vid = _mid(p, team["viewer"])
    posts = [("/projects/new", {"name": "Sneaky"}),
             ("/projects/crew/settings/rename", {"name": "Sneaky"}),
             ("/projects/crew/members/add", {"email": "new@pages.example", "role": "owner"}),
             (f"/projects/crew/members/{vid}/role", {"role": "owner"}),
             (f"/projects/crew/members/{vid}/remove", {}),
             (f"/projects/crew/datasets/{ds.pk}/delete", {}),
             (f"/projects/crew/shares/{share.pk}/revoke", {}),
             ("/projects/crew/settings/delete", {"confirm": "crew"})]
    for path, data in posts:
        assert client.post(path, data).status_code == 403, path
    assert not Project.objects.filter(name="Sneaky").exists() and Project.objects.get(slug="crew").name == "Crew"
    assert Membership.objects.filter(project=p).count() == 3 and Membership.objects.get(pk=vid).role == "viewer"
    assert Dataset.objects.filter(pk=ds.pk).exists()
    share.refresh_from_db()
    assert share.revoked_at is None
    # the same client with the token gets through, so the 403s above were CSRF
    assert client.post(f"/projects/crew/members/{vid}/role", {"role": "editor",
                                                              "csrfmiddlewaretoken": token}).status_code == 302
    assert Membership.objects.get(pk=vid).role == "editor"


def test_page_escapes_names_and_emails(make_user, make_project):
    payload = "<script>alert(1)</script>"
    user = make_user("xss-pages@example.com")
    user.name = payload
    user.save()
    project = make_project("xss-settings", user)
    project.name = payload
    project.save()
    Dataset.objects.create(project=project, name=payload, kind="code")
    body = _login(user).get("/projects/xss-settings/settings").content.decode()
    assert payload not in body and "&lt;script&gt;" in body
