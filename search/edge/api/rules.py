"""Rules API: rules search (JSON) and streamed answers (SSE). Views parse, authorise, call one service, render.

Why validation happens before the stream opens: once a 200 text/event-stream is
sent, an error can only be an `error` event; a bad request must still be a plain
400 JSON error {code, detail, field}, and a non-member must get a 404.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from config.schema import DEPENDENCY_ERRORS, ERROR_RESPONSES
from projects.access import project_for_member
from search.edge.serializers import RulesRequestSerializer, RulesSearchResponseSerializer
from search.rules.answer import stream_answer
from search.rules.search import RulesSpec, rules_search

if TYPE_CHECKING:
    from rest_framework.renderers import BaseRenderer
    from rest_framework.request import Request

log = logging.getLogger(__name__)


# One server-sent event: the schema of each event of the stream, as schemathesis and OpenAPI 3.2 read a
# text/event-stream response. (contentMediaType for `data` is JSON Schema 2019+, not valid in OpenAPI 3.0.)
SSE_EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["search", "context", "generation", "token", "complete", "error"]},
        "data": {"type": "string", "description": "A JSON object."},
    },
    "required": ["event", "data"],
}


def sse(event: str, data: dict[str, Any]) -> str:
    """One SSE frame. JSON data is a single line, so no multi-line `data:` handling is needed."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def encode_sse(events: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    """(event, data) pairs as SSE frames. Closing this (the client went away) closes `events` at once, so the
    answer stops generating and reports `disconnected`, without waiting for the garbage collector."""
    try:
        for event, data in events:
            yield sse(event, data)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


class _AnyAccept(DefaultContentNegotiation):
    """`Accept: text/event-stream` must not become a 406: errors still render as JSON. Parsers are chosen
    by Content-Type as everywhere else (a text/plain body is a 415, not parsed as JSON)."""

    def select_renderer(self, request: Request, renderers: list[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        return renderers[0], renderers[0].media_type


def _spec(request: Request) -> RulesSpec:
    """The body, parsed by its Input serializer into the RulesSpec it asks for."""
    ser = RulesRequestSerializer(data=request.data)
    ser.is_valid(raise_exception=True)
    return ser.spec()


class RulesSearchView(APIView):
    required_scope = "query"
    content_negotiation_class = _AnyAccept

    @extend_schema(operation_id="rules_search", tags=["rules"], request=RulesRequestSerializer,
                   responses={200: RulesSearchResponseSerializer, **ERROR_RESPONSES, **DEPENDENCY_ERRORS},
                   description="Rulebook search: hybrid retrieval (fusion rrf|weighted), book/ruleset filters, graph "
                               "boost (seed_top_n, depth, decay, graph_top_k, graph_strength; graph=false disables "
                               "it).")
    def post(self, request: Request, slug: str) -> Response:
        enforce(request, group="context_query")
        project = project_for_member(user=request.user, slug=slug)
        found = rules_search(user=request.user, project=project, spec=_spec(request))
        return Response(RulesSearchResponseSerializer(found).data)


class AnswerView(APIView):
    required_scope = "query"
    content_negotiation_class = _AnyAccept

    @extend_schema(operation_id="rules_answer", tags=["rules"], request=RulesRequestSerializer,
                   responses={(200, "text/event-stream"): OpenApiResponse(
                       SSE_EVENT, description="One schema per event: search, context, generation, token..., "
                                              "complete | error"), **ERROR_RESPONSES, **DEPENDENCY_ERRORS},
                   description="Streamed, cited answer. Same body as rules search.")
    def post(self, request: Request, slug: str) -> StreamingHttpResponse:
        enforce(request, group="answer")
        project = project_for_member(user=request.user, slug=slug)
        spec = _spec(request)
        user = request.user

        def finished(status: str, info: dict) -> None:
            log.info("answer %s project=%s tokens=%s", status, project.slug, info.get("tokens"))

        # the search runs before the stream opens: its bad input, 404 or 503 is a plain JSON error, not a 200
        # whose only event is `error`
        found = rules_search(user=user, project=project, spec=spec)
        stream = encode_sse(stream_answer(q=spec.q, search=lambda: found, on_finish=finished))
        resp = StreamingHttpResponse(stream, content_type="text/event-stream; charset=utf-8")
        resp["Cache-Control"] = "no-cache"
        resp["X-Accel-Buffering"] = "no"
        return resp
