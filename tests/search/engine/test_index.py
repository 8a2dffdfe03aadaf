"""The index interface: one contract, two adapters (embedded qdrant-edge, qdrant-client local mode).

The client adapter runs against qdrant-client's local mode, which speaks the same client API as a server.
"""
from __future__ import annotations

import pytest

from search.engine.index_embedded import EdgeIndex
from search.engine.index_schema import IndexFilter, IndexPoint, collection_name
from search.engine.index_server import ClientIndex
from search.engine.sparse import encode_document, encode_query
from tests.search.ctx_fixtures import code_repo, ingest  # noqa: F401

DIM = 4
POINTS = [
    # id, vector, text, payload
    (11, [1, 0, 0, 0], "deduct credits from wallet", {"dataset_id": 1, "project_id": 1, "repo": "shop",
                                                      "path": "billing/ledger.py", "lang": "python"}),
    (12, [0.9, 0.1, 0, 0], "grant bonus credits", {"dataset_id": 1, "project_id": 1, "repo": "shop",
                                                   "path": "billing/bonus.py", "lang": "python"}),
    (13, [0, 1, 0, 0], "list products route", {"dataset_id": 1, "project_id": 1, "repo": "shop",
                                               "path": "web/routes.js", "lang": "javascript"}),
    (21, [1, 0, 0, 0], "deduct credits elsewhere", {"dataset_id": 2, "project_id": 2, "repo": "other",
                                                    "path": "billing/ledger.py", "lang": "python"}),
]


def _points() -> list[IndexPoint]:
    return [IndexPoint(id=i, dense=[float(x) for x in v], sparse=encode_document(t), payload={
        **p, "kind": "code", "book_id": "", "ruleset_id": ""}) for i, v, t, p in POINTS]


@pytest.fixture(params=["edge", "client-local"])
def adapter(request, tmp_path):
    if request.param == "edge":
        index = EdgeIndex(path=tmp_path / "edge", model_id="toy-model", dim=DIM)
    else:
        index = ClientIndex(location=":memory:", model_id="toy-model", dim=DIM)
    index.upsert(_points())
    yield index
    index.close()


def _ids(hits):
    return [i for i, _ in hits]


def test_collections_are_named_per_kind_and_model():
    assert collection_name("all-MiniLM-L6-v2", 384, partition="code") == "code_context_all_minilm_l6_v2_384"
    assert collection_name("all-MiniLM-L6-v2", 384, partition="web") == "web_context_all_minilm_l6_v2_384"


def test_dense_search_is_scoped_to_the_given_datasets(adapter):
    hits = adapter.search_dense([1, 0, 0, 0], flt=IndexFilter(dataset_ids=[1]), limit=10)
    assert _ids(hits)[:2] == [11, 12] and 21 not in _ids(hits)
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)  # cosine
    assert _ids(adapter.search_dense([1, 0, 0, 0], flt=IndexFilter(dataset_ids=[2]), limit=10)) == [21]
    assert adapter.search_dense([1, 0, 0, 0], flt=IndexFilter(dataset_ids=[]), limit=10) == []


def test_payload_filters_repo_lang_prefix_and_exact_paths(adapter):
    def ids(**kw):
        return set(_ids(adapter.search_dense([1, 1, 0, 0], flt=IndexFilter(dataset_ids=[1, 2], **kw), limit=10)))

    assert ids(repo=["other"]) == {21}
    assert ids(lang=["javascript"]) == {13}
    assert ids(path_prefix="billing/") == {11, 12, 21}
    assert ids(paths=["billing/bonus.py", "web/routes.js"]) == {12, 13}
    assert ids(paths=[]) == set()  # a glob that matched nothing matches nothing


def test_sparse_search_uses_term_weights(adapter):
    hits = adapter.search_sparse(encode_query("deducted credits", kinds=("code",)), flt=IndexFilter(dataset_ids=[1]), limit=10)
    assert _ids(hits)[0] == 11 and 13 not in _ids(hits)


def test_upsert_and_delete_are_idempotent_by_point_id(adapter):
    assert adapter.count() == 4
    adapter.upsert(_points())  # same ids: replaced, not duplicated
    assert adapter.count() == 4
    adapter.delete([12, 12, 999])
    adapter.delete([12])
    assert adapter.count() == 3
    assert 12 not in _ids(adapter.search_dense([1, 0, 0, 0], flt=IndexFilter(dataset_ids=[1]), limit=10))


def test_each_kind_lives_in_its_own_collection_and_an_unfiltered_query_merges_them(adapter):
    prose = IndexPoint(id=31, dense=[0.95, 0.05, 0, 0], sparse=encode_document("deduct credits guide", kind="web"),
                       payload={"dataset_id": 1, "project_id": 1, "repo": "", "path": "docs/credits.html",
                                "lang": "", "kind": "web", "book_id": "", "ruleset_id": ""})
    adapter.upsert([prose])
    counts = adapter.counts()
    assert counts == {"code_context_toy_model_4": 4, "web_context_toy_model_4": 1, "rules_context_toy_model_4": 0}
    merged = adapter.search_dense([1, 0, 0, 0], flt=IndexFilter(dataset_ids=[1]), limit=10)
    assert _ids(merged)[:3] == [11, 31, 12]  # one score scale (cosine) across the collections, best first
    assert _ids(adapter.search_dense([1, 0, 0, 0], flt=IndexFilter(dataset_ids=[1], kind=["web"]), limit=10)) == [31]
    assert 31 not in _ids(adapter.search_dense([1, 0, 0, 0], flt=IndexFilter(dataset_ids=[1], kind=["code"]),
                                               limit=10))
    adapter.delete([31])  # a delete does not need the kind: every collection drops the id
    assert adapter.counts()["web_context_toy_model_4"] == 0


def test_drop_empties_the_collection_and_optimize_reports_seconds(adapter):
    assert adapter.optimize() >= 0.0
    adapter.drop()
    assert adapter.count() == 0
    adapter.upsert(_points()[:1])
    assert adapter.count() == 1


# --------------------------------------------------------------------------------- opening a store
@pytest.mark.django_db
def test_reindex_command_on_a_store_held_elsewhere_says_how_to_reindex(tmp_path):
    """While the server runs it owns the embedded store: the command must say so, not print a traceback."""
    from django.core.management import CommandError, call_command

    from search.engine.index import open_index

    held = open_index(path=tmp_path / "qdrant")
    try:
        with pytest.raises(CommandError, match="Reindex Qdrant from Postgres"):
            call_command("reindex", path=str(tmp_path / "qdrant"))
    finally:
        held.close()
