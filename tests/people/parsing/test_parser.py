"""The deterministic parser on 20 realistic queries (no LLM configured)."""
from datetime import date

import pytest

from people.parsing.normalize import validate_and_normalize
from people.parsing.parser import parse_deterministic


def parsed(q):
    return validate_and_normalize(parse_deterministic(q), query=q)


def test_the_worked_example_query_parses_without_an_llm(settings):
    settings.OPENAI_BASE_URL = ""
    from people.parsing.parser import parse_query

    q = "backend engineers in Bangalore who worked at Flipkart after 2020, open to work, under 40 LPA"
    raw = parse_query(q)
    assert raw["parser"] == "deterministic"
    m = validate_and_normalize(raw, query=q)["must"]
    assert m["company_norm"] == ["flipkart"]
    assert m["city"] == "bangalore"
    assert m["time_start"] == "2021-01-01"  # "after 2020" is exclusive
    assert m["time_end"] == date.today().isoformat()  # open end closed by the normaliser
    assert m["open_to_work_only"] is True
    assert m["offer_salary_inr_per_year"] == 4_000_000
    assert m["intent_primary"] == ["backend"]
    assert "backend" in validate_and_normalize(raw, query=q)["should"]["keywords"]


CASES = [
    ("senior android developers from Swiggy or Zomato in Gurgaon",
     {"company_norm": ["swiggy", "zomato"], "city": "gurugram", "seniority_level": ["senior"],
      "intent_primary": ["mobile"]}),
    ("data engineers in Hyderabad with spark and airflow", {"intent_primary": ["data"], "city": "hyderabad"}),
    ("ML engineers who worked at Google between 2018 and 2022",
     {"company_norm": ["google"], "intent_primary": ["ml"], "time_start": "2018-01-01", "time_end": "2022-12-31"}),
    ("frontend engineers in Pune, not from TCS", {"intent_primary": ["frontend"], "city": "pune",
                                                  "exclude_company": ["tcs"]}),
    ("devops engineers currently at Razorpay", {"company_norm": ["razorpay"], "is_current": True,
                                               "intent_primary": ["devops"]}),
    ("ex-Flipkart product managers in Bengaluru", {"company_norm": ["flipkart"], "is_current": False,
                                                  "city": "bangalore", "intent_primary": ["product"]}),
    ("freshers in Chennai looking for a job", {"seniority_level": ["junior"], "city": "chennai",
                                              "open_to_work_only": True}),
    ("staff engineers in the payments team at PhonePe", {"company_norm": ["phonepe"], "team_norm": ["payments"],
                                                         "seniority_level": ["staff"]}),
    ("SRE in Mumbai under 30 lakhs", {"intent_primary": ["sre"], "city": "mumbai",
                                     "offer_salary_inr_per_year": 3_000_000}),
    ("fullstack developers with react and node in Noida budget 25 LPA",
     {"intent_primary": ["fullstack"], "city": "noida", "offer_salary_inr_per_year": 2_500_000}),
    ("security engineers who worked at Paytm before 2019", {"company_norm": ["paytm"], "time_end": "2018-12-31",
                                                           "intent_primary": ["security"]}),
    ("contract QA engineers in Kochi", {"employment_type": ["contract"], "city": "kochi", "intent_primary": ["qa"]}),
    ("engineering managers at Microsoft in Hyderabad, max 1.2 crore",
     {"company_norm": ["microsoft"], "city": "hyderabad", "offer_salary_inr_per_year": 12_000_000}),
    ("lead backend engineers at Zerodha in 2021", {"company_norm": ["zerodha"], "seniority_level": ["lead"],
                                                    "time_start": "2021-01-01", "time_end": "2021-12-31"}),
    ("python developers in Delhi excluding Infosys and Wipro", {"city": "delhi",
                                                                 "exclude_company": ["infosys", "wipro"]}),
    ("data analysts in Kolkata open to work", {"intent_primary": ["analytics"], "city": "kolkata",
                                               "open_to_work_only": True}),
    ("mobile engineers from Ola since 2019-06", {"company_norm": ["ola"], "time_start": "2019-06-01",
                                                 "intent_primary": ["mobile"]}),
    ("interns in Bombay", {"seniority_level": ["intern"], "city": "mumbai"}),
    ("backend engineers at Tata Consultancy Services in Chennai", {"company_norm": ["tcs"], "city": "chennai"}),
]


