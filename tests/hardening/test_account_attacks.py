"""Attacks on accounts from outside: taking an address over before its owner signs up, guessing passwords, and
using password reset to learn who has an account or to flood an inbox.

Real parts only: the rate-limit counters are the session's Redis, the reset mail goes through the real broker and
runs as the real Celery task (in this process, so its mail lands in mail.outbox)."""
from __future__ import annotations

import re
import time

import pytest
from django.conf import settings
from django.contrib.auth import authenticate
from django.core import mail
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django_ratelimit.core import _get_window
from rest_framework.test import APIClient

from accounts.login_limits import _account_key
from accounts.models import User
from accounts.tasks import send_password_reset
from config.celery import app

pytestmark = pytest.mark.django_db

VICTIM = "victim@example.com"
VICTIM_PW = "victim-owns-this-mailbox-7"
ATTACKER_PW = "attacker-knows-this-one-3"
RIGHT = "pw-secret-123"  # make_user's password


# ---- pre-account takeover -------------------------------------------------------------------------------------------

def _tokens(email: str) -> list[str]:
    """The sign-up link tokens emailed to `email`, oldest first."""
    return [m.group(1) for msg in mail.outbox if msg.to == [email]
            for m in [re.search(r"/accounts/signup/confirm/([A-Za-z0-9_-]+)", msg.body)] if m]


def _sign_up(password: str) -> None:
    resp = APIClient().post("/api/signup", {"email": VICTIM, "password": password}, format="json")
    assert resp.status_code == 202, resp.content


def _open_link(client: Client, token: str, password: str):
    """The owner opens a link in the browser and types the password they know (the only one they know)."""
    return client.post(f"/accounts/signup/confirm/{token}", {"password": password})


@pytest.mark.parametrize("attacker_first", [True, False], ids=["attacker_signs_up_first", "victim_signs_up_first"])
@pytest.mark.parametrize("attacker_link_first", [True, False], ids=["attacker_link_opened_first",
                                                                     "victim_link_opened_first"])
def test_a_sign_up_of_the_victims_address_by_an_attacker_never_becomes_an_account_with_the_attackers_password(
        attacker_first, attacker_link_first):
    for password in ([ATTACKER_PW, VICTIM_PW] if attacker_first else [VICTIM_PW, ATTACKER_PW]):
        _sign_up(password)
    first, second = _tokens(VICTIM)
    attacker_link, victim_link = (first, second) if attacker_first else (second, first)
    victim = Client()
    for token in ([attacker_link, victim_link] if attacker_link_first else [victim_link, attacker_link]):
        resp = _open_link(victim, token, VICTIM_PW)
        if token == attacker_link:
            assert resp.status_code in (400, 409), resp.status_code  # refused, whatever the order
        if User.objects.filter(email=VICTIM).exists():
            break
    accounts = list(User.objects.filter(email__iexact=VICTIM))
    assert len(accounts) == 1
    assert not accounts[0].check_password(ATTACKER_PW)
    assert accounts[0].check_password(VICTIM_PW)  # the owner's own link still works, in either order


def test_the_attackers_link_logs_no_one_in_and_the_api_refuses_it_without_the_password():
    _sign_up(ATTACKER_PW)
    (token,) = _tokens(VICTIM)
    victim = Client()
    resp = _open_link(victim, token, VICTIM_PW)
    assert resp.status_code == 400 and "_auth_user_id" not in victim.session
    assert "not the password chosen" in resp.content.decode()
    for body in ({"token": token}, {"token": token, "password": VICTIM_PW}):
        resp = APIClient().post("/api/signup/confirm", body, format="json")
        assert resp.status_code == 400 and resp.json()["field"] == "password", resp.content
    assert not User.objects.filter(email=VICTIM).exists()


# ---- password guessing ----------------------------------------------------------------------------------------------

