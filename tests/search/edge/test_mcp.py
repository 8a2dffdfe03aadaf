"""The MCP server, driven by the SDK's own client: in-process, over stdio (`manage.py mcp` as a child
process) and over streamable HTTP against Django's live server. Real Postgres, Redis and Qdrant throughout.

Why three ways: in-process runs inside the test's transaction (cheap, one tool at a time); stdio is what editors
launch; HTTP is /mcp through the real Django stack (middleware, the WSGI view, the SDK's transport).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from tests.search.code_fixtures import code_world  # noqa: F401 - fixtures
from tests.search.ctx_fixtures import LEDGER_PY, code_repo, edge_index, ingest  # noqa: F401 - fixtures
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[3]
TOOLS = {"search_context", "locate", "read_span", "answer_rules", "list_projects", "list_datasets", "feedback"}
CODE_TOOLS = {"find_definition", "find_references", "outline", "list_files", "grep"}
LEDGER_LINES = LEDGER_PY.split("\n")
DEDUCT_START = next(i for i, line in enumerate(LEDGER_LINES, start=1) if line.startswith("def deduct_credits"))
Q = "take credits from a wallet, refuse to go below zero"


# ------------------------------------------------------------------------------------------------ helpers
def _key(user, **kw) -> str:
    from accounts.apikeys import issue_api_key

    return issue_api_key(user=user, **kw).secret


def _structured(result) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


def _ok(result) -> dict[str, Any]:
    assert not result.is_error, result.structured_content or result.content
    return _structured(result)


def _err(result) -> dict[str, Any]:
    assert result.is_error, result
    return _structured(result)


def _in_process(secret: str, script) -> Any:
    """Run `script(client)` against the server in-process, as the key's caller, on the test's thread (so the tools'
    thread-sensitive Django work sees the test's transaction)."""
    from search.edge.mcp.server import caller_for_secret, in_process_client

    caller = caller_for_secret(secret, transport="http")

    async def run() -> Any:
        async with in_process_client(caller) as client:
            return await script(client)

    return async_to_sync(run)()


def _found_deduct(data: dict[str, Any]) -> dict[str, Any]:
    hit = next((r for r in data["results"] if r["path"] == "billing/ledger.py" and r["symbol"] == "deduct_credits"),
               None)
    assert hit is not None, [r["span"] for r in data["results"]]
    assert hit["start_line"] == DEDUCT_START and hit["span"].startswith(f"billing/ledger.py:{DEDUCT_START}-")
    return hit


@pytest.fixture
def shop(db, edge_index, code_repo, make_user, make_project):
    """alice owns `shop` with the shop repo indexed; bob is a member of another project only."""
    alice, bob = make_user("alice@example.com"), make_user("bob@example.com")
    project = make_project("shop", alice)
    make_project("elsewhere", bob)
    ingest(project, "src", code_repo, repo="shop")
    return {"alice": alice, "bob": bob, "project": project}


# ------------------------------------------------------------------------------------------------ in-process
def test_tools_are_listed_with_their_arguments(shop):
    async def script(client):
        return (await client.list_tools()).tools

    tools = {t.name: t for t in _in_process(_key(shop["alice"]), script)}
    assert TOOLS | CODE_TOOLS <= set(tools)
    schema = tools["search_context"].input_schema
    assert {"project", "q"} <= set(schema["required"])
    assert {"repo", "path", "lang", "dataset", "top_k", "budget_tokens", "graph"} <= set(schema["properties"])
    assert {"task", "aggregation", "history", "sources_first", "names", "windows"} <= set(
        tools["locate"].input_schema["properties"])


def test_search_context_finds_the_function_and_read_span_returns_its_exact_lines(shop):
    async def script(client):
        found = await client.call_tool("search_context", {"project": "shop", "q": Q, "top_k": 5})
        hit = _found_deduct(_ok(found))
        span = await client.call_tool("read_span", {"project": "shop", "path": hit["path"],
                                                    "start_line": hit["start_line"], "end_line": hit["end_line"]})
        return found, hit, span

    found, hit, span = _in_process(_key(shop["alice"]), script)
    text = found.content[0].text
    assert f"billing/ledger.py:{DEDUCT_START}-" in text and "def deduct_credits(wallet, amount):" in text
    data = _ok(span)
    assert data["text"] == "\n".join(LEDGER_LINES[hit["start_line"] - 1:hit["end_line"]])
    assert data["text"].startswith("def deduct_credits(wallet, amount):") and data["missing_lines"] == []


def test_search_context_with_graph_packs_the_definitions_the_results_call(code_world):
    from tests.search.code_fixtures import line_of

    async def script(client):
        args = {"project": "shop", "q": "checkout pay take wallet", "top_k": 3}
        return (await client.call_tool("search_context", {**args, "graph": True}),
                await client.call_tool("search_context", args))

    with_graph, plain = _in_process(_key(code_world["alice"]), script)
    added = _ok(with_graph)["pack"]["graph_spans"]
    start = line_of("billing/ledger.py", "def deduct_credits")
    deduct = [g for g in added if g["symbol"] == "deduct_credits"]
    assert deduct and deduct[0]["span"] == f"billing/ledger.py:{start}-{start + 5}" and deduct[0]["relation"] == "calls"
    assert f"(added: calls deduct_credits, from result {deduct[0]['from_rank']})" in with_graph.content[0].text
    assert _ok(plain)["pack"]["graph_spans"] == []  # off unless asked (CODE_GRAPH_PACK is off)


def test_the_logged_query_session_matches_the_response_and_says_mcp(shop):
    from search.models import QuerySession, RerankResult

    async def script(client):
        return _ok(await client.call_tool("search_context", {"project": "shop", "q": Q, "top_k": 3}))

    data = _in_process(_key(shop["alice"]), script)
    session = QuerySession.objects.get(pk=data["search_session_id"])
    assert session.source == "mcp" and session.kind == "context" and session.query == Q
    assert session.user == shop["alice"] and session.result_count == len(data["results"])
    logged = list(RerankResult.objects.filter(session=session, final_rank__isnull=False).order_by("final_rank")
                  .values_list("chunk_id", flat=True))
    assert logged == [r["chunk_id"] for r in data["results"]]


def _check_locate(data: dict[str, Any]) -> None:
    assert data["files"][0]["path"] == "billing/ledger.py", [f["path"] for f in data["files"]]
    fn = next(f for f in data["functions"] if f["symbol"] == "deduct_credits")
    assert fn["kind"] == "function" and fn["span"].startswith(f"billing/ledger.py:{DEDUCT_START}-")
    assert fn["chunks"] and all(c["span"].startswith("billing/ledger.py:") for c in fn["chunks"])


def test_locate_lists_the_past_commits_that_changed_a_function_in_its_text(shop):
    from datetime import UTC, datetime

    from inference.encoders import dense_model_id, embed_cached
    from search.models import CommitMemory, Dataset

    CommitMemory.objects.create(dataset=Dataset.objects.get(project=shop["project"], name="src"), sha="c" * 40,
                                subject="Refuse overdrafts", query="Refuse overdrafts", files=["billing/ledger.py"],
                                functions=[["billing/ledger.py", "deduct_credits"]], model_id=dense_model_id(),
                                embedding=embed_cached(["Refuse overdrafts"])[0].tolist(),
                                committed_at=datetime.now(tz=UTC))

    async def script(client):
        return await client.call_tool("locate", {"project": "shop", "task": Q})

    found = _in_process(_key(shop["alice"]), script)
    fn = next(f for f in _ok(found)["functions"] if f["symbol"] == "deduct_credits")
    assert [h["subject"] for h in fn["history"]] == ["Refuse overdrafts"]
    text = found.content[0].text
    assert "changed by cccccccccccc Refuse overdrafts" in text[text.index(" function(s):"):]


def test_locate_says_which_function_the_task_named(shop):
    async def script(client):
        return (await client.call_tool("locate", {"project": "shop", "task": f"{Q}: `deduct_credits` only"}),
                await client.call_tool("locate", {"project": "shop", "task": f"{Q}: `deduct_credits` only",
                                                  "names": False}))

    named, unnamed = _in_process(_key(shop["alice"]), script)
    fn = next(f for f in _ok(named)["functions"] if f["symbol"] == "deduct_credits")
    assert fn["named_as"] == "deduct_credits" and "(the task names deduct_credits)" in named.content[0].text
    assert "the task names" not in unnamed.content[0].text
    assert {f["named_as"] for f in _ok(unnamed)["functions"]} == {None}


def test_locate_says_where_each_function_reads_most_like_the_task_when_asked_for_windows(shop):
    async def script(client):
        return (await client.call_tool("locate", {"project": "shop", "task": Q, "windows": True}),
                await client.call_tool("locate", {"project": "shop", "task": Q}))

    looked, plain = _in_process(_key(shop["alice"]), script)
    first = _ok(looked)["functions"][0]
    assert first["window"] and f"reads most like the task at {first['window']['span']}" in looked.content[0].text
    assert "reads most like the task" not in plain.content[0].text
    assert {f["window"] for f in _ok(plain)["functions"]} == {None}


def test_locate_names_the_file_and_function_logs_as_mcp_and_refuses_like_the_api(shop):
    from search.models import QuerySession

    async def script(client):
        found = await client.call_tool("locate", {"project": "shop", "task": Q, "top_files": 2})
        bad = _err(await client.call_tool("locate", {"project": "shop", "task": Q, "aggregation": "mean"}))
        hidden = _err(await client.call_tool("locate", {"project": "elsewhere", "task": Q}))
        return found, bad, hidden

    found, bad, hidden = _in_process(_key(shop["alice"]), script)
    data = _ok(found)
    _check_locate(data)
    assert len(data["files"]) <= 2 and f"billing/ledger.py:{DEDUCT_START}-" in found.content[0].text
    session = QuerySession.objects.get(pk=data["search_session_id"])
    assert (session.source, session.kind, session.query, session.user) == ("mcp", "locate", Q, shop["alice"])
    assert (bad["status"], bad["field"]) == (400, "aggregation")
    assert (hidden["status"], hidden["code"]) == (404, "not_found")

    async def no_scope(client):
        return _err(await client.call_tool("locate", {"project": "shop", "task": Q}))

    body = _in_process(_key(shop["alice"], scopes=["ingest"]), no_scope)
    assert body["code"] == "insufficient_scope" and body["status"] == 403


def test_locate_shows_the_past_commits_that_voted_and_history_off_leaves_them_out(shop):
    from datetime import UTC, datetime

    from inference.encoders import dense_model_id, embed_cached
    from search.models import CommitMemory, Dataset

    message = "Refuse to take more credits than the wallet holds"
    CommitMemory.objects.create(dataset=Dataset.objects.get(project=shop["project"], name="src"), sha="c0ffee" * 6
                                + "abcd", subject=message, query=message, files=["billing/ledger.py"],
                                model_id=dense_model_id(), embedding=embed_cached([message])[0].tolist(),
                                committed_at=datetime.now(tz=UTC))

    async def script(client):
        return (await client.call_tool("locate", {"project": "shop", "task": Q}),
                await client.call_tool("locate", {"project": "shop", "task": Q, "history": False}))

    voted, off = _in_process(_key(shop["alice"]), script)
    data = _ok(voted)
    assert data["history"][0]["subject"] == message and data["history"][0]["files"] == ["billing/ledger.py"]
    assert data["files"][0]["path"] == "billing/ledger.py" and data["files"][0]["history"][0]["sha"].startswith("c0ffee")
    assert f"changed by c0ffeec0ffee {message}" in voted.content[0].text
    assert _ok(off)["history"] == [] and "changed by" not in off.content[0].text


def test_feedback_records_a_judgment_on_a_served_result(shop):
    from search.models import Feedback

    async def script(client):
        data = _ok(await client.call_tool("search_context", {"project": "shop", "q": Q, "top_k": 3}))
        chunk_id = data["results"][0]["chunk_id"]
        fb = await client.call_tool("feedback", {"search_session_id": data["search_session_id"],
                                                 "chunk_id": chunk_id, "relevant": True})
        not_served = await client.call_tool("feedback", {"search_session_id": data["search_session_id"],
                                                         "chunk_id": 10 ** 9, "relevant": False})
        return data, _ok(fb), _err(not_served)

    data, fb, not_served = _in_process(_key(shop["alice"]), script)
    row = Feedback.objects.get(session_id=data["search_session_id"])
    assert (row.chunk_id, row.relevance, row.user) == (data["results"][0]["chunk_id"], 1, shop["alice"])
    assert fb["relevance"] == 1
    assert not_served["code"] == "invalid" and not_served["field"] == "chunk_id"


def test_list_projects_and_list_datasets_show_what_the_key_can_see(shop, make_project):
    make_project("second", shop["alice"], role="viewer")
    limited = _key(shop["alice"], projects=[shop["project"]])

    async def script(client):
        projects = _ok(await client.call_tool("list_projects", {}))
        datasets = _ok(await client.call_tool("list_datasets", {"project": "shop"}))
        return projects, datasets

    projects, datasets = _in_process(_key(shop["alice"]), script)
    assert [(p["slug"], p["role"]) for p in projects["projects"]] == [("second", "viewer"), ("shop", "owner")]
    assert [(d["name"], d["kind"], d["access"], d["project"]) for d in datasets["datasets"]] == \
        [("src", "code", "own", "shop")]
    projects, _ = _in_process(limited, script)
    assert [p["slug"] for p in projects["projects"]] == ["shop"]


def test_a_project_without_access_is_answered_exactly_like_a_missing_one(shop):
    async def script(client):
        out = {}
        for project in ("shop", "no-such-project"):
            for tool, args in (("search_context", {"q": Q}), ("list_datasets", {}),
                               ("read_span", {"path": "billing/ledger.py", "start_line": 1, "end_line": 3})):
                res = await client.call_tool(tool, {"project": project, **args})
                out[(project, tool)] = (_err(res), res.content[0].text)
        return out

    out = _in_process(_key(shop["bob"]), script)
    for tool in ("search_context", "list_datasets", "read_span"):
        assert out[("shop", tool)] == out[("no-such-project", tool)], tool
        body = out[("shop", tool)][0]
        assert body["code"] == "not_found" and body["status"] == 404 and body["detail"] == "Project not found."


def test_a_key_limited_to_other_projects_cannot_reach_this_one(shop, make_project):
    other = make_project("other", shop["alice"])

    async def script(client):
        return _err(await client.call_tool("search_context", {"project": "shop", "q": Q}))

    assert _in_process(_key(shop["alice"], projects=[other]), script)["code"] == "not_found"


def test_a_key_without_the_query_scope_is_refused_for_search(shop):
    from search.models import QuerySession

    async def script(client):
        return _err(await client.call_tool("search_context", {"project": "shop", "q": Q}))

    body = _in_process(_key(shop["alice"], scopes=["ingest"]), script)
    assert body["code"] == "insufficient_scope" and body["required_scope"] == "query" and body["status"] == 403
    assert not QuerySession.objects.exists()


def test_a_stdio_session_stops_working_once_its_key_is_revoked(shop):
    from accounts.apikeys import issue_api_key, revoke_api_key
    from search.edge.mcp.server import caller_for_secret, in_process_client

    issued = issue_api_key(user=shop["alice"])
    caller = caller_for_secret(issued.secret, transport="stdio")  # stdio re-checks the key on every call

    async def run():
        async with in_process_client(caller) as client:
            before = await client.call_tool("list_projects", {})
            await sync_to_async(revoke_api_key, thread_sensitive=True)(api_key=issued.api_key)
            after = await client.call_tool("list_projects", {})
            return before, after

    before, after = async_to_sync(run)()
    assert [p["slug"] for p in _ok(before)["projects"]] == ["shop"]
    body = _err(after)
    assert (body["code"], body["status"]) == ("authentication_failed", 401)


def test_bad_input_is_the_api_error_naming_the_field(shop):
    async def script(client):
        return [_err(await client.call_tool("search_context", {"project": "shop", "q": Q, "top_k": 500})),
                _err(await client.call_tool("search_context", {"project": "shop", "q": ""})),
                _err(await client.call_tool("read_span", {"project": "shop", "path": "billing/ledger.py",
                                                          "start_line": 9, "end_line": 2}))]

    top_k, q, span = _in_process(_key(shop["alice"]), script)
    assert (top_k["code"], top_k["field"], top_k["status"]) == ("invalid", "top_k", 400)
    assert (q["code"], q["field"]) == ("invalid", "q")
    assert (span["code"], span["field"]) == ("invalid", "end_line")


def test_search_is_rate_limited_by_the_apis_per_user_limit(shop, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "context_query": "2/m"}

    async def script(client):
        return [await client.call_tool("search_context", {"project": "shop", "q": Q, "top_k": 1}) for _ in range(3)]

    results = _in_process(_key(shop["alice"]), script)
    assert [r.is_error for r in results] == [False, False, True]
    body = _structured(results[2])
    assert body["code"] == "rate_limited" and body["status"] == 429 and body["retry_after"] >= 1


def test_answer_rules_returns_a_cited_answer_logged_as_mcp(demo_project, make_user, settings):
    from projects.models import Membership
    from search.models import QuerySession

    settings.OPENAI_BASE_URL, settings.LLM_MODEL = "", ""
    member = make_user()
    Membership.objects.create(project=demo_project, user=member, role="viewer")

    async def script(client):
        return _ok(await client.call_tool("answer_rules", {"project": demo_project.slug,
                                                           "q": "what happens when I'm pinned?"}))

    data = _in_process(_key(member), script)
    assert data["mode"] == "extractive" and re.search(r"\[\d\]", data["answer"]), data["answer"]
    assert data["citations"] and all(c["chunk_id"] and c["book"] for c in data["citations"])
    session = QuerySession.objects.get(pk=data["search_session_id"])
    assert (session.source, session.kind) == ("mcp", "rules")


def test_resources_list_and_read_indexed_files_within_access(shop):
    async def script(client):
        listed = (await client.list_resources()).resources
        read = await client.read_resource("platform://shop/src/billing/ledger.py")
        return listed, read

    listed, read = _in_process(_key(shop["alice"]), script)
    uris = {str(r.uri) for r in listed}
    assert "platform://shop/src/billing/ledger.py" in uris and "platform://shop/src/web/routes.js" in uris
    assert read.contents[0].text == LEDGER_PY.rstrip("\n")

    async def stranger(client):
        listed = (await client.list_resources()).resources
        try:
            await client.read_resource("platform://shop/src/billing/ledger.py")
        except Exception as exc:  # noqa: BLE001 - the SDK raises MCPError
            return listed, exc
        return listed, None

    listed, exc = _in_process(_key(shop["bob"]), stranger)
    assert listed == [] and exc is not None and "Project not found." in str(exc)


# ------------------------------------------------------------------------------------------------ stdio
@pytest.fixture
def stdio_world(transactional_db, tmp_path, code_repo, make_user, make_project):
    """The shop, committed (the child process has its own connection), indexed into a store this process then
    closes: an embedded Qdrant store admits one open handle, and the child `manage.py mcp` opens it."""
    from django.db import connection

    from search.engine.index import open_index, set_index

    store = tmp_path / "qdrant-stdio"
    index = open_index(path=store)
    set_index(index)
    try:
        alice = make_user("alice@example.com")
        project = make_project("shop", alice)
        ingest(project, "src", code_repo, repo="shop")
    finally:
        set_index(None)
        index.close()
    db = connection.settings_dict
    env = dict(os.environ, DATABASE_URL=f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}",
               QDRANT_PATH=str(store), INDEX_APPLIER_THREAD="0")
    return {"alice": alice, "project": project, "env": env}


