"""Feedback endpoint (judgments on served results) and the daily MRR@10 / nDCG@10 aggregation task."""
from __future__ import annotations

import math
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(make_user, make_project):
    """Two logged sessions in project 'shop' over four chunks (rows as run_query writes them)."""
    from search.models import Chunk, Dataset, Document, QuerySession, RerankResult

    alice = make_user("judge@example.com")
    shop = make_project("shop", alice)
    ds = Dataset.objects.create(project=shop, name="src", kind="code")
    doc = Document.objects.create(dataset=ds, path="a.py", content_hash="h")
    chunks = [Chunk.objects.create(document=doc, dataset=ds, ordinal=i, path="a.py", start_line=i + 1,
                                   end_line=i + 1, text=f"line {i}", text_hash=f"t{i}") for i in range(4)]

    def session(final_ranks: list[int | None]) -> QuerySession:
        s = QuerySession.objects.create(user=alice, project=shop, query="q")
        RerankResult.objects.bulk_create([
            RerankResult(session=s, chunk=c, dataset_id=ds.pk, project_id=shop.pk, rank_before=i + 1,
                         final_rank=r, fused_score=1.0 / (i + 1)) for i, (c, r) in enumerate(zip(chunks, final_ranks, strict=True))])
        return s

    s1 = session([1, 2, 3, None])  # chunk 3 was a candidate that did not make the top_k
    s2 = session([1, 2, 3, 4])
    s3 = session([1, 2, 3, 4])
    return {"alice": alice, "shop": shop, "chunks": chunks, "sessions": [s1, s2, s3]}


def _feedback(client, session, chunk, relevance):
    return client.post(f"/api/query-sessions/{session.pk}/feedback", {"chunk_id": chunk.pk, "relevance": relevance},
                       format="json")


def test_feedback_is_stored_and_a_second_judgment_replaces_the_first(served, client_for):
    from search.models import Feedback

    client = client_for(served["alice"])
    s1, c = served["sessions"][0], served["chunks"][1]
    resp = _feedback(client, s1, c, 2)
    assert resp.status_code == 201 and resp.json() == {"chunk_id": c.pk, "relevance": 2}
    assert _feedback(client, s1, c, 3).status_code == 201
    fb = Feedback.objects.get(session=s1, chunk=c)
    assert fb.relevance == 3 and fb.user == served["alice"]


@pytest.mark.parametrize("relevance,field", [(4, "relevance"), (-1, "relevance"), ("high", "relevance")])
def test_relevance_outside_0_to_3_is_400(served, client_for, relevance, field):
    resp = _feedback(client_for(served["alice"]), served["sessions"][0], served["chunks"][0], relevance)
    assert resp.status_code == 400 and resp.json()["field"] == field


def test_a_chunk_the_session_never_served_is_400_naming_chunk_id(served, client_for):
    from search.models import Chunk, Dataset, Document

    ds = Dataset.objects.get(name="src")
    doc = Document.objects.create(dataset=ds, path="other.py", content_hash="x")
    stranger = Chunk.objects.create(document=doc, dataset=ds, path="other.py", text="x", text_hash="x")
    resp = _feedback(client_for(served["alice"]), served["sessions"][0], stranger, 3)
    assert resp.status_code == 400 and resp.json()["field"] == "chunk_id"


def test_non_members_and_unknown_sessions_get_404(served, client_for, make_user):
    bob = make_user("bob@example.com")
    assert _feedback(client_for(bob), served["sessions"][0], served["chunks"][0], 3).status_code == 404
    ghost = type("S", (), {"pk": uuid.uuid4()})
    assert _feedback(client_for(served["alice"]), ghost, served["chunks"][0], 3).status_code == 404


def test_daily_task_computes_mrr_and_ndcg_per_project(served, client_for, make_project):
    from search.models import DailyMetric, QuerySession
    from search.tasks import aggregate_query_metrics

    client = client_for(served["alice"])
    s1, s2, s3 = served["sessions"]
    c = served["chunks"]
    assert _feedback(client, s1, c[1], 3).status_code == 201  # relevant at rank 2: RR 1/2
    assert _feedback(client, s1, c[3], 2).status_code == 201  # relevant but not shown (rank None)
    assert _feedback(client, s2, c[0], 1).status_code == 201  # relevant at rank 1: RR 1
    assert _feedback(client, s3, c[0], 0).status_code == 201  # everything judged irrelevant: RR 0
    yesterday = timezone.now() - timedelta(days=1)
    QuerySession.objects.filter(pk=s3.pk).update(created_at=yesterday)

    day = timezone.localdate()
    assert aggregate_query_metrics.apply(kwargs={"day": day.isoformat()}).get() == 1
    m = DailyMetric.objects.get(project=served["shop"], day=day, kind="context")
    assert m.judged_sessions == 2
    assert m.mrr_at_10 == pytest.approx((0.5 + 1.0) / 2)
    # s1: rel 3 at rank 2 with an unshown rel 2 in the ideal ranking; s2: perfect
    dcg1 = 3 / math.log2(3)
    idcg1 = 3 / math.log2(2) + 2 / math.log2(3)
    assert m.ndcg_at_10 == pytest.approx((dcg1 / idcg1 + 1.0) / 2, abs=1e-4)

    aggregate_query_metrics.apply(kwargs={"day": (day - timedelta(days=1)).isoformat()}).get()
    zero = DailyMetric.objects.get(project=served["shop"], day=day - timedelta(days=1))
    assert zero.judged_sessions == 1 and zero.mrr_at_10 == 0.0 and zero.ndcg_at_10 == 0.0

    # re-running replaces the row instead of adding one
    aggregate_query_metrics.apply(kwargs={"day": day.isoformat()}).get()
    assert DailyMetric.objects.filter(project=served["shop"], day=day).count() == 1


def test_the_aggregation_runs_on_celery_beat():
    from django.conf import settings

    entries = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "search.tasks.aggregate_query_metrics"]
    assert entries and entries[0]["schedule"] <= timedelta(days=1)
