"""Dependency faults: each ends in a clear 503 naming the dependency, or the documented fallback; nothing is
charged for a failed request and no half-written Search / QuerySession rows are left behind.

Why the faults are injected through settings (a closed port, a missing model path) rather than by stopping
the session's services: the same code path runs as in production when the dependency is unreachable, and
the embedded Postgres/Redis that every other test in the session shares is never touched.

Documented behaviour (README "Reliability"):
- Qdrant unreachable: context query, rules search and the context page answer 503 {dependency: "qdrant"};
  a rules answer stream ends in an `error` event with the same code. No QuerySession row.
- LLM 500 / timeout / malformed / garbage: people search falls back to the deterministic parser (and is
  charged as a normal search); a rules answer falls back to the extractive answer before its first token.
- Embedding model missing (a bad path or a hub id): 503 {dependency: "embeddings"} naming EMBEDDING_MODEL,
  no charge, no Search or QuerySession row.
- Redis (the rate-limit cache) down: 503 {dependency: "redis"} on rate-limited endpoints (API and pages)
  rather than serving paid endpoints without their abuse limit; healthz reports redis down.
"""
from __future__ import annotations

import json
import socket

import pytest
from django.test import Client, override_settings

from tests.fake_llm import fake_llm  # noqa: F401 - fixture

RULEBOOK = ("# Conditions\n\n## Grappled\n\nA grappled creature's speed becomes 0, and it can't benefit from any "
            "bonus to its speed.\nThe condition ends if the grappler is incapacitated.\n\n## Prone\n\n"
            "A prone creature's only movement option is to crawl, unless it stands up.\n")


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sse_events(resp) -> list[tuple[str, dict]]:
    raw = b"".join(resp.streaming_content).decode()
    out = []
    for frame in raw.strip().split("\n\n"):
        event = frame.split("\n", 1)[0].removeprefix("event: ")
        data = json.loads(frame.split("\ndata: ", 1)[1])
        out.append((event, data))
    return out


@pytest.fixture
def world(make_user, make_project, client_for, tmp_path):
    """A member with credits, a tiny code dataset and a tiny rulebook, indexed in the session's store."""
    from search.engine.applier import apply_outbox
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    user = make_user("faults@example.com", credits=5)
    project = make_project("faults", user)
    code = tmp_path / "code"
    code.mkdir()
    (code / "ledger.py").write_text('def deduct_credits(wallet, amount):\n    """Take credits."""\n'
                                    "    wallet.balance -= amount\n    return wallet.balance\n")
    ds = Dataset.objects.create(project=project, name="code", kind="code")
    start_ingest(job=IngestJob(dataset=ds, source=str(code), kind="code"), sync=True)
    book = tmp_path / "book"
    book.mkdir()
    (book / "rules.md").write_text(RULEBOOK)
    rules = Dataset.objects.create(project=project, name="rules", kind="rules")
    start_ingest(job=IngestJob(dataset=rules, source=str(book), kind="rules",
                               options={"ruleset_id": "r", "book_id": "core"}),
                 sync=True)
    apply_outbox()
    page = Client()
    page.force_login(user)
    return {"user": user, "project": project, "api": client_for(user), "page": page}


@pytest.fixture
def people(db):
    from tests.people.factory import embed_all, make_person

    be = {"intent_primary": "backend", "country": "india", "title": "Backend Engineer", "city": "bangalore"}
    make_person("Asha", profile={"open_to_work": True}, cards=[be | {"company_norm": "flipkart",
                                                                    "summary": "Java and Kafka services"}])
    make_person("Ravi", profile={"open_to_work": True}, cards=[be | {"company_norm": "swiggy",
                                                                    "summary": "Go microservices"}])
    embed_all()


def _no_logs_written():
    from search.models import QuerySession, RerankResult

    assert QuerySession.objects.count() == 0
    assert RerankResult.objects.count() == 0


# --------------------------------------------------------------------------- Qdrant
@pytest.fixture
def qdrant_down():
    """The process index re-opened against a Qdrant server URL on a closed port (the ClientIndex adapter)."""
    from search.engine.index import close_index

    close_index()
    with override_settings(QDRANT_URL=f"http://127.0.0.1:{closed_port()}", QDRANT_TIMEOUT_S=1.0):
        yield
        close_index()
    close_index()


