"""Rules search on the demo rulebook: graph boost parameters, per-result why, both fusions, book/ruleset filters."""
from __future__ import annotations

import pytest

from search.rules.search import DEFAULTS, RulesSpec, rules_search, validate_rules_params
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures

PINNED_Q = "what happens when I'm pinned?"


def _search(project, q=PINNED_Q, **kw):
    """Policies, the heading match and the rerank off unless a test turns them on: the graph arithmetic here is
    checked against the fused score alone (the policies' own boosts are pinned in test_rules_policies.py, the heading match's in
    test_headings.py)."""
    kw = {"prefer_kinds": False, "audience": False, "heading_strength": 0.0, "rerank": False, **kw}
    return rules_search(user=None, project=project, spec=RulesSpec(q=q, log=False, **kw))


def _boosted(res):
    return [r for r in res["results"] if r["graph_boost"] > 0]


def _hops(path: list[str]) -> int:
    return (len(path) - 1) // 2


def _uncapped(res) -> dict[int, dict]:
    """Boosted results the ceiling did not touch (a capped one sits a hair below the top seed's base score)."""
    ceiling = max(r["base_score"] for r in res["results"])
    return {r["chunk_id"]: r for r in _boosted(res) if r["score"] < ceiling - 1e-9}


# ------------------------------------------------------------------------------------------------ parameters

def test_graph_boost_defaults_are_the_recommended_ones():
    p = validate_rules_params({"q": "grappled"})
    assert (p["seed_top_n"], p["depth"], p["decay"], p["graph_top_k"]) == (3, 2, 0.4, 50)
    assert p["graph"] is True and p["fusion"] == DEFAULTS["fusion"]


@pytest.mark.parametrize("field,value", [("seed_top_n", -1), ("seed_top_n", 1.5), ("depth", 9), ("decay", 1.5),
                                         ("decay", "0.4"), ("graph_top_k", True), ("fusion", "dbsf"),
                                         ("graph", "yes"), ("top_k", 0), ("book", ["bad id!"]), ("q", "  ")])
def test_bad_parameter_is_a_400_naming_its_field(field, value):
    from config.errors import BadInput

    with pytest.raises(BadInput) as err:
        validate_rules_params({"q": "grappled", field: value})
    assert err.value.field == field


def test_response_echoes_the_defaults_and_the_overrides(demo_project):
    res = _search(demo_project)
    assert {k: res["graph"][k] for k in ("enabled", "seed_top_n", "depth", "decay", "top_k")} == {
        "enabled": True, "seed_top_n": 3, "depth": 2, "decay": 0.4, "top_k": 50}
    over = _search(demo_project, seed_top_n=1, depth=1, decay=0.9, graph_top_k=7)
    assert {k: over["graph"][k] for k in ("seed_top_n", "depth", "decay", "top_k")} == {
        "seed_top_n": 1, "depth": 1, "decay": 0.9, "top_k": 7}


# ------------------------------------------------------------------------------------------------ graph boost

def test_every_result_carries_base_score_boost_and_path(demo_project):
    res = _search(demo_project, prefer_kinds=True, audience=True)
    assert res["results"]
    assert any(r["policy_boost"] > 0 for r in res["results"])
    for r in res["results"]:
        assert r["score"] == pytest.approx(r["base_score"] + r["policy_boost"] + r["heading_boost"] + r["graph_boost"])
        if r["graph_boost"] > 0:
            assert r["graph_path"][0].startswith("chunk:") and r["graph_path"][-1] == f"chunk:{r['chunk_id']}"
            assert set(r["graph_path"][1::2]) <= {"references", "next", "contains", "describes"}
            assert _hops(r["graph_path"]) in (1, 2)
        else:
            assert r["graph_path"] == []
    # the Pinned condition is the answer and stays on top
    assert res["results"][0]["section_path"] == ["Conditions", "Pinned"]
    assert res["results"][0]["base_score"] == max(r["base_score"] for r in res["results"])
    assert [r["score"] for r in res["results"]] == sorted((r["score"] for r in res["results"]), reverse=True)


def test_one_seed_boost_is_strength_times_top_score_decayed_per_hop(demo_project):
    res = _search(demo_project, fusion="weighted", seed_top_n=1, top_k=30)
    top = max(res["results"], key=lambda r: r["base_score"])
    boosted = _boosted(res)
    assert boosted
    for r in boosted:
        assert r["graph_path"][0] == f"chunk:{top['chunk_id']}"  # the only seed
        expected = 0.05 * top["base_score"] * 0.4 ** (_hops(r["graph_path"]) - 1)
        # never above the best match: a boost that would lift it past the top seed stops just below it
        assert r["graph_boost"] == pytest.approx(min(expected, top["base_score"] - r["base_score"]))
        assert r["score"] < top["score"]
    assert {_hops(r["graph_path"]) for r in boosted} == {1, 2}
    assert top["graph_boost"] == 0.0  # a seed does not boost itself


