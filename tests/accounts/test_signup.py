"""Sign-up through POST /api/signup (+ /api/signup/confirm) and the /accounts/signup/ pages: one service, the same
rules, and an answer that never tells whether an address has an account."""
from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import User
from credits.ledger import get_balance, ledger_sum

pytestmark = pytest.mark.django_db

GOOD = "tangerine-orbit-47"


def _signup(body: dict, client: APIClient | None = None):
    return (client or APIClient()).post("/api/signup", body, format="json")


def _err(resp, status: int, code: str, field: str | None = None) -> dict:
    assert resp.status_code == status, resp.content
    body = resp.json()
    assert body["code"] == code and body["detail"], body
    if field:
        assert body.get("field") == field, body
    return body


def _token(email: str) -> str:
    """The token of the last sign-up link emailed to `email`."""
    sent = [m for m in mail.outbox if m.to == [email]]
    assert sent, f"no email to {email}"
    return re.search(r"/accounts/signup/confirm/([A-Za-z0-9_-]+)", sent[-1].body).group(1)


def _signed_up(body: dict, client: APIClient | None = None):
    """Sign up and confirm through the API, as a client would: the 202, then the token from the email."""
    resp = _signup(body, client)
    assert resp.status_code == 202, resp.content
    return (client or APIClient()).post("/api/signup/confirm", {"token": _token(resp.json()["email"]),
                                                                "password": body["password"]}, format="json")


# ---- API ------------------------------------------------------------------------------------------------------------

