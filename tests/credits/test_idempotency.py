"""Idempotency keys reserve before work: 409 in progress, 422 other body, byte-exact replay, 24 h expiry, and a
lease: a retry after it takes over a key whose holder died, and a holder that lost its key charges nothing."""
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from rest_framework.response import Response

from config.errors import Conflict
from credits import ledger
from credits.idempotency import request_fingerprint, reserve, run_reserved
from credits.models import IdempotencyKey, LedgerEntry
from tests.credits import idem_urls
from tests.live import db_env, serving

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


# --- the lease: keys that cannot stick ----------------------------------------------------------------------------

BODY = b'{"ref":"a"}'


def _reserve_and_stall(user, key: str) -> IdempotencyKey:
    """What a request does before its work: reserve the key. The caller then plays a holder that stalls or dies."""
    reservation = reserve(user=user, key=key, endpoint="test-charge",
                          request_hash=request_fingerprint(method="POST", path="test-charge", body=BODY))
    assert isinstance(reservation, IdempotencyKey) and reservation.attempt == 1
    return reservation


def _wait_out_lease(pk: int) -> None:
    """Wait (polling the clock, not asserting it) until the reservation's lease has ended."""
    lease_end = IdempotencyKey.objects.get(pk=pk).lease_expires_at
    while timezone.now() <= lease_end:
        time.sleep(0.02)


def _charge_work(user, ran: list):
    """The same work as the test view, for a holder driven directly through run_reserved."""

    def work() -> Response:
        ran.append(1)
        entry = ledger.deduct(user=user, amount=1, reason="test-charge", reference_type="test", reference_id="a")
        return Response({"entry": entry.pk, "balance": entry.balance_after, "at": time.time()}, status=201)

    return work


def _assert_charged_once(user, *, granted: int) -> None:
    assert _charges(user) == 1
    assert ledger.get_balance(user=user) == granted - 1 == ledger.ledger_sum(user=user)


@pytest.mark.django_db
def test_retry_within_the_lease_is_409_and_charges_nothing(urls, user, api):
    held = _reserve_and_stall(user, "lease-409")  # the default 60 s lease
    r = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-409")
    assert r.status_code == 409 and r.json()["code"] == "idempotency_in_progress"
    row = IdempotencyKey.objects.get(pk=held.pk)
    assert row.status == "in_progress" and row.attempt == 1
    assert _charges(user) == 0


@pytest.mark.django_db
def test_retry_after_the_lease_takes_over_a_stalled_key_runs_the_work_once(urls, user, api, settings):
    settings.IDEMPOTENCY_LEASE_S = 0.3
    held = _reserve_and_stall(user, "lease-takeover")
    _wait_out_lease(held.pk)
    first = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-takeover")
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    row = IdempotencyKey.objects.get(pk=held.pk)
    assert row.status == "completed" and row.attempt == 2
    again = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-takeover")
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true" and again.content == first.content
    _assert_charged_once(user, granted=10)


