"""parse_query's LLM path against a real local OpenAI-compatible server (tests/fake_llm.py) through the real
openai client, and its fallback to the deterministic parser on every kind of LLM failure."""
import json

import pytest

from people.parsing.normalize import validate_and_normalize
from people.parsing.parser import PROMPT_SEARCH_CLEANUP, PROMPT_SEARCH_SINGLE_EXTRACT, parse_query
from tests.fake_llm import fake_llm  # noqa: F401 - fixture

Q = "backend engg in blr who worked at flipkart after 2020, under 40 LPA"
EXTRACT = {
    "must": {"company_norm": ["Flipkart Pvt Ltd", "flipkart"], "intent_primary": ["backend", "wizard"],
             "city": "Bangalore", "time_start": "2021", "time_end": "2024-06",
             "offer_salary_inr_per_year": "40 LPA", "open_to_work_only": "yes"},
    "should": {"skills_or_tools": ["java", "Java"], "keywords": []},
    "exclude": {"company_norm": [], "keywords": []},
    "search_phrases": ["backend engineer"], "query_embedding_text": "backend engineer at flipkart in bangalore",
    "confidence_score": 0.9,
}


def program(fake, extract=EXTRACT):
    fake.reply(json.dumps({"query_cleaned": "backend engineers in Bangalore who worked at Flipkart after 2020"}),
               when="clean up")
    fake.reply(json.dumps(extract), when="extract structured")


def test_llm_path_uses_cleanup_then_single_extract(fake_llm):
    program(fake_llm)
    raw = parse_query(Q)
    assert raw["parser"] == "llm"
    assert [r["messages"][0]["content"] for r in fake_llm.requests] == [PROMPT_SEARCH_CLEANUP,
                                                                        PROMPT_SEARCH_SINGLE_EXTRACT]
    assert fake_llm.requests[0]["messages"][1]["content"] == Q
    # the extract prompt gets the cleaned query, not the raw one
    assert fake_llm.requests[1]["messages"][1]["content"].startswith("backend engineers in Bangalore")
    out = validate_and_normalize(raw, query=Q)
    m = out["must"]
    assert m["company_norm"] == ["flipkart"]  # suffix stripped + deduplicated
    assert m["intent_primary"] == ["backend"] and "wizard" in out["should"]["keywords"]  # enum demotion
    assert m["city"] == "bangalore" and m["time_start"] == "2021-01-01" and m["time_end"] == "2024-06-30"
    assert m["offer_salary_inr_per_year"] == 4_000_000 and m["open_to_work_only"] is True
    assert out["should"]["skills_or_tools"] == ["java"]
    assert out["query_embedding_text"] == "backend engineer at flipkart in bangalore"
    assert out["query_cleaned"].startswith("backend engineers in Bangalore")


@pytest.mark.parametrize("mode", ["error", "timeout", "malformed"])
def test_llm_failure_falls_back_to_deterministic_parser(fake_llm, mode):
    program(fake_llm)
    fake_llm.mode = mode
    raw = parse_query("backend engineers in Bangalore who worked at Flipkart after 2020, under 40 LPA")
    assert raw["parser"] == "deterministic" and raw["parser_fallback_reason"]
    m = validate_and_normalize(raw, query="q")["must"]
    assert m["company_norm"] == ["flipkart"] and m["city"] == "bangalore"
    assert m["offer_salary_inr_per_year"] == 4_000_000


@pytest.mark.parametrize("extract", [{"must": ["flipkart"]}, {"must": {}, "exclude": "tcs"}, ["not", "an", "object"]])
def test_wrong_shaped_extraction_falls_back(fake_llm, extract):
    program(fake_llm, extract=extract)
    raw = parse_query("devops engineers currently at Razorpay")
    assert raw["parser"] == "deterministic"
    assert raw["must"]["company_norm"] == ["razorpay"] and raw["must"]["is_current"] is True


def test_unusable_cleanup_keeps_the_original_query(fake_llm):
    fake_llm.reply(json.dumps({"query_cleaned": ""}), when="clean up")
    fake_llm.reply(json.dumps({"must": {"company_norm": ["swiggy"]}, "confidence_score": 0.8}),
                   when="extract structured")
    raw = parse_query("swiggy people")
    assert raw["parser"] == "llm" and raw["query_cleaned"] == "swiggy people"
    assert fake_llm.requests[1]["messages"][1]["content"] == "swiggy people"


def test_not_configured_never_calls_out(settings):
    settings.OPENAI_BASE_URL = ""
    settings.LLM_MODEL = ""
    assert parse_query("ML engineers at Google")["parser"] == "deterministic"


def test_search_api_uses_llm_parse_and_survives_its_failure(fake_llm, user, api):
    from credits.ledger import get_balance
    from people.models import Search

    program(fake_llm)
    r = api.post("/api/search", {"query": Q}, format="json")
    assert r.status_code == 200, r.content
    s = Search.objects.get(pk=r.json()["search_id"])
    assert s.parsed_constraints["parser"] == "llm" and s.parsed_constraints["must"]["company_norm"] == ["flipkart"]
    fake_llm.mode = "error"
    r = api.post("/api/search", {"query": Q}, format="json")
    assert r.status_code == 200
    s = Search.objects.get(pk=r.json()["search_id"])
    assert s.parsed_constraints["parser"] == "deterministic"
    assert get_balance(user=user) == 8  # both searches charged once each; the LLM failure cost nothing extra


def test_llm_path_reports_words_no_extracted_value_uses(fake_llm):
    fake_llm.reply(json.dumps({"query_cleaned": "backend engineers in Bangalore at Flipkart with zorblax"}),
                   when="clean up")
    fake_llm.reply(json.dumps(EXTRACT), when="extract structured")
    raw = parse_query(Q)
    assert raw["parser"] == "llm" and raw["unused_terms"] == ["zorblax"]
    assert validate_and_normalize(raw, query=Q)["unused_terms"] == ["zorblax"]
