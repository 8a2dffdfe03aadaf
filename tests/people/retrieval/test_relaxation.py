"""The relaxation report: which tier, what was relaxed or dropped, the notice, and who misses what (SQL)."""
import pytest

from people.parsing.normalize import validate_and_normalize
from people.retrieval.relaxation import constraints_met, describe, unmet_constraints
from tests.people.factory import make_person


@pytest.fixture
def seed_policy(settings):
    """The seed's notice, word for word (the graded policy adds one sentence, tested below)."""
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "seed"}


def parsed(**must):
    return validate_and_normalize({"must": must, "confidence_score": 0.9}, query="q")


def test_strict_tier_has_nothing_to_say():
    out = describe(parsed=parsed(city="pune", company_norm=["infosys"]), tier=0, people_per_tier={0: 20})
    assert out["tier_name"] == "strict" and out["relaxed"] == out["dropped"] == [] and out["notice"] == ""


def test_no_one_matched_names_every_relaxable_constraint_and_what_is_shown_instead(seed_policy):
    p = parsed(city="pune", company_norm=["infosys"], time_start="2019", time_end="2021")
    out = describe(parsed=p, tier=3, people_per_tier={0: 0, 1: 0, 2: 4, 3: 20})
    assert [r["constraint"] for r in out["relaxed"]] == ["time", "location"]
    assert out["dropped"] == [{"constraint": "company", "value": "at Infosys"}]
    assert out["notice"] == ("No one at Infosys in Pune between 2019 and 2021 matched; showing people from other "
                             "years, from other cities and from other companies.")


def test_a_few_strict_matches_are_counted_in_the_notice(seed_policy):
    out = describe(parsed=parsed(city="pune"), tier=2, people_per_tier={0: 1, 2: 15})
    assert out["notice"] == "Only 1 person in Pune matched; also showing people from other cities."


def test_the_intent_tier_names_the_roles_it_dropped(seed_policy):
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


def test_dropped_roles_are_named_beside_the_other_constraints(seed_policy):
    out = describe(parsed=parsed(company_norm=["razorpay"], intent_primary=["backend"]), tier=4,
                   people_per_tier={0: 0, 3: 2, 4: 10})
    assert out["notice"] == ("No one at Razorpay (backend) matched; showing people from other companies and in "
                             "other roles.")
    out = describe(parsed=parsed(intent_primary=["devops"]), tier=4, people_per_tier={0: 6, 4: 30})
    assert out["notice"] == "Only 6 people matched devops; also showing people in other roles."


def test_the_graded_policy_says_that_people_meeting_more_come_first(settings):
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "graded"}
    out = describe(parsed=parsed(city="pune"), tier=2, people_per_tier={0: 1, 2: 15})
    assert out["policy"] == "graded"
    assert out["notice"] == ("Only 1 person in Pune matched; also showing people from other cities. People who meet "
                             "more of what you asked for come first.")


def test_the_policy_order_decides_which_tier_relaxes_what(settings):
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "company_before_location"}
    p = parsed(city="pune", company_norm=["infosys"])
    out = describe(parsed=p, tier=2, people_per_tier={0: 0, 2: 20})
    assert out["tier_name"] == "company/team relaxed"
    assert out["dropped"] == [{"constraint": "company", "value": "at Infosys"}] and out["relaxed"] == []
    assert out["notice"] == "No one at Infosys in Pune matched; showing people from other companies."


@pytest.mark.django_db
def test_constraints_met_counts_the_best_single_card_and_weighs_later_relaxed_kinds_more():
    split = make_person("Split", cards=[{"intent_primary": "backend", "company_norm": "flipkart", "city": "pune"},
                                        {"intent_primary": "frontend", "company_norm": "tcs", "city": "bangalore"}])
    local = make_person("Local", cards=[{"intent_primary": "backend", "company_norm": "tcs", "city": "bangalore"}])
    full = make_person("Full", cards=[{"intent_primary": "backend", "company_norm": "flipkart", "city": "bangalore"}])
    p = parsed(city="bangalore", company_norm=["flipkart"], intent_primary=["backend"])
    met = constraints_met(parsed=p, person_ids=[split.pk, local.pk, full.pk])
    assert round(met[full.pk]) == 3 and round(met[split.pk]) == 2 and round(met[local.pk]) == 2
    # the seed gives location up before company: meeting company weighs a little more than meeting location
    assert met[split.pk] > met[local.pk]
