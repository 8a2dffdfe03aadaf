"""The Model Context Protocol server: coding agents reach the platform's retrieval through it.

Why a thin adapter: every tool parses its arguments with the API's own Input serializers and calls the service
the API view calls (run_query, rules_search + stream_answer, record_feedback, projects_of, datasets_seen_by), so
access control, validation, logging (QuerySession rows, source `mcp`) and rate limits (config.ratelimits, the
same groups and per-user counters) cannot drift from the API. An error is the API's error: the exception the
service raised goes through the API's exception handler, and its body ({code, detail, field, ...} plus the HTTP
`status` it would have had) comes back as an MCP tool error (isError, the body as structured content).

Who calls: the key is authenticated once per connection (stdio: `manage.py mcp --key`, re-checked on every
call so a revoked or expired key stops working at once) or once per HTTP request (search.edge.mcp.http at /mcp,
stateless). The caller rides on a context variable that the transport sets before the SDK runs; tools do their
Django work in `sync_to_async(thread_sensitive=True)`, so the ORM never runs on the event loop.

Every tool call's work runs under a deadline, MCP_REQUEST_TIMEOUT_S from the call (config.deadlines, set inside
the worker thread: `_bounded`), which the services' loops check: grep and find_references answer what they found
with `complete: false`, other work stops with the API's 504 `request_timeout`. Over HTTP the request's own
deadline (search.edge.mcp.http) is the outer bound, so a call never outlives the request that carried it.
"""
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, Resource, TextContent, ToolAnnotations
from mcp_types import INVALID_PARAMS
from pydantic import Field
from rest_framework.exceptions import NotAuthenticated

from accounts.authentication import authenticate_secret
from accounts.models import ApiKey, User
from accounts.permissions import require_scopes
from config import deadlines
from config.errors import NotFound, api_exception_handler, error_body
from config.parsers import find_bad_text
from config.ratelimits import enforce
from projects.access import project_for_member
from projects.sharing import projects_of
from search.edge.serializers import (
    CodeFilesRequestSerializer,
    CodeGrepRequestSerializer,
    CodeOutlineRequestSerializer,
    CodeReferencesRequestSerializer,
    CodeSymbolRequestSerializer,
    FeedbackRequestSerializer,
    LocateRequestSerializer,
    QueryRequestSerializer,
    RulesRequestSerializer,
)
from search.engine.code_graph import find_definition as find_definition_of
from search.engine.code_graph import find_references as find_references_of
from search.engine.code_graph import list_files as list_files_of
from search.engine.code_graph import outline as outline_of
from search.engine.grep import grep_project
from search.engine.locate import locate as locate_in
from search.engine.packing import render_pack
from search.engine.pipeline import run_query
from search.engine.spans import indexed_files, read_file
from search.engine.spans import read_span as read
from search.ingest.sharing import datasets_seen_by
from search.quality.feedback import record_feedback
from search.rules.answer import stream_answer
from search.rules.search import rules_search

log = logging.getLogger(__name__)
_T = TypeVar("_T")

SERVER_NAME = "platform-context"
MAX_LISTED_RESOURCES = 200
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


# --------------------------------------------------------------------------- who is calling
@dataclass
class Caller:
    """An authenticated API key and what the rate limiter counts against (`request.user`, as in the API)."""

    user: User
    key: ApiKey
    request: HttpRequest
    transport: str  # stdio | http
    secret: str = field(repr=False, default="")

    def current(self) -> "Caller":
        """stdio: the key again, as it is now (revoked or expired keys stop working mid-session); http: self,
        authenticated at the start of this very request."""
        if self.transport != "stdio":
            return self
        user, key = authenticate_secret(self.secret)
        self.request.user = user
        return Caller(user=user, key=key, request=self.request, transport=self.transport, secret=self.secret)


_caller: ContextVar[Caller | None] = ContextVar("mcp_caller", default=None)


