"""The small world the API fuzzers run in (tests/hardening/test_fuzz.py and bench/fuzz_api.py).

Why a world at all: with random path parameters almost every request is a 404 and the fuzzer never
reaches the code behind it. So the caller owns a project with a small ingested code dataset, is a
member of the demo rules project (the global Emberfall rulebook), has credits, a past people search,
an ingest job, a query session and a second API key; and `use_world` swaps the generated
ids for these real ones about half the time. Everything is built through the same service functions
the product uses.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core import signals
from django.db import close_old_connections, transaction

PROJECT = "fuzz"
CREDITS = 1_000_000


@dataclass
class World:
    secret: str
    user_id: int
    ids: dict[str, list[Any]] = field(default_factory=dict)


CURRENT: dict[str, World] = {}


def build_world(tmp: Path) -> World:
    from accounts.apikeys import issue_api_key
    from accounts.models import User
    from credits.ledger import grant
    from people.service.searches import SearchRequest, run_search
    from projects.models import Membership, Project
    from search.engine.applier import apply_outbox
    from search.engine.pipeline import QuerySpec, run_query
    from search.ingest.sharing import create_dataset, grant_share
    from search.rules.demo import load_demo_rules
    from tests.people.factory import embed_all, make_person
    from tests.search.ctx_fixtures import ingest, write_repo

    user = User.objects.create_user(email="fuzzer@example.com", password="pw-secret-123")
    grant(user=user, amount=CREDITS, reason="fuzz")
    project, _ = Project.objects.get_or_create(slug=PROJECT, defaults={"name": "Fuzz"})
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": "owner"})
    repo_dir = write_repo(tmp / "shop")
    shop, job = ingest(project, "shop", repo_dir, repo="shop")
    rules = load_demo_rules()
    Membership.objects.get_or_create(project=Project.objects.get(slug=rules["project"]), user=user,
                                     defaults={"role": "viewer"})
    apply_outbox()
    be = {"intent_primary": "backend", "country": "india", "title": "Backend Engineer"}
    people = [
        make_person("Asha", profile={"open_to_work": True, "open_to_contact": True, "current_city": "bangalore",
                                     "contact_email": "asha@private.in"},
                    cards=[be | {"company_norm": "flipkart", "city": "bangalore", "start_date": "2021-01-01",
                                 "summary": "Java and Kafka services", "search_phrases": ["backend engineer"],
                                 "children": [{"title": "Impact", "summary": "Cut latency 40%"}]}]),
        make_person("Ravi", profile={"open_to_work": True},
                    cards=[be | {"company_norm": "swiggy", "city": "pune", "summary": "Go microservices"}]),
    ]
    embed_all()
    with transaction.atomic():
        search = run_search(user=user, asked=SearchRequest(query="backend engineers in bangalore"))
    session = run_query(user=user, project=project, spec=QuerySpec(q="deduct credits from a wallet"))
    source = Project.objects.create(slug=f"{PROJECT}-source", name="Fuzz source")
    Membership.objects.create(project=source, user=user, role="owner")
    shared = create_dataset(user=user, project=source, name="notes", kind="web")
    share = grant_share(user=user, dataset_id=shared.pk, to_project=project)
    other_key = issue_api_key(user=user, name="spare").api_key
    # a teammate (so member ids reach change-role and remove) and an account that is in no project (so adds succeed)
    teammate = User.objects.create_user(email="fuzz-teammate@example.com", password="pw-secret-123")
    mate = Membership.objects.create(project=project, user=teammate, role="editor")
    newcomer = User.objects.create_user(email="fuzz-newcomer@example.com", password="pw-secret-123")
    secret = issue_api_key(user=user, name="fuzz").secret
    world = World(secret=secret, user_id=user.pk, ids={
        "slug": [PROJECT, rules["project"], source.slug],
        "person_id": [str(p.pk) for p in people],
        "search_id": [str(search["search_id"])],
        "job_id": [str(job.pk)],
        "session_id": [str(session.session_id)],
        "key_id": [other_key.pk],
        "share_id": [share.pk],
        "member_id": [mate.pk, Membership.objects.get(project=project, user=user).pk],
        "email": [newcomer.email, teammate.email],
        "dataset_id": [shared.pk, shop.pk],  # another project's (shared in) and the fuzz project's own
        "external_id": ["billing/ledger.py", "web/routes.js"],
        "chunk_id": [r["chunk_id"] for r in session.results[:3]],
        "source": [str(repo_dir), str(repo_dir / "billing")],  # the only ingest roots the fuzz run allows
    })
    CURRENT["world"] = world
    return world


def real_ids(values: Any, rnd: random.Random) -> Any:
    """Replace each generated value whose name the world has ids for (slug, person_id, search_id, ...)."""
    world = CURRENT.get("world")
    if world is None or not isinstance(values, dict):
        return values
    out = dict(values)
    for name in out:
        pool = world.ids.get(name)
        if pool:
            out[name] = rnd.choice(pool)
    return out


def use_world(case: Any, rnd: random.Random, *, secret: str) -> None:
    """Authenticate the case and, for about half of a positive case's path, query and body, swap in real ids.

    The key replaces whatever the fuzzer generated for the Authorization header and is marked as explicit
    auth (what schemathesis's own auth helpers do), so `ignored_auth` probes the operation without it and
    negative examples are not counted for a header the server never saw. Negative examples keep their
    generated values: their invalid part must reach the server."""
    case.headers["Authorization"] = f"Bearer {secret}"
    case._has_explicit_auth = True
    draws = [rnd.random() < 0.5 for _ in range(3)]  # always drawn, so the examples replay the same
    meta = case.meta
    if meta is not None and meta.generation.mode.is_negative:
        return
    for attr, swap in zip(("path_parameters", "query", "body"), draws, strict=True):
        value = getattr(case, attr)
        if swap and isinstance(value, dict):
            setattr(case, attr, real_ids(value, rnd))


class InProcessRequests:
    """One fuzzed request, in-process and undone afterwards.

    Inside a transaction the WSGI app must not close the shared connection after each request (Django's
    request_started/finished hooks do; the test client disconnects them the same way), and each request
    runs in a savepoint that is rolled back, so one example (a revoked key, a new dataset) never changes
    the world the next one sees. on_commit work (ingest jobs) therefore never starts."""

    def __enter__(self) -> InProcessRequests:
        signals.request_started.disconnect(close_old_connections)
        signals.request_finished.disconnect(close_old_connections)
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        transaction.set_rollback(True)
        self._atomic.__exit__(None, None, None)
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
