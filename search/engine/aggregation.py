"""From ranked chunks to ranked files (or definitions): one score per group, from the scores of its chunks.

Why several: an agent asks "which file do I edit?", while the pipeline ranks chunks. A file's chunks can be read as
one strong piece of evidence (`max`: the file is as good as its best chunk), as a little corroboration
(`top3`: the sum of its three best scores, so a file matched in several places climbs) or by rank alone
(`rrf`: the sum of 1/(k + rank) over its chunks, which needs no score scale, so it behaves the same whether the
scores came from a fusion or a reranker). `DEFAULT` is `top3`: chosen with the history vote's constants
(search.engine.history_vote) on the 15 commits of click, httpx and seaborn before the reported ones, where, merged
with the vote, it ranked the most gold files and functions in the top 10 (docs/benchmarks/code-localisation.md).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

AGGREGATIONS = ("max", "top3", "rrf")
DEFAULT = "top3"
RRF_K = 60
TOP_N = 3  # chunks summed by `top3`

K = TypeVar("K", bound=Hashable)


@dataclass
class Group(Generic[K]):
    """One file (or definition) with its score and the 0-based ranks of the chunks that support it, best first."""

    key: K
    score: float
    ranks: list[int] = field(default_factory=list)


def aggregate(*, ranked: Sequence[tuple[K, float]], method: str = DEFAULT, rrf_k: int = RRF_K,
              positions: Sequence[int] | None = None) -> list[Group[K]]:
    """Groups ranked by their aggregated score. `ranked`: (group key, chunk score) per entry, best chunk first; a
    key may repeat (a file's several chunks). `positions`: each entry's 0-based chunk rank, for `rrf`, where one
    chunk gives several entries (a chunk spanning two functions); default, its index. A group's `ranks` index
    `ranked`. Ties keep the order of each group's best entry, so the result is deterministic."""
    if positions is not None and len(positions) != len(ranked):
        raise ValueError("positions must give one rank per entry")
    if method not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {method!r}")
    groups: dict[K, Group[K]] = {}
    scores: dict[K, list[float]] = {}
    for rank, (key, score) in enumerate(ranked):
        if key not in groups:
            groups[key] = Group(key=key, score=0.0)
            scores[key] = []
        groups[key].ranks.append(rank)
        scores[key].append(score)
    for key, group in groups.items():
        mine = scores[key]
        if method == "max":
            group.score = max(mine)
        elif method == "top3":
            group.score = sum(sorted(mine, reverse=True)[:TOP_N])
        else:
            at = positions if positions is not None else range(len(ranked))
            group.score = sum(1.0 / (rrf_k + at[i] + 1) for i in group.ranks)
    return sorted(groups.values(), key=lambda g: (-g.score, g.ranks[0]))
