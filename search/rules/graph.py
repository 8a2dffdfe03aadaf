"""The rulebook chunk graph and graph boost.

Why a graph at all: a rules answer is often spread over linked places - the
Grappling rule says the target is *grappled*, and the Grappled condition says what
that means. Lexical and dense scores find one of them; the graph promotes the
other. Edges live in Postgres (GraphEdge, visible in the admin) and are rebuilt
deterministically from the chunks and the ruleset's traversal config.

Nodes: ``chunk:<id>``, ``section:<a > b > c>``, ``term:<kind>:<name>``, ``trait:<tag>``.
Relations:
* ``contains``   section -> subsection, section -> chunk
* ``next``       chunk -> the following chunk of the same document
* ``describes``  chunk -> term it is the definition of (its heading is a known name)
* ``has_trait``  chunk -> trait (spell school/level, rarity, ...)
* ``references`` chunk -> chunk, from "see X" phrases and from mentions of known names
* ``similar_to`` chunk -> chunk, its nearest neighbours by the stored embeddings above a threshold (the
  fix for "graph neighbours are not relevant enough": adjacency in the book is not relatedness in meaning)
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import transaction

from inference.encoders import dense_model_id
from inference.models import EmbeddingCache
from search.engine.boosts import (
    DEFAULT_DECAY,
    DEFAULT_DEPTH,
    DEFAULT_SEED_TOP_N,
    DEFAULT_STRENGTH,
    DEFAULT_TOP_K,
    capped_boost,
    chunk_node,
    compute_boosts,
)
from search.models import Chunk, GraphEdge, TraversalConfig
from search.rules.traversal import config_names, name_pattern

BOOST_RELATIONS = ("references", "next", "contains", "describes")
DEFAULT_SIMILAR_K = 3
DEFAULT_SIMILAR_THRESHOLD = 0.6

_SEE = re.compile(r"\b[Ss]ee\s+(?:the\s+)?[\"*_]*([A-Z][\w'’-]*(?:\s+(?:of|and|the|a|an|[A-Z][\w'’-]*)\b)*)[\"*_]*")
# spell and item names are italic in rulebook prose ("the *fireball* spell"); conditions/feats/actions are plain
_ITALIC = re.compile(r"(?<![*\w])[*_]([^*_\n]{3,60})[*_](?![*\w])")


def section_node(path: Iterable[str]) -> str:
    return "section:" + " > ".join(path)


@dataclass
class GraphStats:
    edges: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.edges.values())


def build_graph(*, dataset_id: int, ruleset_id: str, book_id: str, config: TraversalConfig | None) -> GraphStats:  # noqa: C901, PLR0912 - one edge rule per branch, read top to bottom
    """Rebuild every edge of one book in one dataset (delete + insert in one transaction: idempotent)."""
    chunks = list(Chunk.objects.filter(dataset_id=dataset_id, ruleset_id=ruleset_id, book_id=book_id)
                  .order_by("document_id", "ordinal")
                  .values("id", "document_id", "ordinal", "symbol", "section_path", "text", "content_kind", "tags",
                          "text_hash"))
    edges: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(src: str, dst: str, rel: str, **meta: Any) -> None:
        if src != dst:
            edges.setdefault((src, dst, rel), meta)

    # contains + next
    prev_by_doc: dict[int, int] = {}
    for c in chunks:
        path = list(c["section_path"])
        for i in range(1, len(path)):
            add(section_node(path[:i]), section_node(path[:i + 1]), "contains")
        add(section_node(path), chunk_node(c["id"]), "contains")
        prev = prev_by_doc.get(c["document_id"])
        if prev is not None:
            add(chunk_node(prev), chunk_node(c["id"]), "next")
        prev_by_doc[c["document_id"]] = c["id"]
        for tag in c["tags"]:
            if ":" in tag:
                add(chunk_node(c["id"]), f"trait:{tag}", "has_trait")

    # describes: a chunk whose heading is a known name defines that term; the first one is the definition
    names = config_names(config)
    definition: dict[str, int] = {}  # lower name -> defining chunk id
    by_symbol: dict[str, int] = {}
    # definitions resolve across the whole ruleset in this dataset (a GM guide's "pinned" -> the core book),
    # this book's own headings first
    ruleset_chunks = (Chunk.objects.filter(dataset_id=dataset_id, ruleset_id=ruleset_id).exclude(book_id=book_id)
                      .order_by("book_id", "document_id", "ordinal").values("id", "symbol"))
    for c in chunks + list(ruleset_chunks):
        sym = (c["symbol"] or "").strip()
        if sym:
            by_symbol.setdefault(sym.lower(), c["id"])
    for kind, ns in names.items():
        for n in ns:
            cid = by_symbol.get(n.lower())
            if cid is not None:
                definition.setdefault(n.lower(), cid)
                add(chunk_node(cid), f"term:{kind}:{n.lower()}", "describes")

    # references: "see X" and mentions of known names
    plain = [(k, n, name_pattern(n)) for k, ns in names.items() if k in {"condition", "feat", "action"}
             for n in ns if len(n) >= 4 and n.lower() in definition]
    italic_names = {n.lower() for k, ns in names.items() if k in {"spell", "item"} for n in ns}
    for c in chunks:
        src = chunk_node(c["id"])
        text = c["text"]
        for m in _SEE.finditer(text):
            target = _resolve(m.group(1), by_symbol)
            if target is not None and target != c["id"]:
                add(src, chunk_node(target), "references", via="see", phrase=m.group(0)[:200])
        for m in _ITALIC.finditer(text):
            name = m.group(1).strip().lower()
            if name in italic_names and name in definition and definition[name] != c["id"]:
                add(src, chunk_node(definition[name]), "references", via="mention", name=name)
        low = text.lower()
        for kind, n, rx in plain:
            if n.lower() in low and definition[n.lower()] != c["id"] and rx.search(text):
                if kind == "action" and not re.search(rf"\b{re.escape(n)}\s+action\b", text, re.IGNORECASE):
                    continue  # "help", "dash", "search" are plain words unless "the Help action"
                add(src, chunk_node(definition[n.lower()]), "references", via="mention", name=n.lower())

    graph_policy = ((config.policies if config else None) or {}).get("graph", {}) or {}
    for a, b, sim in similarity_edges(chunks=[(c["id"], c["text_hash"]) for c in chunks],
                                      k=int(graph_policy.get("similar_k", DEFAULT_SIMILAR_K)),
                                      threshold=float(graph_policy.get("similar_threshold",
                                                                       DEFAULT_SIMILAR_THRESHOLD))):
        add(chunk_node(a), chunk_node(b), "similar_to", sim=round(sim, 4))

    stats = GraphStats()
    rows = []
    for (src, dst, rel), meta in edges.items():
        stats.edges[rel] = stats.edges.get(rel, 0) + 1
        rows.append(GraphEdge(dataset_id=dataset_id, ruleset_id=ruleset_id, book_id=book_id, source_id=src,
                              target_id=dst, relation=rel, metadata=meta))
    with transaction.atomic():
        GraphEdge.objects.filter(dataset_id=dataset_id, ruleset_id=ruleset_id, book_id=book_id).delete()
        GraphEdge.objects.bulk_create(rows, batch_size=2000, ignore_conflicts=True)
    return stats


def nearest_pairs(ids: list[int], vectors: Any, *, k: int, threshold: float) -> list[tuple[int, int, float]]:
    """(a, b, cosine) with b among a's k nearest (a != b) at cosine >= threshold; each pair once, a < b.

    Pure (numpy in, tuples out): the tests check it on hand-made vectors."""
    if len(ids) < 2 or k <= 0:
        return []
    m = np.asarray(vectors, dtype=np.float32)
    m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    sims = m @ m.T
    np.fill_diagonal(sims, -np.inf)
    out: dict[tuple[int, int], float] = {}
    kk = min(k, len(ids) - 1)
    for i in range(len(ids)):
        for j in np.argsort(-sims[i], kind="stable")[:kk]:
            s = float(sims[i, j])
            if s < threshold:
                break
            a, b = sorted((ids[i], ids[int(j)]))
            out[(a, b)] = s
    return [(a, b, s) for (a, b), s in sorted(out.items())]


def similarity_edges(*, chunks: list[tuple[int, str]], k: int = DEFAULT_SIMILAR_K,
                     threshold: float = DEFAULT_SIMILAR_THRESHOLD) -> list[tuple[int, int, float]]:
    """Nearest-neighbour pairs of the chunks from their cached embeddings (current model); nothing is embedded.

    A chunk without a cached vector (not embedded yet, or another model) takes part in no pair."""
    hashes = {h for _, h in chunks}
    vectors: dict[str, list[float]] = {}
    keys = list(hashes)
    for i in range(0, len(keys), 2000):
        vectors.update(EmbeddingCache.objects.filter(model_id=dense_model_id(), text_hash__in=keys[i:i + 2000])
                       .values_list("text_hash", "vector"))
    have = [(cid, vectors[h]) for cid, h in chunks if h in vectors]
    if len(have) < 2:
        return []
    return nearest_pairs([cid for cid, _ in have], [v for _, v in have], k=k, threshold=threshold)


def _resolve(phrase: str, by_symbol: dict[str, int]) -> int | None:
    """Longest prefix of the phrase that is a heading ("see Grappled below" -> Grappled)."""
    words = phrase.split()
    for n in range(len(words), 0, -1):
        hit = by_symbol.get(" ".join(words[:n]).lower().strip(" .,;:'’"))
        if hit is not None:
            return hit
    return None


# ------------------------------------------------------------------------------------------------ boost

def load_adjacency(*, node_ids: Iterable[str], dataset_ids: Iterable[int], depth: int,
                   relations: Iterable[str] = BOOST_RELATIONS) -> dict[str, list[tuple[str, str]]]:
    """Undirected adjacency around the seeds, `depth` hops out, one query per hop."""
    adj: dict[str, list[tuple[str, str]]] = defaultdict(list)
    frontier = set(node_ids)
    seen: set[str] = set()
    ds = list(dataset_ids)
    rels = list(relations)
    for _ in range(depth):
        todo = list(frontier - seen)
        if not todo:
            break
        seen |= set(todo)
        rows = GraphEdge.objects.filter(dataset_id__in=ds, relation__in=rels).filter(
            source_id__in=todo).values_list("source_id", "target_id", "relation")
        rows2 = GraphEdge.objects.filter(dataset_id__in=ds, relation__in=rels).filter(
            target_id__in=todo).values_list("source_id", "target_id", "relation")
        nxt: set[str] = set()
        for s, t, r in list(rows) + list(rows2):
            if (t, r) not in adj[s]:
                adj[s].append((t, r))
            if (s, r) not in adj[t]:
                adj[t].append((s, r))
            nxt.update((s, t))
        frontier = nxt
    return adj


@dataclass(frozen=True)
class GraphWalk:
    """How the boost walks the graph: from the `seed_top_n` strongest candidates, `depth` hops along `relations`,
    each hop's share times `decay`, at most `top_k` boosted, the boost a `strength` share of the best score. The
    rules search builds one from its spec (RulesSpec's graph fields); the defaults are the rules search's."""

    seed_top_n: int = DEFAULT_SEED_TOP_N
    depth: int = DEFAULT_DEPTH
    decay: float = DEFAULT_DECAY
    top_k: int = DEFAULT_TOP_K
    strength: float = DEFAULT_STRENGTH
    relations: tuple[str, ...] = BOOST_RELATIONS


def apply_graph_boost(candidates: list, *, dataset_ids: Iterable[int], walk: GraphWalk = GraphWalk(),
                      add_missing: bool = True, score_key: str | None = None,
                      missing_filter: dict[str, list[str]] | None = None) -> list:
    """Re-score candidates with the graph boost (`walk`); returns a new list sorted by boosted score.

    A candidate is a dict or an object (search.engine.fusion.Candidate) with `chunk_id` and a score
    (`score_key`; default `score` for dicts, `fused_score` for objects). Every candidate then carries
    `base_score`, `graph_boost` and `graph_path` (objects: graph_boost attribute + extra dict). With
    add_missing, boosted neighbours that retrieval did not return join with base score 0, so a linked
    definition can surface; `missing_filter` ({"book_id": [...], "ruleset_id": [...]}) keeps them inside
    the same book/ruleset filter as the query.
    """
    ds = list(dataset_ids)
    if not candidates:
        return []
    is_dict = isinstance(candidates[0], dict)
    key = score_key or ("score" if is_dict else "fused_score")
    base = {int(_get(c, "chunk_id")): float(_get(c, key) or 0.0) for c in candidates}
    seeds = sorted(base, key=lambda cid: (-base[cid], cid))[:walk.seed_top_n]
    adjacency = load_adjacency(node_ids=[chunk_node(s) for s in seeds], dataset_ids=ds, depth=walk.depth,
                               relations=walk.relations) if seeds and walk.depth > 0 else {}
    boosts = compute_boosts(base=base, adjacency=adjacency, seed_top_n=walk.seed_top_n, depth=walk.depth,
                            decay=walk.decay, top_k=walk.top_k, strength=walk.strength)
    out = list(candidates)
    if add_missing:
        missing = [cid for cid in boosts if cid not in base]
        if missing:
            qs = Chunk.objects.filter(id__in=missing, dataset_id__in=ds)
            for fkey, fvals in (missing_filter or {}).items():
                if fvals:
                    qs = qs.filter(**{f"{fkey}__in": list(fvals)})
            allowed = set(qs.values_list("id", flat=True))
            for cid in missing:
                if cid in allowed:
                    if is_dict:
                        out.append({"chunk_id": cid, key: 0.0, "via_graph": True})
                    else:
                        obj = type(candidates[0])(chunk_id=cid)
                        _set(obj, key, 0.0)
                        out.append(obj)
    # never above the retrieval's best match (search.engine.boosts.capped_boost says why)
    top_seed = seeds[0] if seeds else None
    ceiling = base.get(top_seed, 0.0) if top_seed is not None else None
    for c in out:
        cid = int(_get(c, "chunk_id"))
        b, path = boosts.get(cid, (0.0, []))
        base_score = float(_get(c, key) or 0.0)
        if ceiling is not None and cid != top_seed:
            b = capped_boost(base_score=base_score, boost=b, ceiling=ceiling)
        _set(c, key, base_score + b)
        _set(c, "graph_boost", b)
        if is_dict:
            c["base_score"], c["graph_path"] = base_score, path
        else:
            extra = getattr(c, "extra", None)
            if isinstance(extra, dict):
                extra.update(base_score=base_score, graph_boost=b, graph_path=path)
    out.sort(key=lambda c: (-float(_get(c, key)), int(_get(c, "chunk_id"))))
    return out


def _get(obj: Any, key: str) -> Any:
    return obj[key] if isinstance(obj, dict) else getattr(obj, key)


def _set(obj: Any, key: str, value: Any) -> None:
    if isinstance(obj, dict):
        obj[key] = value
    else:
        setattr(obj, key, value)