def _login(email: str, password: str, *, ip: str = "203.0.113.5", path: str = "/accounts/login/"):
    client = Client(REMOTE_ADDR=ip)
    return client, client.post(path, {"username": email, "password": password})


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def limits(settings):
    def set_(**rates: str) -> None:
        settings.RATE_LIMITS = {**settings.RATE_LIMITS, **rates}
    return set_


def test_after_n_failed_logins_the_right_password_is_refused_with_429_for_that_account_from_any_address(
        make_user, limits):
    limits(login_account="3/15m", login_ip="1000/15m")
    make_user("target@example.com")
    make_user("bystander@example.com")
    for i in range(3):  # each guess from another address: the account's bucket still fills
        _, resp = _login("TARGET@example.com", f"guess-{i}", ip=f"198.51.100.{i + 1}")
        assert resp.status_code == 200 and "did not match" in resp.content.decode()
    client, resp = _login("target@example.com", RIGHT, ip="198.51.100.99")
    assert resp.status_code == 429 and not _logged_in(client)
    assert int(resp["Retry-After"]) >= 1 and "Too many failed logins" in resp.content.decode()
    client, resp = _login("bystander@example.com", RIGHT, ip="198.51.100.1")  # other accounts are not affected
    assert resp.status_code == 302 and _logged_in(client)


def test_after_n_failed_logins_from_one_address_every_account_is_refused_from_it_but_not_from_elsewhere(
        make_user, limits):
    limits(login_account="1000/15m", login_ip="3/15m")
    make_user("target@example.com")
    for i in range(3):  # a spray: one guess per account
        _login(f"someone{i}@example.com", "guess", ip="192.0.2.7")
    client, resp = _login("target@example.com", RIGHT, ip="192.0.2.7")
    assert resp.status_code == 429 and not _logged_in(client)
    client, resp = _login("target@example.com", RIGHT, ip="192.0.2.8")
    assert resp.status_code == 302 and _logged_in(client)


def test_the_admin_login_and_authenticate_itself_are_limited_the_same_way(make_user, limits):
    limits(login_account="2/15m", login_ip="1000/15m")
    make_user("staff@example.com", staff=True)
    for _ in range(2):
        _login("staff@example.com", "wrong", path="/admin/login/")
    client, resp = _login("staff@example.com", RIGHT, path="/admin/login/")
    assert resp.status_code == 429 and not _logged_in(client)
    assert "Too many failed logins" in resp.content.decode()
    request = RequestFactory().post("/anywhere", REMOTE_ADDR="192.0.2.50")
    assert authenticate(request, username="staff@example.com", password=RIGHT) is None  # any other caller


def test_a_refusal_looks_the_same_for_an_address_without_an_account(make_user, limits):
    limits(login_account="2/15m", login_ip="1000/15m")
    make_user("real@example.com")
    answers = []
    for email in ("real@example.com", "nobody@example.com"):
        for _ in range(2):
            _login(email, "wrong")
        _, resp = _login(email, RIGHT)
        answers.append((resp.status_code, resp.content.decode().replace(email, "EMAIL")))
    assert answers[0][0] == answers[1][0] == 429
    strip = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"|in \d+ minutes?')  # each bucket its window
    assert strip.sub("", answers[0][1]) == strip.sub("", answers[1][1])


def test_successful_logins_are_not_counted(make_user, limits):
    limits(login_account="2/15m", login_ip="2/15m")
    make_user("often@example.com")
    for _ in range(5):
        client, resp = _login("often@example.com", RIGHT)
        assert resp.status_code == 302 and _logged_in(client)


@pytest.mark.rate_windows_turn
def test_the_refusal_ends_when_the_window_passes(make_user, limits):
    period = 6
    limits(login_account=f"2/{period}s", login_ip="1000/15m")
    make_user("patient@example.com")
    bucket = _account_key("patient@example.com")
    while _get_window(bucket, period) - time.time() < period - 1.2:  # start just after the bucket's window turns
        time.sleep(0.05)
    for _ in range(2):
        _login("patient@example.com", "wrong")
    client, resp = _login("patient@example.com", RIGHT)
    assert resp.status_code == 429 and not _logged_in(client)
    time.sleep(int(resp["Retry-After"]) + 0.5)
    client, resp = _login("patient@example.com", RIGHT)
    assert resp.status_code == 302 and _logged_in(client)


