import threading

import pytest
from django.db import connection

from config.errors import InsufficientCredits
from credits import ledger


def test_ledger_sums_to_balance(make_user):
    u = make_user(credits=5)
    ledger.deduct(user=u, amount=2, reason="search")
    ledger.grant(user=u, amount=3, reason="grant")
    assert ledger.get_balance(user=u) == 6
    assert ledger.ledger_sum(user=u) == 6


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
