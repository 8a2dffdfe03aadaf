"""The staff dashboard page: the one place that puts every app's figures side by side.

Why here, in the roof: the figures come from search (queries, quality, evaluations, the index check), people
(people searches) and credits (spending). Only console may use every app; the apps' own modules may not reach up
or sideways to each other, so each app reports its own series and this module composes them.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from credits.ledger import spent_per_day
from people.service.sessions import searches_per_day
from search.quality.dashboard import (
    Series,
    last_reconcile,
    latest_evaluations,
    line_chart_svg,
    quality_metrics,
    search_volume,
)


def query_volume(*, days: int = 14) -> dict[str, dict[str, Series]]:
    """Per search kind (context, rules, people): queries per day and mean latency per day (ms)."""
    out = search_volume(days=days)
    people = out.setdefault("people", {"volume": Series("people searches"), "latency": Series("people ms")})
    for day, (n, ms) in searches_per_day(since=timezone.now() - timedelta(days=days)).items():
        people["volume"].points[day] = n
        people["latency"].points[day] = float(ms or 0)
    return out


def credits_spent(*, days: int = 14) -> Series:
    return Series("credits spent", points=spent_per_day(since=timezone.now() - timedelta(days=days)))


def dashboard_context(*, days: int = 14) -> dict[str, Any]:
    volume = query_volume(days=days)
    quality = quality_metrics(days=30)
    by_project: dict[str, Series] = {}
    for row in quality:
        for key, label in (("mrr_at_10", "MRR@10"), ("ndcg_at_10", "nDCG@10")):
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
                                      title="MRR@10 and nDCG@10 from feedback", days=30, gaps=True),
            "credits": line_chart_svg(series=[credits_spent(days=days)], title="Credits spent per day", days=days),
        },
        "quality_rows": quality[:50],
        "evaluations": latest_evaluations(),
        "reconcile": last_reconcile(),
        "totals": {kind: int(sum(v["volume"].points.values())) for kind, v in volume.items()},
    }


def dashboard(request: HttpRequest) -> HttpResponse:
    days = 14
    ctx = {**admin.site.each_context(request), "days": days, **dashboard_context(days=days)}
    return render(request, "admin/dashboard.html", ctx)
