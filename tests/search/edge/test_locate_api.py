"""POST /api/projects/{slug}/locate (search.edge.api.locate): the files and functions to edit for a task in words,
with the same keys, scope, project access, errors, rate limit and query log as search."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from search.engine.path_roles import is_aside
from search.models import QuerySession, RerankResult
from tests.search.code_fixtures import code_world, code_world_with_tests, edge_index, line_of  # noqa: F401 - fixtures

URL = "/api/projects/shop/locate"
TASK = "take credits from a wallet, refuse to go below zero"


def test_locate_names_the_file_and_the_function_with_their_spans_and_callers(code_world, client_for):
    resp = client_for(code_world["alice"]).post(URL, {"task": TASK, "top_files": 3, "top_functions": 5,
                                                      "aggregation": "max"}, format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    start = line_of("billing/ledger.py", "def deduct_credits")
    assert body["files"][0]["path"] == "billing/ledger.py" and body["aggregation"] == "max"
    assert len(body["files"]) <= 3 and [f["rank"] for f in body["files"]] == list(range(1, len(body["files"]) + 1))
    assert all(c["span"].startswith(f"{f['path']}:") for f in body["files"] for c in f["chunks"])
    assert body["files"][0]["score"] == body["files"][0]["chunks"][0]["score"]  # max: its best chunk
    fn = next(f for f in body["functions"] if f["symbol"] == "deduct_credits")
    assert fn["rank"] <= 2, [f["span"] for f in body["functions"]]
    assert (fn["kind"], fn["path"], fn["start_line"], fn["end_line"]) == ("function", "billing/ledger.py", start,
                                                                          start + 5)
    assert fn["span"] == f"billing/ledger.py:{start}-{start + 5}"
    assert any(c["start_line"] <= start + 5 and start <= c["end_line"] for c in fn["chunks"])
    assert {c["name"] for c in fn["callers"]} == {"Checkout.pay"}
    assert all(c["path"] == "shop/service.py" and c["relation"] == "call" for c in fn["callers"])


def test_the_default_aggregation_sums_a_files_three_best_chunks(code_world, client_for):
    body = client_for(code_world["alice"]).post(URL, {"task": TASK, "history": False}, format="json").json()
    assert body["aggregation"] == "top3"
    for f in body["files"]:
        assert f["score"] == pytest.approx(sum(sorted((c["score"] for c in f["chunks"]), reverse=True)[:3]))


def test_the_query_is_logged_once_as_locate_from_the_api(code_world, client_for):
    body = client_for(code_world["alice"]).post(URL, {"task": TASK}, format="json").json()
    session = QuerySession.objects.get(pk=body["search_session_id"])
    assert (session.kind, session.source, session.query, session.project_id) == \
           ("locate", "api", TASK, code_world["project"].pk)
    assert RerankResult.objects.filter(session=session).count() == body["candidates"] > 0


def test_the_three_aggregations_rank_the_same_candidates(code_world, client_for):
    client = client_for(code_world["alice"])
    seen = {}
    for method in ("max", "top3", "rrf"):
        body = client.post(URL, {"task": TASK, "aggregation": method}, format="json").json()
        assert body["aggregation"] == method
        seen[method] = {f["path"] for f in body["files"]}
    assert seen["max"] == seen["top3"] == seen["rrf"]


def test_filters_narrow_the_files(code_world, client_for):
    body = client_for(code_world["alice"]).post(URL, {"task": TASK, "filters": {"path": "shop/"}},
                                                format="json").json()
    assert body["files"] and all(f["path"].startswith("shop/") for f in body["files"])
    assert all(f["path"].startswith("shop/") for f in body["functions"])


@pytest.mark.parametrize(("body", "field"), [
    ({}, "task"), ({"task": ""}, "task"), ({"task": "x" * 2001}, "task"), ({"task": "x", "top_files": 0}, "top_files"),
    ({"task": "x", "top_functions": 51}, "top_functions"), ({"task": "x", "aggregation": "mean"}, "aggregation"),
    ({"task": "x", "filters": {"colour": "red"}}, "filters.colour"),
    ({"task": "x", "filters": {"dataset": "nope"}}, "filters.dataset"), ({"task": "x", "history": "maybe"}, "history"),
    ({"task": "x", "sources_first": "maybe"}, "sources_first"), ({"task": "x", "names": "maybe"}, "names"),
    ({"task": "x", "windows": "maybe"}, "windows"),
])
def test_bad_input_is_a_400_naming_the_field_and_logs_nothing(code_world, client_for, body, field):
    resp = client_for(code_world["alice"]).post(URL, body, format="json")
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == field and resp.json()["code"] and resp.json()["detail"]
    assert not QuerySession.objects.exists()


def test_a_body_that_is_not_an_object_is_a_400(code_world, client_for):
    resp = client_for(code_world["alice"]).post(URL, ["task"], format="json")
    assert resp.status_code == 400 and resp.json()["code"]


def test_a_non_member_gets_the_same_404_as_for_a_missing_project(code_world, client_for):
    client = client_for(code_world["bob"])
    hidden = client.post(URL, {"task": TASK}, format="json")
    missing = client.post("/api/projects/no-such/locate", {"task": TASK}, format="json")
    assert hidden.status_code == missing.status_code == 404 and hidden.json() == missing.json()
    assert not QuerySession.objects.exists()


def test_a_key_without_the_query_scope_gets_403_and_no_key_401(code_world):
    from accounts.apikeys import issue_api_key

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(user=code_world['alice'], scopes=['ingest']).secret}")
    resp = client.post(URL, {"task": TASK}, format="json")
    assert resp.status_code == 403 and resp.json()["code"] == "insufficient_scope"
    assert APIClient().post(URL, {"task": TASK}, format="json").status_code == 401


def test_locate_shares_searchs_rate_limit(code_world, client_for, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "context_query": "2/m"}
    client = client_for(code_world["alice"])
    codes = [client.post(URL, {"task": TASK}, format="json").status_code,
             client.post("/api/projects/shop/query", {"q": TASK}, format="json").status_code,
             client.post(URL, {"task": TASK}, format="json").status_code]
    assert codes == [200, 200, 429]


def _remember(dataset, message: str, files: list[str], functions: list[list[str]] | None = None) -> None:
    from datetime import UTC, datetime

    from inference.encoders import dense_model_id, embed_cached
    from search.models import CommitMemory

    CommitMemory.objects.create(dataset=dataset, sha=f"{dataset.pk:x}{len(message)}".ljust(40, "a"),
                                subject=message, query=message, files=files, functions=functions or [],
                                model_id=dense_model_id(),
                                embedding=embed_cached([message])[0].tolist(), committed_at=datetime.now(tz=UTC))


def test_a_past_commit_like_the_task_lifts_the_file_it_changed_with_the_commit_as_evidence(code_world, client_for):
    client = client_for(code_world["alice"])
    before = client.post(URL, {"task": TASK, "history": False}, format="json").json()
    assert before["history"] == [] and all(f["history"] == [] for f in before["files"])
    last = before["files"][-1]["path"]
    assert len(before["files"]) > 1 and last != before["files"][0]["path"]
    _remember(code_world["dataset"], TASK, [last])
    after = client.post(URL, {"task": TASK}, format="json").json()
    assert after["files"][0]["path"] == last, [f["path"] for f in after["files"]]
    assert after["files"][0]["history"][0]["subject"] == TASK
    assert after["files"][0]["history"][0]["similarity"] == pytest.approx(1.0, abs=1e-3)
    assert after["history"][0]["files"] == [last]

    # the vote ranks files only: the functions, and the second look's files, are the chunks' own
    assert [f["span"] for f in after["functions"]] == [f["span"] for f in before["functions"]]
    assert {f["path"] for f in after["files"]} == {f["path"] for f in before["files"]}  # reordered, none added
    off = client.post(URL, {"task": TASK, "history": False}, format="json").json()
    assert [f["path"] for f in off["files"]] == [f["path"] for f in before["files"]] and off["history"] == []


def test_another_projects_commit_memory_never_votes(code_world, client_for, tmp_path):
    from tests.search.code_fixtures import write_code_repo
    from tests.search.ctx_fixtures import ingest

    client = client_for(code_world["alice"])
    before = [f["path"] for f in client.post(URL, {"task": TASK}, format="json").json()["files"]]
    theirs, _ = ingest(code_world["other"], "theirs", write_code_repo(tmp_path / "theirs"), repo="app")
    _remember(theirs, TASK, [before[-1]])
    after = client.post(URL, {"task": TASK}, format="json").json()
    assert [f["path"] for f in after["files"]] == before and after["history"] == []


def test_a_filter_on_another_dataset_keeps_this_datasets_memory_out(code_world, client_for, tmp_path):
    from tests.search.code_fixtures import write_code_repo
    from tests.search.ctx_fixtures import ingest

    client = client_for(code_world["alice"])
    second, _ = ingest(code_world["project"], "second", write_code_repo(tmp_path / "second"), repo="second")
    _remember(code_world["dataset"], TASK, ["shop/jobs.py"])
    body = client.post(URL, {"task": TASK, "filters": {"dataset": "second"}}, format="json").json()
    assert body["files"] and {f["dataset_id"] for f in body["files"]} == {second.pk}
    assert body["history"] == [] and all(f["history"] == [] for f in body["files"])


def test_a_voted_file_no_candidate_reached_is_listed_without_chunks_unless_a_filter_excludes_it(code_world,
                                                                                               client_for):
    client = client_for(code_world["alice"])
    few = client.post(URL, {"task": TASK, "candidates": 1, "history": False}, format="json").json()
    assert [f["path"] for f in few["files"]] == ["billing/ledger.py"]
    _remember(code_world["dataset"], TASK, ["web/routes.js"])
    voted = client.post(URL, {"task": TASK, "candidates": 1}, format="json").json()
    routes = next(f for f in voted["files"] if f["path"] == "web/routes.js")
    assert routes["chunks"] == [] and routes["history"][0]["subject"] == TASK and routes["lang"] == "javascript"
    narrowed = client.post(URL, {"task": TASK, "candidates": 1, "filters": {"lang": "python"}}, format="json").json()
    assert "web/routes.js" not in {f["path"] for f in narrowed["files"]} and narrowed["history"]


def test_a_function_lists_the_past_commits_that_changed_it_as_evidence(code_world, client_for):
    _remember(code_world["dataset"], TASK, ["billing/ledger.py"], [["billing/ledger.py", "grantBonus"]])
    body = client_for(code_world["alice"]).post(URL, {"task": TASK, "top_functions": 20}, format="json").json()
    bonus = next(f for f in body["functions"] if f["symbol"] == "grantBonus")
    assert [h["subject"] for h in bonus["history"]] == [TASK]
    assert all(f["history"] == [] for f in body["functions"] if f["symbol"] != "grantBonus")
    assert body["history"][0]["functions"] == ["billing/ledger.py:grantBonus"]


def test_sources_first_false_keeps_tests_and_docs_where_their_scores_put_them(code_world_with_tests, client_for):
    client = client_for(code_world_with_tests["alice"])
    default = client.post(URL, {"task": TASK, "candidates": 20, "top_files": 20}, format="json").json()
    in_place = client.post(URL, {"task": TASK, "candidates": 20, "top_files": 20, "sources_first": False},
                           format="json").json()
    first = [is_aside(f["path"]) for f in default["files"]]
    assert any(first) and first == sorted(first)  # tests and docs listed, after every source file
    kept = [is_aside(f["path"]) for f in in_place["files"]]
    assert kept != sorted(kept)  # a test or the changelog outranks some source file
    assert {f["path"] for f in default["files"]} == {f["path"] for f in in_place["files"]}


def test_a_function_the_task_names_is_listed_with_how_it_was_named_unless_names_is_false(code_world, client_for):
    client = client_for(code_world["alice"])
    task = f"{TASK}; `nightly` must skip empty wallets"
    body = client.post(URL, {"task": task, "candidates": 1, "top_functions": 20}, format="json").json()
    nightly = next(f for f in body["functions"] if f["symbol"] == "nightly")
    assert nightly["named_as"] == "nightly" and nightly["path"] == "shop/jobs.py"
    off = client.post(URL, {"task": task, "candidates": 1, "top_functions": 20, "names": False}, format="json").json()
    assert off["functions"] and "nightly" not in [f["symbol"] for f in off["functions"]]
    assert {f["named_as"] for f in off["functions"]} == {None}


def test_each_function_lists_its_best_window_only_when_windows_is_asked_for(code_world, client_for):
    client = client_for(code_world["alice"])
    body = client.post(URL, {"task": TASK, "top_functions": 5, "windows": True}, format="json").json()
    assert body["functions"] and all(f["window"] for f in body["functions"])
    for f in body["functions"]:
        w = f["window"]
        assert f["start_line"] <= w["start_line"] <= w["end_line"] <= f["end_line"]
        assert w["span"] == f"{f['path']}:{w['start_line']}-{w['end_line']}" and -1.0 <= w["similarity"] <= 1.0
    assert "window_ms" in body["timings_ms"]
    off = client.post(URL, {"task": TASK, "top_functions": 5}, format="json").json()
    assert off["functions"] and {f["window"] for f in off["functions"]} == {None}
    assert "window_ms" not in off["timings_ms"]
