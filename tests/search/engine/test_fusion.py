"""search/engine/fusion.py: RRF's rank offset k is a parameter (tuned per content kind by bench/tune_fusion.py)."""
from __future__ import annotations

import pytest

from search.engine.fusion import RRF_K, fuse

DENSE = [(1, 0.9), (2, 0.8), (3, 0.7)]
SPARSE = [(3, 12.0), (4, 9.0), (1, 1.0)]


def test_rrf_uses_the_given_k_and_defaults_to_60():
    default = {c.chunk_id: c.fused_score for c in fuse(dense=DENSE, sparse=SPARSE)}
    assert RRF_K == 60 and default[1] == pytest.approx(1 / 61 + 1 / 63)
    small = {c.chunk_id: c.fused_score for c in fuse(dense=DENSE, sparse=SPARSE, rrf_k=1)}
    assert small[1] == pytest.approx(1 / 2 + 1 / 4) and small[3] == pytest.approx(1 / 4 + 1 / 2)


def test_a_small_k_with_a_heavier_sparse_weight_lets_the_sparse_top_hit_win():
    order = [c.chunk_id for c in fuse(dense=DENSE, sparse=SPARSE, rrf_k=5, weights={"dense": 1.0, "sparse": 2.0})]
    assert order[0] == 3
    assert [c.chunk_id for c in fuse(dense=DENSE, sparse=SPARSE)][0] == 1  # k=60, equal weights: both-leg hit 1
