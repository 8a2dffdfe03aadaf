"""The staff dashboard's figures and charts, computed from the logs in Postgres.

Why server-rendered SVG: the machines have no internet (no CDN chart library) and
an SVG from matplotlib needs no JavaScript to read.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.apps import apps
from django.db.models import Avg, Count, Sum
from django.db.models.functions import TruncDay
from django.utils import timezone


@dataclass
class Series:
    label: str
    points: dict[date, float] = field(default_factory=dict)


def _days(n: int) -> list[date]:
    today = timezone.now().date()
    return [today - timedelta(days=i) for i in range(n - 1, -1, -1)]


def _model(label: str):  # noqa: ANN202 - a model class or None while that app has no such model
    try:
        return apps.get_model(label)
    except LookupError:
        return None


def query_volume(*, days: int = 14) -> dict[str, dict[str, Series]]:
    """Per search kind: queries per day and mean total latency per day (ms)."""
    since = timezone.now() - timedelta(days=days)
    out: dict[str, dict[str, Series]] = {
        kind: {"volume": Series(f"{kind} queries"), "latency": Series(f"{kind} ms")} for kind in ("context", "rules")}
    qs_model = _model("search.QuerySession")
    if qs_model is not None:
        rows = (qs_model.objects.filter(created_at__gte=since).annotate(day=TruncDay("created_at"))
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
    people_search = _model("people.Search")
    if people_search is not None:
        rows = (people_search.objects.filter(created_at__gte=since).annotate(day=TruncDay("created_at"))
                .values("day").annotate(n=Count("pk")).order_by())
        entry = out.setdefault("people", {"volume": Series("people searches"), "latency": Series("people ms")})
        for r in rows:
            entry["volume"].points[r["day"].date()] = r["n"]
        lat_field = "latency_ms" if any(f.name == "latency_ms" for f in people_search._meta.fields) else None
        if lat_field:
            for r in (people_search.objects.filter(created_at__gte=since).annotate(day=TruncDay("created_at"))
                      .values("day").annotate(ms=Avg(lat_field)).order_by()):
                entry["latency"].points[r["day"].date()] = float(r["ms"] or 0)
    return out


def quality_metrics(*, days: int = 30) -> list[dict[str, Any]]:
    metric = _model("search.DailyMetric")
    since = timezone.now().date() - timedelta(days=days)
    return list(metric.objects.filter(day__gte=since).select_related("project")
                .values("project__slug", "day", "kind", "judged_sessions", "mrr_at_15", "ndcg_at_10")
                .order_by("-day", "project__slug"))


def credits_spent(*, days: int = 14) -> Series:
    ledger = _model("credits.LedgerEntry")
    since = timezone.now() - timedelta(days=days)
    series = Series("credits spent")
    for r in (ledger.objects.filter(created_at__gte=since, delta__lt=0).annotate(day=TruncDay("created_at"))
              .values("day").annotate(spent=Sum("delta")).order_by()):
        series.points[r["day"].date()] = -float(r["spent"])
    return series


def latest_evaluations(*, limit: int = 5) -> list[dict[str, Any]]:
    """Each run with a one-line nDCG@10 summary per pipeline (template lookups cannot spell "ndcg@10")."""
    run = _model("search.EvaluationRun")
    out = []
    for r in run.objects.all()[:limit]:
        parts = [f"{name}: {m.get('ndcg@10', float('nan')):.3f}" for name, m in (r.results or {}).items()
                 if isinstance(m, dict)]
        out.append({"created_at": r.created_at, "collection": r.collection, "queries": r.queries,
                    "summary": ", ".join(parts)})
    return out


def last_reconcile() -> dict[str, Any] | None:
    """The latest index check: whether the Qdrant projection was found exact, and what a fix left."""
    run = _model("search.ReconcileRun")
    last = run.objects.order_by("-created_at").first() if run is not None else None
    if last is None:
        return None
    return {"created_at": last.created_at, "exact": last.exact, "orphans": last.orphans, "missing": last.missing,
            "stale": last.stale, "unembedded": last.unembedded, "pending": last.pending, "fixed": last.fixed,
            "orphans_after": last.orphans_after, "missing_after": last.missing_after,
            "stale_after": last.stale_after, "points": last.points, "chunks": last.chunks}


def line_chart_svg(*, series: list[Series], title: str, days: int = 14, ylabel: str = "",
                   gaps: bool = False) -> str:
    """`gaps`: a day without a value is a gap, not a zero (no feedback that day is not an MRR of 0)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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


def dashboard_context(*, days: int = 14) -> dict[str, Any]:
    volume = query_volume(days=days)
    quality = quality_metrics(days=30)
    by_project: dict[str, Series] = {}
    for row in quality:
        for key, label in (("mrr_at_15", "MRR@15"), ("ndcg_at_10", "nDCG@10")):
            if row[key] is not None:
                s = by_project.setdefault(f"{row['project__slug']} {label}",
                                          Series(f"{row['project__slug']} {label}"))
                s.points[row["day"]] = row[key]
    return {
        "charts": {
            "volume": line_chart_svg(series=[v["volume"] for v in volume.values()], title="Queries per day",
                                     days=days),
            "latency": line_chart_svg(series=[v["latency"] for v in volume.values()],
                                      title="Mean latency per day (ms)", days=days, ylabel="ms"),
            "quality": line_chart_svg(series=list(by_project.values()),
                                      title="MRR@15 and nDCG@10 from feedback", days=30, gaps=True),
            "credits": line_chart_svg(series=[credits_spent(days=days)], title="Credits spent per day", days=days),
        },
        "quality_rows": quality[:50],
        "evaluations": latest_evaluations(),
        "reconcile": last_reconcile(),
        "totals": {kind: int(sum(v["volume"].points.values())) for kind, v in volume.items()},
    }
