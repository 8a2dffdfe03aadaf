import threading

import pytest
from django.db import connection

from config.errors import InsufficientCredits
from credits import ledger


@pytest.mark.django_db
def test_ledger_sums_to_balance(make_user):
    u = make_user(credits=5)
    ledger.deduct(user=u, amount=2, reason="search")
    ledger.grant(user=u, amount=3, reason="grant")
    assert ledger.get_balance(user=u) == 6
    assert ledger.ledger_sum(user=u) == 6


@pytest.mark.django_db
def test_deduct_without_funds_raises_and_charges_nothing(make_user):
    u = make_user(credits=1)
    with pytest.raises(InsufficientCredits):
        ledger.deduct(user=u, amount=2, reason="search")
    assert ledger.get_balance(user=u) == 1
    assert u.ledger_entries.count() == 1


@pytest.mark.django_db(transaction=True)
def test_twenty_threads_never_overdraw_nor_lose_a_charge(make_user):
    u = make_user(credits=15)
    ok, refused = [], []

    def worker():
        try:
            ledger.deduct(user=u, amount=1, reason="search")
            ok.append(1)
        except InsufficientCredits:
            refused.append(1)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 15 and len(refused) == 5
    assert ledger.get_balance(user=u) == 0
    assert ledger.ledger_sum(user=u) == 0


@pytest.mark.django_db(transaction=True)
def test_twenty_threads_mixed_amounts_keep_ledger_equal_to_balance(make_user):
    u = make_user(credits=30)
    barrier = threading.Barrier(20)
    charged = []

    def worker(i):
        try:
            barrier.wait()
            ledger.deduct(user=u, amount=1 + i % 3, reason="search")
            charged.append(1 + i % 3)
        except InsufficientCredits:
            pass
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    balance = ledger.get_balance(user=u)
    assert balance >= 0
    assert balance == 30 - sum(charged) == ledger.ledger_sum(user=u)
    assert u.ledger_entries.filter(delta__lt=0).count() == len(charged)
    # each debit's balance_after is unique: no two charges saw the same balance
    afters = list(u.ledger_entries.filter(delta__lt=0).values_list("balance_after", flat=True))
    assert len(afters) == len(set(afters))


@pytest.mark.django_db
def test_non_positive_amounts_are_bad_input(make_user):
    from config.errors import BadInput

    u = make_user(credits=1)
    for amount in (0, -5):
        with pytest.raises(BadInput):
            ledger.deduct(user=u, amount=amount, reason="x")
        with pytest.raises(BadInput):
            ledger.grant(user=u, amount=amount)
    assert ledger.get_balance(user=u) == 1 == ledger.ledger_sum(user=u)


@pytest.mark.django_db
def test_credits_endpoint(make_user, client_for):
    u = make_user(credits=5)
    ledger.deduct(user=u, amount=2, reason="search", reference_type="query", reference_id="q1")
    c = client_for(u)
    body = c.get("/api/credits").json()
    assert body["balance"] == 3
    assert [e["delta"] for e in body["entries"]] == [-2, 5]
    assert body["entries"][0]["reference_id"] == "q1"
    assert len(c.get("/api/credits?limit=1").json()["entries"]) == 1
    for bad in ("0", "abc", "1000"):
        r = c.get(f"/api/credits?limit={bad}")
        assert r.status_code == 400 and r.json()["field"] == "limit"


@pytest.mark.django_db
def test_balance_never_negative_at_the_database(make_user):
    from django.db import IntegrityError, transaction

    from credits.models import CreditAccount

    u = make_user(credits=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        CreditAccount.objects.filter(user=u).update(balance=-1)