def caller_for_secret(secret: str, *, transport: str, request: HttpRequest | None = None) -> Caller:
    """Authenticate like the API (accounts.authentication.authenticate_secret); raises DRF's
    AuthenticationFailed (key_expired, authentication_failed) for a refused key."""
    user, key = authenticate_secret(secret)
    if request is None:
        request = HttpRequest()
        request.META["REMOTE_ADDR"] = "127.0.0.1"
    request.user = user
    return Caller(user=user, key=key, request=request, transport=transport, secret=secret)


@contextlib.contextmanager
def acting_as(caller: Caller) -> Iterator[None]:
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


# --------------------------------------------------------------------------- errors and the call wrapper
def error_of(exc: BaseException) -> dict[str, Any]:
    """The API's error body for an exception, plus the HTTP status the API would have answered with."""
    resp = api_exception_handler(exc, {}) if isinstance(exc, Exception) else None
    if resp is None:
        log.error("MCP tool failed", exc_info=exc)
        return {**error_body("server_error", "Internal error."), "status": 500}
    return {**dict(resp.data), "status": resp.status_code}


def error_result(body: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body, default=str))],
                          structured_content=body, is_error=True)


def _current_caller() -> Caller:
    caller = _caller.get()
    if caller is None:  # a server object used without a transport that authenticated someone

        raise NotAuthenticated()
    return caller.current()


def _authorised(scope: str, group: str) -> Caller:
    """The caller, checked like an API view: the key's scope (403 insufficient_scope), then the rate limit."""
    caller = _current_caller()
    require_scopes(caller.key, (scope,))
    enforce(caller.request, group=group)
    return caller


def _bounded(work: Callable[[], _T]) -> Callable[[], _T]:
    """`work` under the tool call's deadline: MCP_REQUEST_TIMEOUT_S from now (or the request's, if sooner).

    Set inside the function the worker thread runs, so the deadline reaches the work whatever the thread and
    whatever context the SDK's tasks were started in; it is taken now, when the call arrives, not when a thread
    is free to start it."""
    at = deadlines.now() + settings.MCP_REQUEST_TIMEOUT_S
    outer = deadlines.current()

    def run() -> _T:
        with deadlines.deadline_after(max(0.0, (at if outer is None else min(at, outer)) - deadlines.now())):
            return work()

    return run


async def _call(tool: str, work: Callable[[], _T]) -> _T | CallToolResult:
    """Run `work` (Django code) off the event loop, under the call's deadline; any exception becomes the API's
    error as a tool error (a deadline that stops the work: 504 `request_timeout`)."""
    t0 = time.perf_counter()
    caller = _caller.get()
    who = f"user={caller.user.pk} key={caller.key.prefix} via={caller.transport}" if caller else "anonymous"
    try:
        result = await sync_to_async(_bounded(work), thread_sensitive=True)()
    except Exception as exc:  # noqa: BLE001 - every failure is answered as the API would answer it
        body = error_of(exc)
        log.info("mcp %s %s -> %s %s (%.0f ms)", tool, who, body["status"], body["code"],
                 (time.perf_counter() - t0) * 1000)
        return error_result(body)
    log.info("mcp %s %s -> ok (%.0f ms)", tool, who, (time.perf_counter() - t0) * 1000)
    return result