def test_anonymous_signup_emails_a_link_that_creates_an_account_that_can_log_in():
    resp = _signup({"email": "  New.User@Example.com ", "password": GOOD, "name": "New User"})
    assert resp.status_code == 202, resp.content
    assert resp.json()["status"] == "confirmation_sent" and resp.json()["email"] == "new.user@example.com"
    assert not User.objects.filter(email="new.user@example.com").exists()  # nothing until the owner confirms
    assert GOOD not in mail.outbox[-1].body  # the password is never emailed
    resp = APIClient().post("/api/signup/confirm", {"token": _token("new.user@example.com"), "password": GOOD},
                            format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body == {"id": body["id"], "email": "new.user@example.com", "name": "New User", "balance": 0}
    user = User.objects.get(pk=body["id"])
    assert user.check_password(GOOD) and user.is_active and not user.is_staff and not user.is_superuser
    assert Client().login(username="new.user@example.com", password=GOOD)
    assert "_auth_user_id" not in resp.client.session  # the API does not log a session in


def test_a_link_works_once_and_a_forged_or_expired_one_is_400_invalid_token(settings):
    _signup({"email": "once@example.com", "password": GOOD})
    token = _token("once@example.com")
    assert APIClient().post("/api/signup/confirm", {"token": token, "password": GOOD}, format="json").status_code == 201
    _err(APIClient().post("/api/signup/confirm", {"token": token, "password": GOOD}, format="json"), 400,
         "invalid_token", "token")
    _err(APIClient().post("/api/signup/confirm", {"token": "x" * 43, "password": GOOD}, format="json"), 400,
         "invalid_token")
    settings.SIGNUP_CONFIRM_MAX_AGE_S = -1
    _signup({"email": "late@example.com", "password": GOOD})
    _err(APIClient().post("/api/signup/confirm", {"token": _token("late@example.com"), "password": GOOD},
                          format="json"), 400, "invalid_token")
    assert not User.objects.filter(email="late@example.com").exists()


def test_name_is_optional():
    resp = _signed_up({"email": "quiet@example.com", "password": GOOD})
    assert resp.status_code == 201 and resp.json()["name"] == ""


def test_signup_off_is_403_signup_disabled_and_creates_nothing(settings):
    settings.ALLOW_SIGNUP = False
    _err(_signup({"email": "late@example.com", "password": GOOD}), 403, "signup_disabled")
    assert not User.objects.filter(email="late@example.com").exists()


@pytest.mark.parametrize("password,why", [
    ("short1!", "too short"),
    ("password123", "too common"),
    ("4839201748392", "entirely numeric"),
    ("mallory.longname", "too similar"),
])
def test_weak_passwords_are_400_naming_password(password, why):
    body = _err(_signup({"email": "mallory.longname@example.com", "password": password}), 400, "invalid",
                "password")
    assert why in body["detail"].lower()
    assert not User.objects.exists()


@pytest.mark.parametrize("body,field", [
    ({"email": "not-an-email", "password": GOOD}, "email"),
    ({"email": "", "password": GOOD}, "email"),
    ({"password": GOOD}, "email"),
    ({"email": "a@example.com"}, "password"),
    ({"email": "a@example.com", "password": GOOD, "is_staff": True}, "is_staff"),
    ({"email": ["a@example.com"], "password": GOOD}, "email"),
    ({"email": "a@example.com", "password": GOOD, "name": "n" * 201}, "name"),
])
def test_bad_input_is_400_naming_the_field(body, field):
    _err(_signup(body), 400, "invalid", field)
    assert not User.objects.exists()


def test_a_taken_email_gets_the_same_answer_as_a_free_one_and_its_owner_an_email(make_user):
    owner = make_user("taken@example.com")
    taken = _signup({"email": "TAKEN@Example.COM", "password": GOOD})
    free = _signup({"email": "free@example.com", "password": GOOD})
    assert taken.status_code == free.status_code == 202
    assert {k: v for k, v in taken.json().items() if k != "email"} == {
        k: v for k, v in free.json().items() if k != "email"}
    note = [m for m in mail.outbox if m.to == ["taken@example.com"]][-1]
    assert "already has an account" in note.body and "/accounts/signup/confirm/" not in note.body
    owner.refresh_from_db()
    assert owner.check_password("pw-secret-123")  # nothing about the account changed
    assert User.objects.filter(email__iexact="taken@example.com").count() == 1


def test_two_links_for_one_address_create_one_account_and_the_other_ends():
    _signup({"email": "twice@example.com", "password": GOOD})
    first = _token("twice@example.com")
    _signup({"email": "twice@example.com", "password": GOOD + "-2"})
    second = _token("twice@example.com")
    assert APIClient().post("/api/signup/confirm", {"token": second, "password": GOOD + "-2"},
                            format="json").status_code == 201
    resp = APIClient().post("/api/signup/confirm", {"token": first, "password": GOOD}, format="json")
    assert resp.status_code == 400  # confirming ended every pending sign-up of the address
    assert User.objects.get(email="twice@example.com").check_password(GOOD + "-2")


def test_new_accounts_get_the_free_credits_through_the_ledger(settings):
    settings.SIGNUP_FREE_CREDITS = 25
    resp = _signed_up({"email": "rich@example.com", "password": GOOD})
    assert resp.status_code == 201 and resp.json()["balance"] == 25
    user = User.objects.get(email="rich@example.com")
    assert get_balance(user=user) == 25 == ledger_sum(user=user)
    assert list(user.ledger_entries.values_list("reason", flat=True)) == ["signup"]


def test_no_free_credits_by_default():
    _signed_up({"email": "plain@example.com", "password": GOOD})
    assert not User.objects.get(email="plain@example.com").ledger_entries.exists()


def test_signup_is_rate_limited_per_client(settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "3/m"}
    statuses = [_signup({"email": f"u{i}@example.com", "password": GOOD}).status_code for i in range(3)]
    assert statuses == [202, 202, 202]
    resp = _signup({"email": "u4@example.com", "password": GOOD})
    assert resp.status_code == 429 and resp.json()["code"] == "rate_limited" and int(resp["Retry-After"]) >= 1
    assert not User.objects.filter(email="u4@example.com").exists()


def test_an_api_key_header_is_ignored_not_an_error():
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION="Bearer not-a-key")
    assert _signup({"email": "hdr@example.com", "password": GOOD}, c).status_code == 202


# ---- page -----------------------------------------------------------------------------------------------------------

def _csrf_client() -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/signup/")
    assert page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    return client, token


def test_login_page_links_to_signup():
    assert 'href="/accounts/signup/"' in Client().get("/accounts/login/").content.decode()


def test_page_signs_up_then_the_emailed_link_creates_the_account_and_logs_in():
    client, token = _csrf_client()
    resp = client.post("/accounts/signup/", {"email": "page@example.com", "name": "Page", "password": GOOD,
                                             "password2": GOOD, "csrfmiddlewaretoken": token})
    assert resp.status_code == 200 and "Check <strong>page@example.com</strong>" in resp.content.decode()
    link = f"/accounts/signup/confirm/{_token('page@example.com')}"
    page = client.get(link)
    assert page.status_code == 200 and "page@example.com" in page.content.decode()
    assert not User.objects.filter(email="page@example.com").exists()  # opening the link writes nothing
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    resp = client.post(link, {"csrfmiddlewaretoken": csrf, "password": GOOD})
    assert resp.status_code == 302 and resp["Location"] == "/"
    home = client.get("/")
    assert home.status_code == 200 and "page@example.com" in home.content.decode()


