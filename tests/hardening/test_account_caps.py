"""Per-account limits: projects, datasets and API keys one account may hold, and the key list in pages.

Quotas are per project, so before these limits a sign-up could create projects, datasets and keys in a loop,
each project with its own full quota. The concurrent tests use real threads, each with its own connection to
the real database, as concurrent requests would."""
from __future__ import annotations

import threading

import pytest
from django.db import connection


def _refused(resp, field: str) -> None:
    assert resp.status_code == 409, resp.content
    body = resp.json()
    assert body["code"] == "account_limit" and body["field"] == field and body["detail"], body


@pytest.fixture
def small_limits(settings):
    settings.ACCOUNT_MAX_PROJECTS = 3
    settings.ACCOUNT_MAX_DATASETS = 3
    settings.ACCOUNT_MAX_API_KEYS = 3
    return settings


@pytest.mark.django_db
def test_the_project_past_the_account_limit_is_refused_and_not_created(small_limits, make_user, client_for):
    from projects.models import Project

    client = client_for(make_user())
    for i in range(3):
        assert client.post("/api/projects", {"name": f"P{i}"}, format="json").status_code == 201
    resp = client.post("/api/projects", {"name": "One too many"}, format="json")
    _refused(resp, "projects")
    assert resp.json()["limit"] == 3 and Project.objects.count() == 3
    assert client.delete("/api/projects/p0").status_code == 204  # a deleted project frees its place
    assert client.post("/api/projects", {"name": "Again"}, format="json").status_code == 201


@pytest.mark.django_db
def test_the_dataset_past_the_account_limit_is_refused_in_any_project(small_limits, make_user, client_for):
    from search.models import Dataset

    client = client_for(make_user())
    for slug in ("one", "two"):
        assert client.post("/api/projects", {"name": slug}, format="json").status_code == 201
    for slug, name in (("one", "a"), ("one", "b"), ("two", "c")):
        assert client.post(f"/api/projects/{slug}/datasets", {"name": name}, format="json").status_code == 201
    _refused(client.post("/api/projects/two/datasets", {"name": "d"}, format="json"), "datasets")
    assert Dataset.objects.count() == 3


@pytest.mark.django_db
def test_the_api_key_past_the_account_limit_is_refused_and_revoking_frees_a_place(small_limits, make_user,
                                                                                   client_for):
    from accounts.models import ApiKey

    user = make_user()
    client = client_for(user)  # this key is the first of three
    first = client.post("/api/keys", {"name": "k1"}, format="json")
    assert first.status_code == 201 and client.post("/api/keys", {"name": "k2"}, format="json").status_code == 201
    _refused(client.post("/api/keys", {"name": "k3"}, format="json"), "api_keys")
    assert ApiKey.objects.filter(user=user).count() == 3
    assert client.delete(f"/api/keys/{first.json()['id']}").status_code == 200
    assert client.post("/api/keys", {"name": "k3"}, format="json").status_code == 201


@pytest.mark.django_db
def test_an_admin_override_raises_one_accounts_limits(small_limits, make_user, client_for):
    user = make_user()
    user.max_projects, user.max_api_keys = 5, 6
    user.save(update_fields=["max_projects", "max_api_keys"])
    client = client_for(user)
    assert all(client.post("/api/projects", {"name": f"P{i}"}, format="json").status_code == 201 for i in range(5))
    _refused(client.post("/api/projects", {"name": "P5"}, format="json"), "projects")
    assert all(client.post("/api/keys", {"name": f"k{i}"}, format="json").status_code == 201 for i in range(5))
    _refused(client.post("/api/keys", {"name": "k5"}, format="json"), "api_keys")
    other = client_for(make_user())  # everyone else keeps the setting
    assert all(other.post("/api/projects", {"name": f"Q{i}"}, format="json").status_code == 201 for i in range(3))
    _refused(other.post("/api/projects", {"name": "Q3"}, format="json"), "projects")


def _race(n: int, work) -> list[str]:
    """Run `work(i)` in n threads released together; -> each thread's outcome ('ok' or the error's code)."""
    gate = threading.Barrier(n)
    out: list[str] = [""] * n

    def run(i: int) -> None:
        try:
            gate.wait()
            work(i)
            out[i] = "ok"
        except Exception as exc:  # noqa: BLE001 - the outcome is the assertion
            out[i] = getattr(exc, "code", repr(exc))
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_stop_at_the_limit(small_limits, make_user):
    from accounts.apikeys import create_api_key
    from accounts.models import ApiKey
    from projects import membership
    from projects.models import Project
    from search.ingest.sharing import create_dataset
    from search.models import Dataset

    user = make_user()
    outcomes = _race(8, lambda i: membership.create_project(user=user, name=f"Race {i}"))
    assert sorted(outcomes) == ["account_limit"] * 5 + ["ok"] * 3
    assert Project.objects.filter(created_by=user).count() == 3
    project = Project.objects.filter(created_by=user).first()
    outcomes = _race(8, lambda i: create_dataset(user=user, project=project, name=f"d{i}", kind="code"))
    assert sorted(outcomes) == ["account_limit"] * 5 + ["ok"] * 3 and Dataset.objects.count() == 3
    outcomes = _race(8, lambda i: create_api_key(user=user, name=f"k{i}"))
    assert sorted(outcomes) == ["account_limit"] * 5 + ["ok"] * 3 and ApiKey.objects.count() == 3


@pytest.mark.django_db
def test_the_key_list_comes_in_pages(settings, make_user, client_for):
    from accounts.apikeys import issue_api_key

    settings.API_KEYS_PAGE_SIZE = 3
    user = make_user()
    client = client_for(user)
    for i in range(6):
        issue_api_key(user=user, name=f"k{i}")
    first = client.get("/api/keys").json()
    assert first["count"] == 7 and len(first["results"]) == 3 and first["previous"] is None
    assert [k["name"] for k in first["results"]] == ["k5", "k4", "k3"]  # newest first
    last = client.get("/api/keys", {"page": 3}).json()
    assert len(last["results"]) == 1 and last["next"] is None
    assert len(client.get("/api/keys", {"page_size": 200}).json()["results"]) == 7
    for bad in ("1000", "0", "-1", "１２", "1.5", "True"):  # past the 200 a page, or not a plain number
        resp = client.get("/api/keys", {"page_size": bad})
        assert resp.status_code == 400 and resp.json()["field"] == "page_size", bad
    assert client.get("/api/keys", {"page": "x"}).json()["field"] == "page"
    resp = client.get("/api/keys", {"page": 4})
    assert resp.status_code == 404 and resp.json()["field"] == "page"
