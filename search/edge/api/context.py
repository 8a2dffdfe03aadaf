"""Context API: query, ingest, feedback. Views parse, authorise, call one service, render."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import BadInput, Forbidden, NotFound
from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES, ErrorSerializer
from projects.access import limit_to_key_projects, project_for_member
from projects.policy import authorize
from search.edge import serializers as s
from search.engine.pipeline import run_query
from search.ingest.cancel import cancel_job
from search.ingest.jobs import start_ingest
from search.models import Dataset, IngestJob
from search.quality.feedback import record_feedback

if TYPE_CHECKING:
    from uuid import UUID

    from rest_framework.request import Request

    from accounts.models import User
    from search.models import IngestJob

_ERRS = {**ERROR_RESPONSES, 503: ErrorSerializer}


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise BadInput("The body must be a JSON object.", field=None)
    return request.data


class QueryView(APIView):
    required_scope = "query"

    @extend_schema(operation_id="context_query", request=s.QueryRequestSerializer,
                   responses={200: s.QueryResponseSerializer, **_ERRS}, tags=["context"],
                   description="Hybrid dense+sparse search over every dataset the project can see, with a why per "
                               "result, a context pack and per-stage timings.")
    def post(self, request: Request, slug: str) -> Response:
        enforce(request, group="context_query")
        project = project_for_member(user=request.user, slug=slug)
        ser = s.QueryRequestSerializer(data=_body(request))
        ser.is_valid(raise_exception=True)
        result = run_query(user=request.user, project=project, spec=ser.spec())
        return Response(s.QueryResponseSerializer(result.as_dict()).data)


def _job_data(job: IngestJob) -> dict[str, Any]:
    """An ingest job as its documented shape (IngestJobSerializer reads the model's fields)."""
    return s.IngestJobSerializer(job).data


def allowed_source(*, user: User, source: str) -> Path:
    """Server-path ingest through the API: staff only, an absolute path under INGEST_ALLOWED_ROOTS, never VAR_DIR.

    Why so narrow: a relative path resolved against the server's working directory, and the old default root
    was the whole checkout, runtime state included, so any editor could index the server's own files. Teams
    bring content by push, upload or a source; the CLI (`manage.py ingest`) stays unrestricted for operators.
    """
    if not user.is_staff:
        raise Forbidden("Ingesting a server path is for staff; push documents or upload files instead.",
                        field="source", code="staff_only")
    roots = [Path(r).resolve() for r in settings.INGEST_ALLOWED_ROOTS]
    if not roots:
        raise BadInput("Server-path ingest is disabled: INGEST_ALLOWED_ROOTS is empty.", field="source")
    if not Path(source).is_absolute():
        raise BadInput("Must be an absolute path.", field="source")
    path = Path(source).resolve()
    var_dir = Path(settings.VAR_DIR).resolve()
    inside = any(path == r or r in path.parents for r in roots)
    if not inside or path == var_dir or var_dir in path.parents:
        raise BadInput("Source is outside the allowed ingest roots.", field="source")
    if not path.exists():
        raise BadInput("Source does not exist on the server.", field="source")
    return path


class IngestView(APIView):
    required_scope = "ingest"

    @extend_schema(operation_id="context_ingest", request=s.IngestRequestSerializer,
                   responses={202: s.IngestJobSerializer, 403: ErrorSerializer, **_ERRS}, tags=["context"])
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        authorize("ingest.path", user=request.user, project=project)
        ser = s.IngestRequestSerializer(data=_body(request))
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        source = allowed_source(user=request.user, source=data["source"])
        dataset, _ = Dataset.objects.get_or_create(project=project, name=data["dataset"],
                                                   defaults={"kind": data["kind"]})
        job = start_ingest(job=IngestJob(dataset=dataset, source=str(source), kind=data["kind"],
                                         options={"repo": data.get("repo") or ""}),
                           user=request.user)
        return Response(_job_data(job), status=202)


class IngestJobView(APIView):
    required_scope = "query"

    @extend_schema(operation_id="context_ingest_job", responses={200: s.IngestJobSerializer, **_ERRS},
                   tags=["context"])
    def get(self, request: Request, job_id: UUID) -> Response:
        jobs = IngestJob.objects.filter(pk=job_id, dataset__project__memberships__user=request.user)
        job = limit_to_key_projects(jobs, request.user, "dataset__project_id").first()
        if job is None:
            raise NotFound("Ingest job not found.")
        return Response(_job_data(job))


class IngestJobCancelView(APIView):
    required_scope = "ingest"

    @extend_schema(operation_id="context_ingest_job_cancel", request=s.IngestJobCancelSerializer,
                   responses={200: s.IngestJobCancelledSerializer, 409: ErrorSerializer, **_ERRS}, tags=["context"],
                   description="Cancel an ingest or sync job (editors, owners of its project). A queued job ends "
                               "`cancelled` at once; a running one is asked to stop (`cancel_requested`) and ends "
                               "`cancelled` at the next file, page or document, keeping what it wrote. 404 "
                               "`not_found` for a job you cannot see, 409 `job_finished` for one that has ended.")
    def post(self, request: Request, job_id: UUID) -> Response:
        ser = s.IngestJobCancelSerializer(data=request.data if request.data else {})
        ser.is_valid(raise_exception=True)
        job = cancel_job(user=request.user, job_id=job_id)
        return Response(s.IngestJobCancelledSerializer(job).data)


class FeedbackView(APIView):
    required_scope = "query"

    @extend_schema(operation_id="context_feedback", request=s.FeedbackRequestSerializer,
                   responses={201: s.FeedbackSerializer, **_ERRS}, tags=["context"])
    def post(self, request: Request, session_id: UUID) -> Response:
        ser = s.FeedbackRequestSerializer(data=_body(request))
        ser.is_valid(raise_exception=True)
        fb = record_feedback(user=request.user, session_id=session_id, **ser.validated_data)
        return Response(s.FeedbackSerializer(fb).data, status=201)