def test_page_without_csrf_token_is_refused():
    client, _ = _csrf_client()
    resp = client.post("/accounts/signup/", {"email": "csrf@example.com", "password": GOOD, "password2": GOOD})
    assert resp.status_code == 403
    assert not User.objects.filter(email="csrf@example.com").exists()


@pytest.mark.parametrize("data,status,shown", [
    ({"email": "x@example.com", "password": GOOD, "password2": GOOD + "x"}, 400, "The two passwords differ."),
    ({"email": "x@example.com", "password": "password123", "password2": "password123"}, 400, "too common"),
    ({"email": "dup@example.com", "password": GOOD, "password2": GOOD}, 200, "Check <strong>dup@example.com"),
])
def test_page_shows_the_error_with_its_status(make_user, data, status, shown):
    make_user("dup@example.com")
    client, token = _csrf_client()
    resp = client.post("/accounts/signup/", {**data, "csrfmiddlewaretoken": token})
    assert resp.status_code == status
    assert shown in resp.content.decode()
    assert "_auth_user_id" not in client.session


def test_page_when_signup_is_off(settings):
    settings.ALLOW_SIGNUP = False
    client = Client()
    assert client.get("/accounts/signup/").status_code == 403
    resp = client.post("/accounts/signup/", {"email": "off@example.com", "password": GOOD, "password2": GOOD})
    assert resp.status_code == 403 and "disabled" in resp.content.decode()
    assert not User.objects.filter(email="off@example.com").exists()


def test_page_and_api_share_one_rate_limit(settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "2/m"}
    assert _signup({"email": "a1@example.com", "password": GOOD}).status_code == 202
    assert _signup({"email": "a2@example.com", "password": GOOD}).status_code == 202
    client = Client()
    resp = client.post("/accounts/signup/", {"email": "a3@example.com", "password": GOOD, "password2": GOOD})
    assert resp.status_code == 429
    assert not User.objects.filter(email="a3@example.com").exists()


def test_a_request_without_a_client_address_is_limited_in_one_shared_bucket_not_a_503(settings):
    """Found by the fuzzer: WSGI does not require REMOTE_ADDR, and the rate-limit key then failed as 'redis down'."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "1/m"}
    first = APIClient(REMOTE_ADDR="").post("/api/signup", {"email": "n1@example.com", "password": GOOD}, format="json")
    assert first.status_code == 202, first.content
    second = APIClient(REMOTE_ADDR="").post("/api/signup", {"email": "n2@example.com", "password": GOOD},
                                            format="json")
    assert second.status_code == 429


def test_confirming_needs_the_password_chosen_at_that_sign_up():
    _signup({"email": "proof@example.com", "password": GOOD})
    token = _token("proof@example.com")
    _err(APIClient().post("/api/signup/confirm", {"token": token}, format="json"), 400, "invalid", "password")
    _err(APIClient().post("/api/signup/confirm", {"token": token, "password": GOOD + "x"}, format="json"), 400,
         "wrong_password", "password")
    assert not User.objects.filter(email="proof@example.com").exists()
    resp = APIClient().post("/api/signup/confirm", {"token": token, "password": GOOD}, format="json")
    assert resp.status_code == 201 and User.objects.get(email="proof@example.com").check_password(GOOD)


def test_page_with_the_wrong_password_shows_the_form_again_and_logs_no_one_in():
    _signup({"email": "pagewrong@example.com", "password": GOOD})
    link = f"/accounts/signup/confirm/{_token('pagewrong@example.com')}"
    client = Client()
    resp = client.post(link, {"password": "not-the-one-42"})
    assert resp.status_code == 400 and 'id="confirm-error"' in resp.content.decode()
    assert 'name="password"' in resp.content.decode() and "_auth_user_id" not in client.session
    assert client.post(link, {"password": GOOD}).status_code == 302 and "_auth_user_id" in client.session
