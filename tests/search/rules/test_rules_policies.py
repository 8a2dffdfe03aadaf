"""Traversal policies that act: prefer_kinds, audience and graph.relations change the ranking.

Each test fails if its policy is computed but ignored: the boosts are checked by value on hand-made
candidates, and on the demo rulebook the same query with the policy off must differ exactly by the boost.
"""
from __future__ import annotations

import pytest

from search.engine.fusion import Candidate
from search.rules.policies import (
    STRUCTURAL_RELATIONS,
    PolicyWeights,
    apply_policies,
    chunk_audience,
    graph_relations,
)
from search.rules.traversal import DEFAULT_GM_KEYWORDS, DEFAULT_POLICIES, QueryAnalysis
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures


@pytest.mark.parametrize(("book", "path", "section", "audience"), [
    ("gm-guide", "gm-guide/Running Combat.md", ["Running Combat"], "gm"),
    ("srd", "srd/Gamemastering/Traps.md", ["Traps"], "gm"),        # "traps" is the keyword "trap", plural
    ("srd", "srd/Monsters/Aboleth.md", ["Aboleth"], "gm"),
    ("core", "core/Conditions.md", ["Conditions"], "player"),
    ("srd", "srd/Gameplay/Combat.md", ["Combat"], "player"),       # "encounter" in prose does not count
    ("core", "core/Stigma.md", ["Stigma"], "player"),              # "gm" inside a word is not the keyword
])
def test_chunk_audience_comes_from_gm_keywords_in_book_path_or_chapter(book, path, section, audience):
    assert chunk_audience(book_id=book, path=path, section_path=section, gm_keywords=DEFAULT_GM_KEYWORDS) == audience


def _cands(*scores: float) -> list[Candidate]:
    return [Candidate(chunk_id=i + 1, fused_score=s) for i, s in enumerate(scores)]


def test_prefer_kinds_lifts_the_preferred_kind_by_its_strength_first_kind_weighing_most():
    analysis = QueryAnalysis(intents=["spell"], prefer_kinds=["spell", "rule"])
    kinds = {1: "narrative", 2: "rule", 3: "spell"}
    out = apply_policies(_cands(1.0, 0.99, 0.98), analysis=analysis, kind_of=kinds, audience_of={},
                         weights=PolicyWeights(kind_strength=0.05))
    assert [c.chunk_id for c in out] == [3, 2, 1]
    by_id = {c.chunk_id: c for c in out}
    assert by_id[3].fused_score == pytest.approx(0.98 + 0.05 * 1.0)       # first preferred kind: full unit
    assert by_id[2].fused_score == pytest.approx(0.99 + 0.05 * 1.0 / 2)   # second: half
    assert by_id[1].fused_score == 1.0 and "policy_boost" not in by_id[1].extra
    off = apply_policies(_cands(1.0, 0.99, 0.98), analysis=analysis, kind_of=kinds, audience_of={},
                         weights=PolicyWeights(use_kinds=False, kind_strength=0.05))
    assert [c.chunk_id for c in off] == [1, 2, 3]


def test_audience_lifts_the_sections_written_for_the_detected_reader():
    gm = QueryAnalysis(audience="gm")
    audiences = {1: "player", 2: "gm"}
    out = apply_policies(_cands(1.0, 0.98), analysis=gm, kind_of={}, audience_of=audiences,
                         weights=PolicyWeights(audience_strength=0.03))
    assert [c.chunk_id for c in out] == [2, 1]
    assert out[0].extra["policy_boost"] == pytest.approx(0.03)
    player = apply_policies(_cands(1.0, 0.98), analysis=QueryAnalysis(audience="player"), kind_of={},
                            audience_of=audiences, weights=PolicyWeights(audience_strength=0.03))
    assert [c.chunk_id for c in player] == [1, 2] and player[0].fused_score == pytest.approx(1.03)
    off = apply_policies(_cands(1.0, 0.98), analysis=gm, kind_of={}, audience_of=audiences,
                         weights=PolicyWeights(use_audience=False))
    assert [c.chunk_id for c in off] == [1, 2] and off[0].fused_score == 1.0


