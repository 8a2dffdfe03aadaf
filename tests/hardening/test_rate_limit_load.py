"""Rate limit under load: 50 concurrent attempts against a 10/minute limit admit exactly 10.

tests/people/edge/test_api.py::test_rate_limit checks the limit one request at a time; this is the same
limit (people search, settings.RATE_LIMITS["search"], 10/m by default) hit by 50 real threads at once,
each with its own API client and its own API key of the same user, released together by a barrier,
against the real Redis counter and Postgres. Exactly 10 get a 200 and are charged; the other 40 get a
429 JSON error with Retry-After and cost nothing (no Search row, no ledger entry).

Why one window: django-ratelimit counts in fixed windows (per user, with a per-key offset), so a burst that
straddles a window's edge is legitimately counted in two. The suite's limiter clock stands still during a test
(tests/conftest.py), so the whole burst is counted in the one window it tests.
"""
from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from credits.ledger import get_balance, ledger_sum
from credits.models import LedgerEntry
from people.models import Search
from tests.people.factory import embed_all, make_person

ATTEMPTS = 50
LIMIT = 10
CREDITS = 100


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_searches_against_ten_per_minute_admit_exactly_ten_and_charge_only_them(
        make_user, api_key_for, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "search": f"{LIMIT}/m"}
    make_person("Asha", profile={"open_to_work": True},
                cards=[{"intent_primary": "backend", "country": "india", "title": "Backend Engineer",
                        "company_norm": "flipkart", "city": "bangalore", "summary": "Java and Kafka services"}])
    embed_all()
    user = make_user(credits=CREDITS)
    clients = []
    for _ in range(ATTEMPTS):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_for(user)}")
        clients.append(client)
    from inference.encoders import get_dense_model

    get_dense_model()  # load once, so the admitted requests race on the limit and not on the model load
    barrier = threading.Barrier(ATTEMPTS)
    results: list[tuple[int, dict, str | None]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def attempt(i: int, client: APIClient) -> None:
        try:
            barrier.wait(60)
            r = client.post("/api/search", {"query": f"backend engineer number {i}"}, format="json")
            with lock:
                results.append((r.status_code, r.json(), r.headers.get("Retry-After")))
        except BaseException as exc:  # noqa: BLE001 - reported below, with the thread's own traceback
            with lock:
                errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(i, c)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(results) == ATTEMPTS

    statuses = sorted(s for s, _, _ in results)
    assert statuses.count(200) == LIMIT and statuses.count(429) == ATTEMPTS - LIMIT, statuses
    for status, body, retry_after in results:
        if status == 429:
            assert body["code"] == "rate_limited" and body["detail"]
            assert retry_after is not None and 1 <= int(retry_after) <= 60
            assert body["retry_after"] == int(retry_after)
        else:
            assert body["search_id"] and isinstance(body["people"], list)

    # Only the admitted ten were charged; the refused forty left no trace.
    admitted = {body["search_id"] for status, body, _ in results if status == 200}
    assert set(map(str, Search.objects.filter(searcher=user).values_list("pk", flat=True))) == admitted
    charges = LedgerEntry.objects.filter(user=user, reason="search")
    assert charges.count() == LIMIT
    assert set(charges.values_list("reference_id", flat=True)) == admitted
    assert get_balance(user=user) == CREDITS - LIMIT == ledger_sum(user=user)
