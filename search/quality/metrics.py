"""The ranking metrics: one set of names, cutoffs and rules for evaluation, the online metrics, fusion choice and
reranker training, so a figure means the same wherever it is reported.

Definitions are ranx's (what `manage.py evaluate` reports): nDCG@k with linear graded gains and a log2 discount,
MRR@k the reciprocal rank of the first relevant result within k, hit@k and recall@k. Cutoffs: nDCG and MRR at 10,
offline and online alike. The rule for a query with no answer: a query is scorable when its judgments hold a
relevant document; a scorable query whose ranking has no result (or no relevant one) scores 0 and counts in the
mean. A query with no relevant judgment is not scorable and is left out (a collection without its answer), except
online, where a session whose shown results were all judged irrelevant means the answer exists but was not shown:
it scores 0 (`unanswered_is_zero`).
"""
from __future__ import annotations

import random
import statistics
import warnings

from config.metrics import graded_ndcg

NDCG_K = 10
MRR_K = 10
RUN_DEPTH = 100
# metric name as reported -> ranx's name
RANX_METRICS = {"hit@1": "hit_rate@1", "hit@3": "hit_rate@3", "hit@5": "hit_rate@5", "hit@10": "hit_rate@10",
                "mrr@10": "mrr@10", "ndcg@10": "ndcg@10", "recall@100": "recall@100"}


# what the daily online metrics report: the same cutoffs as evaluation
ONLINE = (f"mrr@{MRR_K}", f"ndcg@{NDCG_K}")


def ndcg(ranked: list, rels: dict, *, k: int = NDCG_K) -> float:
    """Graded nDCG@k of one ranking (`rels`: id -> grade; unlisted ids are not relevant) at search's cutoff: the
    project's one definition (config.metrics, shared with people's benchmark)."""
    return graded_ndcg(ranked=ranked, grades=rels, k=k)


def compute_metrics(*, qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]],
                    names: tuple[str, ...] = tuple(RANX_METRICS), places: int | None = 4) -> dict[str, float]:
    """ranx metrics (`names`, as reported) over the scorable queries; a scorable query the run has no answer for
    scores 0 (not dropped). `places`: rounding of the reported figures (None: unrounded)."""
    from ranx import Qrels, Run, evaluate  # noqa: PLC0415 - heavy: ranx compiles with numba on import; only metrics need it

    judged = {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in qrels.items()
              if any(r > 0 for r in docs.values())}
    if not judged:
        return {k: 0.0 for k in names}
    full_run = {}
    for q in judged:
        docs = {str(d): float(s) for d, s in (run.get(q) or {}).items()}
        full_run[q] = docs or {"__no_result__": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = evaluate(Qrels(judged), Run(full_run), [RANX_METRICS[k] for k in names], make_comparable=True)
    if len(names) == 1:  # ranx returns a bare float for one metric
        scores = {RANX_METRICS[names[0]]: scores}
    return {k: float(scores[RANX_METRICS[k]]) if places is None else round(float(scores[RANX_METRICS[k]]), places)
            for k in names}


def ranked_to_run(ranked: list[tuple[str, float]], *, depth: int = RUN_DEPTH) -> dict[str, float]:
    """Ordered (doc, score) -> ranx scores that keep the order exactly (ties and rescoring can't reorder)."""
    out: dict[str, float] = {}
    for doc, _ in ranked:
        if doc not in out:
            out[doc] = float(depth + 1 - len(out))
            if len(out) >= depth:
                break
    return out


def online_scores(*, qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """MRR@10 and nDCG@10 of served rankings from judgments of what was shown (`unanswered_is_zero`: a session
    judged all irrelevant scores 0 instead of being left out)."""
    judged = {s: q for s, q in qrels.items() if any(v > 0 for v in q.values())}
    if not judged:
        return dict.fromkeys(ONLINE, 0.0)
    scores = compute_metrics(qrels=judged, run=run, names=ONLINE, places=None)
    share = len(judged) / len(qrels)  # the sessions left out by the scorable rule count as 0
    return {name: value * share for name, value in scores.items()}


BOOTSTRAP = 2000


def lower_bound_95(deltas: list[float], *, seed: int) -> float:
    """One-sided 95 % bootstrap lower bound of the mean paired gain (fusion choice and model adaptation adopt a
    change only when it is above zero)."""
    rng = random.Random(seed)
    n = len(deltas)
    means = sorted(statistics.fmean(rng.choices(deltas, k=n)) for _ in range(BOOTSTRAP))
    return means[int(0.05 * BOOTSTRAP)]
