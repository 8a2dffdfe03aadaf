"""The code graph as a ranking signal: candidates that call, or are called by, the strongest candidates move up.

Why: the design's graph boost promotes the rule a strong match points to; in code the same link is a call or a base
class. A query about settling an invoice finds `settle()` first; the `deduct()` it calls, which holds the logic a
change would touch, often ranks far lower on its own words. Edges come from the symbol graph
(search.engine.code_graph.resolved_uses: only uses that resolve to one definition), between candidates of the
fused list only (nothing is added from outside it), both directions; the boost itself is the rules' one
(search.engine.boosts: seeds' neighbours gain STRENGTH x the best score, never above the best match).

A row of `evaluate` (`fused+code-graph`) and of bench/bench_code_commits.py; not in the default stages until it
wins there (docs/architecture.md, "Context packs from the code graph").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from search.engine.boosts import capped_boost, chunk_node, compute_boosts
from search.engine.code_graph import LineSpan, resolved_uses

if TYPE_CHECKING:
    from search.engine.pipeline import QueryRun

POOL = 50           # candidates whose edges are read
SEED_TOP_N = 5      # the strongest candidates, whose callers and callees gain
STRENGTH = 0.05     # a neighbour's boost, relative to the best fused score


def code_adjacency(cands: list) -> dict[str, list[tuple[str, str]]]:
    """`chunk:<id>` -> [(neighbour, relation)] between the candidates (loaded chunks): X calls (or inherits from, or
    names) a definition that starts inside Y -> X `uses` Y and Y `used_by` X."""
    code = [c for c in cands if c.chunk is not None and c.chunk.kind == "code"]
    spans = [LineSpan(c.chunk.dataset_id, c.chunk.document_id, c.chunk.start_line, c.chunk.end_line) for c in code]
    by_doc: dict[int, list] = {}
    for c in code:
        by_doc.setdefault(c.chunk.document_id, []).append(c)
    adj: dict[str, list[tuple[str, str]]] = {}
    for c, uses in zip(code, resolved_uses(spans=spans), strict=True):
        for use in uses:
            d = use.definition
            for other in by_doc.get(d.document_id, []):
                if other is not c and other.chunk.start_line <= d.start_line <= other.chunk.end_line:
                    adj.setdefault(chunk_node(c.chunk_id), []).append((chunk_node(other.chunk_id), "uses"))
                    adj.setdefault(chunk_node(other.chunk_id), []).append((chunk_node(c.chunk_id), "used_by"))
    return adj


def graph_boost(run: QueryRun) -> None:
    """Boost the callers and callees of the SEED_TOP_N best candidates among the first POOL, re-sort, and keep the
    boost and its path in the why (`graph_boost`, `extra["graph_path"]`)."""
    pool = run.cands[:POOL]
    if len(pool) < 2:
        return
    base = {c.chunk_id: c.fused_score for c in pool}
    boosts = compute_boosts(base=base, adjacency=code_adjacency(pool), seed_top_n=SEED_TOP_N, depth=1, decay=1.0,
                            top_k=POOL, strength=STRENGTH)
    if not boosts:
        return
    ceiling = pool[0].fused_score
    for c in pool[1:]:
        b, path = boosts.get(c.chunk_id, (0.0, []))
        b = capped_boost(base_score=c.fused_score, boost=b, ceiling=ceiling)
        if b:
            c.fused_score += b
            c.graph_boost = b
            c.extra["graph_path"] = path
    run.cands.sort(key=lambda c: (-c.fused_score, c.rank_before))
    for i, c in enumerate(run.cands, start=1):
        c.rank_before = i