def test_overrides_change_the_boost_as_configured(demo_project):
    kw = {"fusion": "weighted", "seed_top_n": 1, "top_k": 30}
    base = _search(demo_project, **kw)
    two_hop = [r for r in _boosted(base) if _hops(r["graph_path"]) == 2]
    assert two_hop
    flat = _uncapped(_search(demo_project, decay=1.0, **kw))
    checked = [r for r in two_hop if r["chunk_id"] in flat and r["chunk_id"] in _uncapped(base)]
    assert checked
    for r in checked:  # decay 1.0: two hops weigh as much as one
        assert flat[r["chunk_id"]]["graph_boost"] == pytest.approx(r["graph_boost"] / 0.4)

    shallow = _search(demo_project, depth=1, **kw)
    assert _boosted(shallow) and all(_hops(r["graph_path"]) == 1 for r in _boosted(shallow))

    capped = _search(demo_project, graph_top_k=1, **kw)
    assert len(_boosted(capped)) == 1

    stronger = _uncapped(_search(demo_project, graph_strength=0.2, **kw))
    checked = [r for r in _uncapped(base).values() if r["chunk_id"] in stronger]
    assert checked
    for r in checked:
        assert stronger[r["chunk_id"]]["graph_boost"] == pytest.approx(4 * r["graph_boost"])

    more_seeds = _search(demo_project, fusion="weighted", seed_top_n=3, top_k=30)
    assert sum(r["graph_boost"] for r in _boosted(more_seeds)) > sum(r["graph_boost"] for r in _boosted(base))


@pytest.mark.parametrize("off", [{"graph": False}, {"depth": 0}, {"seed_top_n": 0}, {"graph_strength": 0.0}])
def test_graph_boost_off(demo_project, off):
    res = _search(demo_project, **off)
    assert res["results"]
    assert all(r["graph_boost"] == 0.0 and r["graph_path"] == [] for r in res["results"])
    assert all(r["score"] == pytest.approx(r["base_score"]) for r in res["results"])


# ------------------------------------------------------------------------------------------------ fusions

def test_rrf_base_score_is_reciprocal_rank_sum(demo_project):
    res = _search(demo_project, fusion="rrf", graph=False)
    assert res["fusion"] == "rrf"
    for r in res["results"]:
        ranks = [r["why"]["dense_rank"], r["why"]["sparse_rank"]]
        assert r["base_score"] == pytest.approx(sum(1 / (60 + k) for k in ranks if k is not None))


def test_weighted_base_score_is_min_max_04_sparse_06_dense(demo_project, rules_index):
    from inference.encoders import embed_query
    from search.engine.access import accessible_dataset_ids
    from search.engine.pipeline import build_filter
    from search.engine.sparse import encode_query

    res = _search(demo_project, fusion="weighted", graph=False, candidates=100)
    flt = build_filter(dataset_ids=sorted(accessible_dataset_ids(demo_project)), extra_filter={"kind": ["rules"]})
    dense = rules_index.search_dense(embed_query(PINNED_Q).tolist(), flt=flt, limit=100)
    sparse = rules_index.search_sparse(encode_query(PINNED_Q, kinds=("rules",)), flt=flt, limit=100)

    def minmax(hits):
        lo, hi = min(s for _, s in hits), max(s for _, s in hits)
        return {cid: (s - lo) / (hi - lo) for cid, s in hits}

    nd, ns = minmax(dense), minmax(sparse)
    assert res["results"][0]["base_score"] == pytest.approx(1.0)  # best on both legs
    for r in res["results"]:
        expected = 0.4 * ns.get(r["chunk_id"], 0.0) + 0.6 * nd.get(r["chunk_id"], 0.0)
        assert r["base_score"] == pytest.approx(expected, abs=1e-6)


# ------------------------------------------------------------------------------------------------ filters

def test_book_filter_keeps_one_book_even_with_graph_neighbours_elsewhere(demo_project):
    res = _search(demo_project, books=["gm-guide"])
    assert res["results"] and {r["book_id"] for r in res["results"]} == {"gm-guide"}
    # without the filter the gm-guide pages link to core's Pinned condition, which the boost would bring in
    unfiltered = _search(demo_project, q="monsters that pin")
    assert {"core", "gm-guide"} <= {r["book_id"] for r in unfiltered["results"]}


