"""Money safety against a live gunicorn (several workers, loopback only): 50 concurrent clients, some sharing
idempotency keys, run paid people searches and contact unlocks. Afterwards no anomaly may exist.

Run with MONEY_CLIENTS=200 for a bigger load; the README's Reliability section quotes this test's printout.
"""
from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
import uuid
from collections import defaultdict

import pytest

from tests.live import db_env, serving
from tests.people.factory import embed_all, make_person

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CLIENTS = int(os.environ.get("MONEY_CLIENTS", "50"))
WORKERS = 3
BE = {"intent_primary": "backend", "country": "india", "title": "Backend Engineer"}


@pytest.fixture
def gunicorn_url(transactional_db):
    env = db_env(RATE_LIMIT_SEARCH="100000/m", RATE_LIMIT_UNLOCK="100000/m", RATE_LIMIT_DEFAULT="100000/m")
    with serving(["-m", "gunicorn", "console.wsgi:application", "-w", str(WORKERS), "-b", "127.0.0.1:{port}",
                  "--timeout", "300", "--log-level", "warning"], env=env, probe="/api/schema/",
                 what="gunicorn") as (url, _):
        yield url


def _post(url: str, body: dict, *, key: str, idem: str | None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if idem:
        headers["Idempotency-Key"] = idem
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_concurrent_paid_requests_leave_no_money_anomaly(gunicorn_url, make_user, api_key_for):
    from credits.ledger import get_balance, ledger_sum
    from credits.models import LedgerEntry
    from people.models import Search, UnlockContact

    for i in range(4):
        make_person(f"Dev{i}", profile={"open_to_work": True, "open_to_contact": True},
                    cards=[BE | {"company_norm": "flipkart", "city": "bangalore", "summary": f"Go services {i}"}])
    embed_all()
    users = [make_user(f"payer{i}@example.com", credits=8) for i in range(5)]
    keys = {u.pk: api_key_for(u) for u in users}
    shared = {g: (users[g % len(users)], f"shared-{g}-{uuid.uuid4()}") for g in range(5)}  # 5 keys, 5 clients each
    outcomes: list[dict] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client(n: int) -> None:
        if n < 25:
            user, idem = shared[n % 5]
        else:
            user, idem = users[n % len(users)], (f"own-{n}" if n % 2 else None)
        start.wait()
        status, body = _post(f"{gunicorn_url}/api/search", {"query": "backend engineers at flipkart in bangalore"},
                             key=keys[user.pk], idem=idem)
        rec = {"n": n, "user": user.pk, "idem": idem, "kind": "search", "status": status, "body": body}
        unlock = None
        if status == 200 and n % 3 == 0:
            data = json.loads(body)
            if data["people"]:
                u_idem = f"unlock-{idem}" if idem else None
                s2, b2 = _post(f"{gunicorn_url}/api/people/{data['people'][0]['id']}/unlock-contact",
                               {"search_id": data["search_id"]}, key=keys[user.pk], idem=u_idem)
                unlock = {"n": n, "user": user.pk, "idem": u_idem, "kind": "unlock", "status": s2, "body": b2}
        with lock:
            outcomes.append(rec)
            if unlock:
                outcomes.append(unlock)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)

    anomalies: list[str] = []
    statuses = defaultdict(int)
    for o in outcomes:
        statuses[(o["kind"], o["status"])] += 1
        if o["status"] >= 500:
            anomalies.append(f"5xx: {o['kind']} {o['body'][:200]!r}")
        if o["status"] not in (200, 402, 409, 403):
            anomalies.append(f"unexpected {o['status']} for {o['kind']}: {o['body'][:200]!r}")
    for u in users:
        balance, total = get_balance(user=u), ledger_sum(user=u)
        if balance != total:
            anomalies.append(f"user {u.pk}: balance {balance} != ledger {total}")
        if balance < 0:
            anomalies.append(f"user {u.pk}: negative balance {balance}")
        searches = set(Search.objects.filter(searcher=u).values_list("pk", flat=True))
        search_charges = list(LedgerEntry.objects.filter(user=u, reason="search").values_list("reference_id",
                                                                                               flat=True))
        if sorted(search_charges) != sorted(str(s) for s in searches):
            anomalies.append(f"user {u.pk}: {len(search_charges)} search charges for {len(searches)} searches")
        unlocks = {str(x) for x in UnlockContact.objects.filter(searcher=u).values_list("pk", flat=True)}
        unlock_charges = list(LedgerEntry.objects.filter(user=u, reason="unlock_contact")
                              .values_list("reference_id", flat=True))
        if sorted(unlock_charges) != sorted(unlocks):
            anomalies.append(f"user {u.pk}: {len(unlock_charges)} unlock charges for {len(unlocks)} unlocks")
    by_key = defaultdict(set)
    for o in outcomes:
        if o["idem"] and o["status"] == 200:
            by_key[(o["kind"], o["user"], o["idem"])].add(o["body"])
    anomalies += [f"replay differs for {k}" for k, bodies in by_key.items() if len(bodies) > 1]
    for g, (_u, idem) in shared.items():
        ok = [o for o in outcomes if o["idem"] == idem and o["kind"] == "search" and o["status"] == 200]
        ids = {json.loads(o["body"])["search_id"] for o in ok}
        if len(ids) > 1:
            anomalies.append(f"shared key {g} produced {len(ids)} searches")

    print(f"\nmoney: {CLIENTS} clients against gunicorn -w {WORKERS}; outcomes "
          f"{dict(sorted(statuses.items()))}; anomalies {len(anomalies)}")
    assert len(outcomes) >= CLIENTS
    # both paths exercised: paid requests that went through, and requests refused for lack of credits
    assert statuses[("search", 200)] > 0 and statuses[("unlock", 200)] > 0
    assert statuses[("search", 402)] + statuses[("unlock", 402)] > 0
    assert anomalies == []
