import pytest
from rest_framework.test import APIClient

from accounts.apikeys import issue_api_key, revoke_api_key, verify_api_key

pytestmark = pytest.mark.django_db


def _assert_error_shape(resp, status, code=None):
    assert resp.status_code == status, resp.content
    body = resp.json()
    assert set(body) >= {"code", "detail"}
    assert isinstance(body["detail"], str) and body["detail"]
    if code:
        assert body["code"] == code


def test_valid_key_200(user):
    secret = issue_api_key(user=user).secret
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    resp = c.get("/api/me")
    assert resp.status_code == 200
    assert resp.json()["email"] == "alice@example.com"
    assert resp.json()["balance"] == 10


def test_revoked_key_401(user):
    issued = issue_api_key(user=user)
    revoke_api_key(api_key=issued.api_key)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    resp = c.get("/api/me")
    _assert_error_shape(resp, 401, "authentication_failed")
    assert resp["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Bearer sk_nothere_abc", "Bearer wrong", "Bearer", "Basic Zm9vOmJhcg==", "Bearer a b"])
def test_wrong_or_malformed_key_401(user, header):
    issue_api_key(user=user)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=header)
    _assert_error_shape(c.get("/api/me"), 401)


def test_right_prefix_wrong_secret_401(user):
    issued = issue_api_key(user=user)
    forged = issued.secret[:-4] + ("AAAA" if not issued.secret.endswith("AAAA") else "BBBB")
    assert verify_api_key(secret=forged) is None
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    _assert_error_shape(c.get("/api/me"), 401, "authentication_failed")


def test_no_credentials_401():
    _assert_error_shape(APIClient().get("/api/me"), 401, "not_authenticated")


def test_inactive_user_key_401(make_user):
    u = make_user()
    secret = issue_api_key(user=u).secret
    u.is_active = False
    u.save()
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    _assert_error_shape(c.get("/api/me"), 401)


def test_key_lifecycle_over_api(user, api):
    resp = api.post("/api/keys", {"name": "laptop"}, format="json")
    assert resp.status_code == 201
    created = resp.json()
    assert created["secret"].startswith("sk_") and created["name"] == "laptop"
    # only a hash is stored
    from accounts.models import ApiKey

    row = ApiKey.objects.get(pk=created["id"])
    assert created["secret"] not in row.key_hash

    listed = api.get("/api/keys").json()["results"]
    assert {k["id"] for k in listed} >= {created["id"]}
    assert all("secret" not in k for k in listed)

    new = APIClient()
    new.credentials(HTTP_AUTHORIZATION=f"Bearer {created['secret']}")
    assert new.get("/api/me").status_code == 200
    assert ApiKey.objects.get(pk=created["id"]).last_used_at is not None

    resp = api.delete(f"/api/keys/{created['id']}")
    assert resp.status_code == 200 and resp.json()["is_active"] is False
    _assert_error_shape(new.get("/api/me"), 401)


def test_cannot_revoke_someone_elses_key(user, api, make_user):
    other = issue_api_key(user=make_user())
    _assert_error_shape(api.delete(f"/api/keys/{other.api_key.pk}"), 404, "not_found")
    other.api_key.refresh_from_db()
    assert other.api_key.revoked_at is None


def test_me_lists_projects(user, api, make_project):
    make_project("alpha", user)
    body = api.get("/api/me").json()
    assert body["projects"] == [{"slug": "alpha", "name": "Alpha", "role": "owner"}]
