"""Idempotency keys reserve before work: 409 in progress, 422 other body, byte-exact replay, 24 h expiry."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from credits import ledger
from credits.models import IdempotencyKey, LedgerEntry
from tests.credits import idem_urls

URL = "/api/test/charge"


@pytest.fixture
def urls(settings):
    settings.ROOT_URLCONF = "tests.credits.idem_urls"
    idem_urls.WORK_SECONDS["value"] = 0.0
    yield
    idem_urls.WORK_SECONDS["value"] = 0.0


def _charges(user):
    return LedgerEntry.objects.filter(user=user, reason="test-charge").count()


@pytest.mark.django_db(transaction=True)
def test_ten_threads_same_key_one_charge_one_stored_response(urls, make_user, client_for):
    u = make_user(credits=20)
    idem_urls.WORK_SECONDS["value"] = 0.3
    results, barrier = [], threading.Barrier(10)

    def worker():
        try:
            c = client_for(u)
            barrier.wait()
            r = c.post(URL, {"ref": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k-threads")
            results.append((r.status_code, r.content))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(s for s, _ in results)
    assert len(results) == 10
    assert set(statuses) <= {201, 409}, statuses
    assert statuses.count(201) >= 1
    assert len({body for s, body in results if s == 201}) == 1  # replays are byte-identical
    assert _charges(u) == 1
    assert ledger.get_balance(user=u) == 19 == ledger.ledger_sum(user=u)
    rows = IdempotencyKey.objects.filter(user=u, key="k-threads")
    assert rows.count() == 1 and rows.get().status == "completed"
    # after the dust settles, the key replays exactly what the first one answered
    replay = client_for(u).post(URL, {"ref": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k-threads")
    assert replay.status_code == 201 and replay.content == bytes(rows.get().response_body)
    assert _charges(u) == 1


@pytest.mark.django_db
def test_replay_is_byte_identical_and_marked(urls, user, api):
    first = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    second = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == second.status_code == 201
    assert first.content == second.content
    assert second["Idempotent-Replayed"] == "true"
    assert first["Content-Type"] == second["Content-Type"]
    assert _charges(user) == 1


@pytest.mark.django_db
def test_key_order_in_json_does_not_matter(urls, user, api):
    api.post(URL, data='{"ref": "a", "amount": 1}', content_type="application/json", HTTP_IDEMPOTENCY_KEY="k")
    r = api.post(URL, data='{"amount":1,"ref":"a"}', content_type="application/json", HTTP_IDEMPOTENCY_KEY="k")
    assert r.status_code == 201 and r["Idempotent-Replayed"] == "true"
    assert _charges(user) == 1


@pytest.mark.django_db
def test_same_key_different_body_is_422(urls, user, api):
    assert api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k2").status_code == 201
    r = api.post(URL, {"ref": "b"}, format="json", HTTP_IDEMPOTENCY_KEY="k2")
    assert r.status_code == 422
    assert r.json()["code"] == "idempotency_key_reused" and r.json()["field"] == "Idempotency-Key"
    assert _charges(user) == 1


@pytest.mark.django_db
def test_in_progress_is_409(urls, user, api):
    from credits.idempotency import request_fingerprint

    fp = request_fingerprint(method="POST", path="test-charge", body=b'{"ref":"a"}')
    IdempotencyKey.objects.create(key="k3", user=user, endpoint="test-charge", request_hash=fp,
                                  expires_at=timezone.now() + timedelta(hours=24))
    r = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k3")
    assert r.status_code == 409 and r.json()["code"] == "idempotency_in_progress"
    assert _charges(user) == 0


@pytest.mark.django_db
def test_keys_expire_after_24h(urls, user, api):
    assert api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k4").status_code == 201
    row = IdempotencyKey.objects.get(key="k4")
    assert timedelta(hours=23, minutes=59) < row.expires_at - row.created_at <= timedelta(hours=24, seconds=5)
    IdempotencyKey.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    # expired: the key is free again, even for a different body, and the work runs again
    r = api.post(URL, {"ref": "b"}, format="json", HTTP_IDEMPOTENCY_KEY="k4")
    assert r.status_code == 201 and "Idempotent-Replayed" not in r
    assert _charges(user) == 2
    from credits.idempotency import purge_expired

    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert purge_expired() == 1 and not IdempotencyKey.objects.exists()


@pytest.mark.django_db
def test_failed_request_charges_nothing_and_frees_the_key(urls, make_user, client_for):
    u = make_user(credits=0)
    c = client_for(u)
    r = c.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k5")
    assert r.status_code == 402 and r.json()["code"] == "insufficient_credits"
    assert not IdempotencyKey.objects.filter(key="k5").exists()
    assert _charges(u) == 0
    ledger.grant(user=u, amount=1)
    r = c.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k5")
    assert r.status_code == 201 and _charges(u) == 1


@pytest.mark.django_db
def test_keys_are_per_user(urls, make_user, client_for):
    a, b = make_user(credits=2), make_user(credits=2)
    assert client_for(a).post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="shared").status_code == 201
    r = client_for(b).post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    assert r.status_code == 201 and "Idempotent-Replayed" not in r
    assert _charges(a) == _charges(b) == 1


@pytest.mark.django_db
def test_oversized_key_is_400(urls, user, api):
    r = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="x" * 256)
    assert r.status_code == 400 and r.json()["field"] == "Idempotency-Key"
    assert _charges(user) == 0


@pytest.mark.django_db
def test_without_key_every_request_charges(urls, user, api):
    api.post(URL, {"ref": "a"}, format="json")
    api.post(URL, {"ref": "a"}, format="json")
    assert _charges(user) == 2
