"""One metrics module: the per-ranking nDCG that fusion choice and reranker training use agrees with the ranx
figure evaluation reports, online and offline use the same cutoffs, and the rule for a query with no answer
is the documented one."""
from __future__ import annotations

import random

import pytest

from search.quality import metrics


def _random_case(rng: random.Random) -> tuple[list[str], dict[str, int]]:
    docs = [f"d{i}" for i in range(30)]
    ranked = rng.sample(docs, rng.randint(0, 25))
    rels = {d: rng.choice([0, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 8))}
    if not any(rels.values()):
        rels[docs[0]] = 1
    return ranked, rels


def test_per_ranking_ndcg_equals_the_ranx_figure_evaluation_reports():
    rng = random.Random(7)
    for i in range(60):
        ranked, rels = _random_case(rng)
        run = {"q": metrics.ranked_to_run([(d, 0.0) for d in ranked])}
        ranx = metrics.compute_metrics(qrels={"q": rels}, run=run, names=("ndcg@10",), places=None)
        assert metrics.ndcg(ranked, rels) == pytest.approx(ranx["ndcg@10"], abs=1e-9), i


def test_online_and_offline_report_the_same_cutoffs():
    assert metrics.NDCG_K == metrics.MRR_K == 10
    online = metrics.online_scores(qrels={"s": {"a": 1}}, run={"s": {"a": 1.0}})
    assert set(online) == {"mrr@10", "ndcg@10"} <= set(metrics.RANX_METRICS)


def test_a_relevant_result_below_the_cutoff_scores_zero():
    ranked = [f"x{i}" for i in range(10)] + ["gold"]
    below = metrics.compute_metrics(qrels={"q": {"gold": 1}}, run={"q": metrics.ranked_to_run([(d, 0) for d in ranked])},
                                    names=("mrr@10", "ndcg@10"))
    assert below == {"mrr@10": 0.0, "ndcg@10": 0.0}
    assert metrics.ndcg(ranked, {"gold": 1}) == 0.0 and metrics.ndcg(ranked[-1:], {"gold": 1}) == 1.0


def test_a_scorable_query_with_no_result_counts_as_zero_and_an_unscorable_one_is_left_out():
    qrels = {"answered": {"a": 1}, "no_result": {"b": 1}, "no_gold": {"c": 0}}
    m = metrics.compute_metrics(qrels=qrels, run={"answered": {"a": 1.0}}, names=("mrr@10",))
    assert m["mrr@10"] == pytest.approx(0.5)


def test_online_a_session_judged_all_irrelevant_scores_zero_instead_of_being_left_out():
    scores = metrics.online_scores(qrels={"good": {"a": 1}, "bad": {"b": 0}}, run={"good": {"a": 1.0},
                                                                                 "bad": {"b": 1.0}})
    assert scores == {"mrr@10": pytest.approx(0.5), "ndcg@10": pytest.approx(0.5)}
