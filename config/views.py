from django.http import JsonResponse

from config.health import health_report


def healthz(request):  # noqa: ANN001, ANN201
    report = health_report()
    return JsonResponse(report, status=200 if report["ok"] else 503)