def test_qdrant_unreachable_context_query_is_503_naming_qdrant_and_logs_nothing(world, qdrant_down):
    resp = world["api"].post("/api/projects/faults/query", {"q": "deduct credits"}, format="json")
    assert resp.status_code == 503
    body = resp.json()
    assert body["code"] == "dependency_unavailable" and body["dependency"] == "qdrant"
    assert "qdrant" in body["detail"]
    _no_logs_written()


def test_qdrant_unreachable_rules_search_page_and_answer_stream(world, qdrant_down):
    resp = world["api"].post("/api/projects/faults/rules/search", {"q": "grappled speed"}, format="json")
    assert resp.status_code == 503 and resp.json()["dependency"] == "qdrant"
    page = world["page"].get("/search/", {"project": "faults", "q": "deduct credits"})
    assert page.status_code == 503 and "qdrant" in page.content.decode()
    # the answer's search runs before its stream opens: a plain 503 JSON error, not an SSE `error`
    resp = world["api"].post("/api/projects/faults/answer", {"q": "grappled speed"}, format="json")
    assert resp.status_code == 503 and resp.json()["dependency"] == "qdrant"
    _no_logs_written()


def test_qdrant_back_up_serves_again(world, qdrant_down):
    """After the outage the process re-opens the real index: the fault does not poison the singleton."""
    from search.engine.index import close_index

    assert world["api"].post("/api/projects/faults/query", {"q": "deduct"}, format="json").status_code == 503
    close_index()
    with override_settings(QDRANT_URL=""):
        resp = world["api"].post("/api/projects/faults/query", {"q": "deduct credits"}, format="json")
        assert resp.status_code == 200
        assert resp.json()["results"][0]["path"] == "ledger.py"
        close_index()


# --------------------------------------------------------------------------- LLM
@pytest.mark.parametrize("mode", ["error", "timeout", "malformed", "garbage"])
def test_llm_failure_people_search_falls_back_to_deterministic_parser(people, make_user, client_for, fake_llm,
                                                                      mode):
    from credits.ledger import get_balance
    from people.models import Search

    user = make_user(credits=3)
    fake_llm.mode = mode
    resp = client_for(user).post("/api/search", {"query": "backend engineers in bangalore"}, format="json")
    assert resp.status_code == 200, resp.content
    assert fake_llm.requests, "the LLM was tried first"
    assert {p["name"] for p in resp.json()["people"]} >= {"Asha", "Ravi"}
    search = Search.objects.get()
    assert search.parsed_constraints["parser"] == "deterministic"
    assert search.parsed_constraints["parser_fallback_reason"]
    assert get_balance(user=user) == 2  # a served search is charged once, fallback or not


@pytest.mark.parametrize("mode", ["error", "timeout", "garbage"])
def test_llm_failure_rules_answer_falls_back_to_extractive(world, fake_llm, mode):
    fake_llm.mode = mode
    resp = world["api"].post("/api/projects/faults/answer", {"q": "what happens to speed when grappled"},
                             format="json")
    assert resp.status_code == 200
    events = dict(sse_events(resp))
    assert events["generation"]["mode"] == "extractive"
    assert events["generation"]["fallback_reason"]
    assert events["complete"]["mode"] == "extractive"
    assert "speed becomes 0" in events["complete"]["answer"]
    assert events["complete"]["citations"]


def test_llm_malformed_stream_text_is_still_a_cited_answer(world, fake_llm):
    """A stream is free text, not JSON: a reply without citation markers still lists what it was given."""
    fake_llm.mode = "malformed"
    events = dict(sse_events(world["api"].post("/api/projects/faults/answer", {"q": "grappled"}, format="json")))
    assert events["complete"]["mode"] == "llm"
    assert events["complete"]["citations"]


# --------------------------------------------------------------------------- embeddings
@pytest.fixture(params=["missing-path", "hub-id", "unknown-precision"])
def bad_model(request, tmp_path, settings):
    """Each case names the setting the 503's detail must point the operator at."""
    if request.param == "unknown-precision":
        settings.EMBEDDING_PRECISION = "fp8"
        return "EMBEDDING_PRECISION"
    settings.EMBEDDING_MODEL = (str(tmp_path / "no-such-model") if request.param == "missing-path"
                                else "sentence-transformers/all-mpnet-base-v2")
    return "EMBEDDING_MODEL"