def _manage_mcp(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "mcp", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_stdio_server_searches_reads_and_logs_as_mcp(stdio_world):
    import anyio
    from mcp import Client, StdioServerParameters

    from search.models import QuerySession, RerankResult

    secret = _key(stdio_world["alice"])
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp", "--key", secret],
                                   env=stdio_world["env"], cwd=str(ROOT))

    async def run():
        async with Client(params, read_timeout_seconds=240) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            found = _ok(await client.call_tool("search_context", {"project": "shop", "q": Q, "top_k": 5}))
            hit = _found_deduct(found)
            span = _ok(await client.call_tool("read_span", {"project": "shop", "path": hit["path"],
                                                            "start_line": hit["start_line"],
                                                            "end_line": hit["end_line"]}))
            missing = _err(await client.call_tool("search_context", {"project": "nope", "q": Q}))
            return tools, found, hit, span, missing

    tools, found, hit, span, missing = anyio.run(run)
    assert TOOLS <= tools
    assert span["text"] == "\n".join(LEDGER_LINES[hit["start_line"] - 1:hit["end_line"]])
    assert missing["code"] == "not_found" and missing["detail"] == "Project not found."
    session = QuerySession.objects.get(pk=found["search_session_id"])
    assert session.source == "mcp" and session.user == stdio_world["alice"]
    assert list(RerankResult.objects.filter(session=session, final_rank__isnull=False).order_by("final_rank")
                .values_list("chunk_id", flat=True)) == [r["chunk_id"] for r in found["results"]]


