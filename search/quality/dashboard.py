"""The staff dashboard's search figures and its charts, computed from the logs in Postgres.

Why server-rendered SVG: the machines have no internet (no CDN chart library) and
an SVG from matplotlib needs no JavaScript to read.
Why only search's figures: people searches and credits are above and beside search in the layers; the page
(console.dashboard, in the roof) asks each app for its own series and puts them together.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.db.models.functions import TruncDay
from django.utils import timezone

from search.models import DailyMetric, EvaluationRun, QuerySession, ReconcileRun


@dataclass
class Series:
    label: str
    points: dict[date, float] = field(default_factory=dict)


def _days(n: int) -> list[date]:
    today = timezone.now().date()
    return [today - timedelta(days=i) for i in range(n - 1, -1, -1)]


def search_volume(*, days: int = 14) -> dict[str, dict[str, Series]]:
    """Per search kind (context, rules): queries per day and mean total latency per day (ms)."""
    since = timezone.now() - timedelta(days=days)
    out: dict[str, dict[str, Series]] = {
        kind: {"volume": Series(f"{kind} queries"), "latency": Series(f"{kind} ms")} for kind in ("context", "rules")}
    rows = (QuerySession.objects.filter(created_at__gte=since).annotate(day=TruncDay("created_at"))
            .values("day", "kind", "timings").order_by())
    agg: dict[tuple[str, date], list[float]] = {}
    for r in rows:
        total = float((r["timings"] or {}).get("total_ms") or sum(
            v for v in (r["timings"] or {}).values() if isinstance(v, (int, float))))
        agg.setdefault((r["kind"], r["day"].date()), []).append(total)
    for (kind, day), values in agg.items():
        entry = out.setdefault(kind, {"volume": Series(f"{kind} queries"), "latency": Series(f"{kind} ms")})
        entry["volume"].points[day] = len(values)
        entry["latency"].points[day] = sum(values) / len(values)
    return out


def quality_metrics(*, days: int = 30) -> list[dict[str, Any]]:
    since = timezone.now().date() - timedelta(days=days)
    return list(DailyMetric.objects.filter(day__gte=since).select_related("project")
                .values("project__slug", "day", "kind", "judged_sessions", "mrr_at_10", "ndcg_at_10")
                .order_by("-day", "project__slug"))


def latest_evaluations(*, limit: int = 5) -> list[dict[str, Any]]:
    """Each run with a one-line nDCG@10 summary per pipeline (template lookups cannot spell "ndcg@10")."""
    out = []
    for r in EvaluationRun.objects.all()[:limit]:
        parts = [f"{name}: {m.get('ndcg@10', float('nan')):.3f}" for name, m in (r.results or {}).items()
                 if isinstance(m, dict)]
        out.append({"created_at": r.created_at, "collection": r.collection, "queries": r.queries,
                    "summary": ", ".join(parts)})
    return out


def last_reconcile() -> dict[str, Any] | None:
    """The latest index check: whether the Qdrant projection was found exact, and what a fix left."""
    last = ReconcileRun.objects.order_by("-created_at").first()
    if last is None:
        return None
    return {"created_at": last.created_at, "exact": last.exact, "orphans": last.orphans, "missing": last.missing,
            "stale": last.stale, "unembedded": last.unembedded, "pending": last.pending, "fixed": last.fixed,
            "orphans_after": last.orphans_after, "missing_after": last.missing_after,
            "stale_after": last.stale_after, "points": last.points, "chunks": last.chunks}


def line_chart_svg(*, series: list[Series], title: str, days: int = 14, ylabel: str = "",
                   gaps: bool = False) -> str:
    """`gaps`: a day without a value is a gap, not a zero (no feedback that day is not an MRR of 0)."""
    import matplotlib  # noqa: PLC0415 - heavy: charts load only when a report is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - heavy: charts load only when a report is drawn

    xs = _days(days)
    fig, ax = plt.subplots(figsize=(6.4, 2.6), dpi=100)
    for s in series:
        ax.plot(xs, [s.points.get(d, float("nan") if gaps else 0) for d in xs], marker="o", markersize=3,
                label=s.label)
    top = max([v for s in series for v in s.points.values()] + [0])
    ax.set_ylim(bottom=0, top=top * 1.15 if top > 0 else 1)  # no negative axis for counts and latencies
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=7, loc="upper left")
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]
