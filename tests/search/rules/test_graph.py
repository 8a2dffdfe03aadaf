"""Graph edges (known cross-references on SRD text, vendored in fixtures/srd51, and demo text) and the graph boost's arithmetic."""
from __future__ import annotations

import shutil

import pytest

from search.rules.graph import GraphWalk, apply_graph_boost, build_graph, compute_boosts
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture
from tests.search.ingest.test_rules_enrichment import SRD

# ---------------------------------------------------------------------------------------- pure boost arithmetic

ADJ = {
    "chunk:1": [("chunk:5", "references"), ("section:A", "contains")],
    "chunk:5": [("chunk:1", "references"), ("chunk:6", "next")],
    "chunk:6": [("chunk:5", "next")],
    "section:A": [("chunk:1", "contains"), ("chunk:7", "contains")],
    "chunk:7": [("section:A", "contains")],
    "chunk:2": [("chunk:8", "references")],
    "chunk:8": [("chunk:2", "references")],
}
BASE = {1: 1.0, 2: 0.5, 3: 0.2, 5: 0.1}


def test_boost_follows_depth_and_decay():
    b = compute_boosts(base=BASE, adjacency=ADJ, seed_top_n=1, depth=2, decay=0.4, top_k=50, strength=0.05)
    assert b[5][0] == pytest.approx(0.05)                      # 1 hop: strength * top score
    assert b[6][0] == pytest.approx(0.05 * 0.4)                # 2 hops: * decay
    assert b[7][0] == pytest.approx(0.05 * 0.4)                # through a section node
    assert b[6][1] == ["chunk:1", "references", "chunk:5", "next", "chunk:6"]
    assert 8 not in b                                          # chunk 2 is not a seed with seed_top_n=1
    assert b.get(1) is None                                       # a seed does not boost itself


def test_boost_parameters_change_the_result():
    shallow = compute_boosts(base=BASE, adjacency=ADJ, seed_top_n=1, depth=1, decay=0.4, top_k=50, strength=0.05)
    assert set(shallow) == {5}
    no_decay = compute_boosts(base=BASE, adjacency=ADJ, seed_top_n=1, depth=2, decay=1.0, top_k=50, strength=0.05)
    assert no_decay[6][0] == pytest.approx(0.05)
    two_seeds = compute_boosts(base=BASE, adjacency=ADJ, seed_top_n=2, depth=2, decay=0.4, top_k=50, strength=0.05)
    assert two_seeds[8][0] == pytest.approx(0.05)
    capped = compute_boosts(base=BASE, adjacency=ADJ, seed_top_n=2, depth=2, decay=0.4, top_k=2, strength=0.05)
    assert set(capped) == {5, 8}                               # nearest first
    assert compute_boosts(base=BASE, adjacency=ADJ, seed_top_n=0, depth=2, decay=0.4, top_k=50) == {}
    assert compute_boosts(base=BASE, adjacency=ADJ, seed_top_n=3, depth=0, decay=0.4, top_k=50) == {}


# ---------------------------------------------------------------------------------------- edges in Postgres

def _store(dataset, docs):
    """Chunk rows straight from the chunker (the graph reads only rows; no embeddings needed here)."""
    from search.models import Chunk, Document

    for d in docs:
        doc = Document.objects.create(dataset=dataset, path=d.path, content_hash=d.content_hash)
        Chunk.objects.bulk_create([
            Chunk(document=doc, dataset=dataset, ordinal=i, kind="rules", path=d.path, symbol=c.symbol,
                  heading_path=c.heading_path, start_line=c.start_line, end_line=c.end_line, text=c.text,
                  text_hash=str(i), ruleset_id=c.ruleset_id, book_id=c.book_id, section_path=c.section_path,
                  page=c.page, content_kind=c.content_kind, tags=c.tags, traits=c.traits,
                  is_rule_bearing=c.is_rule_bearing) for i, c in enumerate(d.chunks)])


def _chunk_id(**kw):
    from search.models import Chunk

    return Chunk.objects.get(**kw).pk


