"""Locate API: a task in words in, the files and functions to edit out. The view parses, authorises, calls one
service (search.engine.locate), renders; the same keys, scope (`query`), project access (404 for a project you are
not in), rate limit (`context_query`) and query log as POST /query, whose ranking it regroups."""
from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES
from projects.access import project_for_member
from search.edge import serializers as s
from search.edge.api.context import _body
from search.engine.locate import locate

if TYPE_CHECKING:
    from rest_framework.request import Request


class LocateView(APIView):
    required_scope = "query"

    @extend_schema(operation_id="context_locate", request=s.LocateRequestSerializer,
                   responses={200: s.LocateResponseSerializer, **ERROR_RESPONSES}, tags=["context"],
                   description="Where to change something: the files (scored from their chunks) and the functions, "
                               "methods and classes (with their spans and, for the top ones, callers and callees "
                               "from the code graph) that the context query ranks for a task in words, with the "
                               "vote of similar past commits where the datasets follow git. Logged as a query of "
                               "kind `locate`.")
    def post(self, request: Request, slug: str) -> Response:
        enforce(request, group="context_query")
        project = project_for_member(user=request.user, slug=slug)
        ser = s.LocateRequestSerializer(data=_body(request))
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        result = locate(user=request.user, project=project, spec=ser.spec(), top_files=d["top_files"],
                        top_functions=d["top_functions"], ranking=ser.ranking())
        return Response(s.LocateResponseSerializer(result.as_dict()).data)
