"""Home (the projects you are in) and /healthz (every dependency): they show several apps, so they live in the roof."""
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from console.health import health_report
from projects.sharing import projects_of


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when every dependency answers, else 503 naming the ones that did not.

    Cheap checks only (console.health: no worker ping, the index is never opened here), because a load balancer
    polls this. Anonymous callers learn up or down per dependency; versions, collection names and error texts are
    for staff only."""
    report = health_report()
    if not report["ok"]:
        report["down"] = [name for name, check in report["checks"].items() if not check["ok"]]
    if not getattr(request.user, "is_staff", False):
        report["checks"] = {name: {"ok": check["ok"]} for name, check in report["checks"].items()}
    return JsonResponse(report, status=200 if report["ok"] else 503)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"projects": projects_of(user=request.user)})
