"""Chapter routing: only the likeliest chapters are searched, trading coverage for MRR.

Why: a rulebook question usually lives in one chapter (Conditions, Spells, Equipment); searching only the
likeliest chapters removes look-alike passages from the others, at the price of missing the answer when the
router picks wrong. The evaluation reports both sides (evaluability/coverage against MRR) for routing off,
top-1 and top-3, so the choice is made on evidence.

A chapter is the first level of a chunk's section path within its book (the demo's "Conditions", the SRD's
"Gameplay" or "Spells"). The classifier scores a chapter by the mean of two cosines of the query, to the
chapter's centroid (the mean of its chunks' stored embeddings; nothing is re-embedded) and to its closest chunk
(a centroid alone misroutes a question about one section of a varied chapter), plus, from the traversal
config, a bonus for chapters rich in the content kinds the query's intents prefer (`prefer_kinds`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from django.db.models import Count, Max

from inference.encoders import dense_model_id, embed_query
from inference.models import EmbeddingCache
from search.models import Chunk

if TYPE_CHECKING:
    from search.rules.traversal import QueryAnalysis

KIND_BONUS = 0.1  # a chapter whose chunks are all of the preferred kinds gains this much cosine
_cache: dict[tuple, ChapterIndex] = {}
_lock = threading.Lock()


@dataclass
class ChapterIndex:
    chapters: list[tuple[str, str]]            # (book_id, chapter title)
    centroids: np.ndarray                      # (n chapters, dim), unit length
    kind_share: list[dict[str, float]]         # per chapter: content kind -> share of its chunks
    paths: list[list[str]]                     # per chapter: the document paths it spans
    vectors: np.ndarray | None = None          # (n chunks, dim), unit length
    owner: np.ndarray | None = None            # (n chunks,): the chapter row of each vector


def chapter_of(section_path: list[str]) -> str:
    return section_path[0] if section_path else ""


def build_index(*, dataset_ids: list[int], books: list[str] | None = None,
                rulesets: list[str] | None = None) -> ChapterIndex:
    """Centroids of the accessible rules chunks per (book, chapter), cached per process until the chunks change."""
    qs = Chunk.objects.filter(dataset_id__in=dataset_ids, kind="rules")
    if books:
        qs = qs.filter(book_id__in=books)
    if rulesets:
        qs = qs.filter(ruleset_id__in=rulesets)
    stamp = qs.aggregate(n=Count("id"), last=Max("id"))
    key = (tuple(sorted(dataset_ids)), tuple(books or ()), tuple(rulesets or ()), stamp["n"], stamp["last"],
           dense_model_id())
    with _lock:
        if key in _cache:
            return _cache[key]
    rows = list(qs.values_list("book_id", "section_path", "content_kind", "path", "text_hash"))
    hashes = list({r[4] for r in rows})
    vectors: dict[str, list[float]] = {}
    for i in range(0, len(hashes), 2000):
        vectors.update(EmbeddingCache.objects.filter(model_id=dense_model_id(), text_hash__in=hashes[i:i + 2000])
                       .values_list("text_hash", "vector"))
    order: dict[tuple[str, str], int] = {}
    sums: list[np.ndarray | None] = []
    chunk_vecs: list[np.ndarray] = []
    owners: list[int] = []
    kinds: list[dict[str, float]] = []
    paths: list[set[str]] = []
    for book, section, kind, path, h in rows:
        ch = (book, chapter_of(list(section)))
        if ch not in order:
            order[ch] = len(order)
            sums.append(None)
            kinds.append({})
            paths.append(set())
        i = order[ch]
        kinds[i][kind] = kinds[i].get(kind, 0.0) + 1.0
        paths[i].add(path)
        vec = vectors.get(h)
        if vec is not None:
            v = np.asarray(vec, dtype=np.float32)
            sums[i] = v if sums[i] is None else sums[i] + v
            chunk_vecs.append(v / (np.linalg.norm(v) or 1.0))
            owners.append(i)
    dim = next((len(v) for v in vectors.values()), 1)
    cents = np.stack([s if s is not None else np.zeros(dim, dtype=np.float32) for s in sums]) if sums \
        else np.zeros((0, dim), dtype=np.float32)
    cents = cents / np.maximum(np.linalg.norm(cents, axis=1, keepdims=True), 1e-12)
    shares = [{k: n / sum(d.values()) for k, n in d.items()} for d in kinds]
    index = ChapterIndex(chapters=list(order), centroids=cents, kind_share=shares, paths=[sorted(p) for p in paths],
                         vectors=np.stack(chunk_vecs) if chunk_vecs else None,
                         owner=np.asarray(owners, dtype=np.int64) if owners else None)
    with _lock:
        _cache.clear()  # one ruleset view at a time is what a process serves; keep memory flat
        _cache[key] = index
    return index


def score_chapters(*, query_vector: np.ndarray, index: ChapterIndex, analysis: QueryAnalysis | None = None
                   ) -> list[tuple[tuple[str, str], float]]:
    """Chapters best first: mean of the cosines to the centroid and to the closest chunk (the centroid alone when
    the index holds no chunk vectors) + KIND_BONUS x share of the preferred kinds (first kind full, n-th 1/n)."""
    if not index.chapters:
        return []
    q = np.asarray(query_vector, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    scores = index.centroids @ q
    if index.vectors is not None and index.owner is not None:
        best = np.full(len(index.chapters), -1.0, dtype=np.float32)
        np.maximum.at(best, index.owner, index.vectors @ q)
        scores = (scores + best) / 2
    prefer = list(analysis.prefer_kinds) if analysis else []
    out = []
    for i, ch in enumerate(index.chapters):
        bonus = sum(index.kind_share[i].get(k, 0.0) / (n + 1) for n, k in enumerate(prefer))
        out.append((ch, float(scores[i]) + KIND_BONUS * bonus))
    out.sort(key=lambda t: (-t[1], t[0]))
    return out


def route(*, q: str, top_n: int, dataset_ids: list[int], analysis: QueryAnalysis | None = None,
          books: list[str] | None = None, rulesets: list[str] | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """(the top_n chapters, the document paths they span) for a query."""
    index = build_index(dataset_ids=dataset_ids, books=books, rulesets=rulesets)
    ranked = score_chapters(query_vector=embed_query(q), index=index, analysis=analysis)[:max(top_n, 0)]
    chosen = [ch for ch, _ in ranked]
    pos = {ch: i for i, ch in enumerate(index.chapters)}
    paths = sorted({p for ch in chosen for p in index.paths[pos[ch]]})
    return chosen, paths


def in_chapters(cands: list, *, chapters: list[tuple[str, str]]) -> list:
    """The candidates (objects with `chunk_id`) whose (book, chapter) is among `chapters`, order kept."""
    keep = set(chapters)
    where = {cid: (book, chapter_of(list(path))) for cid, book, path in Chunk.objects.filter(
        id__in=[c.chunk_id for c in cands]).values_list("id", "book_id", "section_path")}
    return [c for c in cands if where.get(c.chunk_id) in keep]
