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

Label-free queries (search.quality.self_judged) come in kinds that can disagree (docstrings, commit messages):
`choose_agreed` runs the same rule with one pick over all kinds and a confirm half per kind, each of which must
pass; a kind judged per file (commit messages) scores rankings with each file once (`as_docs`).
"""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from search.engine.access import accessible_dataset_ids
from search.engine.fusion import fuse
from search.engine.fusion_settings import DEFAULT, FusionSetting, kind_default
from search.engine.pipeline import QuerySpec, build_filter, execute, over, retrieve_legs
from search.engine.project_ranking import save_fusion
from search.models import Dataset, Feedback
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


def judged_queries(*, project: Project, kinds: tuple[str, ...] = ("context",)) -> dict[str, dict[int, int]]:
    """query text -> {chunk id: relevance} from the project's feedback on queries of `kinds` (fusion choice reads
    context queries, the fusion it picks serves only those); several sessions of one query merge (the highest
    rating of a chunk wins)."""
    out: dict[str, dict[int, int]] = {}
    rows = (Feedback.objects.filter(session__project=project, session__kind__in=kinds, chunk__isnull=False)
            .values_list("session__query", "chunk_id", "relevance"))
    for query, chunk_id, rel in rows:
        judged = out.setdefault(query.strip(), {})
        judged[chunk_id] = max(rel, judged.get(chunk_id, 0))
    return {q: rels for q, rels in out.items() if q and any(r > 0 for r in rels.values())}


Legs = dict[str, tuple[list[tuple[int, float]], list[tuple[int, float]]]]


def run_legs(*, queries: list[str], dataset_ids: list[int], index: VectorIndex | None = None) -> Legs:
    """Each query's dense and sparse hits (top DEPTH), searched once; every setting is scored from these."""
    stages = (over(build_filter(dataset_ids=dataset_ids), setting=DEFAULT), retrieve_legs)  # the legs, not fused
    out: Legs = {}
    for q in queries:
        run = execute(spec=QuerySpec(q=q, log=False, candidates=DEPTH), project=None, index=index, stages=stages)
        out[q] = (run.dense, run.sparse)
    return out


def as_docs(chunk_ids: list[int], to_doc: dict[int, Any] | None) -> list[Any]:
    """A chunk ranking as judged: itself, or (with `to_doc`, chunk id -> document key) each document once, at its
    best chunk's rank; a chunk `to_doc` does not know is left out."""
    if to_doc is None:
        return chunk_ids
    seen: dict[Any, None] = {}
    for cid in chunk_ids:
        doc = to_doc.get(cid)
        if doc is not None:
            seen.setdefault(doc, None)
    return list(seen)


def score_setting(setting: FusionSetting, *, legs: Legs, judged: dict[str, dict[Any, int]],
                  queries: list[str], to_doc: dict[int, Any] | None = None) -> list[float]:
    """Per-query nDCG@10 of one setting over `queries`; with `to_doc`, at document level (`judged` then holds
    document keys), from the fused top DEPTH so ten distinct documents are there to rank."""
    out = []
    for q in queries:
        dense, sparse = legs[q]
        fused = fuse(dense=dense, sparse=sparse, method=setting.method, weights=setting.weights(),
                     rrf_k=setting.rrf_k, limit=10 if to_doc is None else DEPTH)
        out.append(ndcg(as_docs([c.chunk_id for c in fused], to_doc), judged[q]))
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


@dataclass
class JudgedSet:
    """One kind of judged queries for `choose_agreed`: their legs, their judgments and, for judging at document
    level, chunk id -> document key (`judged` then holds document keys)."""

    legs: Legs
    judged: dict[str, dict[Any, int]]
    to_doc: dict[int, Any] | None = None


def _leg_mean(js: JudgedSet, queries: list[str], leg: int) -> float:
    return statistics.fmean(ndcg(as_docs([i for i, _ in js.legs[q][leg]], js.to_doc), js.judged[q])
                            for q in queries)