def test_stdio_selftest_lists_tools_and_runs_one_search(stdio_world):
    out = _manage_mcp(stdio_world["env"], "--selftest", "--key", _key(stdio_world["alice"]), "--query", Q)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "12 tools:" in out.stdout and "search_context" in out.stdout and "locate" in out.stdout
    assert all(name in out.stdout for name in CODE_TOOLS)
    assert f"billing/ledger.py:{DEDUCT_START}-" in out.stdout and "selftest passed" in out.stdout


def test_stdio_refuses_to_start_with_a_revoked_or_expired_key(stdio_world):
    from django.utils import timezone

    from accounts.apikeys import issue_api_key, revoke_api_key

    revoked = issue_api_key(user=stdio_world["alice"])
    revoke_api_key(api_key=revoked.api_key)
    expired = issue_api_key(user=stdio_world["alice"], expires_at=timezone.now() - timedelta(minutes=1))
    for secret, code in ((revoked.secret, "authentication_failed"), (expired.secret, "key_expired"),
                         ("sk_not_a_key", "authentication_failed")):
        out = _manage_mcp(stdio_world["env"], "--key", secret)
        assert out.returncode == 1 and f"The API key was refused ({code})" in out.stderr, out.stderr
        assert out.stdout == ""


# ------------------------------------------------------------------------------------------------ HTTP
@pytest.fixture
def live_shop(live_server, edge_index, code_repo, make_user, make_project):
    alice, bob = make_user("alice@example.com"), make_user("bob@example.com")
    project = make_project("shop", alice)
    make_project("elsewhere", bob)
    ingest(project, "src", code_repo, repo="shop")
    return {"alice": alice, "bob": bob, "project": project, "url": f"{live_server.url}/mcp"}