@pytest.mark.django_db
def test_takeover_after_the_lease_still_refuses_another_body_with_422(urls, user, api, settings):
    settings.IDEMPOTENCY_LEASE_S = 0.3
    held = _reserve_and_stall(user, "lease-422")
    _wait_out_lease(held.pk)
    r = api.post(URL, {"ref": "b"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-422")
    assert r.status_code == 422 and r.json()["code"] == "idempotency_key_reused"
    assert IdempotencyKey.objects.get(pk=held.pk).attempt == 1
    assert _charges(user) == 0


@pytest.mark.django_db
def test_late_holder_after_a_takeover_runs_nothing_and_gets_the_winners_response(urls, user, api, settings):
    settings.IDEMPOTENCY_LEASE_S = 0.3
    late = _reserve_and_stall(user, "lease-late")
    _wait_out_lease(late.pk)
    winner = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-late")
    assert winner.status_code == 201
    ran: list = []
    answer = run_reserved(reservation=late, work=_charge_work(user, ran))  # the original holder wakes up
    assert answer.status_code == 201 and answer["Idempotent-Replayed"] == "true"
    assert answer.content == winner.content
    assert ran == []
    _assert_charged_once(user, granted=10)


@pytest.mark.django_db
def test_holder_completing_just_before_a_takeover_is_replayed_to_the_retry(urls, user, api, settings):
    settings.IDEMPOTENCY_LEASE_S = 0.3
    held = _reserve_and_stall(user, "lease-first")
    _wait_out_lease(held.pk)
    ran: list = []
    done = run_reserved(reservation=held, work=_charge_work(user, ran))  # past its lease, but nobody took it
    assert done.status_code == 201 and ran == [1]
    retry = api.post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-first")
    assert retry.status_code == 201 and retry["Idempotent-Replayed"] == "true" and retry.content == done.content
    assert IdempotencyKey.objects.get(pk=held.pk).attempt == 1
    _assert_charged_once(user, granted=10)


@pytest.mark.django_db
def test_completion_that_no_longer_owns_its_reservation_rolls_back_its_charge(urls, user):
    """The completion fence on its own: the work (inside its transaction) moves the reservation to another attempt,
    as a takeover would if the row lock did not keep one out. The charge must roll back with the completion."""
    held = _reserve_and_stall(user, "lease-fence")
    ran: list = []
    charge = _charge_work(user, ran)

    def work_that_loses_the_key() -> Response:
        response = charge()
        IdempotencyKey.objects.filter(pk=held.pk).update(attempt=held.attempt + 1)
        return response

    with pytest.raises(Conflict) as lost:
        run_reserved(reservation=held, work=work_that_loses_the_key)
    assert lost.value.code == "idempotency_in_progress"
    assert ran == [1]
    assert _charges(user) == 0
    assert ledger.get_balance(user=user) == 10 == ledger.ledger_sum(user=user)


@pytest.fixture
def gate(tmp_path, monkeypatch):
    """The test view's hold point (idem_urls.hold_at_gate), armed: work that reaches it waits there."""
    monkeypatch.setenv(idem_urls.GATE_ENV, str(tmp_path))
    (tmp_path / "hold").touch()
    return tmp_path


def _wait_for(path: Path, *, proc: subprocess.Popen | None = None) -> str:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        assert proc is None or proc.poll() is None, "the server died"
        time.sleep(0.02)
    return path.read_text()


@pytest.mark.django_db(transaction=True)
def test_live_holder_past_its_lease_keeps_the_key_and_charges_once(urls, make_user, client_for, settings, gate):
    settings.IDEMPOTENCY_LEASE_S = 0.3
    u = make_user(credits=5)
    out: dict = {}

    def holder() -> None:
        try:
            r = client_for(u).post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-live")
            out["status"], out["body"] = r.status_code, r.content
        finally:
            connection.close()

    t = threading.Thread(target=holder)
    t.start()
    try:
        _wait_for(gate / "entered")  # charged, uncommitted, inside its work transaction
        _wait_out_lease(IdempotencyKey.objects.get(key="lease-live").pk)
        retry = client_for(u).post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-live")
        assert retry.status_code == 409 and retry.json()["code"] == "idempotency_in_progress"
    finally:
        (gate / "hold").unlink()
        t.join(timeout=60)
    assert out["status"] == 201
    replay = client_for(u).post(URL, {"ref": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="lease-live")
    assert replay.status_code == 201 and replay.content == out["body"]
    assert IdempotencyKey.objects.get(key="lease-live").attempt == 1
    _assert_charged_once(u, granted=5)


def _http_post(url: str, *, api_key: str, idem: str, body: bytes) -> tuple[int, bytes, dict]:
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"Bearer {api_key}", "Content-Type": "application/json", "Idempotency-Key": idem})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


@pytest.fixture
def idem_gunicorn(transactional_db, gate):
    """One gunicorn worker on the test database serving the test charge URL, with a 1 s lease and the gate armed."""
    env = db_env(IDEMPOTENCY_LEASE_S="1", INDEX_APPLIER_THREAD="0")
    with serving(["-m", "gunicorn", "tests.credits.idem_wsgi:application", "-w", "1", "-b", "127.0.0.1:{port}",
                  "--timeout", "120", "--log-level", "warning"], env=env, probe="/api/test/charge",
                 what="gunicorn") as (url, proc):
        yield url, proc


def _wait_until_unlocked(pk: int) -> None:
    """Postgres rolls back a killed client's transaction when it sees the socket close; wait for that, so that the
    retry below meets a dead reservation rather than the dying one."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with transaction.atomic():
                IdempotencyKey.objects.select_for_update(nowait=True).filter(pk=pk).first()
            return
        except DatabaseError:
            assert time.monotonic() < deadline, "the killed worker's transaction was never rolled back"
            time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_worker_killed_mid_request_leaves_a_key_that_a_retry_after_the_lease_completes_once(
        idem_gunicorn, gate, make_user, api_key_for):
    url, _server = idem_gunicorn
    u = make_user(credits=5)
    key = api_key_for(u)
    body = json.dumps({"ref": "a"}).encode()
    first: dict = {}

    def doomed_client() -> None:
        try:
            first["answer"] = _http_post(f"{url}/api/test/charge", api_key=key, idem="killed", body=body)
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            first["error"] = exc

    t = threading.Thread(target=doomed_client)
    t.start()
    worker_pid = int(_wait_for(gate / "entered", proc=_server))  # reserved and charged, not committed
    os.kill(worker_pid, signal.SIGKILL)
    t.join(timeout=60)
    assert "answer" not in first  # the request died with its worker: no response at all
    (gate / "hold").unlink()

    row = IdempotencyKey.objects.get(user=u, key="killed")
    _wait_until_unlocked(row.pk)
    row.refresh_from_db()
    assert row.status == "in_progress" and row.attempt == 1  # stuck, as it would be for 24 h without the lease
    assert _charges(u) == 0 and ledger.get_balance(user=u) == 5  # the killed charge rolled back
    _wait_out_lease(row.pk)

    status, retried, headers = _http_post(f"{url}/api/test/charge", api_key=key, idem="killed", body=body)
    assert status == 201 and "Idempotent-Replayed" not in headers, retried
    status2, replayed, headers2 = _http_post(f"{url}/api/test/charge", api_key=key, idem="killed", body=body)
    assert status2 == 201 and headers2.get("Idempotent-Replayed") == "true" and replayed == retried
    row.refresh_from_db()
    assert row.status == "completed" and row.attempt == 2
    _assert_charged_once(u, granted=5)
