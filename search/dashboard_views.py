from django.contrib import admin
from django.shortcuts import render

from search.dashboard import dashboard_context


def dashboard(request):  # noqa: ANN001, ANN201
    days = 14
    ctx = {**admin.site.each_context(request), "days": days, **dashboard_context(days=days)}
    return render(request, "admin/dashboard.html", ctx)
