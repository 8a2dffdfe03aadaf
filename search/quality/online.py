"""Online quality from user judgments: MRR@10 and nDCG@10 per project per day (search.quality.metrics).

Why from RerankResult: the logged final ranks are exactly what the user saw,
so a judgment on any shown chunk scores the ranking that was served.
"""
from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.db import transaction
from django.utils import timezone

from search.models import DailyMetric, Feedback, RerankResult
from search.quality.metrics import online_scores


def aggregate_day(*, day: date, kind: str | None = None) -> int:
    """Recompute DailyMetric rows for `day`; returns how many rows were written."""
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
        scores = online_scores(qrels=qrels, run=run)
        with transaction.atomic():
            DailyMetric.objects.update_or_create(project_id=pid, day=day, kind=skind,
                                                 defaults={"judged_sessions": len(qrels), "mrr_at_10": scores["mrr@10"],
                                                           "ndcg_at_10": scores["ndcg@10"]})
        written += 1
    return written
