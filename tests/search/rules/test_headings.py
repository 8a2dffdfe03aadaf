"""Heading match (search/rules/headings.py): the question naming a section's heading lifts that section, and a
well-matched section the legs missed joins the candidates.

The scores are checked by value on hand-made terms (a change of formula fails them), and on the demo rulebook
the same question with the stage off and on must differ by the recorded boost.
"""
from __future__ import annotations

import math

import pytest

from search.engine.fusion import Candidate
from search.rules.headings import HeadingTerms, apply_heading_match, heading_terms, match_score
from search.rules.search import RulesSpec, rules_search
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import chunk_id, demo_project, emberfall, rules_index  # noqa: F401 - fixtures


def test_heading_terms_are_the_title_and_the_parents_below_the_chapter_stemmed():
    h = heading_terms(["Gameplay", "Making an Attack", "Temporary Hit Points"])
    assert h.title == frozenset({"temporari", "hit", "point"})
    assert h.parents == frozenset({"make", "attack"})  # "Gameplay", the chapter, is not a parent
    assert heading_terms([]) == HeadingTerms(frozenset(), frozenset())


def test_match_is_one_when_the_question_names_exactly_the_heading_and_falls_with_extra_words():
    idf = {"temporari": 3.0, "hit": 1.0, "point": 1.0, "stack": 2.0}
    heading = HeadingTerms(frozenset({"temporari", "hit", "point"}), frozenset())
    assert match_score(query=frozenset({"temporari", "hit", "point"}), heading=heading, idf=idf) == pytest.approx(1.0)
    with_stack = match_score(query=frozenset({"temporari", "hit", "point", "stack"}), heading=heading, idf=idf)
    assert with_stack == pytest.approx(11 / math.sqrt(11 * 15))  # the cosine of the IDF-weighted sets
    # a question sharing only the common words matches a heading of common words less than the rare one
    assert match_score(query=frozenset({"hit", "point", "stack"}), heading=heading, idf=idf) < with_stack
    assert match_score(query=frozenset({"stack"}), heading=heading, idf=idf) == 0.0


def test_parents_count_at_their_weight():
    idf = {"pact": 2.0, "magic": 1.0, "warlock": 3.0}
    heading = HeadingTerms(frozenset({"pact", "magic"}), frozenset({"warlock"}))
    q = frozenset({"warlock"})
    full = match_score(query=q, heading=heading, idf=idf, parent_weight=1.0)
    half = match_score(query=q, heading=heading, idf=idf, parent_weight=0.5)
    assert match_score(query=q, heading=heading, idf=idf, parent_weight=0.0) == 0.0
    assert full == pytest.approx(9 / math.sqrt(14 * 9)) and half == pytest.approx(4.5 / math.sqrt(7.25 * 9))


def test_apply_lifts_the_named_section_by_strength_times_top_times_match(demo_project):
    pinned = chunk_id(book_id="core", symbol="Pinned")
    dash = chunk_id(book_id="core", symbol="Dash")
    cands = [Candidate(chunk_id=dash, fused_score=1.0), Candidate(chunk_id=pinned, fused_score=0.9)]
    ds = _dataset_ids(demo_project)
    out = apply_heading_match(cands, q="pinned", dataset_ids=ds, scope={}, strength=0.2, recall_max=0)
    assert [c.chunk_id for c in out] == [pinned, dash]
    assert out[0].extra["heading_boost"] == pytest.approx(0.2 * 1.0 * 1.0, abs=1e-6)  # "pinned" is the whole heading
    assert "heading_boost" not in out[1].extra and out[1].fused_score == 1.0