def _http_client(url: str, secret: str) -> Any:
    from search.edge.mcp.server import http_client

    return http_client(url, secret)


def test_selftest_checks_a_running_server_over_http(live_shop):
    """`manage.py mcp --selftest --url` works while another process holds the embedded store (make run)."""
    import io

    from django.core.management import call_command

    from search.models import QuerySession

    out = io.StringIO()
    call_command("mcp", selftest=True, url=live_shop["url"], key=_key(live_shop["alice"]), project="shop",
                 query=Q, stdout=out)
    text = out.getvalue()
    assert f"over streamable HTTP: {live_shop['url']}" in text and "selftest passed" in text
    assert "billing/ledger.py" in text
    assert QuerySession.objects.filter(source="mcp", user=live_shop["alice"]).count() == 1


def test_http_server_lists_tools_searches_reads_resources_and_logs_as_mcp(live_shop):
    import anyio

    from search.models import QuerySession, RerankResult

    secret = _key(live_shop["alice"])

    async def run():
        async with _http_client(live_shop["url"], secret) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            found = _ok(await client.call_tool("search_context", {"project": "shop", "q": Q, "top_k": 5}))
            hit = _found_deduct(found)
            span = _ok(await client.call_tool("read_span", {"project": "shop", "path": hit["path"],
                                                            "start_line": hit["start_line"],
                                                            "end_line": hit["end_line"]}))
            datasets = _ok(await client.call_tool("list_datasets", {"project": "shop"}))
            fb = _ok(await client.call_tool("feedback", {"search_session_id": found["search_session_id"],
                                                         "chunk_id": hit["chunk_id"], "relevant": True}))
            resource = await client.read_resource("platform://shop/src/billing/ledger.py")
            return tools, found, hit, span, datasets, fb, resource

    tools, found, hit, span, datasets, fb, resource = anyio.run(run)
    assert resource.contents[0].text == LEDGER_PY.rstrip("\n")
    assert TOOLS <= tools
    assert span["text"] == "\n".join(LEDGER_LINES[hit["start_line"] - 1:hit["end_line"]])
    assert [d["name"] for d in datasets["datasets"]] == ["src"] and fb["relevance"] == 1
    session = QuerySession.objects.get(pk=found["search_session_id"])
    assert session.source == "mcp" and session.user == live_shop["alice"]
    assert list(RerankResult.objects.filter(session=session, final_rank__isnull=False).order_by("final_rank")
                .values_list("chunk_id", flat=True)) == [r["chunk_id"] for r in found["results"]]
    assert session.feedback.get().chunk_id == hit["chunk_id"]


