"""Self-serve content API: push, list and delete documents; upload files and archives. Views parse, authorise,
call one service (search.ingest.content), render."""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Count
from drf_spectacular.utils import extend_schema
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES, ErrorSerializer
from search.edge import serializers as s
from search.edge.api.context import _job_data
from search.ingest import content
from search.models import Document

if TYPE_CHECKING:
    from rest_framework.request import Request

_WRITE = {**ERROR_RESPONSES, 403: ErrorSerializer, 409: ErrorSerializer, 413: ErrorSerializer}
_UPLOAD = {**_WRITE, 415: ErrorSerializer, 422: ErrorSerializer}


class DocumentListView(APIView):
    required_scope = {"GET": "query", "PUT": "ingest", "DELETE": "ingest"}

    @extend_schema(operation_id="documents_list", parameters=[s.DocumentListQuerySerializer],
                   responses={200: s.DocumentPageSerializer, **ERROR_RESPONSES}, tags=["content"])
    def get(self, request: Request, slug: str, dataset_id: int) -> Response:
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id)
        ser = s.DocumentListQuerySerializer(data=request.query_params)
        ser.is_valid(raise_exception=True)
        q = ser.validated_data
        docs = Document.objects.filter(dataset=dataset).order_by("path")
        if q.get("path_prefix"):
            docs = docs.filter(path__startswith=q["path_prefix"])
        page = docs.annotate(chunk_count=Count("chunks"))[q["offset"]:q["offset"] + q["limit"]]
        return Response(s.DocumentPageSerializer({"count": docs.count(), "limit": q["limit"], "offset": q["offset"],
                                                  "results": list(page)}).data)

    @extend_schema(operation_id="documents_push", request=s.PushRequestSerializer,
                   responses={202: s.IngestJobSerializer, **_WRITE}, tags=["content"],
                   description="Upsert documents by external_id (unchanged text re-embeds nothing). Returns the "
                               "ingest job; follow it at /api/ingest-jobs/{id}. All or nothing: a failed job "
                               "leaves the dataset as it was. 413 quota_exceeded if the project's quota would "
                               "be passed (nothing is written). 409 dataset_has_source if the dataset follows a "
                               "git repository or a web site (a sync would overwrite what is pushed).")
    def put(self, request: Request, slug: str, dataset_id: int) -> Response:
        enforce(request, group="ingest")
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        ser = s.PushRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        job = content.push_documents(user=request.user, dataset=dataset, documents=ser.validated_data["documents"],
                                     repo=ser.validated_data.get("repo", ""))
        return Response(_job_data(job), status=202)

    @extend_schema(operation_id="documents_delete_batch", request=s.DocumentDeleteSerializer,
                   responses={200: s.DocumentDeleteResultSerializer, **_WRITE}, tags=["content"],
                   description="Delete documents by external_id and/or path. Their index points go in the same "
                               "transaction.")
    def delete(self, request: Request, slug: str, dataset_id: int) -> Response:
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        ser = s.DocumentDeleteSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        out = content.delete_documents(user=request.user, dataset=dataset, **ser.validated_data)
        return Response(s.DocumentDeleteResultSerializer(out).data)


class DocumentDetailView(APIView):
    required_scope = {"DELETE": "ingest"}

    @extend_schema(operation_id="documents_delete", responses={204: None, **_WRITE}, tags=["content"],
                   description="Delete one document by external_id (or by path for uploaded files).")
    def delete(self, request: Request, slug: str, dataset_id: int, external_id: str) -> Response:
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        content.delete_document(user=request.user, dataset=dataset, external_id=external_id)
        return Response(status=204)


class UploadView(APIView):
    required_scope = "ingest"
    parser_classes = [MultiPartParser]

    @extend_schema(operation_id="documents_upload", request={"multipart/form-data": s.UploadRequestSerializer},
                   responses={202: s.IngestJobSerializer, **_UPLOAD}, tags=["content"],
                   description="Upload a file or an archive (.zip, .tar.gz) and ingest it as the CLI would. The "
                               "archive is checked before anything is extracted (no absolute paths, no `..`, no "
                               "links, caps on files, bytes and compression ratio: 413/422 with a `code`, nothing "
                               "written). 409 dataset_has_source if the dataset follows a source. Returns the ingest job.")
    def post(self, request: Request, slug: str, dataset_id: int) -> Response:
        enforce(request, group="ingest")
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        ser = s.UploadRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        upload = data["file"]
        options = {k: data[k] for k in ("repo", "ruleset", "book") if data.get(k)}
        job = content.upload(user=request.user, dataset=dataset, filename=upload.name, data=upload.read(),
                             mode=data.get("mode"), options=options)
        return Response(_job_data(job), status=202)
