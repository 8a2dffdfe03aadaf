"""Rules evaluation runs (issue 16 §1): evaluability, cross-book contamination and answer similarity as
`evaluate_rules` reports them, on the demo rulebook ingested for real.
"""
from __future__ import annotations

import json

import pytest

from search.evaluation import answer_cosine
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures


def test_answer_cosine_is_one_for_the_same_answer_and_ranks_a_paraphrase_above_an_unrelated_one(db):
    gold = "A pinned character's speed is 0."
    same, para, other, empty = answer_cosine([
        (gold, gold),
        ("The speed of a pinned creature drops to zero.", gold),
        ("Fireball deals 8d6 fire damage in a 20-foot radius.", gold),
        ("", gold),
    ])
    assert same == pytest.approx(1.0, abs=1e-5)
    assert para > other + 0.2
    assert 0.0 < other < para < same
    assert empty == 0.0


def _queries(tmp_path, items) -> str:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps({"queries": items}))
    return str(path)


def test_evaluate_rules_reports_evaluability_contamination_and_both_answer_similarities(demo_project, tmp_path):
    from search.answer import extractive_answer
    from search.evaluation_runs import evaluate_rules
    from search.models import Chunk
    from search.rules_search import rules_search

    q = "what happens when I'm pinned?"
    found = rules_search(user=None, project=demo_project, q=q, log=False, top_k=50)
    top10 = list(Chunk.objects.filter(id__in=found["candidate_ids"][:10]).values("id", "book_id", "text"))
    top10.sort(key=lambda r: found["candidate_ids"].index(r["id"]))
    produced, _ = extractive_answer(q=q, results=top10[:5])
    other_books = sum(1 for r in top10 if r["book_id"] != "core") / len(top10)
    path = _queries(tmp_path, [
        # gold answer = exactly what the extractive answer produces: both similarities are 1 for this query
        {"id": "a", "query": q, "book_id": "core", "expected_sections": [["Conditions", "Pinned"]],
         "answer": produced},
        # its gold section does not exist: not evaluable; no book, no answer -> no contamination, no similarity
        {"id": "b", "query": "how do starships jump", "expected_sections": [["Starships", "Jump Drives"]]},
    ])
    report = evaluate_rules(path=path, project_slug="demo", pipelines=["default", "sparse"], progress=False)
    assert report.queries == 2
    m = report.pipelines["default"]
    assert m["evaluability"] == 0.5
    assert m["hit@1"] == 1.0  # query a finds Pinned first; b has no gold in the book: ranked metrics leave it out
    assert m["cross_book_contamination"] == pytest.approx(round(other_books, 4))
    assert m["answer_similarity"] == 1.0
    assert m["answer_cosine"] == pytest.approx(1.0, abs=1e-4)
    assert report.pipelines["sparse"]["evaluability"] == 0.5