def test_graph_relations_come_from_the_config_and_unknown_ones_are_ignored():
    class Cfg:
        policies = {"graph": {"relations": ["next", "similar_to", "bogus"]}}

    assert graph_relations(Cfg()) == ("next", "similar_to")
    assert graph_relations(None) == STRUCTURAL_RELATIONS
    Cfg.policies = {"graph": {"relations": ["bogus"]}}
    assert graph_relations(Cfg()) == STRUCTURAL_RELATIONS


# ------------------------------------------------------------------------------------------------ on the demo book

def _search(project, q, **kw):
    from search.rules.search import RulesSpec, rules_search

    kw = {"heading_strength": 0.0, "rerank": False, **kw}  # the policies' arithmetic alone (headings: test_headings.py)
    return rules_search(user=None, project=project, spec=RulesSpec(q=q, log=False, graph=False, top_k=30, **kw))


def test_prefer_kinds_boosts_the_kinds_the_query_intent_prefers_and_nothing_when_off(demo_project):
    q = "casting Cinderstorm"  # spell intent (the verb and the entity)
    on = _search(demo_project, q)
    prefer = on["analysis"]["prefer_kinds"]
    assert prefer[:2] == ["spell", "rule"] and on["policies"]["prefer_kinds"] == prefer
    top = max(r["base_score"] for r in on["results"])
    lifted = [r for r in on["results"] if r["content_kind"] in prefer]
    assert lifted
    for r in on["results"]:
        want = 0.03 * top / (prefer.index(r["content_kind"]) + 1) if r["content_kind"] in prefer else 0.0
        assert r["policy_boost"] == pytest.approx(want)
        assert r["score"] == pytest.approx(r["base_score"] + want)
    off = _search(demo_project, q, prefer_kinds=False, audience=False)
    assert all(r["policy_boost"] == 0.0 and r["score"] == r["base_score"] for r in off["results"])


def test_audience_boosts_gm_guide_sections_for_a_gm_question_and_nothing_when_off(demo_project):
    q = "which trap suits an encounter with an ash crawler"  # GM keywords, no player wording
    on = _search(demo_project, q, prefer_kinds=False)
    assert on["analysis"]["audience"] == "gm"
    top = max(r["base_score"] for r in on["results"])
    by_book = {r["book_id"] for r in on["results"]}
    assert {"core", "gm-guide"} <= by_book
    for r in on["results"]:
        assert r["policy_boost"] == pytest.approx(0.03 * top if r["book_id"] == "gm-guide" else 0.0)
    off = _search(demo_project, q, prefer_kinds=False, audience=False)
    assert all(r["policy_boost"] == 0.0 for r in off["results"])


def test_graph_relations_policy_selects_the_edges_the_boost_walks(demo_project):
    from search.rules.search import RulesSpec, rules_search
    from search.rules.traversal import build_default_config, load_config, save_config

    def walked(res) -> set[str]:
        return {rel for r in res["results"] for rel in r["graph_path"][1::2]}

    q = "what happens when I'm pinned?"
    default = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30))
    assert default["policies"]["graph_relations"] == list(STRUCTURAL_RELATIONS)
    assert len(walked(default)) >= 2
    cfg = load_config(ruleset_id="emberfall")
    save_config(ruleset_id="emberfall", names={k: getattr(cfg, f"{k}_names") for k in
                                                ("condition", "spell", "feat", "item", "action")},
                policies={**DEFAULT_POLICIES, "graph": {"relations": ["next"]}})
    only_next = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30))
    assert only_next["policies"]["graph_relations"] == ["next"]
    assert walked(only_next) == {"next"}
    # a per-call override wins over the config (the evaluation's ablation rows use it)
    refs = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30, relations=["references"]))
    assert walked(refs) <= {"references"} and walked(refs) != walked(only_next)
    # a rebuilt default config keeps the GM's edited policy
    assert build_default_config(ruleset_id="emberfall").policies["graph"]["relations"] == ["next"]
