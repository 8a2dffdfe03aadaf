"""Fusion chosen per project from its own feedback, adopted only on evidence.

Why a rule and not "the best setting on the judged queries": a grid of fusions scored on a few dozen queries
always has a winner, and most winners are noise (on the code collection the train split's pick was 0.005 below
RRF on test). So the grid is scored on one half of the project's judged queries (the pick half), and the
winner replaces the default only when the other half (the confirm half, never used to pick) agrees: a mean
nDCG@10 gain of at least MIN_GAIN over the default, with the one-sided 95 % bootstrap lower bound of the
paired per-query gain above zero, and the setting not below either single leg on all judged queries. Under
`min_queries` judged queries nothing is chosen. The evidence is stored either way, so the admin shows why a
project runs what it runs.

A judged query is a context query of the project with feedback: its chunks rated 1-3 are relevant (graded),
0 is judged not relevant, unrated chunks count as not relevant. The legs are re-run now, over the project's
current datasets, so the choice reflects today's index.
"""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from projects.access import accessible_dataset_ids
from projects.models import Dataset
from search.engine.fusion import fuse
from search.engine.fusion_settings import DEFAULT, FusionSetting, kind_default
from search.engine.pipeline import build_filter, retrieve
from search.models import Feedback
from search.quality.metrics import lower_bound_95, ndcg

if TYPE_CHECKING:
    from projects.models import Project
    from search.engine.index import VectorIndex

MIN_QUERIES = 30
MIN_GAIN = 0.01
DEPTH = 100


GRID: tuple[FusionSetting, ...] = (
    DEFAULT,
    *(FusionSetting("rrf", k, 1.0, s) for k in (10, 30, 60, 100) for s in (0.5, 1.0, 2.0)
      if (k, s) != (60, 1.0)),
    *(FusionSetting(m, 60, round(1 - s, 2), s) for m in ("weighted", "dbsf") for s in (0.3, 0.4, 0.5, 0.6, 0.7)),
)


@dataclass
class FusionChoice:
    """What choose_fusion found: the setting to run (DEFAULT unless adopted) and the evidence for it."""

    setting: FusionSetting
    adopted: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"setting": self.setting.as_dict() if self.adopted else None, "adopted": self.adopted,
                "label": self.setting.label, "reason": self.reason, "evidence": self.evidence}


def judged_queries(*, project: Project) -> dict[str, dict[int, int]]:
    """query text -> {chunk id: relevance} from the project's context feedback; several sessions of one query
    merge (the highest rating of a chunk wins)."""
    out: dict[str, dict[int, int]] = {}
    rows = (Feedback.objects.filter(session__project=project, session__kind="context", chunk__isnull=False)
            .values_list("session__query", "chunk_id", "relevance"))
    for query, chunk_id, rel in rows:
        judged = out.setdefault(query.strip(), {})
        judged[chunk_id] = max(rel, judged.get(chunk_id, 0))
    return {q: rels for q, rels in out.items() if q and any(r > 0 for r in rels.values())}


Legs = dict[str, tuple[list[tuple[int, float]], list[tuple[int, float]]]]


def run_legs(*, queries: list[str], dataset_ids: list[int], index: VectorIndex | None = None) -> Legs:
    """Each query's dense and sparse hits (top DEPTH), searched once; every setting is scored from these."""
    flt = build_filter(dataset_ids=dataset_ids)
    out: Legs = {}
    for q in queries:
        dense = [(c.chunk_id, c.dense_score or 0.0) for c in retrieve(q=q, flt=flt, candidates=DEPTH, legs="dense",
                                                                     index=index)]
        sparse = [(c.chunk_id, c.sparse_score or 0.0) for c in retrieve(q=q, flt=flt, candidates=DEPTH,
                                                                       legs="sparse", index=index)]
        out[q] = (dense, sparse)
    return out


def score_setting(setting: FusionSetting, *, legs: Legs, judged: dict[str, dict[int, int]],
                  queries: list[str]) -> list[float]:
    """Per-query nDCG@10 of one setting over `queries`."""
    out = []
    for q in queries:
        dense, sparse = legs[q]
        fused = fuse(dense=dense, sparse=sparse, method=setting.method, weights=setting.weights(),
                     rrf_k=setting.rrf_k, limit=10)
        out.append(ndcg([c.chunk_id for c in fused], judged[q]))
    return out