def test_a_well_matched_section_outside_the_candidates_joins_within_the_scope(demo_project):
    pinned = chunk_id(book_id="core", symbol="Pinned")
    dash = chunk_id(book_id="core", symbol="Dash")
    ds = _dataset_ids(demo_project)
    out = apply_heading_match([Candidate(chunk_id=dash, fused_score=1.0)], q="pinned", dataset_ids=ds, scope={},
                              strength=0.2, recall_max=5)
    joined = [c for c in out if c.extra.get("heading_joined")]
    assert pinned in [c.chunk_id for c in joined]
    # the scope is the search's: a book filter that excludes the section keeps it out
    out = apply_heading_match([Candidate(chunk_id=dash, fused_score=1.0)], q="pinned", dataset_ids=ds,
                              scope={"book_id": ["gm-guide"]}, strength=0.2, recall_max=5)
    assert pinned not in [c.chunk_id for c in out]
    # and recall off (the default) adds nothing
    out = apply_heading_match([Candidate(chunk_id=dash, fused_score=1.0)], q="pinned", dataset_ids=ds, scope={},
                              strength=0.2)
    assert [c.chunk_id for c in out] == [dash]


def test_rules_search_applies_it_only_when_switched_on(demo_project):
    q = "escaping a pin"
    kw = {"q": q, "log": False, "prefer_kinds": False, "audience": False, "graph": False, "top_k": 20, "rerank": False}
    off = rules_search(user=None, project=demo_project, spec=RulesSpec(**kw, heading_strength=0.0))
    on = rules_search(user=None, project=demo_project, spec=RulesSpec(**kw, heading_strength=0.3))
    escaping = chunk_id(book_id="core", symbol="Escaping a Pin")
    off_rank = [r["chunk_id"] for r in off["results"]].index(escaping)
    on_rank = [r["chunk_id"] for r in on["results"]].index(escaping)
    assert on_rank == 0 and on_rank <= off_rank
    by_id_off = {r["chunk_id"]: r["score"] for r in off["results"]}
    by_id_on = {r["chunk_id"]: r["score"] for r in on["results"]}
    assert by_id_on[escaping] > by_id_off[escaping]


def _dataset_ids(project) -> list[int]:
    from search.engine.access import accessible_dataset_ids

    return sorted(accessible_dataset_ids(project))


def test_the_api_shows_each_results_heading_boost(demo_project, client_for, make_user):
    """The rules search response carries `heading_boost` beside `policy_boost` and `graph_boost`: the section
    whose heading the question names shows what the heading match added, the same figure rules_search records,
    and each result's score is still its base plus its three boosts."""
    from projects.models import Membership

    member = make_user()
    Membership.objects.create(project=demo_project, user=member, role="member")
    q = "escaping a pin"
    resp = client_for(member).post(f"/api/projects/{demo_project.slug}/rules/search", {"q": q}, format="json")
    assert resp.status_code == 200, resp.content
    results = resp.json()["results"]
    escaping = chunk_id(book_id="core", symbol="Escaping a Pin")
    by_id = {r["chunk_id"]: r for r in results}
    assert by_id[escaping]["heading_boost"] == max(r["heading_boost"] for r in results) > 0  # the exact heading
    assert any(r["heading_boost"] == 0.0 for r in results)   # results whose headings the question does not name
    direct = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False))  # the API's default
    assert {r["chunk_id"]: r["heading_boost"] for r in direct["results"]} == pytest.approx(
        {r["chunk_id"]: r["heading_boost"] for r in results})
    # no trained reranker here, so by default none runs (as for context search): the fused score orders the results
    assert resp.json()["reranker"] is None
    for r in results:
        assert r["why"]["fused_score"] == pytest.approx(
            r["base_score"] + r["policy_boost"] + r["heading_boost"] + r["graph_boost"])
        assert r["why"]["rerank_score"] is None and r["score"] == pytest.approx(r["why"]["fused_score"], abs=1e-4)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    # rerank: true asks for the embedded reranker; its score then orders them, and the boosts still sum to fused
    asked = client_for(member).post(f"/api/projects/{demo_project.slug}/rules/search", {"q": q, "rerank": True},
                                    format="json").json()
    assert asked["reranker"] == "embedded:coverage-v1"
    for r in asked["results"]:
        assert r["why"]["fused_score"] == pytest.approx(
            r["base_score"] + r["policy_boost"] + r["heading_boost"] + r["graph_boost"])
        assert r["score"] == pytest.approx(r["why"]["rerank_score"])
