"""Lexical bonus from Postgres FTS over parent and child search_document, on real Postgres."""
import pytest

from people.parsing.normalize import validate_and_normalize
from people.retrieval.lexical import lexical_bonus, lexical_terms
from tests.people.factory import make_person

pytestmark = pytest.mark.django_db


def parsed(phrases=(), keywords=(), query="q"):
    return validate_and_normalize({"search_phrases": list(phrases), "should": {"keywords": list(keywords)},
                                   "confidence_score": 0.9}, query=query)


@pytest.fixture
def people():
    return {
        "kafka2": make_person("K2", cards=[{"title": "Backend Engineer", "summary": "Kafka streams and Kafka connect",
                                           "search_phrases": ["kafka"]}]),
        "kafka1": make_person("K1", cards=[{"title": "Engineer", "summary": "some kafka consumers"}]),
        "child": make_person("Ch", cards=[{"title": "Engineer", "summary": "payments",
                                           "children": [{"title": "Built Kafka pipelines"}]}]),
        "hidden": make_person("Hid", cards=[{"title": "Kafka expert", "summary": "kafka kafka",
                                             "visibility": "hidden"}]),
        "none": make_person("None", cards=[{"title": "Designer", "summary": "Figma"}]),
    }


def ids(people, *names):
    return [people[n].pk for n in names]


def test_bonus_is_normalised_to_the_cap_and_proportional(people, settings):
    settings.PEOPLE_SEARCH = {"LEXICAL_BONUS_MAX": 0.2}
    bonus = lexical_bonus(parsed=parsed(["kafka"]), person_ids=ids(people, "kafka2", "kafka1", "none"))
    k2, k1 = bonus[people["kafka2"].pk], bonus[people["kafka1"].pk]
    assert k2 == pytest.approx(0.2) and 0 < k1 < k2
    assert people["none"].pk not in bonus


def test_child_documents_count_and_hidden_parents_do_not(people):
    bonus = lexical_bonus(parsed=parsed(["kafka"]), person_ids=ids(people, "child", "hidden"))
    assert people["child"].pk in bonus and people["hidden"].pk not in bonus


def test_only_candidate_people_are_scored(people):
    bonus = lexical_bonus(parsed=parsed(["kafka"]), person_ids=ids(people, "kafka1"))
    assert set(bonus) == {people["kafka1"].pk}


def test_phrases_are_ored_not_anded(people):
    # one plainto_tsquery of "kafka figma" would match nobody; each phrase on its own matches someone
    bonus = lexical_bonus(parsed=parsed(["kafka", "figma"]), person_ids=ids(people, "kafka1", "none"))
    assert set(bonus) == {people["kafka1"].pk, people["none"].pk}


def test_terms_use_phrases_then_five_keywords_then_the_query():
    assert lexical_terms(parsed(["a b"], ["k1", "k2", "k3", "k4", "k5", "k6"])) == ["a b", "k1", "k2", "k3", "k4",
                                                                                   "k5"]
    assert lexical_terms(parsed(query="kafka people " + "x" * 300)) == [("kafka people " + "x" * 300)[:200]]


def test_no_terms_or_no_people_means_no_bonus(people):
    assert lexical_bonus(parsed=parsed(query="   "), person_ids=ids(people, "kafka1")) == {}
    assert lexical_bonus(parsed=parsed(["kafka"]), person_ids=[]) == {}


def test_search_document_is_kept_current_on_save(people):
    from people.models import ExperienceCard

    card = ExperienceCard.objects.get(person=people["none"])
    assert lexical_bonus(parsed=parsed(["terraform"]), person_ids=ids(people, "none")) == {}
    card.summary = "Terraform modules for AWS"
    card.save()
    assert people["none"].pk in lexical_bonus(parsed=parsed(["terraform"]), person_ids=ids(people, "none"))
