"""The code tools API (search.edge.api.code): the same keys, scope, project access, errors and rate limit as search."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.search.code_fixtures import code_world, edge_index, line_of  # noqa: F401 - fixtures

BASE = "/api/projects/shop/code"


def _post(client, tool, body):
    return client.post(f"{BASE}/{tool}", body, format="json")


def test_each_tool_answers_with_file_line_spans(code_world, client_for):
    client = client_for(code_world["alice"])
    start = line_of("billing/ledger.py", "def deduct_credits")
    d = _post(client, "definition", {"symbol": "deduct_credits"}).json()
    assert d["status"] == "found" and d["definitions"][0]["span"].startswith(f"billing/ledger.py:{start}-")
    r = _post(client, "references", {"symbol": "deduct_credits", "limit": 2}).json()
    assert r["total"] == 3 and len(r["references"]) == 2 and r["truncated"]
    assert all(x["resolution"] == "resolved" for x in r["references"])
    o = _post(client, "outline", {"path": "billing/ledger.py"}).json()
    assert ("deduct_credits", f"billing/ledger.py:{start}-{start + 5}") in {(s["name"], s["span"]) for s in o["symbols"]}
    f = _post(client, "files", {"glob": "web/*"}).json()
    assert [x["path"] for x in f["files"]] == ["web/routes.js"]
    g = _post(client, "grep", {"pattern": r"def \w+_credits", "regex": True}).json()
    assert [h["span"] for h in g["hits"]] == [f"billing/ledger.py:{start}"]


@pytest.mark.parametrize(("tool", "body", "field"), [
    ("definition", {}, "symbol"), ("definition", {"symbol": "x" * 501}, "symbol"),
    ("references", {"symbol": "x", "limit": 0}, "limit"), ("outline", {"path": ""}, "path"),
    ("files", {"glob": "[z-a]"}, "glob"), ("files", {"limit": "many"}, "limit"),
    ("grep", {"pattern": "(", "regex": True}, "pattern"), ("grep", {"pattern": "x", "regex": "yes"}, "regex"),
    ("grep", {"pattern": "x", "dataset": "nope"}, "dataset"),
])
def test_bad_input_is_a_400_naming_the_field(code_world, client_for, tool, body, field):
    resp = _post(client_for(code_world["alice"]), tool, body)
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == field and resp.json()["code"] and resp.json()["detail"]


def test_a_missing_file_is_a_404(code_world, client_for):
    resp = _post(client_for(code_world["alice"]), "outline", {"path": "nope.py"})
    assert resp.status_code == 404 and resp.json()["field"] == "path"


def test_strangers_get_the_same_404_as_for_a_missing_project(code_world, client_for):
    client = client_for(code_world["bob"])
    for tool, body in (("definition", {"symbol": "x"}), ("grep", {"pattern": "x"}), ("files", {})):
        hidden = _post(client, tool, body)
        missing = client.post(f"/api/projects/no-such/code/{tool}", body, format="json")
        assert hidden.status_code == missing.status_code == 404 and hidden.json() == missing.json()


def test_a_key_without_the_query_scope_and_no_key_are_refused(code_world):
    from accounts.apikeys import issue_api_key

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(user=code_world['alice'], scopes=['ingest']).secret}")
    resp = _post(client, "grep", {"pattern": "x"})
    assert resp.status_code == 403 and resp.json()["code"] == "insufficient_scope"
    assert _post(APIClient(), "grep", {"pattern": "x"}).status_code == 401


def test_the_tools_share_searchs_rate_limit(code_world, client_for, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "context_query": "2/m"}
    client = client_for(code_world["alice"])
    codes = [_post(client, "definition", {"symbol": "Wallet"}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
