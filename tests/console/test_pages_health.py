import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_home_requires_login():
    resp = Client().get("/")
    assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/")


def test_login_page_has_no_cdn_assets():
    resp = Client().get("/accounts/login/")
    assert resp.status_code == 200
    html = resp.content.decode()
    assert 'name="password"' in html and "https://" not in html


def test_login_then_home_shows_email_balance_projects(make_user, make_project):
    u = make_user("bob@example.com", credits=42, password="pw-secret-123")
    make_project("bobs-project", u)
    c = Client()
    resp = c.post("/accounts/login/", {"username": "bob@example.com", "password": "pw-secret-123"})
    assert resp.status_code == 302 and resp["Location"] == "/"
    html = c.get("/").content.decode()
    assert "bob@example.com" in html and "42 credits" in html and "bobs-project" in html
    assert 'href="/admin/"' in html and 'href="/api/docs/"' in html
    # session auth reaches the API too
    assert c.get("/api/me").json()["email"] == "bob@example.com"
    resp = c.post("/accounts/logout/")
    assert resp.status_code == 302
    assert c.get("/").status_code == 302


def test_wrong_password_stays_on_login(make_user):
    make_user("carol@example.com", password="right-password")
    resp = Client().post("/accounts/login/", {"username": "carol@example.com", "password": "wrong"})
    assert resp.status_code == 200 and b"did not match" in resp.content


def _staff_client(make_user) -> Client:
    client = Client()
    client.force_login(make_user("ops@example.com", staff=True))
    return client


def test_healthz_503_names_the_missing_worker(make_user):
    resp = _staff_client(make_user).get("/healthz")
    body = resp.json()
    assert body["checks"]["postgres"]["ok"] and body["checks"]["redis"]["ok"]
    assert "pgvector" in body["checks"]["postgres"]["detail"]
    assert not body["checks"]["worker"]["ok"]  # no worker runs on this session's private broker
    assert resp.status_code == 503 and "worker" in body["down"]


def test_healthz_names_a_bad_embedding_precision(settings, make_user):
    settings.EMBEDDING_PRECISION = "fp8"
    resp = _staff_client(make_user).get("/healthz")
    body = resp.json()
    assert resp.status_code == 503 and "embeddings" in body["down"]
    assert "EMBEDDING_PRECISION" in body["checks"]["embeddings"]["detail"]


def test_healthz_reports_the_embedding_model_precision_and_device(settings, make_user):
    settings.EMBEDDING_PRECISION = "fp32"
    settings.EMBEDDING_DEVICE = "cpu"
    settings.EMBEDDING_BATCH_SIZE = 16
    check = _staff_client(make_user).get("/healthz").json()["checks"]["embeddings"]
    assert check["ok"] and check["detail"] == "all-MiniLM-L6-v2, fp32; batches on cpu fp32, batch 16"


def test_healthz_503_when_redis_is_unreachable(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    body = Client().get("/healthz").json()
    assert not body["checks"]["redis"]["ok"] and "redis" in body["down"]


@pytest.mark.slow
def test_healthz_200_with_everything_up(celery_worker_proc):
    from search.engine.index import get_index

    get_index()  # the web process opens its index at start (its applier thread); /healthz never opens it
    resp = Client().get("/healthz")
    body = resp.json()
    assert resp.status_code == 200, body
    assert set(body["checks"]) == {"postgres", "redis", "qdrant", "embeddings", "worker"}
    assert all(c["ok"] for c in body["checks"].values())