def _assert_embeddings_503(resp, setting: str = "EMBEDDING_MODEL"):
    assert resp.status_code == 503, resp.content
    body = resp.json()
    assert body["code"] == "dependency_unavailable" and body["dependency"] == "embeddings"
    assert setting in body["detail"]


def test_missing_embedding_model_people_search_is_503_and_free(people, make_user, client_for, bad_model):
    from credits.ledger import get_balance, ledger_sum
    from people.models import Search

    user = make_user(credits=3)
    _assert_embeddings_503(client_for(user).post("/api/search", {"query": "backend engineers"}, format="json"),
                           bad_model)
    assert get_balance(user=user) == 3 and ledger_sum(user=user) == 3
    assert Search.objects.count() == 0


def test_missing_embedding_model_context_query_is_503_and_logs_nothing(world, bad_model):
    _assert_embeddings_503(world["api"].post("/api/projects/faults/query", {"q": "deduct credits"}, format="json"),
                           bad_model)
    _no_logs_written()


def test_missing_embedding_model_before_the_index_is_opened_is_503(world, bad_model):
    """A fresh process opens the index with the model's id and dimension: that must be a 503 too, not a 500."""
    from search.engine.index import close_index

    close_index()
    try:
        _assert_embeddings_503(world["api"].post("/api/projects/faults/query", {"q": "deduct"}, format="json"),
                               bad_model)
        _assert_embeddings_503(world["api"].post("/api/projects/faults/answer", {"q": "grappled"}, format="json"),
                               bad_model)
        _no_logs_written()
    finally:
        close_index()


# --------------------------------------------------------------------------- Redis
@pytest.fixture
def redis_down():
    url = f"redis://127.0.0.1:{closed_port()}/0"
    caches = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
                          "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}
    with override_settings(CACHES=caches, REDIS_URL=url):
        yield url


def test_redis_down_rate_limited_api_is_503_naming_redis_and_free(people, make_user, client_for, redis_down):
    from credits.ledger import get_balance
    from people.models import Search

    user = make_user(credits=3)
    api = client_for(user)
    resp = api.post("/api/search", {"query": "backend engineers"}, format="json")
    assert resp.status_code == 503
    assert resp.json()["dependency"] == "redis"
    assert get_balance(user=user) == 3 and Search.objects.count() == 0


def test_redis_down_context_query_and_pages_are_503_naming_redis(world, redis_down):
    resp = world["api"].post("/api/projects/faults/query", {"q": "deduct credits"}, format="json")
    assert resp.status_code == 503 and resp.json()["dependency"] == "redis"
    _no_logs_written()
    page = world["page"].post("/people/", {"query": "backend engineers", "idempotency_key": "k-1"})
    assert page.status_code == 503
    assert "redis" in page.content.decode().lower()
    from credits.ledger import get_balance

    assert get_balance(user=world["user"]) == 5


def test_redis_down_healthz_names_redis(db, redis_down):
    resp = Client().get("/healthz")
    assert resp.status_code == 503
    assert "redis" in resp.json()["down"]


def test_redis_stopped_mid_run_turns_the_next_request_into_a_free_503(people, make_user, client_for, tmp_path):
    """A real redis-server (a second embedded one, so the session's shared Redis is untouched) serves the rate
    limiter for one paid search, is stopped with SIGTERM, and the next search is a 503 naming redis, uncharged."""
    from config import embedded
    from credits.ledger import get_balance
    from people.models import Search

    url = embedded.redis_url(var_dir=tmp_path)
    caches = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
                          "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}
    user = make_user(credits=3)
    api = client_for(user)
    try:
        with override_settings(CACHES=caches, REDIS_URL=url):
            from django.core.cache import caches as live

            live["default"].clear()
            assert api.post("/api/search", {"query": "backend engineers"}, format="json").status_code == 200
            assert get_balance(user=user) == 2 and Search.objects.count() == 1
            assert embedded.stop_redis(var_dir=tmp_path)
            resp = api.post("/api/search", {"query": "backend engineers in pune"}, format="json")
            assert resp.status_code == 503 and resp.json()["dependency"] == "redis"
            assert get_balance(user=user) == 2 and Search.objects.count() == 1
    finally:
        embedded.stop_redis(var_dir=tmp_path)