def test_ruleset_filter(demo_project):
    assert {r["ruleset_id"] for r in _search(demo_project, rulesets=["emberfall"])["results"]} == {"emberfall"}
    assert _search(demo_project, rulesets=["another-game"])["results"] == []


def test_a_query_naming_a_book_does_not_mix_other_books(demo_project):
    res = _search(demo_project, q="what happens when a monster pins someone, in the gm guide")
    assert res["filters"] == {"book": ["gm-guide"], "ruleset": [], "book_from_query": True}
    assert res["results"] and {r["book_id"] for r in res["results"]} == {"gm-guide"}
    core = _search(demo_project, q="pinned condition in the core rules")
    assert core["filters"]["book"] == ["core"] and {r["book_id"] for r in core["results"]} == {"core"}
    # an explicit book wins over a book named in the text
    explicit = _search(demo_project, q="pinned in the gm guide", books=["core"])
    assert explicit["filters"]["book_from_query"] is False
    assert {r["book_id"] for r in explicit["results"]} == {"core"}


def test_analysis_detects_intent_and_entities(demo_project):
    res = _search(demo_project)
    assert "condition" in res["analysis"]["intents"]
    assert {"kind": "condition", "name": "Pinned"} in res["analysis"]["entities"]


# ------------------------------------------------------------------------------------------------ API

def test_api_rules_search(demo_project, client_for, make_user):
    from projects.models import Membership

    member, outsider = make_user(), make_user()
    Membership.objects.create(project=demo_project, user=member, role="member")
    api = client_for(member)
    url = f"/api/projects/{demo_project.slug}/rules/search"
    ok = api.post(url, {"q": PINNED_Q, "fusion": "weighted", "seed_top_n": 1, "depth": 1}, format="json")
    assert ok.status_code == 200, ok.content
    body = ok.json()
    assert body["fusion"] == "weighted" and body["graph"]["seed_top_n"] == 1 and body["graph"]["depth"] == 1
    first = body["results"][0]
    assert {"base_score", "graph_boost", "graph_path", "book_id", "section_path", "page", "chunk_id"} <= set(first)

    assert {"policy_boost"} <= set(first) and body["routing"] == {"top_n": 0, "chapters": []}
    routed = api.post(url, {"q": PINNED_Q, "route_chapters": 1, "expand_aliases": False, "prefer_kinds": False,
                            "audience": False}, format="json").json()
    assert routed["routing"]["chapters"] == [{"book_id": "core", "chapter": "Conditions"}]
    assert routed["fusion"] == "weighted"  # an omitted fusion is the rules lawyer's default, as in evaluate
    assert routed["policies"]["prefer_kinds"] == [] and routed["policies"]["sparse_query"] == PINNED_Q
    assert all(r["policy_boost"] == 0.0 and r["section_path"][0] == "Conditions" for r in routed["results"])

    bad = api.post(url, {"q": PINNED_Q, "decay": 3}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "decay" and bad.json()["code"]
    too_many = api.post(url, {"q": PINNED_Q, "route_chapters": 99}, format="json")
    assert too_many.status_code == 400 and too_many.json()["field"] == "route_chapters"
    unknown = api.post(url, {"q": PINNED_Q, "seeds": 3}, format="json")
    assert unknown.status_code == 400 and unknown.json()["field"] == "seeds"
    not_json = api.post(url, "[1, 2]", content_type="application/json")
    assert not_json.status_code == 400
    assert client_for(outsider).post(url, {"q": PINNED_Q}, format="json").status_code == 404


def test_a_named_ruleset_the_caller_cannot_read_reveals_no_entities(demo_project, emberfall):
    from projects.models import Project
    from search.models import Dataset

    Dataset.objects.filter(project=demo_project, kind="rules").update(is_global=False)
    outsider = Project.objects.create(slug="outsider", name="Outsider")
    res = _search(outsider, rulesets=["emberfall"])
    assert res["results"] == [] and res["analysis"]["entities"] == []
    assert {"kind": "condition", "name": "Pinned"} in _search(demo_project, rulesets=["emberfall"])["analysis"]["entities"]


def test_graph_boost_never_lifts_a_neighbour_over_the_best_match(demo_project):
    """'how do I escape a pin': the Pinned condition is linked from the asked section and used to overtake it."""
    for fusion in ("rrf", "weighted"):
        plain = _search(demo_project, q="how do I escape a pin", graph=False, fusion=fusion)["results"]
        boosted = _search(demo_project, q="how do I escape a pin", fusion=fusion)["results"]
        assert plain[0]["section_path"] == boosted[0]["section_path"] == ["Actions in Combat", "Escaping a Pin"]
        assert _boosted({"results": boosted})  # the graph still reorders what lies below
