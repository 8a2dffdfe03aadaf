"""Code tools API: where a symbol is defined and used, a file's outline, the files, exact search.

Views parse, authorise, call one service (search.engine.code_graph, search.engine.grep), render. The same keys,
scope (`query`), project access (a project you are not in is 404, as for search) and per-user rate limit
(`context_query`, search's) as POST /query; the MCP tools of the same names call the same services. The five views
differ only in their serializers, service and schema text, so `_tool_view` builds each one. The services run
under the request's deadline (config.deadlines, installed by config.middleware): grep and find_references answer
what they found by then with `complete: false`; outline pages (`limit`, `offset`, `next`)."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES
from projects.access import project_for_member
from search.edge import serializers as s
from search.edge.api.context import _body
from search.engine import code_graph
from search.engine.grep import grep_project

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.serializers import Serializer

log = logging.getLogger(__name__)


def _tool_view(name: str, *, tool: str, operation_id: str, parse: type[Serializer], render: type[Serializer],
               service: Callable[..., dict[str, Any]], description: str) -> type[APIView]:
    """An APIView named `name` whose POST parses the body with `parse`, calls `service(project=, **fields)` and
    renders with `render`; its schema (operation `operation_id`, tag `code`) names both serializers."""

    @extend_schema(operation_id=operation_id, request=parse, responses={200: render, **ERROR_RESPONSES},
                   tags=["code"], description=description)
    def post(self: APIView, request: Request, slug: str) -> Response:
        t0 = time.perf_counter()
        enforce(request, group="context_query")
        project = project_for_member(user=request.user, slug=slug)
        ser = parse(data=_body(request))
        ser.is_valid(raise_exception=True)
        out = service(project=project, **ser.validated_data)
        log.info("code %s project=%s user=%s (%.1f ms)", tool, project.slug, request.user.pk,
                 (time.perf_counter() - t0) * 1000)
        return Response(render(out).data)

    return type(name, (APIView,), {"required_scope": "query", "post": post, "__module__": __name__,
                                   "__qualname__": name})


DefinitionView = _tool_view(
    "DefinitionView", tool="find_definition", operation_id="code_definition",
    parse=s.CodeSymbolRequestSerializer, render=s.CodeDefinitionResponseSerializer,
    service=code_graph.find_definition,
    description="Where a symbol is defined (file:line spans) in the datasets the project can read. "
                "`ambiguous` lists every match and chooses none.")

ReferencesView = _tool_view(
    "ReferencesView", tool="find_references", operation_id="code_references",
    parse=s.CodeReferencesRequestSerializer, render=s.CodeReferencesResponseSerializer,
    service=code_graph.find_references,
    description="Calls, references, imports and subclasses of a symbol's definition(s), each "
                "resolved (by file, import, then name within its dataset) or marked ambiguous.")

OutlineView = _tool_view(
    "OutlineView", tool="outline", operation_id="code_outline",
    parse=s.CodeOutlineRequestSerializer, render=s.CodeOutlineResponseSerializer,
    service=code_graph.outline,
    description="A file's definitions in line order, with their spans, and its imports.")

FilesView = _tool_view(
    "FilesView", tool="list_files", operation_id="code_files",
    parse=s.CodeFilesRequestSerializer, render=s.CodeFilesResponseSerializer,
    service=code_graph.list_files,
    description="Indexed files the project can read, by dataset and path, narrowed by a glob.")

GrepView = _tool_view(
    "GrepView", tool="grep", operation_id="code_grep",
    parse=s.CodeGrepRequestSerializer, render=s.CodeGrepResponseSerializer,
    service=grep_project,
    description="Exact or RE2 regular-expression search over the indexed text, line by line: "
                "file:line hits, at most max_matches, within a time budget (`complete`).")
