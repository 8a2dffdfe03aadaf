"""why_matched: deterministic bullets, sanitising, and the batched LLM refinement (real openai client against
tests/fake_llm.py; a real Celery worker for the after-commit task)."""
import json
import time

import pytest

from people.models import SearchResult
from people.parsing.normalize import validate_and_normalize
from people.retrieval.ranking import RankedPerson
from people.service.why import deterministic_bullets, refine_with_llm, sanitize
from tests.fake_llm import fake_llm  # noqa: F401 - fixture
from tests.people.factory import embed_all, make_person


def test_sanitize_bounds_dedupes_and_strips(settings):
    lines = ["- Worked at Flipkart", "worked at flipkart", "  ", 42, "1. Kafka   pipelines\n on payments",
             "x" * 500, "fourth"]
    out = sanitize(lines)
    assert out[:2] == ["Worked at Flipkart", "Kafka pipelines on payments"]
    assert len(out) == 3 and len(out[2]) == 160 and out[2].endswith("…")
    assert sanitize("one line") == ["one line"] and sanitize({"a": 1}) == [] and sanitize(None) == []
    settings.PEOPLE_SEARCH = {"WHY_MAX_LINES_LLM": 1}
    assert sanitize(["a", "b"]) == ["a"]


def test_deterministic_bullets_use_evidence_and_constraints():
    class Prof:
        open_to_work, current_city, work_preferred_salary_min = True, "bangalore", 3_000_000

    parsed = validate_and_normalize({"must": {"company_norm": ["flipkart"], "city": "bangalore",
                                              "open_to_work_only": True, "offer_salary_inr_per_year": 4_000_000},
                                     "confidence_score": 0.9}, query="q")
    from datetime import date

    card = {"id": "c1", "title": "Backend Engineer", "company_norm": "flipkart", "city": "bangalore",
            "start_date": date(2021, 1, 1), "end_date": None, "is_current": True}
    r = RankedPerson(person_id="p", score=0.9, parents=[card], should_hits=["kafka"], lexical=0.1)
    bullets = deterministic_bullets(ranked=r, parsed=parsed, profile=Prof())
    # up to 6 deterministic bullets (WHY_MAX_BULLETS; the LLM's refinement is the one capped at 3)
    assert bullets == ["Backend Engineer at Flipkart (2021–present)", "Worked at Flipkart", "Experience in Bangalore",
                       "Mentions kafka", "Open to work", "Expects 30 LPA, within budget"]  # the 7th (lexical) is cut
    import django.test

    with django.test.override_settings(PEOPLE_SEARCH={"WHY_MAX_BULLETS": 2}):
        assert len(deterministic_bullets(ranked=r, parsed=parsed, profile=Prof())) == 2


@pytest.fixture
def searched(db, user, api):
    make_person("Asha", profile={"open_to_work": True},
                cards=[{"title": "Backend Engineer", "company_norm": "flipkart", "city": "bangalore",
                        "intent_primary": "backend", "summary": "Kafka payments"}])
    make_person("Ravi", profile={"open_to_work": True},
                cards=[{"title": "Backend Engineer", "company_norm": "swiggy", "city": "pune",
                        "intent_primary": "backend", "summary": "Go services"}])
    embed_all()
    r = api.post("/api/search", {"query": "backend engineers"}, format="json")
    assert r.status_code == 200
    return r.json()


def _llm_reply(body):
    payload = json.loads(body["messages"][1]["content"])
    return json.dumps({"people": [{"id": p["id"], "why_matched": [f"LLM says {p['name']} fits", "LLM says so",
                                                                  "llm SAYS SO", "a", "b"]}
                                  for p in payload["people"]]})


def test_refinement_stores_sanitised_llm_reasons_and_detail_shows_them(searched, fake_llm, api):
    sid = searched["search_id"]
    deterministic = {p["id"]: p["why_matched"] for p in searched["people"]}
    fake_llm.reply(_llm_reply, when="explain why each person matches")
    assert refine_with_llm(search_id=sid) == 2
    assert len(fake_llm.requests) == 1  # one batched call for all people
    detail = api.get(f"/api/searches/{sid}").json()
    assert detail["refinement"] == "done"
    for p in detail["people"]:
        assert p["why_source"] == "llm" and p["why_matched"][0] == f"LLM says {p['name']} fits"
        assert len(p["why_matched"]) == 3 and p["why_matched"] == p["why_matched_refined"]
        assert p["why_matched_deterministic"] == deterministic[p["id"]]  # kept beside the refined ones


@pytest.mark.parametrize("mode,reply", [("error", None), ("timeout", None), ("malformed", None),
                                        ("ok", '{"people": "nope"}'), ("ok", '{"people": [{"id": "other"}]}')])
def test_refinement_failure_keeps_deterministic_bullets(searched, fake_llm, api, mode, reply):
    sid = searched["search_id"]
    fake_llm.reply(reply or '{"people": []}')
    fake_llm.mode = mode
    assert refine_with_llm(search_id=sid) == 0
    detail = api.get(f"/api/searches/{sid}").json()
    assert detail["refinement"] == "failed"
    for p in detail["people"]:
        assert p["why_source"] == "deterministic" and p["why_matched"] and p["why_matched_refined"] == []
    assert list(SearchResult.objects.values_list("extra__why_source", flat=True)) == ["deterministic"] * 2


@pytest.fixture
def llm_worker(fake_llm, monkeypatch, request):
    """A Celery worker process that talks to this test's fake LLM."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("LLM_MODEL", fake_llm.model)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return request.getfixturevalue("celery_worker_proc")


@pytest.mark.django_db(transaction=True)  # the worker process must see committed rows
def test_search_enqueues_one_refinement_task_after_commit(llm_worker, fake_llm, make_user, client_for):
    make_person("Asha", profile={"open_to_work": True},
                cards=[{"title": "Backend Engineer", "company_norm": "flipkart", "intent_primary": "backend"}])
    embed_all()
    fake_llm.reply(_llm_reply, when="explain why each person matches")
    c = client_for(make_user("w@example.com", credits=2))
    body = c.post("/api/search", {"query": "backend engineers"}, format="json").json()
    assert body["people"][0]["why_matched"]  # the paid response carries deterministic bullets at once
    assert body["refinement"] == "pending"
    deadline = time.time() + 300  # a fresh worker loads torch and the model first: slow on a loaded machine
    while time.time() < deadline:
        d = c.get(f"/api/searches/{body['search_id']}").json()
        if d["people"][0]["why_source"] == "llm":
            break
        time.sleep(0.3)
    assert d["people"][0]["why_matched"][0] == "LLM says Asha fits"
    assert len([r for r in fake_llm.requests if "explain why" in r["messages"][0]["content"].lower()]) == 1


def test_a_worker_without_llm_settings_marks_the_refinement_failed_instead_of_leaving_it_pending(searched, api,
                                                                                                 settings):
    settings.OPENAI_BASE_URL = ""
    sid = searched["search_id"]
    assert refine_with_llm(search_id=sid) == 0
    assert api.get(f"/api/searches/{sid}").json()["refinement"] == "failed"
