"""Role words the vocabulary lacks, mapped by embedding similarity (real MiniLM, real Postgres for the titles)."""
import pytest

from people.parsing.gazetteer import curated_gazetteer
from people.parsing.normalize import validate_and_normalize
from people.parsing.parser import parse_deterministic
from people.parsing.semantic import enrich, unmatched_phrases, vocabulary
from tests.people.factory import make_person


@pytest.mark.parametrize(("query", "unused", "phrases"), [
    ("data scientist with NLP experience open to work", ["data", "scientist"], ["data scientist"]),
    ("test automation engineers in pune", ["test", "automation"], ["test automation engineer"]),
    ("growth marketers in pune", ["marketers"], ["marketer"]),
    ("people who cut cloud spend", ["cut", "cloud", "spend"], ["cut cloud spend"]),
    ("backend engineers in pune", [], []),
])
def test_unmatched_phrases_are_runs_of_unused_words_with_their_role_noun(query, unused, phrases):
    assert unmatched_phrases(query, unused) == phrases


@pytest.fixture
def directory(db):
    """Roles the directory has (their titles are part of the vocabulary); no one is in design."""
    for title, intent in (("Site Reliability Engineer", "sre"), ("SDET", "qa"), ("Security Engineer", "security"),
                          ("Backend Engineer", "backend"), ("Product Manager", "product"),
                          ("Data Analyst", "analytics"), ("Machine Learning Engineer", "ml")):
        make_person(title, cards=[{"title": title, "intent_primary": intent, "city": "pune"}])


def parse(query, gazetteer):
    return enrich(parse_deterministic(query, gazetteer=gazetteer), gazetteer=gazetteer)


def test_a_role_phrase_with_no_vocabulary_entry_becomes_the_nearest_role(directory):
    g = curated_gazetteer()
    out = parse("test automation engineers in pune", g)
    assert out["must"]["intent_primary"] == ["qa"]
    sem = [u for u in out["understood"] if u["how"] == "semantic" and u["kind"] == "intent"]
    assert sem == [{"kind": "intent", "text": "test automation engineer", "value": "qa", "how": "semantic",
                    "score": sem[0]["score"]}]
    assert 0.6 <= sem[0]["score"] <= 1
    assert "test" not in out["unused_terms"] and "automation" not in out["unused_terms"]
    # the score survives normalisation (what the response's `understood` shows)
    norm = validate_and_normalize(out, query="test automation engineers in pune")
    assert any(u.get("how") == "semantic" and u.get("score") for u in norm["understood"])


def test_beside_a_role_the_query_named_semantic_roles_only_boost(directory):
    g = curated_gazetteer()
    out = parse("data scientist with NLP experience open to work", g)
    assert out["must"]["intent_primary"] == ["ml"]  # "nlp" is the parser's rule; it stays the filter
    assert out["should"]["intent_secondary"]  # "data scientist" adds boosts, never a second filter
    assert "data" not in out["unused_terms"] and "scientist" not in out["unused_terms"]


def test_words_near_nothing_stay_unused(directory):
    g = curated_gazetteer()
    out = parse("people who like zxqvw", g)
    assert "zxqvw" in out["unused_terms"]
    assert not [u for u in out["understood"] if u["how"] == "semantic"]


def test_roles_the_directory_lacks_are_never_targets(directory):
    voc = vocabulary(curated_gazetteer())
    intents = {v for v, kind in zip(voc.values, voc.kinds, strict=True) if kind in ("intent", "title")}
    assert "design" not in intents and {"sre", "qa", "ml"} <= intents


def test_switched_off_it_changes_nothing(directory, settings):
    settings.PEOPLE_SEARCH = {"SEMANTIC_ROLES": False}
    g = curated_gazetteer()
    before = parse_deterministic("test automation engineers in pune", gazetteer=g)
    assert enrich(dict(before), gazetteer=g) == before


def test_the_vocabulary_follows_the_cards_under_an_unchanged_gazetteer(db):
    """The roles present come from the cards, so one gazetteer object read over two directories in turn (an
    import of cards with no new terms, or one test's directory after another's) must not keep the first's roles."""
    g = curated_gazetteer()
    make_person("Security Engineer", cards=[{"title": "Security Engineer", "intent_primary": "security"}])
    first = vocabulary(g)
    assert "qa" not in {v for v, k in zip(first.values, first.kinds, strict=True) if k == "intent"}
    make_person("SDET", cards=[{"title": "SDET", "intent_primary": "qa"}])
    second = vocabulary(g)
    assert "qa" in {v for v, k in zip(second.values, second.kinds, strict=True) if k == "intent"}
    assert vocabulary(g) is second  # unchanged cards: the cached vocabulary