def test_srd_grappling_references_the_grappled_condition(db, tmp_path, make_project):
    from search.ingest.rules import read_rulebook
    from search.models import Dataset, GraphEdge
    from search.rules.traversal import build_default_config

    for rel in ("Gameplay/Combat.md", "Gamemastering/Conditions.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SRD / rel, tmp_path / rel)
    ds = Dataset.objects.create(project=make_project("srd-graph"), name="srd", kind="rules")
    _store(ds, read_rulebook(path=tmp_path, ruleset_id="srd51", book_id="srd"))
    config = build_default_config(ruleset_id="srd51")
    assert "Grappled" in config.condition_names and "Dash" in config.action_names
    stats = build_graph(dataset_id=ds.pk, ruleset_id="srd51", book_id="srd", config=config)
    assert set(stats.edges) == {"contains", "next", "describes", "has_trait", "references"}

    grappling = _chunk_id(dataset=ds, symbol="Grappling")
    grappled = _chunk_id(dataset=ds, symbol="Grappled", content_kind="condition")
    edge = GraphEdge.objects.get(source_id=f"chunk:{grappling}", target_id=f"chunk:{grappled}",
                                 relation="references")
    assert edge.metadata == {"via": "mention", "name": "grappled"}
    # a "see X" phrase: the Attack action -> See the "Making an Attack" section
    attack = _chunk_id(dataset=ds, symbol="Attack", content_kind="action")
    making = _chunk_id(dataset=ds, symbol="Making an Attack")
    see = GraphEdge.objects.get(source_id=f"chunk:{attack}", target_id=f"chunk:{making}", relation="references")
    assert see.metadata["via"] == "see"
    assert GraphEdge.objects.filter(source_id="section:Gamemastering > Conditions > Grappled",
                                    target_id=f"chunk:{grappled}", relation="contains").exists()
    assert GraphEdge.objects.filter(source_id=f"chunk:{grappled}", target_id="term:condition:grappled",
                                    relation="describes").exists()
    # rebuilding is idempotent
    again = build_graph(dataset_id=ds.pk, ruleset_id="srd51", book_id="srd", config=config)
    assert again.edges == stats.edges
    assert GraphEdge.objects.filter(dataset=ds).count() == stats.total


@pytest.fixture
def demo_rules(db, edge_index):
    from search.rules.demo import load_demo_rules

    return load_demo_rules()


def test_demo_graph_has_see_and_cross_book_references(demo_rules):
    from search.models import GraphEdge

    pin = _chunk_id(symbol="Pin", book_id="core")
    pinned = _chunk_id(symbol="Pinned", book_id="core")
    monsters = _chunk_id(symbol="Monsters That Pin", book_id="gm-guide")
    assert GraphEdge.objects.filter(source_id=f"chunk:{pin}", target_id=f"chunk:{pinned}", relation="references",
                                    metadata__via="see").exists()
    assert GraphEdge.objects.filter(source_id=f"chunk:{monsters}", target_id=f"chunk:{pinned}",
                                    relation="references").exists()
    cinder = _chunk_id(symbol="Cinderstorm")
    assert GraphEdge.objects.filter(source_id=f"chunk:{cinder}", target_id="trait:school:evocation",
                                    relation="has_trait").exists()


def test_graph_boost_changes_scores_and_is_off_when_disabled(demo_rules):
    from projects.models import Project
    from search.rules.search import RulesSpec, rules_search

    project = Project.objects.get(slug="demo")
    q = "what happens when I'm pinned?"
    on = rules_search(user=None, project=project, spec=RulesSpec(q=q, log=False))
    off = rules_search(user=None, project=project, spec=RulesSpec(q=q, log=False, graph=False))
    assert all(r["graph_boost"] == 0.0 and r["graph_path"] == [] for r in off["results"])
    boosted = [r for r in on["results"] if r["graph_boost"] > 0]
    assert boosted, "the default graph boost should lift a neighbour of the top seeds"
    for r in boosted:
        # the boosts add up to the fused score, which orders the results: no trained reranker, so none by default
        assert r["why"]["fused_score"] == pytest.approx(
            r["base_score"] + r["policy_boost"] + r["heading_boost"] + r["graph_boost"])
        assert r["why"]["rerank_score"] is None and r["score"] == pytest.approx(r["why"]["fused_score"], abs=1e-4)
        assert r["graph_path"][0].startswith("chunk:") and r["graph_path"][-1] == f"chunk:{r['chunk_id']}"
    stronger = rules_search(user=None, project=project, spec=RulesSpec(q=q, log=False, graph_strength=0.5, decay=1.0))
    top_boost = max(r["graph_boost"] for r in stronger["results"])
    assert top_boost > max(r["graph_boost"] for r in boosted)
    # base scores are the same with the boost on or off: only the boost differs
    base_off = {r["chunk_id"]: r["base_score"] for r in off["results"]}
    for r in on["results"]:
        if r["chunk_id"] in base_off:
            assert r["base_score"] == pytest.approx(base_off[r["chunk_id"]])


def test_apply_graph_boost_on_dicts_adds_linked_definitions(demo_rules):
    from search.models import Dataset

    ds = Dataset.objects.get(name="emberfall-rules")
    pin = _chunk_id(symbol="Pin", book_id="core")
    pinned = _chunk_id(symbol="Pinned", book_id="core")
    out = apply_graph_boost([{"chunk_id": pin, "score": 1.0}], dataset_ids=[ds.pk], walk=GraphWalk(seed_top_n=1, depth=1))
    by_id = {c["chunk_id"]: c for c in out}
    assert by_id[pinned]["base_score"] == 0.0 and by_id[pinned]["graph_boost"] == pytest.approx(0.05)
    assert by_id[pinned]["graph_path"] == [f"chunk:{pin}", "references", f"chunk:{pinned}"]
    none = apply_graph_boost([{"chunk_id": pin, "score": 1.0}], dataset_ids=[ds.pk], walk=GraphWalk(seed_top_n=1, depth=1),
                             missing_filter={"book_id": ["gm-guide"]})
    assert [c["chunk_id"] for c in none] == [pin]  # neighbours outside the book filter are not added


# ------------------------------------------------------------------------------------------------ similarity edges

def test_nearest_pairs_keeps_the_k_nearest_above_the_threshold_once_per_pair():
    from search.rules.graph import nearest_pairs

    # unit vectors at angles: 1 and 2 are 0.995 apart, 3 is 0.6 from 1, 4 is orthogonal to everything but 3
    vecs = [[1.0, 0.0, 0.0], [0.995, 0.0998749, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]]
    pairs = nearest_pairs([1, 2, 3, 4], vecs, k=1, threshold=0.5)
    assert [(a, b) for a, b, _ in pairs] == [(1, 2), (2, 3)]   # 1<->2 mutual; 3's nearest is 2 (0.677)
    assert pairs[0][2] == pytest.approx(0.995, abs=1e-4)
    assert [(a, b) for a, b, _ in nearest_pairs([1, 2, 3, 4], vecs, k=2, threshold=0.5)] == [(1, 2), (1, 3), (2, 3)]
    assert nearest_pairs([1, 2, 3, 4], vecs, k=3, threshold=0.99) == [(1, 2, pytest.approx(0.995, abs=1e-4))]
    assert nearest_pairs([1], [[1.0, 0.0]], k=3, threshold=0.0) == []


def test_demo_graph_has_similarity_edges_from_the_stored_embeddings(demo_rules):
    import numpy as np

    from inference.encoders import dense_model_id
    from inference.models import EmbeddingCache
    from search.models import Chunk, GraphEdge
    from search.rules.graph import DEFAULT_SIMILAR_THRESHOLD

    edges = list(GraphEdge.objects.filter(relation="similar_to", ruleset_id="emberfall"))
    assert edges
    hashes = dict(Chunk.objects.filter(ruleset_id="emberfall").values_list("id", "text_hash"))
    vectors = dict(EmbeddingCache.objects.filter(model_id=dense_model_id(), text_hash__in=hashes.values())
                   .values_list("text_hash", "vector"))
    for e in edges:
        a, b = (int(n.split(":")[1]) for n in (e.source_id, e.target_id))
        assert a < b
        va, vb = np.asarray(vectors[hashes[a]]), np.asarray(vectors[hashes[b]])
        cos = float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))
        assert e.metadata["sim"] == pytest.approx(cos, abs=1e-3)
        assert cos >= DEFAULT_SIMILAR_THRESHOLD


def test_boost_over_similarity_edges_only_walks_similar_to(demo_rules):
    from projects.models import Project
    from search.rules.search import RulesSpec, rules_search

    project = Project.objects.get(slug="demo")
    res = rules_search(user=None, project=project, spec=RulesSpec(q="what happens when I'm pinned?", log=False, top_k=30, relations=["similar_to"]))
    walked = {rel for r in res["results"] for rel in r["graph_path"][1::2]}
    assert walked == {"similar_to"}
