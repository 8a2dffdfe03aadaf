"""Graph boosts: the neighbours of the best candidates gain a share of the best score.

Why one function for rules and code: the rulebook graph (search.rules.graph: see-references, sections) and the
code graph (search.engine.graph_signal: calls and base classes) differ in their edges, not in how a boost is
given; both hand an adjacency of `chunk:<id>` nodes to `compute_boosts` and cap the result below the best match.
"""
from __future__ import annotations

import math
from collections import defaultdict

DEFAULT_SEED_TOP_N = 3
DEFAULT_DEPTH = 2
DEFAULT_DECAY = 0.4
DEFAULT_TOP_K = 50
DEFAULT_STRENGTH = 0.05  # the boost one hop out, relative to the best base score (1.0 on min-max scores)


def chunk_node(chunk_id: int) -> str:
    return f"chunk:{chunk_id}"


def capped_boost(*, base_score: float, boost: float, ceiling: float) -> float:
    """The boost, cut so the boosted score stays just below `ceiling` (the best seed's score).

    Why: the boost reorders everything below the retrieval's best match but never lifts a chunk above it: with
    RRF the gaps between top ranks are smaller than one boost unit, and seeds boosting each other used to push a
    linked neighbour (the "Pinned" condition) over the section actually asked for ("Escaping a Pin")."""
    if boost and base_score + boost >= ceiling:
        return max(0.0, math.nextafter(ceiling, -math.inf) - base_score)
    return boost


def compute_boosts(*, base: dict[int, float], adjacency: dict[str, list[tuple[str, str]]],
                   seed_top_n: int = DEFAULT_SEED_TOP_N, depth: int = DEFAULT_DEPTH, decay: float = DEFAULT_DECAY,
                   top_k: int = DEFAULT_TOP_K, strength: float = DEFAULT_STRENGTH
                   ) -> dict[int, tuple[float, list[str]]]:
    """chunk id -> (boost, path). BFS from the top seeds; a node d hops away gets strength*top*decay^(d-1).

    Section/term nodes are walked through but only chunks receive a boost; `top_k` caps how many chunks
    are boosted (nearest first, then by boost). Pure function: the tests drive it with a hand-made graph.
    """
    if not base or seed_top_n <= 0 or depth <= 0 or strength == 0:
        return {}
    top_score = max(base.values())
    unit = strength * (top_score if top_score > 0 else 1.0)
    seeds = sorted(base, key=lambda cid: (-base[cid], cid))[:seed_top_n]
    boosts: dict[int, float] = defaultdict(float)
    paths: dict[int, tuple[int, list[str]]] = {}
    for seed in seeds:
        start = chunk_node(seed)
        visited = {start}
        frontier: list[tuple[str, list[str]]] = [(start, [start])]
        for d in range(1, depth + 1):
            nxt: list[tuple[str, list[str]]] = []
            for node, path in frontier:
                for neighbour, rel in sorted(adjacency.get(node, [])):
                    if neighbour in visited:
                        continue
                    visited.add(neighbour)
                    p = path + [rel, neighbour]
                    nxt.append((neighbour, p))
                    if neighbour.startswith("chunk:"):
                        cid = int(neighbour.split(":", 1)[1])
                        if cid == seed:
                            continue
                        boosts[cid] += unit * decay ** (d - 1)
                        if cid not in paths or paths[cid][0] > d:
                            paths[cid] = (d, p)
            frontier = nxt
    ranked = sorted(boosts, key=lambda cid: (paths[cid][0], -boosts[cid], cid))[:max(top_k, 0)]
    return {cid: (boosts[cid], paths[cid][1]) for cid in ranked}
