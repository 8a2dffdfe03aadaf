"""The per-category breakdown of a rules evaluation (search/quality/evaluation.py): categories load from the
question file, each category's metrics are the harness's metrics over its questions only, and the report's
markdown shows them as a table.

Why here: the breakdown exists for the rules question sets (SRD: conditions, combat, ...), which live beside
these tests. The metrics are checked against hand-computed values, so a breakdown that mixed categories or
averaged over the wrong questions fails.
"""
from __future__ import annotations

import json

import pytest

from search.quality.evaluation import (
    EvalReport,
    category_table,
    load_rules_queries,
    markdown_table,
    metrics_by_category,
)


def _write(tmp_path, records):
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"queries": records}))
    return path


def test_categories_load_from_the_file_and_default_to_empty(tmp_path):
    path = _write(tmp_path, [{"id": "a", "query": "x", "category": "combat", "expected_sections": [["A"]]},
                             {"id": "b", "query": "y", "expected_sections": [["B"]]}])
    qs = load_rules_queries(path)
    assert [q.category for q in qs] == ["combat", ""]


def test_each_category_is_scored_over_its_own_questions_only(tmp_path):
    path = _write(tmp_path, [{"id": "a", "query": "x", "category": "combat"},
                             {"id": "b", "query": "y", "category": "combat"},
                             {"id": "c", "query": "z", "category": "spells"},
                             {"id": "d", "query": "w"},                       # no category: left out
                             {"id": "e", "query": "v", "category": "monsters"}])  # gold resolved to nothing
    queries = load_rules_queries(path)
    qrels = {"a": {"1": 1}, "b": {"2": 1}, "c": {"3": 1}, "d": {"4": 1}, "e": {}}
    run = {"a": {"1": 2.0, "9": 1.0},          # gold at rank 1
           "b": {"9": 2.0, "2": 1.0},          # gold at rank 2
           "c": {"8": 2.0, "9": 1.0},          # gold missed
           "d": {"4": 1.0}}
    out = metrics_by_category(queries=queries, qrels=qrels, run=run)
    assert list(out) == ["combat", "spells"]
    assert out["combat"]["queries"] == 2 and out["spells"]["queries"] == 1
    assert out["combat"]["mrr@10"] == pytest.approx((1 + 1 / 2) / 2)
    assert out["combat"]["hit@1"] == pytest.approx(0.5)
    assert out["spells"]["mrr@10"] == 0.0 and out["spells"]["hit@10"] == 0.0


def test_the_report_markdown_carries_the_category_table_when_present():
    by_category = {"default": {"combat": {"queries": 2, "ndcg@10": 0.75}, "spells": {"queries": 1, "ndcg@10": 0.5}},
                   "sparse": {"combat": {"queries": 2, "ndcg@10": 0.25}}}
    table = category_table(by_category)
    assert "| pipeline | combat (2) | spells (1) |" in table
    assert "| default | 0.7500 | 0.5000 |" in table and "| sparse | 0.2500 |  |" in table
    report = EvalReport(collection="rules:x", queries=3, pipelines={"default": {"ndcg@10": 0.6}}, timings={},
                        extra={"by_category": by_category})
    assert table in markdown_table(report)
    assert "by category" not in markdown_table(EvalReport(collection="rules:x", queries=3,
                                                          pipelines={"default": {"ndcg@10": 0.6}}, timings={}))
    assert category_table({}) == ""
