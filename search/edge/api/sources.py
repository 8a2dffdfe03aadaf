"""Dataset source endpoints: set or remove the source, sync now, the sync history. Views parse, authorise (the
dataset is looked up as the caller may see it: non-members 404, viewers read, editors and owners write), call one
service (search.sources.sync) and render."""
from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES, ErrorSerializer
from search.edge import serializers as s
from search.ingest import content
from search.sources import sync

if TYPE_CHECKING:
    from rest_framework.request import Request

_WRITE = {**ERROR_RESPONSES, 403: ErrorSerializer, 409: ErrorSerializer}


class SourceView(APIView):
    required_scope = {"PUT": "ingest", "DELETE": "ingest"}

    @extend_schema(operation_id="datasets_source_set", request=s.SourceSetSerializer,
                   responses={200: s.SourceSerializer, **_WRITE}, tags=["sources"],
                   description="Set (or replace) the git repository or web site the dataset follows (editors, "
                               "owners). Checked whole before anything is stored: a URL whose host is or resolves "
                               "to a loopback, private, link-local or metadata address is 400 `unsafe_address`; a "
                               "path on the server is staff only (403). A changed URL, ref or subdir makes the next "
                               "sync compare the whole tree by content hash. The token is stored encrypted and "
                               "never returned. Nothing is fetched until a sync: POST .../sync, or the schedule.")
    def put(self, request: Request, slug: str, dataset_id: int) -> Response:
        enforce(request, group="ingest")
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        ser = s.SourceSetSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        sync.configure_source(user=request.user, dataset=dataset, raw=data["source"],
                              interval_s=data.get("interval_s"), token=data.get("token"))
        return Response(s.SourceSerializer(sync.describe_source(dataset=dataset)).data)

    @extend_schema(operation_id="datasets_source_delete", request=None,
                   responses={204: OpenApiResponse(description="The dataset no longer follows a source; its "
                                                               "documents stay."), **_WRITE},
                   tags=["sources"], description="Stop following the source (editors, owners). 404 `no_source` "
                                                 "if there is none.")
    def delete(self, request: Request, slug: str, dataset_id: int) -> Response:
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        sync.remove_source(user=request.user, dataset=dataset)
        return Response(status=204)


class SyncView(APIView):
    required_scope = "ingest"

    @extend_schema(operation_id="datasets_sync", request=None, responses={202: s.IngestJobSerializer, **_WRITE},
                   tags=["sources"],
                   description="Queue a sync of the dataset's source now (editors, owners); returns its ingest job "
                               "(follow it at /api/ingest-jobs/{id}). 409 `sync_running` (with `job_id`) while one "
                               "is queued or running; 404 `no_source` if the dataset follows none.")
    def post(self, request: Request, slug: str, dataset_id: int) -> Response:
        enforce(request, group="ingest")
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        job = sync.start_sync(dataset=dataset, user=request.user, trigger="manual")
        return Response(s.IngestJobSerializer(job).data, status=202)


class SyncHistoryView(APIView):
    required_scope = "query"

    @extend_schema(operation_id="datasets_syncs", responses={200: s.SyncJobSerializer(many=True), **ERROR_RESPONSES},
                   tags=["sources"],
                   description="The dataset's syncs, newest first (at most 50), each with what it did (`result`, "
                               "`summary`) or why it failed (`error`).")
    def get(self, request: Request, slug: str, dataset_id: int) -> Response:
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id)
        return Response(s.SyncJobSerializer(sync.sync_history(dataset=dataset), many=True).data)
