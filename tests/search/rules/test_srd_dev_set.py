"""The SRD 5.1 development questions (search/rules/demo_rules/srd51_dev_queries.json, and the second and third sets,
srd51_dev2_queries.json and srd51_dev3_queries.json, each written apart from the others), on which the rules
retrieval is tuned and which a tenant judges to train its model, are well formed, resolve in the SRD, and are not the
test questions (srd51_eval_queries.json).

Why: a quality claim must come from questions nobody tuned on. The dev set is where settings are chosen; if it shared wording with the 99 test questions, a setting chosen on it would be chosen on them too.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from search.engine.sparse import tokenize
from search.quality.evaluation import load_rules_queries
from tests.search.rules.test_srd_eval_set import CATEGORIES, CHAPTERS, FULL_SRD, SET, _resolves, _section_paths

DEV = SET.parent / "srd51_dev_queries.json"
DEV2 = SET.parent / "srd51_dev2_queries.json"
DEV3 = SET.parent / "srd51_dev3_queries.json"
DEV_SETS = pytest.mark.parametrize("dev", [DEV, DEV2, DEV3], ids=["dev", "dev2", "dev3"])
LATER_SETS = pytest.mark.parametrize("later", [DEV2, DEV3], ids=["dev2", "dev3"])


def _records(path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["queries"]


def _words(text: str) -> set[str]:
    """Content words, stemmed (the sparse leg's prose analyzer: stop words like "what happens if" do not count)."""
    return set(tokenize(text, code=False))


@DEV_SETS
def test_dev_set_loads_with_the_harness_loader_with_categories(dev):
    queries = load_rules_queries(dev)
    assert 40 <= len(queries) <= 60
    assert all(q.book_id == "srd" and q.ruleset_id == "srd51" and q.expected_sections for q in queries)
    assert set(Counter(q.category for q in queries)) == CATEGORIES
    assert len({q.id for q in queries}) == len(queries)
    for r in _records(dev):
        assert len(r["answer"].split()) >= 3, r["id"]
        for path in r["expected_sections"]:
            assert path[0] in CHAPTERS and len(path) >= 2, (r["id"], path)
    assert "Wizards of the Coast" in json.loads(dev.read_text(encoding="utf-8"))["about"]


@DEV_SETS
def test_no_dev_question_is_a_test_question_or_close_to_one(dev):
    """Not the same question, and no pair sharing more than half of the longer one's content words."""
    test = [_words(r["query"]) for r in _records(SET)]
    for r in _records(dev):
        words = _words(r["query"])
        for t in test:
            assert len(words & t) <= 0.5 * max(len(words), len(t)), r["query"]


@DEV_SETS
def test_no_dev_question_is_its_gold_heading(dev):
    for r in _records(dev):
        for path in r["expected_sections"]:
            assert r["query"].lower().strip(" ?") != path[-1].lower(), r["id"]


@pytest.mark.skipif(not (FULL_SRD / "Legal.md").is_file(), reason="the full SRD 5.1 is not beside the repository")
@DEV_SETS
def test_every_dev_gold_path_resolves_in_the_full_srd(dev):
    paths = _section_paths(FULL_SRD)
    missing = [(r["id"], p) for r in _records(dev) for p in r["expected_sections"] if not _resolves(p, paths)]
    assert not missing


@pytest.mark.parametrize(("earlier", "later"), [(DEV, DEV2), (DEV, DEV3), (DEV2, DEV3)],
                         ids=["dev-dev2", "dev-dev3", "dev2-dev3"])
def test_each_later_dev_set_asks_about_other_rules_than_the_earlier_ones(earlier, later):
    """Two sets that judge the same sections would be one set twice: each later set is there to add evidence."""
    first = {tuple(p) for r in _records(earlier) for p in r["expected_sections"]}
    second = [(r["id"], tuple(p)) for r in _records(later) for p in r["expected_sections"]]
    assert not [(rid, p) for rid, p in second if p in first]
    assert not {r["query"] for r in _records(earlier)} & {r["query"] for r in _records(later)}


@LATER_SETS
def test_the_later_dev_sets_judge_no_section_that_a_test_question_judges(later):
    """The later sets are what a tenant's judgments train the model on (README, "Rules questions: SRD"): a question
    on a test question's gold section, however it is worded, would teach the test."""
    test_gold = {tuple(p) for r in _records(SET) for p in r["expected_sections"]}
    assert not [(r["id"], p) for r in _records(later) for p in r["expected_sections"] if tuple(p) in test_gold]


@pytest.mark.skipif(not (FULL_SRD / "Legal.md").is_file(), reason="the full SRD 5.1 is not beside the repository")
@LATER_SETS
def test_the_later_dev_sets_gold_sections_resolve_to_no_test_gold_section(later):
    """The same screen on the sections the paths name in the SRD: a path and a longer one ending the same way name
    one section (the suffix rule of search.quality.evaluation.resolve_expected), which tuple equality would miss."""
    paths = _section_paths(FULL_SRD)

    def sections(expected: list[str]) -> set[tuple[str, ...]]:
        return {tuple(p) for p in paths if _resolves(expected, [p])}

    test_gold = set().union(*(sections(p) for r in _records(SET) for p in r["expected_sections"]))
    assert not [(r["id"], p) for r in _records(later) for p in r["expected_sections"] if sections(p) & test_gold]
