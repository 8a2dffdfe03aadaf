"""File (and definition) scores from their chunks: max, the sum of the top 3, and the reciprocal-rank sum."""
from __future__ import annotations

import pytest

from search.engine.aggregation import AGGREGATIONS, DEFAULT, RRF_K, aggregate

# best chunk first: a.py has one strong chunk, b.py four middling ones
RANKED = [("a.py", 0.9), ("b.py", 0.5), ("b.py", 0.45), ("c.py", 0.3), ("b.py", 0.4), ("b.py", 0.35)]


def test_max_ranks_a_file_by_its_best_chunk():
    out = aggregate(ranked=RANKED, method="max")
    assert [(g.key, g.score) for g in out] == [("a.py", 0.9), ("b.py", 0.5), ("c.py", 0.3)]


def test_top3_sums_the_three_best_chunks_so_corroboration_climbs():
    out = aggregate(ranked=RANKED, method="top3")
    assert [g.key for g in out] == ["b.py", "a.py", "c.py"]
    assert out[0].score == pytest.approx(0.5 + 0.45 + 0.4)  # the fourth chunk (0.35) does not count


def test_rrf_reads_ranks_only_so_the_score_scale_does_not_matter():
    scaled = [(k, s * 1000 - 7) for k, s in RANKED]
    assert [(g.key, g.score) for g in aggregate(ranked=scaled, method="rrf")] == \
           [(g.key, g.score) for g in aggregate(ranked=RANKED, method="rrf")]
    a = next(g for g in aggregate(ranked=RANKED, method="rrf") if g.key == "a.py")
    assert a.score == pytest.approx(1 / (RRF_K + 1))


def test_rrf_counts_a_chunk_shared_by_two_definitions_at_the_chunks_rank():
    # one chunk (rank 0) overlaps f and g; the next chunk (rank 1) is h's
    out = aggregate(ranked=[("f", 1.0), ("g", 1.0), ("h", 0.5)], method="rrf", positions=[0, 0, 1])
    scores = {g.key: g.score for g in out}
    assert scores["f"] == scores["g"] == pytest.approx(1 / (RRF_K + 1))
    assert scores["h"] == pytest.approx(1 / (RRF_K + 2))


def test_each_group_keeps_its_chunks_best_first_and_ties_keep_the_best_chunks_order():
    out = aggregate(ranked=[("x", 0.5), ("y", 0.5), ("x", 0.1)], method="max")
    assert [(g.key, g.ranks) for g in out] == [("x", [0, 2]), ("y", [1])]


def test_an_unknown_method_or_mismatched_positions_are_refused():
    assert DEFAULT in AGGREGATIONS
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(ranked=RANKED, method="mean")
    with pytest.raises(ValueError, match="one rank per entry"):
        aggregate(ranked=RANKED, method="rrf", positions=[0])


def test_no_chunks_give_no_groups():
    assert aggregate(ranked=[], method="top3") == []
