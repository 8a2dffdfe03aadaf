"""Fusion of the dense and sparse legs, in Python so every candidate keeps its per-leg score and rank (the why).

Three methods: RRF (rank-only, robust to score scales; the default where kinds mix), DBSF
(Qdrant's distribution-based normalisation: mean +- 3 sigma), and the
min-max weighted sum (0.4 sparse / 0.6 dense).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

FUSIONS = ("rrf", "dbsf", "weighted")
RULES_FUSIONS = ("rrf", "weighted")  # what rules search offers (RRF and the min-max weighted sum)
RRF_K = 60
WEIGHTED = {"sparse": 0.4, "dense": 0.6}


@dataclass
class Candidate:
    chunk_id: int
    dense_score: float | None = None
    dense_rank: int | None = None
    sparse_score: float | None = None
    sparse_rank: int | None = None
    fused_score: float = 0.0
    rank_before: int = 0
    rerank_score: float | None = None
    rank_after: int | None = None
    final_rank: int | None = None
    graph_boost: float | None = None
    chunk: Any = None  # search.models.Chunk once loaded
    extra: dict[str, Any] = field(default_factory=dict)


def _minmax(hits: list[tuple[int, float]]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [s for _, s in hits]
    lo, hi = min(scores), max(scores)
    return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in hits}


def _dbsf(hits: list[tuple[int, float]]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [s for _, s in hits]
    mu = statistics.fmean(scores)
    sd = statistics.pstdev(scores) if len(scores) > 1 else 0.0
    lo, hi = mu - 3 * sd, mu + 3 * sd
    return {i: (s - lo) / (hi - lo) if hi > lo else 0.5 for i, s in hits}


def fuse(*, dense: list[tuple[int, float]], sparse: list[tuple[int, float]], method: str = "rrf",
         weights: dict[str, float] | None = None, limit: int | None = None, rrf_k: int = RRF_K) -> list[Candidate]:
    """Fused candidates, best first, with rank_before set (1-based). `rrf_k` is RRF's rank offset (tuning)."""
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}")
    weights = weights or ({"dense": 1.0, "sparse": 1.0} if method != "weighted" else WEIGHTED)
    cands: dict[int, Candidate] = {}
    for leg, hits in (("dense", dense), ("sparse", sparse)):
        for rank, (cid, score) in enumerate(hits, start=1):
            c = cands.setdefault(cid, Candidate(chunk_id=cid))
            setattr(c, f"{leg}_score", score)
            setattr(c, f"{leg}_rank", rank)
    if method == "rrf":
        for c in cands.values():
            c.fused_score = sum(weights[leg] / (rrf_k + getattr(c, f"{leg}_rank"))
                                for leg in ("dense", "sparse") if getattr(c, f"{leg}_rank") is not None)
    else:
        norm = _dbsf if method == "dbsf" else _minmax
        scaled = {"dense": norm(dense), "sparse": norm(sparse)}
        for c in cands.values():
            c.fused_score = sum(weights[leg] * scaled[leg].get(c.chunk_id, 0.0) for leg in ("dense", "sparse"))
    ordered = sorted(cands.values(), key=lambda c: (-c.fused_score, c.chunk_id))
    if limit is not None:
        ordered = ordered[:limit]
    for i, c in enumerate(ordered, start=1):
        c.rank_before = i
    return ordered


def single_leg(hits: list[tuple[int, float]], *, leg: str, limit: int | None = None) -> list[Candidate]:
    """Ablation: one leg alone, shaped like fused candidates."""
    out = []
    for rank, (cid, score) in enumerate(hits[:limit] if limit else hits, start=1):
        c = Candidate(chunk_id=cid, fused_score=score, rank_before=rank)
        setattr(c, f"{leg}_score", score)
        setattr(c, f"{leg}_rank", rank)
        out.append(c)
    return out