def choose_agreed(*, sets: dict[str, JudgedSet], min_queries: int = MIN_QUERIES, min_gain: float = MIN_GAIN,
                  seed: int = 15, baseline: FusionSetting = DEFAULT) -> FusionChoice:
    """The rule with several kinds of judged queries that must agree (pure, as `choose`).

    Every kind with at least `min_queries` queries takes part (none: nothing is chosen), each split into its own
    pick and confirm halves. The grid is scored on the pick halves, each kind weighing the same (the mean of the
    kinds' means: a project has more docstrings than commits, and a plain union would let the larger kind choose
    alone). The best setting is adopted only when, on the confirm half of EVERY kind that takes part, it gains at
    least `min_gain` over `baseline` with the 95 % lower bound above zero, and on every kind's queries it is not
    below a single leg. With one kind this is `choose`'s rule and decision (same seed, same halves)."""
    counts = {name: len([q for q in js.judged if q in js.legs]) for name, js in sets.items()}
    used = [name for name in sets if counts[name] >= min_queries]
    evidence: dict[str, Any] = {"judged_queries": sum(counts[n] for n in used), "min_queries": min_queries,
                                "min_gain": min_gain, "baseline": baseline.label,
                                "computed_at": timezone.now().isoformat(),
                                "types": {name: {"queries": counts[name], "used": name in used} for name in sets}}
    if not used:
        have = ", ".join(f"{counts[n]} {n}" for n in sets) or "no"
        return FusionChoice(baseline, False, f"{have} judged queries; at least {min_queries} of one kind are "
                                             f"needed", evidence)
    halves: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for name in used:
        queries = sorted(q for q in sets[name].judged if q in sets[name].legs)
        random.Random(seed).shuffle(queries)
        halves[name] = (queries, queries[: len(queries) // 2], queries[len(queries) // 2:])
    per_kind = {name: {s: statistics.fmean(score_setting(s, legs=sets[name].legs, judged=sets[name].judged,
                                                         queries=halves[name][1], to_doc=sets[name].to_doc))
                       for s in GRID} for name in used}
    grid = {s: statistics.fmean(per_kind[name][s] for name in used) for s in GRID}
    best = max(GRID, key=lambda s: (grid[s], s == baseline))  # a tie keeps the default
    evidence["pick"] = {"queries": sum(len(halves[n][1]) for n in used), "kinds": used,
                        "grid": {s.label: round(v, 4) for s, v in grid.items()}, "best": best.label}
    single_leg: dict[str, float] = {}
    for name in used:
        js, (queries, pick, _) = sets[name], halves[name]
        dense, sparse = _leg_mean(js, queries, 0), _leg_mean(js, queries, 1)
        single_leg[name] = max(dense, sparse)
        evidence["types"][name].update({
            "pick": len(pick), "pick_best": max(GRID, key=lambda s, n=name: (per_kind[n][s], s == baseline)).label,
            "legs": {"dense": round(dense, 4), "sparse": round(sparse, 4)}})
        if len(used) > 1:  # what each kind alone would have picked, and by how much
            evidence["types"][name]["grid"] = {s.label: round(v, 4) for s, v in per_kind[name].items()}
    if len(used) == 1:  # the shape `choose` writes, which the command and the admin also read
        evidence["legs"] = evidence["types"][used[0]]["legs"]
    if best == baseline:
        return FusionChoice(baseline, False, f"the default is the best setting on the pick half"
                                             f"{'s (' + ', '.join(used) + ')' if len(used) > 1 else ''}", evidence)
    failures: list[str] = []
    passed: list[str] = []
    for name in used:
        js, (queries, _, confirm) = sets[name], halves[name]
        base = score_setting(baseline, legs=js.legs, judged=js.judged, queries=confirm, to_doc=js.to_doc)
        cand = score_setting(best, legs=js.legs, judged=js.judged, queries=confirm, to_doc=js.to_doc)
        deltas = [b - a for a, b in zip(base, cand, strict=True)]
        gain, low = statistics.fmean(deltas), lower_bound_95(deltas, seed=seed)
        overall = statistics.fmean(score_setting(best, legs=js.legs, judged=js.judged, queries=queries,
                                                 to_doc=js.to_doc))
        confirm_ev = {"queries": len(confirm), "default": round(statistics.fmean(base), 4),
                      "best": round(statistics.fmean(cand), 4), "gain": round(gain, 4),
                      "gain_lower_95": round(low, 4), "wins": sum(d > 0 for d in deltas),
                      "losses": sum(d < 0 for d in deltas)}
        kind_ev = evidence["types"][name]
        kind_ev.update({"confirm": confirm_ev, "best_all_queries": round(overall, 4)})
        on = f" on the {name} confirm half" if len(used) > 1 else " on the confirm half"
        if gain < min_gain:
            why = f"{best.label} gains {gain:+.4f}{on}; {min_gain} is needed"
        elif low <= 0:
            why = f"{best.label} gains {gain:+.4f}{on}, but its 95 % lower bound is {low:+.4f}"
        elif overall < single_leg[name]:
            why = f"{best.label} is below a single leg on the {'' if len(used) == 1 else name + ' '}judged queries"
        else:
            why = ""
            passed.append(f"{gain:+.4f} nDCG@10 on {len(confirm)} held-out {name if len(used) > 1 else 'judged'} "
                          f"queries (95 % lower bound {low:+.4f})")
        kind_ev["passes"] = not why
        if why:
            failures.append(why)
    if len(used) == 1:
        evidence["confirm"] = evidence["types"][used[0]]["confirm"]
        evidence["best_all_queries"] = evidence["types"][used[0]]["best_all_queries"]
    if failures:
        return FusionChoice(baseline, False, "; ".join(failures), evidence)
    return FusionChoice(best, True, f"{best.label} gains {' and '.join(passed)}", evidence)


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
        save_fusion(project=project, choice=result.as_dict())
    return result
