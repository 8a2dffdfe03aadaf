"""The gazetteer's matching: word boundaries, aliases from three sources, spacing variants and typos (no DB)."""
import pytest

from people.parsing.gazetteer import build, curated_gazetteer, key_of, osa_distance

TERMS = [("company", "stripe", 40, {}), ("company", "motorola", 5, {}), ("company", "ola", 3, {}),
         ("company", "kestrel robotics", 12, {}), ("company", "dream11", 2, {}), ("company", "search", 9, {}),
         ("city", "berlin", 30, {"country": "germany"}), ("city", "tallinn", 9, {"country": "estonia"}),
         ("company", "strive", 1, {}), ("skill", "kafka", 3, {})]


@pytest.fixture
def g():
    return build(terms=TERMS, aliases=[("company", "big blue", "ibm"), ("city", "tln", "tallinn")])


def norms(matches, kind="company"):
    return [m.norm for m in matches if m.kind == kind]


def test_word_boundaries_ola_never_matches_inside_motorola(g):
    assert norms(g.scan("engineers at motorola", kinds=["company"])) == ["motorola"]
    assert norms(g.scan("motorolas and ola-cabs people", kinds=["company"])) == ["ola"]
    assert norms(g.fuzzy("motorol engineers", kinds=["company"])) == ["motorola"]  # a typo of the long name
    assert g.fuzzy("ola", kinds=["company"]) == []  # short words are never corrected


def test_aliases_from_the_admin_the_curated_list_and_spacing_variants(g):
    found = g.scan("ex big blue in bengaluru, dream 11 and tln", kinds=["company", "city"])
    assert [(m.kind, m.norm, m.how) for m in found] == [
        ("company", "ibm", "alias"), ("city", "bangalore", "alias"), ("company", "dream11", "alias"),
        ("city", "tallinn", "alias")]


def test_typos_pick_the_closest_then_the_most_common(g):
    assert [(m.norm, m.how) for m in g.fuzzy("at flipkrat", kinds=["company"])] == [("flipkart", "fuzzy")]
    # "stripr" is one edit from stripe (40 cards) and two from strive (1 card): the closest wins
    assert norms(g.fuzzy("stripr", kinds=["company"])) == ["stripe"]
    assert norms(g.fuzzy("kestrel robotcs", kinds=["company"])) == ["kestrel robotics"]
    assert norms(g.fuzzy("berln", kinds=["city"]), "city") == ["berlin"]
    assert g.fuzzy("engineers", kinds=["company"]) == []  # common words are never typo-corrected


def test_a_directory_value_spelled_like_a_common_word_is_not_a_name(g):
    assert g.scan("search engineers", kinds=["company"]) == []  # data said company "search": not trusted


def test_curated_only_without_a_directory():
    g = curated_gazetteer()
    assert norms(g.scan("at tata consultancy services", kinds=["company"])) == ["tcs"]
    assert g.scan("at stripe", kinds=["company"]) == []


def test_key_and_distance_helpers():
    assert key_of("Node.js / CI-CD, Byju's") == "node js ci cd byjus"
    assert osa_distance("flipkrat", "flipkart", limit=2) == 1  # a swap is one edit
    assert osa_distance("kitten", "sitting", limit=5) == 3
    assert osa_distance("abc", "abcdefgh", limit=2) == 3  # past the limit: limit + 1