@pytest.mark.parametrize("query,expected", CASES, ids=[c[0][:40] for c in CASES])
def test_realistic_queries(query, expected):
    out = parsed(query)
    m = out["must"]
    for key, value in expected.items():
        if key == "exclude_company":
            assert out["exclude"]["company_norm"] == value, out["exclude"]
        else:
            assert m[key] == value, (key, m)
    assert out["query_embedding_text"]


def test_skills_become_should_and_phrases():
    out = parsed("backend engineers with kafka and postgresql")
    assert {"kafka", "postgresql"} <= set(out["should"]["skills_or_tools"])
    assert "backend engineer" in out["search_phrases"]


def _directory_gazetteer():
    from people.parsing.gazetteer import build

    return build(terms=[("company", "stripe", 40, {}), ("company", "kestrel robotics", 12, {}),
                        ("company", "motorola", 5, {}), ("city", "berlin", 30, {"country": "germany"}),
                        ("company", "berlin", 2, {}), ("skill", "kafka", 3, {})], aliases=[])


def parsed_with(q):
    from people.parsing.parser import parse_deterministic as parse

    return validate_and_normalize(parse(q, gazetteer=_directory_gazetteer()), query=q)


def test_directory_names_typos_and_negation_parse_together():
    out = parsed_with("backend engineers at Kestrel Robotcs in Berlin, not from Stirpe")
    m = out["must"]
    assert m["company_norm"] == ["kestrel robotics"] and m["city"] == "berlin" and m["country"] == "germany"
    assert out["exclude"]["company_norm"] == ["stripe"]
    hows = {(u["kind"], u["value"]): u["how"] for u in out["understood"]}
    assert hows[("company", "kestrel robotics")] == "fuzzy" and hows[("exclude_company", "stripe")] == "fuzzy"
    assert out["unused_terms"] == []


def test_a_name_that_is_both_a_city_and_a_company_follows_the_word_before_it():
    assert parsed_with("engineers in berlin")["must"]["city"] == "berlin"
    out = parsed_with("engineers at berlin")
    assert out["must"]["company_norm"] == ["berlin"] and out["must"]["city"] is None


def test_ola_is_never_found_inside_motorola():
    out = parsed_with("android engineers from motorola")
    assert out["must"]["company_norm"] == ["motorola"]
    assert parsed_with("ola drivers app team")["must"]["company_norm"] == ["ola"]


def test_a_skill_spelled_like_a_company_stays_a_skill_unless_the_query_says_at():
    assert parsed("devops engineers with aws and terraform")["must"]["company_norm"] == []
    assert parsed("devops engineers who worked at aws")["must"]["company_norm"] == ["amazon"]


def test_words_nothing_understood_are_reported_as_unused():
    out = parsed_with("kafka engineers at zorblax in gotham")
    assert out["unused_terms"] == ["zorblax", "gotham"]
    assert {"zorblax", "gotham"} <= set(out["should"]["keywords"])  # still free text for the lexical bonus
    assert out["must"]["company_norm"] == [] and out["must"]["city"] is None
    assert parsed_with("engineers not in berlin")["unused_terms"] == ["berlin"]  # no "not in <city>" filter exists


def test_a_role_word_that_is_also_a_skill_filters_by_role_and_boosts_the_skill():
    p = parse_deterministic("data scientist with NLP experience open to work")
    assert p["must"]["intent_primary"] == ["ml"]
    assert "nlp" in p["should"]["skills_or_tools"] and "nlp" in p["search_phrases"]
    assert parse_deterministic("backend engineers")["should"]["skills_or_tools"] == []
