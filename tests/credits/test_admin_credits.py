"""Staff see every user's balance and grant credits from credits' own admin (users' credits), not from the
accounts' user admin, which knows nothing of credits."""
from django.test import Client

from credits.ledger import get_balance
from credits.models import LedgerEntry


def _staff(make_user) -> Client:
    client = Client()
    client.force_login(make_user(staff=True))
    return client


def test_users_credits_list_shows_each_balance_including_a_user_with_no_ledger_row(make_user):
    rich, fresh = make_user("rich@example.com", credits=42), make_user("fresh@example.com")
    body = _staff(make_user).get("/admin/credits/usercredits/").content.decode()
    assert "rich@example.com" in body and "fresh@example.com" in body
    assert '<td class="field-credit_balance">42</td>' in body
    assert '<td class="field-credit_balance">0</td>' in body
    assert get_balance(user=rich) == 42 and get_balance(user=fresh) == 0


def test_the_grant_action_asks_for_the_amount_then_writes_one_ledger_row_per_user(make_user):
    one, two = make_user("one@example.com"), make_user("two@example.com", credits=3)
    client = _staff(make_user)
    url = "/admin/credits/usercredits/"
    picked = {"action": "grant_credits", "_selected_action": [one.pk, two.pk]}
    ask = client.post(url, picked)
    assert ask.status_code == 200 and "Grant credits to 2 user(s)" in ask.content.decode()
    done = client.post(url, {**picked, "apply": "1", "amount": "7", "reason": "support"})
    assert done.status_code == 302
    assert (get_balance(user=one), get_balance(user=two)) == (7, 10)
    rows = LedgerEntry.objects.filter(reason="support", reference_type="admin")
    assert sorted(rows.values_list("user_id", "delta")) == sorted([(one.pk, 7), (two.pk, 7)])


def test_the_accounts_user_admin_shows_no_credits(make_user):
    user = make_user("plain@example.com", credits=9)
    body = _staff(make_user).get(f"/admin/accounts/user/{user.pk}/change/").content.decode()
    assert "plain@example.com" in body and "credit_balance" not in body and "grant_credits" not in body