def _ok(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# --------------------------------------------------------------------------- the server
def bad_arguments(arguments: Any) -> dict[str, Any] | None:
    """The API's 400 body (plus `status`) for tool arguments or a resource URI that no store could hold (a NUL,
    a lone surrogate), else None. The JSON-RPC body never passes the API's JSON parser, so the same check runs
    here, once for every tool and resource, present and future (docs/security.md, "Input by class")."""
    found = find_bad_text(arguments)
    if found is None:
        return None
    field, reason = found
    return {**error_body("invalid_character", f"Text {reason}.", field or None), "status": 400}


class PlatformMCPServer(MCPServer):
    """MCPServer whose resource list is the caller's: the indexed files of their projects (bounded), and whose
    tool arguments and resource URIs pass the input guard before any tool runs."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        bad = bad_arguments(arguments)
        if bad is not None:
            return error_result(bad)
        return await super().call_tool(name, arguments, context)

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        bad = bad_arguments(str(uri))
        if bad is not None:
            raise MCPError(code=INVALID_PARAMS, message=bad["detail"], data=bad)
        return await super().read_resource(uri, context)

    async def list_resources(self) -> list[Resource]:
        static = await super().list_resources()

        def work() -> list[Resource]:
            caller = _authorised("query", "default")
            out: list[Resource] = []
            for row in projects_of(user=caller.user):
                project = row["project"]
                for f in indexed_files(project=project, limit=MAX_LISTED_RESOURCES - len(out)):
                    out.append(Resource(uri=resource_uri(project.slug, f.dataset_ref, f.path), name=f.path,
                                        title=f"{project.slug}/{f.dataset_ref}/{f.path}", mime_type="text/plain",
                                        description=f"Indexed file in dataset {f.dataset.name} of project "
                                                    f"{project.slug}"))
                if len(out) >= MAX_LISTED_RESOURCES:
                    break
            return out

        try:
            return static + await sync_to_async(_bounded(work), thread_sensitive=True)()
        except Exception as exc:  # re-raised as the protocol error, with the API's code and detail
            body = error_of(exc)
            raise MCPError(code=INVALID_PARAMS, message=body["detail"], data=body) from exc


def resource_uri(project: str, dataset: str, path: str) -> str:
    return f"platform://{project}/{dataset}/{path}"


mcp = PlatformMCPServer(
    SERVER_NAME,
    title="Context retrieval platform",
    instructions=("Search this platform's indexed code, web pages and rulebooks. Start with list_projects, then "
                  "search_context(project, q) for a context pack with file:line spans; locate(project, task) names the files and functions to edit for a "
                  "change described in words; read_span reads exact lines; "
                  "find_definition, find_references, outline, list_files and grep navigate code exactly; "
                  "answer_rules answers rules questions with citations; feedback marks results relevant."),
    log_level="WARNING",
)

ProjectSlug = Annotated[str, Field(description="Project slug (see list_projects).")]


@mcp.tool(annotations=READ_ONLY)
async def list_projects() -> CallToolResult:
    """The projects this API key can query, with your role in each."""
    def work() -> CallToolResult:
        caller = _authorised("query", "default")
        rows = [{"slug": r["project"].slug, "name": r["project"].name, "role": r["role"]}
                for r in projects_of(user=caller.user)]
        text = "\n".join(f"{r['slug']}\t{r['role']}\t{r['name']}" for r in rows) or "No projects."
        return _ok(text, {"projects": rows})

    return await _call("list_projects", work)


@mcp.tool(annotations=READ_ONLY)
async def list_datasets(project: ProjectSlug) -> CallToolResult:
    """Every dataset the project can search: its own, shared to it, and global ones."""
    def work() -> CallToolResult:
        caller = _authorised("query", "default")
        proj = project_for_member(user=caller.user, slug=project)
        rows = [{"id": r["dataset"].pk, "name": r["dataset"].name, "kind": r["dataset"].kind,
                 "access": r["access"], "project": r["owner"], "is_global": r["dataset"].is_global,
                 "description": r["dataset"].description}
                for r in datasets_seen_by(user=caller.user, project=proj)]
        text = "\n".join(f"{r['id']}\t{r['name']}\t{r['kind']}\t{r['access']}" for r in rows) or "No datasets."
        return _ok(text, {"project": proj.slug, "datasets": rows})

    return await _call("list_datasets", work)


@mcp.tool(annotations=READ_ONLY)
async def search_context(  # noqa: PLR0913 - the parameters are the MCP tool's input schema, flat as clients send them
    project: ProjectSlug,
    q: Annotated[str, Field(description="What you are looking for, in words or identifiers.")],
    repo: Annotated[str | list[str] | None, Field(description="Only these repo(s).")] = None,
    path: Annotated[str | None, Field(description="Path prefix (`src/`) or glob (`src/**/*.py`).")] = None,
    lang: Annotated[str | list[str] | None, Field(description="Only these language(s), e.g. python.")] = None,
    dataset: Annotated[str | list[str] | None,
                       Field(description="Only these dataset(s), by name or id (list_datasets shows them).")] = None,
    top_k: Annotated[int | None, Field(description="Results to return (1-50, default 15).")] = None,
    budget_tokens: Annotated[int | None, Field(description="Token budget of the pack (default 8000).")] = None,
    graph: Annotated[bool | None, Field(description="Code: also pack the definitions the top results call or "
                                                    "inherit from (default: the server's setting).")] = None,
) -> CallToolResult:
    """Hybrid (dense + sparse) search over every dataset the project can see. Returns the context pack as text
    (file:line spans, merged, within the token budget; with `graph`, the definitions the top results use, each
    marked with the result it came from) and the ranked results with scores and the search_session_id to send
    feedback for."""
    def work() -> CallToolResult:
        caller = _authorised("query", "context_query")
        proj = project_for_member(user=caller.user, slug=project)
        filters = _drop_none({"repo": repo, "path": path, "lang": lang, "dataset": dataset})
        ser = QueryRequestSerializer(data=_drop_none({"q": q, "filters": filters or None, "top_k": top_k,
                                                      "budget_tokens": budget_tokens, "graph": graph}))
        ser.is_valid(raise_exception=True)
        res = run_query(user=caller.user, project=proj, spec=ser.spec(source="mcp"))
        results = [{"rank": r["rank"], "chunk_id": r["chunk_id"], "span": r["span"], "path": r["path"],
                    "start_line": r["start_line"], "end_line": r["end_line"], "repo": r["repo"], "lang": r["lang"],
                    "symbol": r["symbol"], "kind": r["kind"], "dataset_id": r["dataset_id"],
                    "document_id": r["document_id"], "score": r["score"]} for r in res.results]
        head = [f"search_session_id: {res.session_id}", f"{len(results)} result(s):"]
        head += [f"{r['rank']}. {r['span']}  score={r['score']:.4f}  chunk_id={r['chunk_id']}"
                 + (f"  {r['symbol']}" if r["symbol"] else "") for r in results]
        pack = res.pack
        text = "\n".join(head) + "\n\n" + render_pack(pack)
        return _ok(text, {"search_session_id": res.session_id, "results": results,
                          "pack": {"tokens": pack["tokens"], "budget": pack["budget"], "truncated": pack["truncated"],
                                   "spans": [s["span"] for f in pack["files"] for s in f["spans"]],
                                   "graph_spans": [{"span": s["span"], **s["why"]} for f in pack["files"]
                                                   for s in f["spans"] if s["source"] == "graph"]},
                          "reranker": res.reranker, "fusion": res.fusion, "fusion_source": res.fusion_source,
                          "embedding_models": res.embedding_models})

    return await _call("search_context", work)


@mcp.tool(annotations=READ_ONLY)
async def locate(  # noqa: PLR0913 - the parameters are the MCP tool's input schema, flat as clients send them
    project: ProjectSlug,
    task: Annotated[str, Field(description="The change you want to make, in words.")],
    top_files: Annotated[int | None, Field(description="Files to return (1-50, default 10).")] = None,
    top_functions: Annotated[int | None, Field(description="Functions to return (1-50, default 10).")] = None,
    repo: Annotated[str | list[str] | None, Field(description="Only these repo(s).")] = None,
    path: Annotated[str | None, Field(description="Path prefix (`src/`) or glob (`src/**/*.py`).")] = None,
    lang: Annotated[str | list[str] | None, Field(description="Only these language(s), e.g. python.")] = None,
    dataset: Annotated[str | list[str] | None,
                       Field(description="Only these dataset(s), by name or id (list_datasets shows them).")] = None,
    aggregation: Annotated[str | None, Field(description="A file's score from its chunks: top3 (default), "
                                                         "max or rrf.")] = None,
    history: Annotated[bool | None, Field(description="Let similar past commits vote for the files they changed "
                                                      "(default true; datasets that follow git).")] = None,
    sources_first: Annotated[bool | None, Field(description="Source files and their definitions before tests, "
                                                            "docs and examples (default true).")] = None,
    names: Annotated[bool | None, Field(description="Lift the definitions the task names in code form "
                                                    "(`open_url`, `Plot.layout`; default true).")] = None,
    windows: Annotated[bool | None, Field(description="Rank the best functions again by their lines that read most "
                                                      "like the task and say where in each those lines are "
                                                      "(default false: slower on a CPU).")] = None,
) -> CallToolResult:
    """Where to make a change: the files ranked by their chunks' scores and the vote of similar past commits, and
    the functions, methods and classes with their file:line spans, the chunks that support each, the similar past
    commits that changed each and, for the top ones, their callers and callees."""
    def work() -> CallToolResult:
        caller = _authorised("query", "context_query")
        proj = project_for_member(user=caller.user, slug=project)
        filters = _drop_none({"repo": repo, "path": path, "lang": lang, "dataset": dataset})
        ser = LocateRequestSerializer(data=_drop_none({"task": task, "filters": filters or None,
                                                       "top_files": top_files, "top_functions": top_functions,
                                                       "aggregation": aggregation, "history": history,
                                                       "sources_first": sources_first, "names": names,
                                                       "windows": windows}))
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        out = locate_in(user=caller.user, project=proj, spec=ser.spec(source="mcp"), top_files=d["top_files"],
                        top_functions=d["top_functions"], ranking=ser.ranking()).as_dict()
        lines = [f"search_session_id: {out['search_session_id']}", f"{len(out['files'])} file(s):"]
        for f in out["files"]:
            lines.append(f"{f['rank']}. {f['path']}  score={f['score']:.4f}  "
                         + ", ".join(c["span"] for c in f["chunks"]))
            lines += [f"   changed by {c['sha'][:12]} {c['subject']}" for c in f["history"]]
        lines.append(f"{len(out['functions'])} function(s):")
        for fn in out["functions"]:
            lines.append(f"{fn['rank']}. {fn['span']}  {fn['kind']} {fn['symbol']}  score={fn['score']:.4f}"
                         + (f"  (the task names {fn['named_as']})" if fn["named_as"] else ""))
            if fn["window"]:
                lines.append(f"   reads most like the task at {fn['window']['span']}")
            lines += [f"   called by {n['name']} at {n['span']}" for n in fn["callers"]]
            lines += [f"   calls {n['name']} ({n['span']})" for n in fn["callees"]]
            lines += [f"   changed by {c['sha'][:12]} {c['subject']}" for c in fn["history"]]
        return _ok("\n".join(lines), out)

    return await _call("locate", work)


@mcp.tool(annotations=READ_ONLY)
async def read_span(
    project: ProjectSlug,
    path: Annotated[str, Field(description="The file's path as search_context shows it.")],
    start_line: Annotated[int, Field(description="First line, 1-based.")],
    end_line: Annotated[int, Field(description="Last line, inclusive.")],
    dataset_id: Annotated[int | None, Field(description="Which dataset, where several hold the path.")] = None,
) -> CallToolResult:
    """The exact lines of an indexed file (the version search returned), from a dataset the project can read."""
    def work() -> CallToolResult:
        caller = _authorised("query", "default")
        proj = project_for_member(user=caller.user, slug=project)
        out = read(project=proj, path=path, start_line=start_line, end_line=end_line, dataset_id=dataset_id)
        return _ok(f"--- {out['span']}\n{out['text']}", out)

    return await _call("read_span", work)


@mcp.tool(annotations=READ_ONLY)
async def answer_rules(
    project: ProjectSlug,
    q: Annotated[str, Field(description="The rules question.")],
    book: Annotated[str | list[str] | None, Field(description="Only these book id(s).")] = None,
    ctx: Context | None = None,
) -> CallToolResult:
    """A cited answer from the project's rulebooks (an LLM where one is configured, else extractive). Progress
    notifications carry the answer's stages and tokens where the client asks for progress."""
    def prepare() -> Iterator[tuple[str, dict[str, Any]]]:
        caller = _authorised("query", "answer")
        proj = project_for_member(user=caller.user, slug=project)
        ser = RulesRequestSerializer(data=_drop_none({"q": q, "book": book}))
        ser.is_valid(raise_exception=True)
        spec = ser.spec(source="mcp")
        # as the /answer view does: the search runs (and is logged) before the answer, so its errors are plain
        found = rules_search(user=caller.user, project=proj, spec=spec)
        return stream_answer(q=spec.q, search=lambda: found)

    events = await _call("answer_rules", prepare)
    if isinstance(events, CallToolResult):
        return events
    return await _finish_answer(events, ctx)


async def _finish_answer(events: Iterator[tuple[str, dict[str, Any]]], ctx: Context | None) -> CallToolResult:
    step = 0
    session_id = None
    nxt = sync_to_async(lambda: next(events, None), thread_sensitive=True)
    while (item := await nxt()) is not None:
        event, data = item
        step += 1
        if event == "search":
            session_id = data.get("search_session_id")
        if ctx is not None:
            with contextlib.suppress(Exception):  # progress is a courtesy; the result carries the answer
                await ctx.report_progress(step, None, data.get("text") if event == "token" else event)
        if event == "error":
            return error_result({**data, "status": 503 if data.get("code") == "llm_failed" else 500})
        if event == "complete":
            cites = "\n".join(f"[{c['n']}] {c['cite'] or c['book']} {' > '.join(c['section_path'])} ({c['span']})"
                              + (f" {c['page_url']}" if c.get("page_url") else "") for c in data["citations"])
            return _ok(f"{data['answer']}\n\nCitations:\n{cites}",
                       {"answer": data["answer"], "citations": data["citations"], "mode": data["mode"],
                        "model": data["model"], "search_session_id": session_id})
    return error_result({**error_body("server_error", "The answer ended without a result."), "status": 500})


@mcp.tool()
async def feedback(
    search_session_id: Annotated[str, Field(description="From search_context's result.")],
    chunk_id: Annotated[int, Field(description="The result's chunk_id.")],
    relevant: Annotated[bool, Field(description="Was this result relevant to the query?")],
    relevance: Annotated[int | None, Field(description="Graded instead: 0 (not) to 3 (perfect).")] = None,
) -> CallToolResult:
    """Judge one served result, so the platform's MRR/nDCG metrics (and its learned ranking) see it."""
    def work() -> CallToolResult:
        caller = _authorised("query", "default")
        ser = FeedbackRequestSerializer(data={"chunk_id": chunk_id,
                                              "relevance": relevance if relevance is not None else int(relevant)})
        ser.is_valid(raise_exception=True)
        try:
            session = uuid.UUID(str(search_session_id))
        except ValueError:
            raise NotFound("Query session not found.") from None  # what the API's URL answers for a bad id
        fb = record_feedback(user=caller.user, session_id=session, **ser.validated_data)
        data = {"search_session_id": str(session), "chunk_id": fb.chunk_id, "relevance": fb.relevance}
        return _ok(f"Recorded relevance {fb.relevance} for chunk {fb.chunk_id}.", data)

    return await _call("feedback", work)


# --------------------------------------------------------------------------- code tools
DatasetRef = Annotated[str | int | None, Field(description="Only this dataset (name or id, see list_datasets).")]


def _code_tool(parse: type, service: Callable[..., dict[str, Any]], args: dict[str, Any],
               text: Callable[[dict[str, Any]], str], project: str) -> Callable[[], CallToolResult]:
    """The API view's path for one code tool: scope and rate limit, project access, the Input serializer, the
    service (search.edge.api.code does the same)."""
    def work() -> CallToolResult:
        caller = _authorised("query", "context_query")
        proj = project_for_member(user=caller.user, slug=project)
        ser = parse(data=_drop_none({k: (str(v) if k == "dataset" and v is not None else v)
                                     for k, v in args.items()}))
        ser.is_valid(raise_exception=True)
        out = service(project=proj, **ser.validated_data)
        return _ok(text(out), out)

    return work


def _defs_text(out: dict[str, Any]) -> str:
    head = f"{out['symbol']}: {out['status']}"
    return "\n".join([head, *(f"{d['span']}  {d['kind']} {d['qualname']}  {d['signature']}"
                              for d in out["definitions"])])


@mcp.tool(annotations=READ_ONLY)
async def find_definition(
    project: ProjectSlug,
    symbol: Annotated[str, Field(description="`deduct`, `Wallet.deduct` or `billing.ledger.deduct`.")],
    dataset: DatasetRef = None,
) -> CallToolResult:
    """Where a symbol is defined: file:line spans, kind and signature. `ambiguous` lists every match."""
    return await _call("find_definition", _code_tool(
        CodeSymbolRequestSerializer, find_definition_of,
        {"symbol": symbol, "dataset": dataset}, _defs_text, project))


@mcp.tool(annotations=READ_ONLY)
async def find_references(
    project: ProjectSlug,
    symbol: Annotated[str, Field(description="The symbol whose uses you want (as find_definition takes it).")],
    dataset: DatasetRef = None,
    limit: Annotated[int | None, Field(description="At most this many uses (1-500, default 500).")] = None,
) -> CallToolResult:
    """Calls, references, imports and subclasses of a symbol, each resolved to its definition or marked
    ambiguous (its name has several definitions and this use cannot be pinned to one)."""
    def text(out: dict[str, Any]) -> str:
        lines = [_defs_text(out), f"{out['total']} use(s):"]
        lines += [f"{r['span']}  {r['kind']}  in {r['container'] or '<file>'}"
                  + ("" if r["resolution"] == "resolved" else f"  (ambiguous: {r['candidates']} candidates)")
                  for r in out["references"]]
        if not out["complete"]:
            lines.append("(time budget reached: not every use was resolved)")
        return "\n".join(lines)

    return await _call("find_references", _code_tool(
        CodeReferencesRequestSerializer, find_references_of,
        {"symbol": symbol, "dataset": dataset, "limit": limit}, text, project))


@mcp.tool(annotations=READ_ONLY)
async def outline(
    project: ProjectSlug,
    path: Annotated[str, Field(description="The file's path as search_context or list_files shows it.")],
    dataset: DatasetRef = None,
    limit: Annotated[int | None, Field(description="At most this many symbols and imports (1-1000, default "
                                                   "200).")] = None,
    offset: Annotated[int | None, Field(description="Skip this many (paging: the previous page's `next`).")] = None,
) -> CallToolResult:
    """A file's definitions in line order with their spans (indented by nesting), and its imports, a page at a
    time (`complete`, else ask again with offset=`next`)."""
    def text(out: dict[str, Any]) -> str:
        lines = [f"{out['path']} ({out['lang'] or 'text'})"]
        lines += [f"{'  ' * d['depth']}{d['start_line']}-{d['end_line']}  {d['kind']} {d['name']}  {d['signature']}"
                  for d in out["symbols"]]
        if not out["complete"]:
            lines.append(f"(more: ask again with offset={out['next']})")
        return "\n".join(lines)

    return await _call("outline", _code_tool(CodeOutlineRequestSerializer, outline_of,
                                             {"path": path, "dataset": dataset, "limit": limit, "offset": offset},
                                             text, project))


@mcp.tool(annotations=READ_ONLY)
async def list_files(
    project: ProjectSlug,
    dataset: DatasetRef = None,
    glob: Annotated[str | None, Field(description="Path glob, e.g. `src/**/*.py`.")] = None,
    limit: Annotated[int | None, Field(description="At most this many files (1-1000, default 200).")] = None,
    offset: Annotated[int | None, Field(description="Skip this many (paging).")] = None,
) -> CallToolResult:
    """The indexed files the project can read, by dataset and path."""
    def text(out: dict[str, Any]) -> str:
        lines = [f"{f['dataset']}\t{f['path']}\t{f['lang']}" for f in out["files"]]
        return "\n".join(lines + (["(more: raise offset)"] if out["truncated"] else [])) or "No files."

    return await _call("list_files", _code_tool(
        CodeFilesRequestSerializer, list_files_of,
        {"dataset": dataset, "glob": glob, "limit": limit, "offset": offset}, text, project))


@mcp.tool(annotations=READ_ONLY)
async def grep(
    project: ProjectSlug,
    pattern: Annotated[str, Field(description="A literal string, or an RE2 regular expression with regex=true.")],
    path: Annotated[str | None, Field(description="Path prefix (`src/`) or glob (`src/**/*.py`).")] = None,
    regex: Annotated[bool | None, Field(description="Treat pattern as an RE2 regular expression.")] = None,
    case_sensitive: Annotated[bool | None, Field(description="Default true.")] = None,
    dataset: DatasetRef = None,
    max_matches: Annotated[int | None, Field(description="At most this many hits (1-500, default 100).")] = None,
) -> CallToolResult:
    """Exact or regular-expression search over the indexed text, line by line: file:line hits, bounded in
    matches and time (linear-time RE2 engine)."""
    def text(out: dict[str, Any]) -> str:
        lines = [f"{h['span']}: {h['text']}" for h in out["hits"]]
        if out["truncated"]:
            lines.append(f"(stopped at {len(out['hits'])} hits)")
        if not out["complete"]:
            lines.append("(time budget reached: not every file was read)")
        return "\n".join(lines) or "No match."

    return await _call("grep", _code_tool(
        CodeGrepRequestSerializer, grep_project,
        {"pattern": pattern, "path": path, "regex": regex, "case_sensitive": case_sensitive, "dataset": dataset,
         "max_matches": max_matches}, text, project))


@mcp.resource("platform://{project}/{dataset}/{+path}", name="indexed-file", mime_type="text/plain",
              description="An indexed file: platform://{project}/{dataset name or id}/{path}")
async def indexed_file(project: str, dataset: str, path: str) -> str:
    def work() -> str:
        caller = _authorised("query", "default")
        proj = project_for_member(user=caller.user, slug=project)
        return read_file(project=proj, dataset_ref=dataset, path=path)["text"]

    try:
        return await sync_to_async(_bounded(work), thread_sensitive=True)()
    except Exception as exc:  # re-raised as the protocol error, with the API's code and detail
        body = error_of(exc)
        raise MCPError(code=INVALID_PARAMS, message=body["detail"], data=body) from exc


# --------------------------------------------------------------------------- transports
async def serve_stdio(caller: Caller, stdin: Any = None, stdout: Any = None) -> None:
    """Serve one editor over stdin/stdout as `caller` until the client closes the pipe."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415 - heavy: the MCP SDK (pydantic models, anyio) loads only when an agent connects

    server = mcp._lowlevel_server
    with acting_as(caller):
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(scope: dict[str, Any], body: bytes, caller: Caller) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One HTTP request through the SDK's streamable-HTTP transport, stateless and answering JSON, as `caller`.

    Why a fresh session manager per request: stateless mode keeps nothing between requests, and a manager's
    run() is single-use; the WSGI view (search.edge.mcp.http) calls this through async_to_sync."""
    manager = StreamableHTTPSessionManager(app=mcp._lowlevel_server, stateless=True, json_response=True)
    status, headers, chunks = 500, [], []
    done = anyio.Event()
    sent_body = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    with acting_as(caller):
        async with manager.run():
            await manager.handle_request(scope, receive, send)
    done.set()
    return status, headers, b"".join(chunks)


def http_client(url: str, secret: str, *, timeout_s: float = 240.0) -> Any:
    """An SDK client for a running server's /mcp (streamable HTTP), sending `secret` as its Bearer key."""
    import httpx2  # noqa: PLC0415 - heavy: loads with the MCP SDK only
    from mcp import Client  # noqa: PLC0415 - heavy: the MCP SDK (pydantic models, anyio) loads only when an agent connects
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415 - heavy: the MCP SDK (pydantic models, anyio) loads only when an agent connects

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=httpx2.Timeout(timeout_s))
    return Client(streamable_http_client(url, http_client=http))


@contextlib.asynccontextmanager
async def in_process_client(caller: Caller) -> AsyncIterator[Any]:
    """An SDK client connected to this server in-process, as `caller` (the selftest uses it)."""
    from mcp import Client  # noqa: PLC0415 - heavy: the MCP SDK (pydantic models, anyio) loads only when an agent connects

    with acting_as(caller):
        async with Client(mcp) as client:
            yield client