# ---- password reset -------------------------------------------------------------------------------------------------

TASK = send_password_reset.name  # what the request enqueues by name


def _drain() -> list[dict]:
    """Take the queued password-reset messages off the broker: their kwargs, oldest first."""
    found = []
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        while (message := channel.basic_get(settings.CELERY_TASK_DEFAULT_QUEUE, no_ack=False)) is not None:
            if message.headers.get("task") == TASK:
                found.append(message.decode()[1])
                message.ack()
            else:
                message.reject(requeue=True)  # not ours: leave it
                break
    return found


@pytest.fixture
def broker():
    _drain()
    yield
    _drain()


def _reset(email: str, *, ip: str = "203.0.113.9") -> object:
    return Client(REMOTE_ADDR=ip).post("/accounts/password_reset/", {"email": email})


def test_a_reset_request_does_the_same_work_for_a_known_and_an_unknown_address_and_mails_from_the_worker(
        make_user, broker):
    make_user("known@example.com")
    seen = []
    for email in ("known@example.com", "unknown@example.com"):
        with CaptureQueriesContext(connection) as queries:
            resp = _reset(email)
        assert resp.status_code == 302 and resp["Location"] == "/accounts/password_reset/done/"
        sql = [q["sql"] for q in queries.captured_queries]
        assert not any("accounts_user" in s for s in sql), sql  # no lookup of the address in the request
        seen.append(sql)
    assert seen[0] == seen[1]
    assert mail.outbox == []  # nothing is sent in the request
    queued = _drain()
    assert [q["email"] for q in queued] == ["known@example.com", "unknown@example.com"]
    for kwargs in queued:
        send_password_reset.apply(kwargs=kwargs).get()  # the real task, as the worker runs it
    assert [m.to for m in mail.outbox] == [["known@example.com"]]
    link = re.search(r"https?://[^/]+(/accounts/reset/\S+)", mail.outbox[0].body).group(1)
    client = Client()
    form = client.get(link, follow=True)
    assert form.status_code == 200 and "new_password1" in form.content.decode()
    done = client.post(form.redirect_chain[-1][0], {"new_password1": "a-fresh-pass-77", "new_password2":
                                                    "a-fresh-pass-77"})
    assert done.status_code == 302
    assert User.objects.get(email="known@example.com").check_password("a-fresh-pass-77")


def test_reset_requests_are_limited_per_caller_with_429_and_a_message(broker, limits):
    limits(password_reset="3/m", password_reset_address="1000/h")
    assert [_reset(f"r{i}@example.com").status_code for i in range(3)] == [302, 302, 302]
    resp = _reset("r4@example.com")
    assert resp.status_code == 429 and int(resp["Retry-After"]) >= 1
    assert "Rate limit" in resp.content.decode()
    assert _reset("r4@example.com", ip="203.0.113.10").status_code == 302
    assert [q["email"] for q in _drain()] == ["r0@example.com", "r1@example.com", "r2@example.com",
                                              "r4@example.com"]


def test_reset_requests_for_one_address_are_limited_from_every_caller_known_or_not(make_user, broker, limits):
    limits(password_reset="1000/m", password_reset_address="2/h")
    make_user("inbox@example.com")
    for email in ("inbox@example.com", "ghost@example.com"):
        statuses = [_reset(email, ip=f"198.51.100.{i}").status_code for i in range(1, 5)]
        assert statuses == [302, 302, 429, 429], (email, statuses)
    assert len(_drain()) == 4  # two per address reach the queue; the flood does not


def test_a_bad_reset_address_is_400_naming_email_and_enqueues_nothing(broker):
    resp = _reset("not-an-address")
    assert resp.status_code == 400 and "valid email" in resp.content.decode()
    assert _drain() == []
