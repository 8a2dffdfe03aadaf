from datetime import timedelta

from django.utils import timezone

from credits import ledger
from search.models import DailyMetric, EvaluationRun, QuerySession


def test_dashboard_requires_staff(client, make_user):
    user = make_user(staff=False)
    client.force_login(user)
    resp = client.get("/admin/dashboard/")
    assert resp.status_code == 302 and "/admin/login/" in resp["Location"]


def test_dashboard_renders_charts_from_logged_data(client, make_user, make_project):
    staff = make_user(staff=True, credits=5)
    project = make_project("acme", staff)
    QuerySession.objects.create(user=staff, project=project, kind="context", query="q", timings={"total_ms": 42.0})
    ledger.deduct(user=staff, amount=2, reason="search")
    DailyMetric.objects.create(project=project, day=timezone.now().date() - timedelta(days=1), judged_sessions=3,
                               mrr_at_10=0.5, ndcg_at_10=0.61)
    EvaluationRun.objects.create(collection="scifact", queries=300, results={"default": {"ndcg@10": 0.7123}})
    client.force_login(staff)
    resp = client.get("/admin/dashboard/")
    body = resp.content.decode()
    assert resp.status_code == 200
    assert all(f'id="chart-{c}"><svg' in body for c in ("volume", "latency", "quality", "credits"))
    assert "context: 1 queries" in body.replace("</strong>", "").replace("<strong>", "")
    assert "0.610" in body and "acme" in body
    assert "default: 0.712" in body


def test_people_search_latency_is_recorded_and_plotted(make_user, client_for):
    from console.dashboard import query_volume
    from people.models import Search
    from tests.people.factory import embed_all, make_person

    make_person("Asha", cards=[{"title": "Backend Engineer", "intent_primary": "backend"}])
    embed_all()
    api = client_for(make_user("lat@example.com", credits=2))
    assert api.post("/api/search", {"query": "backend engineers"}, format="json").status_code == 200
    search = Search.objects.get()
    assert search.latency_ms is not None and search.latency_ms > 0
    latency = query_volume(days=2)["people"]["latency"].points
    assert list(latency.values()) == [float(search.latency_ms)]
