"""Heading match: a rules section whose heading the question names is lifted, and joins the candidates if missed.

Why: a rulebook's headings are its own index of concepts ("Temporary Hit Points", "Death Saving Throws", "Hold
Person", "Pact Magic"), and a player's question names the concept far more often than it repeats the body's
wording. The body of a short rule is outweighed in both legs by long sections that use the same common words
many times (a stat block, a table), and the sparse leg sees the heading only as a few tokens among hundreds
(BM25F's reason for a separate title field). Here the heading is a field of its own: the question's terms (after
the alias expansion, so "temp HP" reaches "Temporary Hit Points") are compared with each section's heading by
the cosine of their IDF-weighted term sets, which is 1.0 only when the question names exactly the heading and
falls as the heading carries words the question lacks, or the question's rare words miss the heading.

The heading is the section's own title plus, at half weight, its parents below the chapter ("Warlock" for
"Pact Magic"): a class or spell named in the question then counts for its features. A soft boost relative to the
best fused score (like the policies and the graph boost). Optionally (`recall_max` > 0) sections that match well but
were not among the fused candidates are added at the bottom of the list, where the boost can lift them; on the SRD
dev questions that changed nothing (the legs' 100 candidates already held every well-named section), so it is off.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from search.engine.fusion import Candidate
from search.engine.sparse import term_index, tokenize
from search.engine.term_stats import idf_weights
from search.models import Chunk

DEFAULT_STRENGTH = 0.3  # boost of a perfect match, relative to the best fused score (chosen on the dev set with the
# rerank on: 0.05 / 0.1 / 0.2 / 0.3 gave nDCG@10 0.5181 / 0.5181 / 0.5113 / 0.5215; 0.1 was best without it)
DEFAULT_PARENT_WEIGHT = 0.5  # parents' terms (below the chapter) weigh this much of the title's
DEFAULT_RECALL_MIN = 0.5  # a section outside the candidates joins when its match reaches this
DEFAULT_RECALL_MAX = 0  # ... and at most this many chunks join: off, as 5 changed no dev question (row heading-recall)


@dataclass(frozen=True)
class HeadingTerms:
    """A section's terms: its title's and (lower weight) its parents' below the chapter, analysed as prose."""

    title: frozenset[str]
    parents: frozenset[str]


def heading_terms(section_path: Sequence[str]) -> HeadingTerms:
    """The title (last element) and the parents between chapter and title, as stemmed prose terms."""
    path = list(section_path)
    if not path:
        return HeadingTerms(frozenset(), frozenset())
    title = frozenset(tokenize(path[-1], code=False))
    parents = frozenset(t for part in path[1:-1] for t in tokenize(part, code=False)) - title
    return HeadingTerms(title, parents)


def match_score(*, query: frozenset[str], heading: HeadingTerms, idf: dict[str, float],
                parent_weight: float = DEFAULT_PARENT_WEIGHT) -> float:
    """Cosine of the question's and the heading's term sets, each term weighted by its IDF (parents' terms by
    `parent_weight` times it). 0 without a shared term; 1 when the question names exactly the heading."""
    if not heading.title or not query:
        return 0.0
    h = {t: idf.get(t, 0.0) for t in heading.title}
    h.update({t: parent_weight * idf.get(t, 0.0) for t in heading.parents})
    q = {t: idf.get(t, 0.0) for t in query}
    dot = sum(w * q[t] for t, w in h.items() if t in q)
    if dot <= 0:
        return 0.0
    return dot / math.sqrt(sum(w * w for w in h.values()) * sum(w * w for w in q.values()))


def term_idf(terms: Iterable[str], *, dataset_ids: Sequence[int]) -> dict[str, float]:
    """IDF of each prose term over the searched datasets (search.engine.term_stats: the sparse leg's own)."""
    terms = set(terms)
    by_index = idf_weights(terms={term_index(t) for t in terms}, dataset_ids=dataset_ids)
    return {t: by_index.get(term_index(t), 0.0) for t in terms}


def apply_heading_match(cands: list[Candidate], *, q: str, dataset_ids: Sequence[int], scope: dict[str, list[str]],
                        strength: float = DEFAULT_STRENGTH, recall_max: int = DEFAULT_RECALL_MAX
                        ) -> list[Candidate]:
    """Add `strength * top * match` to each candidate (its `heading_boost` in `extra`), add up to `recall_max`
    chunks outside the candidates whose match reaches DEFAULT_RECALL_MIN, and re-sort (a parent heading weighs
    DEFAULT_PARENT_WEIGHT).

    `q`: the question as the sparse leg reads it (aliases expanded). `scope`: the search's filters, so a joined
    chunk is one the search could have returned: `book_id`, `ruleset_id`, `path` (lists; empty = any)."""
    query = frozenset(tokenize(q, code=False))
    if strength <= 0 or not query:
        return cands
    rows = Chunk.objects.filter(dataset_id__in=list(dataset_ids), kind="rules")
    if scope.get("book_id"):
        rows = rows.filter(book_id__in=scope["book_id"])
    if scope.get("ruleset_id"):
        rows = rows.filter(ruleset_id__in=scope["ruleset_id"])
    if scope.get("path"):
        rows = rows.filter(path__in=scope["path"])
    paths = dict(rows.values_list("id", "section_path"))
    terms = {cid: heading_terms(p) for cid, p in paths.items()}
    vocab = set(query).union(*(h.title | h.parents for h in terms.values() if query & (h.title | h.parents)))
    idf = term_idf(vocab, dataset_ids=dataset_ids)
    scores = {cid: match_score(query=query, heading=h, idf=idf, parent_weight=DEFAULT_PARENT_WEIGHT)
              for cid, h in terms.items() if query & (h.title | h.parents)}
    if not cands and not scores:
        return cands
    top = max((c.fused_score for c in cands), default=0.0)
    unit = top if top > 0 else 1.0
    have = {c.chunk_id for c in cands}
    floor = min((c.fused_score for c in cands), default=0.0)
    joined = sorted((cid for cid, s in scores.items() if cid not in have and s >= DEFAULT_RECALL_MIN),
                    key=lambda cid: (-scores[cid], cid))[:recall_max]
    for cid in joined:
        cands.append(Candidate(chunk_id=cid, fused_score=floor, extra={"heading_joined": True}))
    for c in cands:
        s = scores.get(c.chunk_id, 0.0)
        if s > 0:
            boost = strength * unit * s
            c.fused_score += boost
            c.extra["heading_boost"] = boost
    cands.sort(key=lambda c: (-c.fused_score, c.chunk_id))
    return cands