def choose(*, legs: Legs, judged: dict[str, dict[int, int]], min_queries: int = MIN_QUERIES,
           min_gain: float = MIN_GAIN, seed: int = 15, baseline: FusionSetting = DEFAULT) -> FusionChoice:
    """The rule in the module docstring, over legs already run (pure: tests feed it hand-made legs).
    `baseline`: what the project runs without a choice (its content kind's default)."""
    queries = sorted(q for q in judged if q in legs)
    n = len(queries)
    evidence: dict[str, Any] = {"judged_queries": n, "min_queries": min_queries, "min_gain": min_gain,
                                "baseline": baseline.label,
                                "computed_at": timezone.now().isoformat()}
    if n < min_queries:
        return FusionChoice(baseline, False, f"{n} judged queries; at least {min_queries} are needed", evidence)
    random.Random(seed).shuffle(queries)
    pick, confirm = queries[: n // 2], queries[n // 2:]
    grid = {s: statistics.fmean(score_setting(s, legs=legs, judged=judged, queries=pick)) for s in GRID}
    best = max(GRID, key=lambda s: (grid[s], s == baseline))  # a tie keeps the default
    evidence["pick"] = {"queries": len(pick), "grid": {s.label: round(v, 4) for s, v in grid.items()},
                        "best": best.label}
    dense_only = statistics.fmean(ndcg([i for i, _ in legs[q][0]], judged[q]) for q in queries)
    sparse_only = statistics.fmean(ndcg([i for i, _ in legs[q][1]], judged[q]) for q in queries)
    evidence["legs"] = {"dense": round(dense_only, 4), "sparse": round(sparse_only, 4)}
    if best == baseline:
        return FusionChoice(baseline, False, "the default is the best setting on the pick half", evidence)
    base = score_setting(baseline, legs=legs, judged=judged, queries=confirm)
    cand = score_setting(best, legs=legs, judged=judged, queries=confirm)
    deltas = [b - a for a, b in zip(base, cand, strict=True)]
    gain, low = statistics.fmean(deltas), lower_bound_95(deltas, seed=seed)
    overall = statistics.fmean(score_setting(best, legs=legs, judged=judged, queries=queries))
    evidence["confirm"] = {"queries": len(confirm), "default": round(statistics.fmean(base), 4),
                           "best": round(statistics.fmean(cand), 4), "gain": round(gain, 4),
                           "gain_lower_95": round(low, 4), "wins": sum(d > 0 for d in deltas),
                           "losses": sum(d < 0 for d in deltas)}
    evidence["best_all_queries"] = round(overall, 4)
    if gain < min_gain:
        return FusionChoice(baseline, False, f"{best.label} gains {gain:+.4f} on the confirm half; "
                                            f"{min_gain} is needed", evidence)
    if low <= 0:
        return FusionChoice(baseline, False, f"{best.label} gains {gain:+.4f} on the confirm half, but its 95 % "
                                            f"lower bound is {low:+.4f}", evidence)
    if overall < max(dense_only, sparse_only):
        return FusionChoice(baseline, False, f"{best.label} is below a single leg on the judged queries", evidence)
    return FusionChoice(best, True, f"{best.label} gains {gain:+.4f} nDCG@10 on {len(confirm)} held-out judged "
                                    f"queries (95 % lower bound {low:+.4f})", evidence)


def choose_for_project(*, project: Project, min_queries: int = MIN_QUERIES, min_gain: float = MIN_GAIN,
                       save: bool = True, index: VectorIndex | None = None) -> FusionChoice:
    """Run the rule on the project's feedback over its datasets (own, shared and global, as its queries search)
    and store the result on the project (`save`): the adopted setting, or the default with the reason."""
    judged = judged_queries(project=project)
    dataset_ids = list(accessible_dataset_ids(project, include_global=True))
    kinds = set(Dataset.objects.filter(pk__in=dataset_ids).values_list("kind", flat=True))
    baseline = kind_default(kinds)
    if len(judged) < min_queries:  # not worth running the legs
        result = choose(legs={}, judged=judged, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
        result.evidence["judged_queries"] = len(judged)
        result.reason = f"{len(judged)} judged queries; at least {min_queries} are needed"
    else:
        legs = run_legs(queries=sorted(judged), dataset_ids=dataset_ids, index=index)
        result = choose(legs=legs, judged=judged, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
    if save:
        type(project).objects.filter(pk=project.pk).update(fusion=result.as_dict())
        project.fusion = result.as_dict()
    return result
