"""Traversal policies that act on the ranking.

Why here and not in the traversal config module: `search.rules.traversal.detect` reads a query (intents,
entities, audience) and the config says what each intent prefers; this module turns that analysis into
score changes on the fused candidates, before the graph boost picks its seeds. Each policy is a soft boost
relative to the best fused score (like the graph boost), so it reorders near-ties and never hides a chunk:
* `prefer_kinds`: chunks whose content kind the detected intents prefer ("spell" questions -> spell chunks);
* `audience`: a query worded by a player ("can I ...") or a GM ("my encounter's trap") lifts the sections
  written for that reader. A chunk is for GMs when a GM keyword of the config names its book, its document
  path or its chapter (the demo's `gm-guide` book, the SRD's `Gamemastering/Traps.md`); every other chunk is
  for players.
The strengths live in the config's `policies["ranking"]`, so a GM can tune them per ruleset.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from search.models import Chunk
from search.rules.graph import BOOST_RELATIONS

if TYPE_CHECKING:
    from search.models import TraversalConfig
    from search.rules.traversal import QueryAnalysis

DEFAULT_KIND_STRENGTH = 0.03
DEFAULT_AUDIENCE_STRENGTH = 0.03
STRUCTURAL_RELATIONS = BOOST_RELATIONS  # what the boost walked before similarity edges existed
SIMILARITY_RELATIONS = ("similar_to",)
KNOWN_RELATIONS = (*STRUCTURAL_RELATIONS, "has_trait", *SIMILARITY_RELATIONS)


def strengths(config: TraversalConfig | None) -> tuple[float, float]:
    """(prefer_kinds strength, audience strength) from the config's policies, else the defaults."""
    ranking = ((config.policies if config else None) or {}).get("ranking", {}) or {}
    return (float(ranking.get("prefer_kinds_strength", DEFAULT_KIND_STRENGTH)),
            float(ranking.get("audience_strength", DEFAULT_AUDIENCE_STRENGTH)))


def graph_relations(config: TraversalConfig | None) -> tuple[str, ...]:
    """The edges the graph boost walks: the config's `policies["graph"]["relations"]`, else the structural ones."""
    rels = ((config.policies if config else None) or {}).get("graph", {}).get("relations")
    if not rels:
        return STRUCTURAL_RELATIONS
    return tuple(r for r in rels if r in KNOWN_RELATIONS) or STRUCTURAL_RELATIONS


def chunk_audience(*, book_id: str, path: str, section_path: list[str], gm_keywords: Iterable[str]) -> str:
    """"gm" when a GM keyword names the chunk's book, document path or chapter; else "player"."""
    where = " " + re.sub(r"[^a-z0-9]+", " ", " ".join([book_id, path, *(section_path[:1] or [])]).lower()) + " "
    for kw in gm_keywords:
        word = re.sub(r"[^a-z0-9]+", " ", kw.lower()).strip()
        if word and re.search(rf" {re.escape(word)}(?:s|es)? ", where):
            return "gm"
    return "player"


@dataclass(frozen=True)
class PolicyWeights:
    """Which policies run and how strongly (the rules search builds one from its spec and the traversal config's
    strengths, policy_strengths)."""

    use_kinds: bool = True
    use_audience: bool = True
    kind_strength: float = DEFAULT_KIND_STRENGTH
    audience_strength: float = DEFAULT_AUDIENCE_STRENGTH


def apply_policies(cands: list, *, analysis: QueryAnalysis, kind_of: dict[int, str], audience_of: dict[int, str],
                   weights: PolicyWeights = PolicyWeights()) -> list:
    """Add the policy boosts to each candidate's `fused_score` and re-sort; records `policy_boost` in `extra`.

    A candidate gets `kind_strength * top` when its content kind is among `analysis.prefer_kinds` (earlier
    kinds weigh more: the first preferred kind gets the full unit, the n-th 1/n of it), and
    `audience_strength * top` when the query's audience is detected and the chunk is written for it."""
    if not cands:
        return cands
    top = max(c.fused_score for c in cands)
    unit = top if top > 0 else 1.0
    prefer = list(analysis.prefer_kinds) if weights.use_kinds else []
    audience = analysis.audience if weights.use_audience else ""
    if not prefer and not audience:
        return cands
    for c in cands:
        boost = 0.0
        kind = kind_of.get(c.chunk_id, "")
        if kind in prefer:
            boost += weights.kind_strength * unit / (prefer.index(kind) + 1)
        if audience and audience_of.get(c.chunk_id) == audience:
            boost += weights.audience_strength * unit
        if boost:
            c.fused_score += boost
            c.extra["policy_boost"] = boost
    cands.sort(key=lambda c: (-c.fused_score, c.chunk_id))
    return cands


def chunk_facts(chunk_ids: list[int], *, gm_keywords: Iterable[str]) -> tuple[dict[int, str], dict[int, str]]:
    """({chunk id: content kind}, {chunk id: audience}) for the candidates, in one query."""
    kws = list(gm_keywords)
    kinds, audiences = {}, {}
    for cid, kind, book, path, section in Chunk.objects.filter(id__in=chunk_ids).values_list(
            "id", "content_kind", "book_id", "path", "section_path"):
        kinds[cid] = kind
        audiences[cid] = chunk_audience(book_id=book, path=path, section_path=list(section), gm_keywords=kws)
    return kinds, audiences


def describe(*, analysis: QueryAnalysis, use_kinds: bool, use_audience: bool, relations: Iterable[str]
             ) -> dict[str, Any]:
    """What the policies did for this query, for the response (the "why" of a reordering)."""
    return {"prefer_kinds": list(analysis.prefer_kinds) if use_kinds else [],
            "audience": analysis.audience if use_audience else "", "graph_relations": list(relations)}
