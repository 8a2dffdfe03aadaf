"""Chapter routing: a classifier over chapter centroids and the traversal config, and a rules
search that stays inside the routed chapters."""
from __future__ import annotations

import numpy as np
import pytest

from search.rules.chapter_routing import ChapterIndex, chapter_of, score_chapters
from search.rules.traversal import QueryAnalysis
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures


def _index() -> ChapterIndex:
    return ChapterIndex(chapters=[("core", "Spells"), ("core", "Conditions")],
                        centroids=np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32),
                        kind_share=[{"spell": 1.0}, {"condition": 0.5, "rule": 0.5}],
                        paths=[["core/Spells.md"], ["core/Conditions.md"]])


def test_chapters_rank_by_cosine_to_their_centroid():
    ranked = score_chapters(query_vector=np.array([0.6, 0.8]), index=_index())
    assert [ch for ch, _ in ranked] == [("core", "Conditions"), ("core", "Spells")]
    assert [s for _, s in ranked] == pytest.approx([0.8, 0.6])


def test_a_chapter_with_one_chunk_close_to_the_query_beats_a_closer_centroid():
    idx = _index()
    # Spells: two chunks, one exactly the query direction; Conditions: one chunk at the centroid
    idx.vectors = np.array([[0.0, 1.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    idx.owner = np.array([0, 0, 1])
    idx.centroids = np.array([[0.3162, 0.9487], [0.0, 1.0]], dtype=np.float32)
    ranked = score_chapters(query_vector=np.array([0.6, 0.8]), index=idx)
    # Spells: (centroid 0.6*0.3162 + 0.8*0.9487 = 0.9487, closest 1.0) / 2 = 0.9743; Conditions: (0.8 + 0.8) / 2
    assert [ch for ch, _ in ranked] == [("core", "Spells"), ("core", "Conditions")]
    assert [s for _, s in ranked] == pytest.approx([0.9743, 0.8], abs=1e-4)


def test_the_config_preferred_kinds_lift_a_chapter_rich_in_them():
    analysis = QueryAnalysis(intents=["spell"], prefer_kinds=["spell", "rule"])
    ranked = score_chapters(query_vector=np.array([0.6, 0.8]), index=_index(), analysis=analysis)
    # Spells: 0.6 + 0.1 * 1.0 (all spell) = 0.7; Conditions: 0.8 + 0.1 * 0.5 / 2 (half rule, 2nd kind) = 0.825
    assert [s for _, s in ranked] == pytest.approx([0.825, 0.7])
    strong = score_chapters(query_vector=np.array([0.7, 0.72]), index=_index(), analysis=analysis)
    assert strong[0][0] == ("core", "Spells")              # without the policy Conditions would win (0.72 > 0.7)


def test_chapter_is_the_first_level_of_the_section_path():
    assert chapter_of(["Gameplay", "Combat", "Grappling"]) == "Gameplay"
    assert chapter_of([]) == ""


def test_routed_search_stays_inside_the_likeliest_chapters(demo_project):
    from search.rules.search import RulesSpec, rules_search

    q = "what happens when I'm pinned?"
    whole = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30))
    assert whole["routing"] == {"top_n": 0, "chapters": []}
    assert len({r["section_path"][0] for r in whole["results"]}) > 1
    one = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30, route_chapters=1))
    assert one["routing"]["chapters"] == [{"book_id": "core", "chapter": "Conditions"}]
    assert one["results"] and {(r["book_id"], r["section_path"][0]) for r in one["results"]} == {
        ("core", "Conditions")}                              # graph neighbours outside are not added either
    assert one["results"][0]["section_path"] == ["Conditions", "Pinned"]
    three = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30, route_chapters=3))
    chapters = {(c["book_id"], c["chapter"]) for c in three["routing"]["chapters"]}
    assert len(chapters) == 3 and ("core", "Conditions") in chapters
    assert {(r["book_id"], r["section_path"][0]) for r in three["results"]} <= chapters
