"""Graded nDCG, the one definition both products score rankings with.

Why in config: search (evaluation, fusion choice, adaptation, reranker training: search.quality.metrics) and people
(its graded benchmark: people.evaluation.benchmark) both report nDCG and must mean the same figure, but people may not import
search. The function is pure arithmetic with no Django, no model and no setting, so it sits in the shared kernel
below both rather than in a product; each product keeps its own cutoff (search 10, people 6, what a search shows).

The definition is ranx's (what `manage.py evaluate` reports): linear graded gains, a log2 discount, and the ideal
order of every positive grade, so a relevant item left out of the ranking still lowers the score. Unlisted ids gain
nothing; a ranking judged against no positive grade scores 0.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence


def graded_ndcg(*, ranked: Sequence[Hashable], grades: Mapping[Hashable, int], k: int) -> float:
    """nDCG@k of one ranking (`grades`: id -> grade)."""
    dcg = sum(grades.get(item, 0) / math.log2(i + 2) for i, item in enumerate(ranked[:k]))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    best = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0
