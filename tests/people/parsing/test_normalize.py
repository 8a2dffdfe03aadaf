"""validate_and_normalize: every normalisation rule, and the request-body overrides (apply_overrides)."""
import pytest

from people.parsing.normalize import apply_overrides, normalize_date, normalize_salary, validate_and_normalize


def norm(must=None, should=None, exclude=None, conf=0.9, **extra):
    return validate_and_normalize({"must": must or {}, "should": should or {}, "exclude": exclude or {},
                                   "confidence_score": conf, **extra}, query="q")


def test_dedupe_and_cleanup_of_lists():
    out = norm(must={"company_norm": [" Flipkart ", "flipkart", "FLIPKART Pvt Ltd", "", None, 3]},
               should={"skills_or_tools": ["Python", "python ", "  Kafka", {"x": 1}]})
    assert out["must"]["company_norm"] == ["flipkart"]
    assert out["should"]["skills_or_tools"] == ["python", "kafka"]


def test_enum_validation_demotes_unknown_values_to_should():
    out = norm(must={"intent_primary": ["backend", "wizardry"], "seniority_level": ["senior", "godlike"],
                     "employment_type": ["full_time", "gig"]})
    assert out["must"]["intent_primary"] == ["backend"]
    assert out["must"]["seniority_level"] == ["senior"]
    assert out["must"]["employment_type"] == ["full_time"]
    assert {"wizardry", "godlike", "gig"} <= set(out["should"]["keywords"])


def test_must_caps_demote_overflow_to_should():
    out = norm(must={"company_norm": ["a", "b", "c", "d", "e"], "team_norm": ["t1", "t2", "t3", "t4"]})
    assert out["must"]["company_norm"] == ["a", "b", "c"]
    assert out["must"]["team_norm"] == ["t1", "t2", "t3"]
    assert {"d", "e", "t4"} <= set(out["should"]["keywords"])


def test_low_confidence_demotes_weak_constraints_but_keeps_company_and_place():
    out = norm(must={"company_norm": ["swiggy"], "team_norm": ["payments"], "seniority_level": ["senior"],
                     "domain": ["fintech"], "city": "Pune"}, conf=0.3)
    assert out["must"]["team_norm"] == [] and out["must"]["seniority_level"] == [] and out["must"]["domain"] == []
    assert out["must"]["company_norm"] == ["swiggy"] and out["must"]["city"] == "pune"
    assert {"payments", "senior", "fintech"} <= set(out["should"]["keywords"])
    high = norm(must={"team_norm": ["payments"]}, conf=0.8)
    assert high["must"]["team_norm"] == ["payments"]


@pytest.mark.parametrize("value,end,expected", [
    ("2020", False, "2020-01-01"), ("2020", True, "2020-12-31"),
    ("2021-02", False, "2021-02-01"), ("2021-02", True, "2021-02-28"), ("2024-02", True, "2024-02-29"),
    ("2019-07-15", False, "2019-07-15"), ("2019-07-15", True, "2019-07-15"),
    ("2019-13", False, None), ("2019-02-30", True, None), ("last year", False, None), (None, False, None),
    (2018, False, "2018-01-01"), ("1800", False, None),
])
def test_three_date_forms(value, end, expected):
    assert normalize_date(value, end=end) == expected


def test_date_swap_when_start_after_end():
    out = norm(must={"time_start": "2023", "time_end": "2019-06"})
    assert out["must"]["time_start"] == "2019-06-01"
    assert out["must"]["time_end"] == "2023-12-31"
    assert out["dates_swapped"] is True


@pytest.mark.parametrize("value,expected", [
    (4000000, 4000000), (40, 4000000), (12.5, 1250000), ("40 LPA", 4000000), ("1.2 cr", 12000000),
    ("4,000,000", 4000000), ("150k", 1800000), (-5, None), (0, None), ("lots", None), (True, None), (None, None),
])
def test_salary_to_inr_per_year(value, expected):
    assert normalize_salary(value) == expected
    assert norm(must={"offer_salary_inr_per_year": value})["must"]["offer_salary_inr_per_year"] == expected


def test_required_and_excluded_company_contradiction_excludes():
    out = norm(must={"company_norm": ["tcs", "infosys"]}, exclude={"company_norm": ["TCS"]})
    assert out["must"]["company_norm"] == ["infosys"]
    assert out["exclude"]["company_norm"] == ["tcs"]


def test_garbage_payload_becomes_empty_constraints():
    for junk in (None, [], "x", {"must": "nope", "should": 3, "confidence_score": "high"}):
        out = validate_and_normalize(junk, query="backend engineers")
        assert out["query_original"] == "backend engineers"
        assert out["must"]["company_norm"] == [] and out["confidence_score"] == 0.0


def test_booleans_and_scalars():
    out = norm(must={"open_to_work_only": "yes", "is_current": "maybe", "city": "  Bangalore ", "country": ["x"]})
    assert out["must"]["open_to_work_only"] is True
    assert out["must"]["is_current"] is None
    assert out["must"]["city"] == "bangalore" and out["must"]["country"] is None


def test_overrides_beat_parsed_values():
    parsed = norm(must={"open_to_work_only": True, "offer_salary_inr_per_year": 4000000})
    same = apply_overrides(parsed, open_to_work_only=None, salary_max=None, preferred_locations=None)
    assert same["must"]["open_to_work_only"] is True and same["must"]["offer_salary_inr_per_year"] == 4000000
    over = apply_overrides(parsed, open_to_work_only=False, salary_max=2500000, preferred_locations=["Pune"])
    assert over["must"]["open_to_work_only"] is False
    assert over["must"]["offer_salary_inr_per_year"] == 2500000
    assert over["preferred_locations"] == ["pune"]
    assert parsed["must"]["open_to_work_only"] is True  # not mutated


def test_open_ended_ranges_are_closed():
    from datetime import date

    out = norm(must={"time_start": "2021"})
    assert out["must"]["time_start"] == "2021-01-01" and out["must"]["time_end"] == date.today().isoformat()
    out = norm(must={"time_end": "2019-03"})
    assert out["must"]["time_start"] == "1900-01-01" and out["must"]["time_end"] == "2019-03-31"
    assert norm(must={})["must"]["time_start"] is None and norm(must={})["must"]["time_end"] is None
