"""One nDCG for the whole project: search's evaluation and people's benchmark score a ranking with the same figure."""
import math

import pytest

from config.metrics import graded_ndcg
from people.evaluation.benchmark import ndcg_at
from search.quality.metrics import ndcg


def test_graded_ndcg_uses_linear_gains_a_log2_discount_and_the_ideal_of_every_positive_grade():
    grades = {"a": 3, "b": 2, "c": 1, "z": 0}
    got = graded_ndcg(ranked=["c", "x", "a"], grades=grades, k=3)
    dcg = 1 / math.log2(2) + 0 + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert got == pytest.approx(dcg / ideal)
    assert graded_ndcg(ranked=["a", "b", "c"], grades=grades, k=3) == pytest.approx(1.0)
    assert graded_ndcg(ranked=["a"], grades={"z": 0}, k=3) == 0.0  # nothing relevant to find


def test_search_and_people_report_the_same_ndcg_for_the_same_graded_ranking():
    grades = {"p1": 3, "p2": 2, "p3": 2, "p4": 1, "p5": 0}
    for ranked in (["p1", "p2", "p3"], ["p5", "p4", "p3", "p2", "p1"], ["q", "p2"], []):
        for k in (1, 6, 10):
            assert ndcg(ranked, grades, k=k) == ndcg_at(ranked, grades, k) == graded_ndcg(ranked=ranked, grades=grades,
                                                                                           k=k)