def test_http_no_access_and_no_project_get_the_same_error(live_shop):
    import anyio

    secret = _key(live_shop["bob"])

    async def run():
        async with _http_client(live_shop["url"], secret) as client:
            hidden = await client.call_tool("search_context", {"project": "shop", "q": Q})
            missing = await client.call_tool("search_context", {"project": "no-such-project", "q": Q})
            return (_err(hidden), hidden.content[0].text), (_err(missing), missing.content[0].text)

    hidden, missing = anyio.run(run)
    assert hidden == missing and hidden[0]["code"] == "not_found"


def test_http_key_without_the_query_scope_is_refused_for_search(live_shop):
    import anyio

    secret = _key(live_shop["alice"], scopes=["people"])

    async def run():
        async with _http_client(live_shop["url"], secret) as client:
            return _err(await client.call_tool("search_context", {"project": "shop", "q": Q}))

    body = anyio.run(run)
    assert body["code"] == "insufficient_scope" and body["required_scope"] == "query"


def test_http_refuses_revoked_expired_and_missing_keys_with_401(live_shop):
    import anyio
    import httpx2
    from django.utils import timezone

    from accounts.apikeys import issue_api_key, revoke_api_key

    revoked = issue_api_key(user=live_shop["alice"])
    revoke_api_key(api_key=revoked.api_key)
    expired = issue_api_key(user=live_shop["alice"], expires_at=timezone.now() - timedelta(minutes=1))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, code in (({"Authorization": f"Bearer {revoked.secret}"}, "authentication_failed"),
                          ({"Authorization": f"Bearer {expired.secret}"}, "key_expired"),
                          ({}, "not_authenticated")):
        resp = httpx2.post(live_shop["url"], json=body, headers={**accept, **headers}, timeout=60)
        assert resp.status_code == 401 and resp.json()["code"] == code, resp.text
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")

    async def connect():
        async with _http_client(live_shop["url"], revoked.secret) as client:
            await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK reports the 401 as its own error type
        anyio.run(connect)


