"""The login and password-reset pages around their limits: what a person sees, and what the worker's task mails.

The attacks themselves (guessing, flooding, telling accounts apart) are in tests/hardening/test_account_attacks.py.
"""
from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client, RequestFactory

from accounts.login_limits import check_login_allowed, record_login_failure
from accounts.tasks import send_password_reset
from config.errors import RateLimited

pytestmark = pytest.mark.django_db

RIGHT = "pw-secret-123"  # make_user's password


def test_login_page_links_to_password_reset_and_the_reset_page_asks_for_an_address():
    login = Client().get("/accounts/login/").content.decode()
    assert 'href="/accounts/password_reset/"' in login
    page = Client().get("/accounts/password_reset/")
    assert page.status_code == 200 and 'name="email"' in page.content.decode()


def test_a_wrong_password_says_so_and_the_right_one_logs_in(make_user):
    make_user("plain@example.com")
    client = Client()
    resp = client.post("/accounts/login/", {"username": "plain@example.com", "password": "nope"})
    assert resp.status_code == 200 and "did not match" in resp.content.decode()
    resp = client.post("/accounts/login/", {"username": "plain@example.com", "password": RIGHT})
    assert resp.status_code == 302 and "_auth_user_id" in client.session


def test_failures_are_counted_under_the_address_in_any_letter_case(settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login_account": "2/15m", "login_ip": "1000/15m"}
    request = RequestFactory().post("/accounts/login/", REMOTE_ADDR="192.0.2.1")
    check_login_allowed(request=request, username="Case@Example.com")
    record_login_failure(request=request, username="Case@Example.com")
    record_login_failure(request=request, username=" case@example.COM ")
    with pytest.raises(RateLimited) as exc:
        check_login_allowed(request=request, username="case@example.com")
    assert exc.value.status_code == 429 and int(exc.value.headers["Retry-After"]) >= 1
    check_login_allowed(request=request, username="other@example.com")  # another account's bucket is empty


def test_the_reset_task_mails_only_active_accounts_with_a_usable_password(make_user):
    make_user("active@example.com")
    gone = make_user("gone@example.com")
    gone.is_active = False
    gone.save()
    nopass = make_user("nopass@example.com")
    nopass.set_unusable_password()
    nopass.save()
    counts = {email: send_password_reset.apply(kwargs={"email": email, "link_base": "https://search.example"}).get()
              for email in ("active@example.com", "gone@example.com", "nopass@example.com", "nobody@example.com")}
    assert counts == {"active@example.com": 1, "gone@example.com": 0, "nopass@example.com": 0,
                      "nobody@example.com": 0}
    assert [m.to for m in mail.outbox] == [["active@example.com"]]
    assert re.search(r"https://search\.example/accounts/reset/[^/\s]+/[^/\s]+/", mail.outbox[0].body)
    assert RIGHT not in mail.outbox[0].body
