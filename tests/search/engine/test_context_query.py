"""End to end on real Postgres + embedded Qdrant: ingest, query, access matrix, filters, log rows, errors."""
from __future__ import annotations

import pytest
from django.utils import timezone

from search.models import Chunk, IndexOutbox, QuerySession, RerankResult
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_user, make_project, code_repo, edge_index, tmp_path):
    """alice in 'shop' (own code); a global dataset; one shared to shop; one never shared; one revoked."""
    from search.models import ProjectShare

    alice = make_user("alice@example.com")
    shop = make_project("shop", alice)
    other = make_project("other")
    own, _ = ingest(shop, "shop-src", code_repo, repo="shop")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "glob.py").write_text('def global_helper():\n    """Shared across every project."""\n    return 1\n')
    (docs / "shared.py").write_text('def shared_tool():\n    """Lent to the shop through a share."""\n    return 2\n')
    (docs / "never.py").write_text('def never_seen():\n    """Private to the other project."""\n    return 3\n')
    (docs / "revoked.py").write_text('def revoked_thing():\n    """Once shared, then revoked."""\n    return 4\n')
    out = {}
    for name, is_global in (("glob", True), ("shared", False), ("never", False), ("revoked", False)):
        src = tmp_path / f"src-{name}"
        src.mkdir()
        (src / f"{name}.py").write_text((docs / f"{name}.py").read_text())
        out[name], _ = ingest(other, f"ds-{name}", src, is_global=is_global, repo=name)
    ProjectShare.objects.create(dataset=out["shared"], project=shop)
    ProjectShare.objects.create(dataset=out["revoked"], project=shop, revoked_at=timezone.now())
    return {"alice": alice, "shop": shop, "other": other, "own": own, **out}


def _query(client, slug="shop", **body):
    body.setdefault("q", "take credits from a wallet")
    return client.post(f"/api/projects/{slug}/query", body, format="json")


def test_query_finds_exact_span_with_why_and_pack(world, client_for):
    client = client_for(world["alice"])
    resp = _query(client, q="where are credits deducted from the wallet?")
    assert resp.status_code == 200, resp.content
    data = resp.json()
    top = data["results"][0]
    assert top["path"] == "billing/ledger.py" and top["symbol"] == "deduct_credits"
    assert top["span"] == f"billing/ledger.py:{top['start_line']}-{top['end_line']}"
    why = top["why"]
    for key in ("dense_score", "dense_rank", "sparse_score", "sparse_rank", "fused_score", "final_rank",
                "dataset_id", "project_id", "span"):
        assert key in why
    assert why["final_rank"] == 1 and why["dataset_id"] == world["own"].pk
    assert why["project_id"] == world["shop"].pk
    assert set(data["timings_ms"]) >= {"access_ms", "embed_ms", "dense_ms", "sparse_ms", "fuse_ms", "pack_ms",
                                        "total_ms"}
    assert data["reranker"] is None  # no RERANKER_MODEL: the default is no rerank
    files = [f["path"] for f in data["pack"]["files"]]
    assert len(files) == len(set(files))  # one entry (and one macro) per file
    ledger = next(f for f in data["pack"]["files"] if f["path"] == "billing/ledger.py")
    assert ledger["macro_summary"].startswith("Money moves here")


def test_log_rows_match_response(world, client_for):
    data = _query(client_for(world["alice"]), top_k=3, candidates=20).json()
    session = QuerySession.objects.get(pk=data["search_session_id"])
    assert session.result_count == len(data["results"]) and session.query == "take credits from a wallet"
    rows = list(RerankResult.objects.filter(session=session).order_by("rank_before"))
    assert rows and all(r.project_id == world["shop"].pk for r in rows)
    finals = {r.chunk_id: r.final_rank for r in rows if r.final_rank}
    assert finals == {r["chunk_id"]: r["rank"] for r in data["results"]}
    for r in data["results"]:
        row = next(x for x in rows if x.chunk_id == r["chunk_id"])
        assert row.fused_score == pytest.approx(r["why"]["fused_score"])
        assert row.dense_rank == r["why"]["dense_rank"] and row.sparse_rank == r["why"]["sparse_rank"]


def test_access_matrix_own_global_shared_never_revoked(world, client_for):
    client = client_for(world["alice"])
    seen = set()
    for q in ("global helper", "shared tool lent", "never seen private", "revoked thing", "deduct credits"):
        for r in _query(client, q=q, top_k=50, candidates=200).json()["results"]:
            seen.add(r["dataset_id"])
    assert world["own"].pk in seen and world["glob"].pk in seen and world["shared"].pk in seen
    assert world["never"].pk not in seen and world["revoked"].pk not in seen
    no_global = {r["dataset_id"] for r in _query(client, q="global helper", include_global=False, top_k=50,
                                                     candidates=200).json()["results"]}
    assert world["glob"].pk not in no_global
    # a non-member gets 404 (existence does not leak)
    assert _query(client, slug="other").status_code == 404