# ------------------------------------------------------------------------------------------------ code tools
CODE_CALLS = [
    ("find_definition", {"project": "shop", "symbol": "deduct_credits"}),
    ("find_references", {"project": "shop", "symbol": "Wallet"}),
    ("outline", {"project": "shop", "path": "billing/ledger.py"}),
    ("list_files", {"project": "shop", "glob": "billing/**"}),
    ("grep", {"project": "shop", "pattern": "def deduct_credits"}),
]


def _check_code_answers(answers: dict[str, dict[str, Any]]) -> None:
    span = f"billing/ledger.py:{DEDUCT_START}"
    d = answers["find_definition"]
    assert d["status"] == "found" and d["definitions"][0]["span"].startswith(span + "-")
    assert answers["find_references"]["status"] == "found"
    assert any(s["span"].startswith(f"{span}-") for s in answers["outline"]["symbols"])
    assert "deduct_credits" in {s["name"] for s in answers["outline"]["symbols"]}
    assert [f["path"] for f in answers["list_files"]["files"]] == ["billing/ledger.py"]
    assert [h["span"] for h in answers["grep"]["hits"]] == [span]


def test_code_tools_answer_like_the_api_and_refuse_like_it(shop):
    async def script(client):
        answers = {name: _ok(await client.call_tool(name, args)) for name, args in CODE_CALLS}
        bad = _err(await client.call_tool("grep", {"project": "shop", "pattern": "(", "regex": True}))
        hidden = _err(await client.call_tool("find_definition", {"project": "elsewhere", "symbol": "x"}))
        return answers, bad, hidden

    answers, bad, hidden = _in_process(_key(shop["alice"]), script)
    _check_code_answers(answers)
    assert (bad["status"], bad["field"]) == (400, "pattern")
    assert (hidden["status"], hidden["code"]) == (404, "not_found")

    async def no_scope(client):
        return _err(await client.call_tool("find_references", {"project": "shop", "symbol": "Wallet"}))

    body = _in_process(_key(shop["alice"], scopes=["ingest"]), no_scope)
    assert body["code"] == "insufficient_scope" and body["status"] == 403


