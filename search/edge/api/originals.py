"""The original of a paged document (a PDF), served so that a citation's page link (`...#page=112`) opens the
page it cites. Views parse, authorise, call one service (search.engine.page_links), render.

Why behind the API's authentication (an API key with the `query` scope, or a signed-in session) and under a
project: the bytes are a tenant's content, readable exactly where its chunks are searchable (the project's own,
global and shared datasets); anything else, another tenant's included, is the same 404 as a hash nobody holds.
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.views import APIView

from config.errors import BadInput, NotFound
from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES
from projects.access import project_for_member
from search.engine.page_links import readable_original

if TYPE_CHECKING:
    from rest_framework.request import Request

_SHA256 = re.compile(r"[0-9a-f]{64}")
_UNSAFE_NAME = re.compile(r"[^\w.\- ]+")


class OriginalView(APIView):
    required_scope = "query"

    @extend_schema(
        operation_id="originals_read", tags=["content"],
        parameters=[OpenApiParameter("sha256", str, OpenApiParameter.PATH,
                                     description="The SHA-256 of the file (64 lowercase hex digits), as a result's "
                                                 "or a citation's `page_url` names it.")],
        responses={(200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY, description="The file as it was "
                   "uploaded (or read from a folder or a git source); append `#page=N` to open page N."),
                   **ERROR_RESPONSES},
        description="The original of a paged document (PDF) that this project can search: what a result's, a "
                    "citation's or a context-pack span's `page_url` opens. 404 for a hash no readable document "
                    "has (another tenant's included).")
    def get(self, request: Request, slug: str, sha256: str) -> HttpResponse:
        enforce(request, group="context_query")
        project = project_for_member(user=request.user, slug=slug)
        if not _SHA256.fullmatch(sha256):
            raise BadInput("An original is named by its SHA-256: 64 lowercase hex digits.", field="sha256")
        original = readable_original(project=project, sha256=sha256)
        if original is None:
            raise NotFound("No document this project can read has that original.", field="sha256")
        name = _UNSAFE_NAME.sub("_", PurePosixPath(original.document.path).name)[:200] or "document.pdf"
        resp = HttpResponse(bytes(original.data), content_type=original.media_type)
        resp["Content-Disposition"] = f'inline; filename="{name}"'
        resp["Content-Length"] = str(original.size)
        resp["X-Content-Type-Options"] = "nosniff"
        resp["Cache-Control"] = "private, max-age=3600"  # the bytes of a hash never change; access can
        resp["ETag"] = f'"{sha256}"'
        return resp
