"""Online quality from user judgments: MRR@15 and nDCG@10 per project per day (ranx).

Why from RerankResult: the logged final ranks are exactly what the user saw,
so a judgment on any shown chunk scores the ranking that was served.
"""
from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.db import transaction
from django.utils import timezone

from search.models import DailyMetric, Feedback, RerankResult


def aggregate_day(*, day: date, kind: str | None = None) -> int:
    """Recompute DailyMetric rows for `day`; returns how many rows were written."""
    from ranx import Qrels, Run, evaluate  # noqa: PLC0415 - heavy: ranx compiles with numba on import; only metrics need it

    tz = timezone.get_current_timezone()
    start = timezone.make_aware(datetime.combine(day, time.min), tz)
    end = start + timedelta(days=1)
    fb = Feedback.objects.filter(session__created_at__gte=start, session__created_at__lt=end)
    if kind:
        fb = fb.filter(session__kind=kind)
    per_project: dict[tuple[int, str], dict[str, dict[str, int]]] = {}
    for sid, pid, skind, cid, rel in fb.values_list("session_id", "session__project_id", "session__kind",
                                                   "chunk_id", "relevance"):
        per_project.setdefault((pid, skind), {}).setdefault(str(sid), {})[str(cid)] = int(rel)
    written = 0
    for (pid, skind), qrels in per_project.items():
        run: dict[str, dict[str, float]] = {}
        for sid, cid, rank in RerankResult.objects.filter(session_id__in=list(qrels), final_rank__isnull=False) \
                .values_list("session_id", "chunk_id", "final_rank"):
            run.setdefault(str(sid), {})[str(cid)] = 1.0 / rank
        # a session whose results were all judged irrelevant scores 0 on both metrics (ranx cannot score a
        # query with no relevant document, so it averages over the others and we rescale to every judged session)
        judged = {s: q for s, q in qrels.items() if any(v > 0 for v in q.values())}
        mrr = ndcg = 0.0
        if judged:
            for s in judged:
                run.setdefault(s, {"__none__": 0.0})
            scores = evaluate(Qrels(judged), Run({s: run[s] for s in judged}), ["mrr@15", "ndcg@10"])
            share = len(judged) / len(qrels)
            mrr, ndcg = float(scores["mrr@15"]) * share, float(scores["ndcg@10"]) * share
        with transaction.atomic():
            DailyMetric.objects.update_or_create(project_id=pid, day=day, kind=skind,
                                                 defaults={"judged_sessions": len(qrels), "mrr_at_15": mrr,
                                                           "ndcg_at_10": ndcg})
        written += 1
    return written