TS_CLIENT = ROOT / "tests" / "search" / "edge" / "mcp_ts"


def _ts_client_ready() -> None:
    """The TypeScript SDK from the npm registry, installed once into mcp_ts/node_modules (package-lock.json)."""
    if shutil.which("node") is None or shutil.which("npm") is None:  # a missing tool fails; it never skips
        pytest.fail("node and npm are needed for the TypeScript MCP client (apt install nodejs npm)")
    if not (TS_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TS_CLIENT, check=True, capture_output=True,
                       timeout=600)


def test_the_typescript_sdk_client_drives_the_code_tools_and_locate_over_http(live_shop):
    """An MCP client other than the one the server is built on: the TypeScript SDK, over streamable HTTP."""
    import json

    _ts_client_ready()
    env = dict(os.environ, MCP_URL=live_shop["url"], MCP_KEY=_key(live_shop["alice"]))
    calls = [*CODE_CALLS, ("grep", {"project": "shop", "pattern": "(", "regex": True}),
             ("find_definition", {"project": "elsewhere", "symbol": "x"}),
             ("locate", {"project": "shop", "task": Q}), ("locate", {"project": "shop", "task": ""})]
    out = subprocess.run(["node", "client.mjs", json.dumps(calls)], cwd=TS_CLIENT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    tools = {t["name"]: t for t in data["tools"]}
    assert TOOLS | CODE_TOOLS <= set(tools)
    assert tools["grep"]["required"] == ["project", "pattern"]
    results = data["results"]
    assert not any(r["isError"] for r in results[:5]), results
    _check_code_answers({r["name"]: r["structured"] for r in results[:5]})
    assert f"billing/ledger.py:{DEDUCT_START}" in results[4]["text"]
    assert results[5]["isError"] and results[5]["structured"]["field"] == "pattern"
    assert results[6]["isError"] and results[6]["structured"]["code"] == "not_found"
    assert tools["locate"]["required"] == ["project", "task"] and not results[7]["isError"], results[7]
    _check_locate(results[7]["structured"])
    assert results[8]["isError"] and results[8]["structured"]["field"] == "task"
