"""Scoring arithmetic, penalties, tiebreaks and similarity_percent on hand-built card lists."""
import uuid
from datetime import date

import pytest

from people.parsing.normalize import validate_and_normalize
from people.retrieval.ranking import (
    RankedPerson,
    apply_tiebreaks,
    collapse_and_rank,
    sim_from_distance,
    similarity_percent,
)


def card(pid, dist, **kw):
    return {"id": uuid.uuid4(), "person_id": pid, "dist": dist, "title": kw.pop("title", "Engineer"),
            "summary": kw.pop("summary", ""), "search_phrases": kw.pop("search_phrases", []),
            "company_norm": "x", "team_norm": "", "city": kw.pop("city", "bangalore"), "country": "india",
            "location_text": "", "start_date": kw.pop("start_date", None), "end_date": kw.pop("end_date", None),
            "is_current": kw.pop("is_current", False), **kw}


def q(**must):
    return validate_and_normalize({"must": must, "should": {"skills_or_tools": ["kafka"]}, "confidence_score": 0.9},
                                  query="q")


def test_blended_score_arithmetic():
    x = "X"
    parents = [card(x, 0.2), card(x, 0.5, summary="uses Kafka daily")]
    children = [card(x, 0.25, parent_id=None)]
    [r] = collapse_and_rank(parents=parents, children=children, parsed=q(), tier=0, lexical={x: 0.1})
    p1, p2, c1 = 1 / 1.2, 1 / 1.5 + 0.02, 1 / 1.25  # card-level SHOULD boost on the kafka card
    assert r.parent_best == pytest.approx(p1)
    assert r.child_best == pytest.approx(c1)
    assert r.avg_top3 == pytest.approx((p1 + c1 + p2) / 3)
    base = 0.65 * p1 + 0.25 * c1 + 0.10 * (p1 + c1 + p2) / 3
    assert r.should_bonus == pytest.approx(0.02)          # person-level: 1 distinct hit
    assert r.score == pytest.approx(base + 0.1 + 0.02)
    assert sim_from_distance(0.2) == pytest.approx(1 / 1.2)


def test_constants_come_from_settings(settings):
    settings.PEOPLE_SEARCH = {"WEIGHT_PARENT_BEST": 1.0, "WEIGHT_CHILD_BEST": 0.0, "WEIGHT_AVG_TOP3": 0.0}
    [r] = collapse_and_rank(parents=[card("X", 0.0)], children=[], parsed=q(), tier=0, lexical={})
    assert r.score == pytest.approx(1.0)


def test_should_bonus_is_capped(settings):
    settings.PEOPLE_SEARCH = {"SHOULD_BONUS_MAX": 0.03}
    parsed = validate_and_normalize({"should": {"skills_or_tools": ["a1", "b2", "c3"]}, "confidence_score": 0.9},
                                    query="q")
    [r] = collapse_and_rank(parents=[card("X", 0.0, summary="a1 b2 c3")], children=[], parsed=parsed, tier=0,
                            lexical={})
    assert r.should_bonus == pytest.approx(0.03)


def test_penalties_only_when_that_filter_was_relaxed():
    must = {"time_start": "2020", "time_end": "2021", "city": "pune"}
    undated_elsewhere = [card("X", 0.0, city="delhi")]
    [t0] = collapse_and_rank(parents=undated_elsewhere, children=[], parsed=q(**must), tier=0, lexical={})
    [t1] = collapse_and_rank(parents=undated_elsewhere, children=[], parsed=q(**must), tier=1, lexical={})
    [t2] = collapse_and_rank(parents=undated_elsewhere, children=[], parsed=q(**must), tier=2, lexical={})
    assert t0.penalties == 0
    assert t1.penalties == pytest.approx(0.12)
    assert t2.penalties == pytest.approx(0.22)
    ok = [card("X", 0.0, city="pune", start_date=date(2020, 5, 1), end_date=date(2020, 9, 1))]
    [fine] = collapse_and_rank(parents=ok, children=[], parsed=q(**must), tier=3, lexical={})
    assert fine.penalties == 0


def test_score_never_negative():
    [r] = collapse_and_rank(parents=[card("X", 1.99, city="delhi")], children=[],
                            parsed=q(time_start="2020", time_end="2021", city="pune"), tier=3, lexical={})
    assert r.score >= 0


def test_ordering_best_first():
    ranked = collapse_and_rank(parents=[card("A", 0.5), card("B", 0.1), card("C", 0.3)], children=[], parsed=q(),
                               tier=0, lexical={})
    assert [r.person_id for r in ranked] == ["B", "C", "A"]


def test_tiebreaks_salary_then_dates():
    a = RankedPerson(person_id="a", score=0.8)
    b = RankedPerson(person_id="b", score=0.8, has_salary_min=True)
    c = RankedPerson(person_id="c", score=0.9)
    assert [r.person_id for r in apply_tiebreaks([a, b, c], parsed=q(offer_salary_inr_per_year=4000000))] == \
        ["c", "b", "a"]
    assert [r.person_id for r in apply_tiebreaks([a, b, c], parsed=q())] == ["a", "b", "c"]  # no offer: untouched
    d = RankedPerson(person_id="d", score=0.8, full_date_overlap=True)
    out = apply_tiebreaks([a, d], parsed=q(time_start="2020", time_end="2021"))
    assert [r.person_id for r in out] == ["d", "a"]


@pytest.mark.parametrize("score,pct", [(-0.2, 0), (0, 0), (0.456, 46), (0.999, 100), (1.7, 100)])
def test_similarity_percent(score, pct):
    assert similarity_percent(score) == pct


def test_a_graded_policy_orders_by_constraints_met_before_the_score(settings):
    parents = [card("Near", 0.05), card("Far", 0.6)]
    met = {"Near": 2.06, "Far": 2.07}  # equal counts; Far meets the constraint the policy gives up later
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "seed"}
    assert [r.person_id for r in collapse_and_rank(parents=parents, children=[], parsed=q(), tier=3, lexical={},
                                                   met=met)] == ["Near", "Far"]
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "graded"}
    ranked = collapse_and_rank(parents=parents, children=[], parsed=q(), tier=3, lexical={}, met=met)
    assert [r.person_id for r in ranked] == ["Far", "Near"]
    assert ranked[0].score < ranked[1].score  # the blended score (similarity_percent) is left as it was
    assert apply_tiebreaks(ranked, parsed=q(time_start="2020", time_end="2021"))[0].person_id == "Far"


def test_a_soft_policy_adds_its_bonus_per_constraint_met(settings):
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "graded_soft"}
    [r] = collapse_and_rank(parents=[card("X", 0.0)], children=[], parsed=q(), tier=3, lexical={}, met={"X": 2.0})
    assert r.met_bonus == pytest.approx(0.16) and r.rank_score == pytest.approx(r.score + 0.16)
