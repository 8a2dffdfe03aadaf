"""The API keys page (/account/keys) and the admin's key list: scopes, projects, expiry, last use."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.apikeys import issue_api_key
from accounts.models import ApiKey

pytestmark = pytest.mark.django_db

SECRET_RE = re.compile(r"sk_[0-9a-f]{12}_[A-Za-z0-9_-]+")


@pytest.fixture
def owner(make_user, make_project):
    user = make_user("keys-page@example.com")
    make_project("alpha", user)
    make_project("beta", user)
    return user


def _api(secret: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return c


def test_page_needs_login(client):
    resp = client.get("/account/keys")
    assert resp.status_code == 302 and "/accounts/login/" in resp["Location"]


def test_create_shows_the_secret_once_and_the_key_works_as_chosen(client, owner):
    client.force_login(owner)
    page = client.get("/account/keys")
    assert page.status_code == 200 and 'href="/account/keys"' in page.content.decode()
    resp = client.post("/account/keys", {"name": "ci", "scopes": ["query", "people"], "projects": ["alpha"],
                                         "expires_in_days": "7"})
    body = resp.content.decode()
    assert resp.status_code == 201 and resp["Cache-Control"] == "no-store"
    secrets = SECRET_RE.findall(body)
    assert len(secrets) == 1 and "shown only this once" in body
    key = ApiKey.objects.get(user=owner, name="ci")
    assert key.scopes == ["query", "people"] and key.expires_at - timezone.now() <= timedelta(days=7)
    # the list shows scopes, projects, expiry and last use, never the secret again
    api = _api(secrets[0])
    assert api.get("/api/projects/alpha").status_code == 200
    assert api.get("/api/projects/beta").status_code == 404
    assert api.get("/api/keys").json()["code"] == "insufficient_scope"
    listed = client.get("/account/keys").content.decode()
    assert secrets[0] not in listed and not SECRET_RE.search(listed)
    row = re.search(rf'<tr id="key-{key.pk}">(.*?)</tr>', listed, re.S).group(1)
    assert "query, people" in row and "alpha" in row and "beta" not in row
    assert key.expires_at.strftime("%Y-%m-%d") in row and "active" in row
    assert "never" not in row.split("</td>")[5]  # last used: just now, by the API calls above


def test_default_form_creates_an_all_scope_unlimited_key(client, owner):
    client.force_login(owner)
    assert client.post("/account/keys", {"name": "", "scopes": ["query", "ingest", "people", "manage"]}).status_code == 201
    key = ApiKey.objects.get(user=owner)
    assert key.name == "default" and key.project_ids is None and key.expires_at is None
    assert len(key.scopes) == 4


@pytest.mark.parametrize("data,field", [
    ({"name": "x"}, "scopes"),
    ({"scopes": ["root"]}, "scopes"),
    ({"scopes": ["query"], "projects": ["nowhere"]}, "projects"),
    ({"scopes": ["query"], "expires_in_days": "0"}, "expires_in_days"),
    ({"scopes": ["query"], "expires_in_days": "soon"}, "expires_in_days"),
    ({"scopes": ["query"], "name": "n" * 101}, "name"),
])
def test_create_errors_are_shown_and_create_nothing(client, owner, data, field):
    client.force_login(owner)
    resp = client.post("/account/keys", data)
    assert resp.status_code == 400
    assert f"(field: {field})" in resp.content.decode()
    assert not ApiKey.objects.filter(user=owner).exists()


def test_revoke(client, owner, make_user):
    issued = issue_api_key(user=owner, name="old")
    other = issue_api_key(user=make_user())
    client.force_login(owner)
    resp = client.post(f"/account/keys/{issued.api_key.pk}/revoke")
    assert resp.status_code == 302 and resp["Location"] == "/account/keys"
    page = client.get("/account/keys").content.decode()
    assert "Revoked key" in page and "revoked" in page
    assert _api(issued.secret).get("/api/me").status_code == 401
    assert client.post(f"/account/keys/{other.api_key.pk}/revoke").status_code == 404
    other.api_key.refresh_from_db()
    assert other.api_key.revoked_at is None
    assert client.get(f"/account/keys/{issued.api_key.pk}/revoke").status_code == 405


def test_expired_key_is_listed_as_expired(client, owner):
    issue_api_key(user=owner, name="gone", expires_at=timezone.now() - timedelta(days=1))
    client.force_login(owner)
    assert re.search(r"<td>expired</td>", client.get("/account/keys").content.decode())


def test_csrf_is_enforced(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post("/account/keys", {"scopes": ["query"]}).status_code == 403
    issued = issue_api_key(user=owner)
    assert client.post(f"/account/keys/{issued.api_key.pk}/revoke").status_code == 403
    assert ApiKey.objects.filter(user=owner).count() == 1
    issued.api_key.refresh_from_db()
    assert issued.api_key.revoked_at is None
    page = client.get("/account/keys")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    assert client.post("/account/keys", {"scopes": ["query"], "csrfmiddlewaretoken": token}).status_code == 201


def test_admin_shows_scopes_projects_expiry_and_last_use(client, make_user, owner):
    from projects.models import Project

    staff = make_user("staff-keys@example.com", staff=True)
    key = issue_api_key(user=owner, name="limited", scopes=["query"], projects=[Project.objects.get(slug="alpha")],
                        expires_at=timezone.now() + timedelta(days=2)).api_key
    client.force_login(staff)
    listing = client.get("/admin/accounts/apikey/").content.decode()
    assert "limited" in listing and "alpha" in listing and "active" in listing
    assert client.get("/admin/accounts/apikey/?scope=people").content.decode().count("limited") == 0
    detail = client.get(f"/admin/accounts/apikey/{key.pk}/change/")
    assert detail.status_code == 200
    html = detail.content.decode()
    assert 'name="scopes"' in html and 'name="expires_at_0"' in html and "alpha" in html
    # staff narrow the scopes in the admin
    resp = client.post(f"/admin/accounts/apikey/{key.pk}/change/",
                       {"name": "limited", "scopes": ["query", "people"], "expires_at_0": "", "expires_at_1": ""})
    assert resp.status_code == 302, resp.content.decode()[:2000]
    key.refresh_from_db()
    assert key.scopes == ["query", "people"] and key.expires_at is None
