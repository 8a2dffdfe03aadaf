"""The project resource (its datasets' usage, its reranker) and its shares: the endpoints under /api/projects that
show search's rows. Memberships are projects' (projects.api); both resolve the project with project_for_member, so
non-members get 404.

Why here: what these answers hold (datasets, shares, document and chunk counts, the reranker) is search's, and
projects does not import search (docs/architecture.md); the paths and operation ids are the ones they always had.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.schema import ERROR_RESPONSES, WRITE_ERRORS
from projects import membership, quotas
from projects.access import project_for_member
from projects.models import Membership
from projects.serializers import ProjectCreateSerializer
from projects.sharing import projects_of
from search.edge.project_serializers import (
    ProjectDetailSerializer,
    ProjectSerializer,
    ProjectUpdateSerializer,
    ShareCreateSerializer,
    ShareSerializer,
)
from search.engine.access import accessible_dataset_ids
from search.engine.project_ranking import reranker_of, set_reranker
from search.engine.reranker_store import model_path
from search.ingest import sharing

if TYPE_CHECKING:
    from rest_framework.request import Request

    from projects.models import Project


class ProjectListView(APIView):
    required_scope = {"GET": "query", "POST": "manage"}

    @extend_schema(operation_id="projects_list", responses={200: ProjectSerializer(many=True), **ERROR_RESPONSES},
                   tags=["projects"])
    def get(self, request: Request) -> Response:
        rows = [_project_row(p["project"], p["role"]) for p in projects_of(user=request.user)]
        return Response(ProjectSerializer(rows, many=True).data)

    @extend_schema(operation_id="projects_create", request=ProjectCreateSerializer,
                   responses={201: ProjectSerializer, **WRITE_ERRORS}, tags=["projects"],
                   description="Create a project; you become its owner. The slug is derived from the name when "
                               "absent. A slug one of your projects has is 409 `project_exists`; one only other "
                               "accounts' projects have gets a random suffix (the answer's `slug` is the one you "
                               "got). 'global' or a slug a URL cannot carry is 400. Past your account's project "
                               "limit it is 409 `account_limit` (field `projects`).")
    def post(self, request: Request) -> Response:
        ser = ProjectCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        project = membership.create_project(user=request.user, name=ser.validated_data["name"],
                                            slug=ser.validated_data.get("slug") or None)
        return Response(ProjectSerializer(_project_row(project, "owner")).data, status=201)


class ProjectDetailView(APIView):
    required_scope = {"GET": "query", "PATCH": "manage", "DELETE": "manage"}

    @extend_schema(operation_id="projects_retrieve", responses={200: ProjectDetailSerializer, **ERROR_RESPONSES},
                   tags=["projects"])
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        members = Membership.objects.filter(project=project).select_related("user").order_by("user__email")
        role = next((m.role for m in members if m.user_id == request.user.pk), None)
        data = {"slug": project.slug, "name": project.name, "role": role, "created_at": project.created_at,
                "reranker": reranker_of(project),
                "members": [{"email": m.user.email, "role": m.role} for m in members],
                "dataset_count": len(accessible_dataset_ids(project)), **quotas.report(project)}
        return Response(ProjectDetailSerializer(data).data)

    @extend_schema(operation_id="projects_update", request=ProjectUpdateSerializer,
                   responses={200: ProjectSerializer, **WRITE_ERRORS}, tags=["projects"],
                   description="Rename the project or set its reranker (owners). The slug never changes.")
    def patch(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ser = ProjectUpdateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        reranker = ser.validated_data.get("reranker")
        if reranker:
            model_path(reranker)  # a name not trained here is a 400 on `reranker`
        with transaction.atomic():  # both or neither
            project = membership.update_project(user=request.user, project=project,
                                                name=ser.validated_data.get("name"))
            if reranker is not None:
                set_reranker(user=request.user, project=project, name=reranker)
        return Response(ProjectSerializer(_project_row(project, "owner")).data)

    @extend_schema(operation_id="projects_destroy", request=None,
                   responses={204: OpenApiResponse(description="Deleted, with all its content."), **WRITE_ERRORS},
                   tags=["projects"],
                   description="Delete the project with its datasets, documents and chunks (owners). Its datasets "
                               "shared into other projects disappear from them. The index deletes are queued in "
                               "the same transaction.")
    def delete(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        membership.delete_project(user=request.user, project=project)
        return Response(status=204)


class ShareListView(APIView):
    required_scope = {"GET": "query", "POST": "manage"}

    @extend_schema(operation_id="shares_list", responses={200: ShareSerializer(many=True), **ERROR_RESPONSES},
                   tags=["projects"], description="Datasets shared into this project, revoked ones included.")
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        return Response(ShareSerializer(sharing.incoming_shares(project=project), many=True).data)

    @extend_schema(operation_id="shares_create", request=ShareCreateSerializer,
                   responses={201: ShareSerializer, **WRITE_ERRORS}, tags=["projects"],
                   description="Share a dataset into this project. The caller must own the dataset's project.")
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ser = ShareCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        share = sharing.grant_share(user=request.user, dataset_id=ser.validated_data["dataset_id"],
                                    to_project=project)
        return Response(ShareSerializer(share).data, status=201)


class ShareDetailView(APIView):
    required_scope = "manage"

    @extend_schema(operation_id="shares_revoke", responses={200: ShareSerializer, **WRITE_ERRORS},
                   tags=["projects"], description="Revoke a share (kept for history): one into this project, or of one "
                               "of its datasets into another. Owners of either project may.")
    def delete(self, request: Request, slug: str, share_id: int) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        share = sharing.revoke_share(user=request.user, share_id=share_id, project=project)
        return Response(ShareSerializer(share).data)


def _project_row(project: Project, role: str) -> dict[str, Any]:
    return {"slug": project.slug, "name": project.name, "role": role, "created_at": project.created_at,
            "reranker": reranker_of(project)}
