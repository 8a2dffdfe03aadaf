"""The relaxation report: which tier, what was relaxed or dropped, the notice, and who misses what (SQL)."""
import pytest

from people.normalize import validate_and_normalize
from people.relaxation import describe, unmet_constraints
from tests.people.factory import make_person


def parsed(**must):
    return validate_and_normalize({"must": must, "confidence_score": 0.9}, query="q")


def test_strict_tier_has_nothing_to_say():
    out = describe(parsed=parsed(city="pune", company_norm=["infosys"]), tier=0, people_per_tier={0: 20})
    assert out["tier_name"] == "strict" and out["relaxed"] == out["dropped"] == [] and out["notice"] == ""


def test_no_one_matched_names_every_relaxable_constraint_and_what_is_shown_instead():
    p = parsed(city="pune", company_norm=["infosys"], time_start="2019", time_end="2021")
    out = describe(parsed=p, tier=3, people_per_tier={0: 0, 1: 0, 2: 4, 3: 20})
    assert [r["constraint"] for r in out["relaxed"]] == ["time", "location"]
    assert out["dropped"] == [{"constraint": "company", "value": "at Infosys"}]
    assert out["notice"] == ("No one at Infosys in Pune between 2019 and 2021 matched; showing people from other "
                             "years, from other cities and from other companies.")


def test_a_few_strict_matches_are_counted_in_the_notice():
    out = describe(parsed=parsed(city="pune"), tier=2, people_per_tier={0: 1, 2: 15})
    assert out["notice"] == "Only 1 person in Pune matched; also showing people from other cities."


def test_the_intent_tier_names_the_roles_it_dropped():
    out = describe(parsed=parsed(intent_primary=["ml"], seniority_level=["staff"]), tier=4,
                   people_per_tier={0: 0, 4: 9})
    assert out["dropped"] == [{"constraint": "intent", "value": "ml, staff"}]
    assert out["notice"] == "No one matched ml, staff; showing people in other roles."


def test_low_confidence_demotions_are_reported():
    p = validate_and_normalize({"must": {"seniority_level": ["senior"]}, "confidence_score": 0.1}, query="q")
    assert describe(parsed=p, tier=0, people_per_tier={0: 3})["demoted_to_should"] == ["senior"]


@pytest.mark.django_db
def test_unmet_looks_at_every_public_card_of_a_person():
    both = make_person("Both", cards=[{"company_norm": "infosys", "city": "chennai"},
                                      {"company_norm": "tcs", "city": "pune"}])
    hidden = make_person("Hidden", cards=[{"company_norm": "infosys", "city": "pune", "visibility": "hidden"},
                                          {"company_norm": "tcs", "city": "delhi"}])
    p = parsed(city="pune", company_norm=["infosys"])
    got = unmet_constraints(parsed=p, tier=3, person_ids=[both.pk, hidden.pk])
    # per constraint, not per card: Both was at Infosys (Chennai) and in Pune (TCS); Hidden's Infosys card is hidden
    assert got == {both.pk: [], hidden.pk: ["location", "company"]}
    assert unmet_constraints(parsed=p, tier=0, person_ids=[hidden.pk]) == {}  # nothing relaxed: nothing to say


def test_dropped_roles_are_named_beside_the_other_constraints():
    out = describe(parsed=parsed(company_norm=["razorpay"], intent_primary=["backend"]), tier=4,
                   people_per_tier={0: 0, 3: 2, 4: 10})
    assert out["notice"] == ("No one at Razorpay (backend) matched; showing people from other companies and in "
                             "other roles.")
    out = describe(parsed=parsed(intent_primary=["devops"]), tier=4, people_per_tier={0: 6, 4: 30})
    assert out["notice"] == "Only 6 people matched devops; also showing people in other roles."