def test_stale_qdrant_payload_never_leaks(world, client_for):
    """Move a chunk to a private dataset in Postgres only: Qdrant still says 'own', SQL must win."""
    chunk = Chunk.objects.get(dataset=world["own"], symbol="deduct_credits")
    Chunk.objects.filter(pk=chunk.pk).update(dataset=world["never"])
    IndexOutbox.objects.filter(chunk_id=chunk.pk).delete()  # the applier will not fix it
    results = _query(client_for(world["alice"]), q="deduct credits wallet", top_k=50, candidates=200).json()["results"]
    assert chunk.pk not in {r["chunk_id"] for r in results}
    assert not RerankResult.objects.filter(chunk_id=chunk.pk).exists()  # not even logged


def test_filters_repo_path_glob_lang(world, client_for):
    client = client_for(world["alice"])

    def paths(**filters):
        resp = _query(client, q="function wallet credits products", top_k=50, candidates=200, filters=filters)
        assert resp.status_code == 200, resp.content
        return {r["path"] for r in resp.json()["results"]}

    assert paths(repo="shop") == {"billing/ledger.py", "web/routes.js"}
    assert paths(lang="javascript") == {"web/routes.js"}
    assert paths(path="billing/") == {"billing/ledger.py"}
    assert paths(path="**/*.js") == {"web/routes.js"}
    assert paths(path="web/*.py") == set()
    assert paths(repo=["glob", "shared"]) == {"glob.py", "shared.py"}


@pytest.mark.parametrize("body,field", [
    ({"q": ""}, "q"),
    ({"q": "x" * 2001}, "q"),
    ({"q": "ok", "top_k": 0}, "top_k"),
    ({"q": "ok", "top_k": 51}, "top_k"),
    ({"q": "ok", "candidates": 201}, "candidates"),
    ({"q": "ok", "top_k": "5"}, "top_k"),
    ({"q": "ok", "filters": {"owner": "x"}}, "filters.owner"),
    ({"q": "ok", "filters": {"path": "src/[abc.py"}}, "filters.path"),
    ({"q": "ok", "fusion": "magic"}, "fusion"),
    ({"q": "ok", "include_global": "yes"}, "include_global"),
])
def test_bad_input_is_400_naming_the_field(world, client_for, body, field):
    before = QuerySession.objects.count()
    resp = client_for(world["alice"]).post("/api/projects/shop/query", body, format="json")
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == field and resp.json()["code"]
    assert QuerySession.objects.count() == before


def test_fusion_choices_and_rerank_name_the_reranker(world, client_for):
    client = client_for(world["alice"])
    for fusion in ("rrf", "dbsf", "weighted"):
        data = _query(client, fusion=fusion, rerank=True).json()
        assert data["fusion"] == fusion and data["reranker"] == "embedded:coverage-v1"
        assert data["results"][0]["why"]["rerank_score"] is not None
        assert data["results"][0]["symbol"] == "deduct_credits"


def test_qdrant_down_is_503_and_nothing_logged(world, client_for, settings):
    """A real unreachable Qdrant server (nothing listens on the port)."""
    from search.engine.index import set_index
    from search.engine.index_server import ClientIndex

    set_index(ClientIndex(url="http://127.0.0.1:9", model_id="all-MiniLM-L6-v2", dim=384, timeout=1))
    before = QuerySession.objects.count()
    resp = _query(client_for(world["alice"]))
    assert resp.status_code == 503
    assert resp.json()["dependency"] == "qdrant"
    assert QuerySession.objects.count() == before


def test_a_dataset_filter_searches_only_the_named_datasets_and_names_no_other(world, client_for):
    client = client_for(world["alice"])
    everything = {r["why"]["dataset_id"] for r in _query(client, q="shared helper tool", top_k=20).json()["results"]}
    assert {world["glob"].pk, world["shared"].pk} <= everything  # without the filter: own, global and shared
    by_name = _query(client, q="shared helper tool", top_k=20, filters={"dataset": "ds-shared"}).json()["results"]
    assert by_name and {r["why"]["dataset_id"] for r in by_name} == {world["shared"].pk}
    by_id = _query(client, q="shared helper tool", top_k=20,
                   filters={"dataset": [str(world["glob"].pk), "shop-src"]}).json()["results"]
    assert {r["why"]["dataset_id"] for r in by_id} <= {world["glob"].pk, world["own"].pk}
    assert world["glob"].pk in {r["why"]["dataset_id"] for r in by_id}
    # a typo, a dataset the project cannot read (never shared, revoked) and a global one with include_global off
    # are the same 400: nothing is revealed about datasets out of reach
    for wanted, extra in (("shop-srcc", {}), ("ds-never", {}), ("ds-revoked", {}),
                          (str(world["never"].pk), {}), ("ds-glob", {"include_global": False})):
        resp = _query(client, filters={"dataset": wanted}, **extra)
        assert resp.status_code == 400 and resp.json()["field"] == "filters.dataset", (wanted, resp.content)
    assert not QuerySession.objects.filter(query="take credits from a wallet").exists()
