"""Project endpoints. Every one resolves the project with project_for_member, so non-members get 404."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.schema import ERROR_RESPONSES, ErrorSerializer
from projects import sharing
from projects.access import accessible_dataset_ids, project_for_member
from projects.models import Membership
from projects.serializers import (DatasetCreateSerializer, DatasetSerializer, ProjectDetailSerializer,
                                  ProjectSerializer, ShareCreateSerializer, ShareSerializer)

_WRITE_ERRORS = {**ERROR_RESPONSES, 403: ErrorSerializer, 409: ErrorSerializer}


class ProjectListView(APIView):
    required_scope = {"GET": "query", "POST": "manage"}

    @extend_schema(operation_id="projects_list", responses={200: ProjectSerializer(many=True), **ERROR_RESPONSES},
                   tags=["projects"])
    def get(self, request):  # noqa: ANN001, ANN201
        rows = [{"slug": p["project"].slug, "name": p["project"].name, "role": p["role"],
                 "created_at": p["project"].created_at} for p in sharing.projects_of(user=request.user)]
        return Response(ProjectSerializer(rows, many=True).data)


class ProjectDetailView(APIView):
    required_scope = {"GET": "query", "PATCH": "manage", "DELETE": "manage"}

    @extend_schema(operation_id="projects_retrieve", responses={200: ProjectDetailSerializer, **ERROR_RESPONSES},
                   tags=["projects"])
    def get(self, request, slug: str):  # noqa: ANN001, ANN201
        project = project_for_member(user=request.user, slug=slug)
        members = Membership.objects.filter(project=project).select_related("user").order_by("user__email")
        role = next((m.role for m in members if m.user_id == request.user.pk), None)
        data = {"slug": project.slug, "name": project.name, "role": role, "created_at": project.created_at,
                "members": [{"email": m.user.email, "role": m.role} for m in members],
                "dataset_count": len(accessible_dataset_ids(project))}
        return Response(ProjectDetailSerializer(data).data)


class DatasetListView(APIView):
    required_scope = {"GET": "query", "POST": "manage"}

    @extend_schema(operation_id="datasets_list", responses={200: DatasetSerializer(many=True), **ERROR_RESPONSES},
                   tags=["projects"], description="Every dataset the project can search: own, global and shared.")
    def get(self, request, slug: str):  # noqa: ANN001, ANN201
        project = project_for_member(user=request.user, slug=slug)
        rows = sharing.visible_datasets(project=project)
        mine = {p["project"].pk for p in sharing.projects_of(user=request.user)}
        data = [dict(DatasetSerializer(r["dataset"]).data, access=r["access"],
                     **({"project": None} if r["dataset"].project_id not in mine and r["access"] == "global" else {}))
                for r in rows]
        return Response(data)

    @extend_schema(operation_id="datasets_create", request=DatasetCreateSerializer,
                   responses={201: DatasetSerializer, **_WRITE_ERRORS}, tags=["projects"])
    def post(self, request, slug: str):  # noqa: ANN001, ANN201
        project = project_for_member(user=request.user, slug=slug)
        ser = DatasetCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        ds = sharing.create_dataset(user=request.user, project=project, **ser.validated_data)
        return Response(dict(DatasetSerializer(ds).data, access="own"), status=201)


class ShareListView(APIView):
    required_scope = {"GET": "query", "POST": "manage"}

    @extend_schema(operation_id="shares_list", responses={200: ShareSerializer(many=True), **ERROR_RESPONSES},
                   tags=["projects"], description="Datasets shared into this project, revoked ones included.")
    def get(self, request, slug: str):  # noqa: ANN001, ANN201
        project = project_for_member(user=request.user, slug=slug)
        return Response(ShareSerializer(sharing.incoming_shares(project=project), many=True).data)

    @extend_schema(operation_id="shares_create", request=ShareCreateSerializer,
                   responses={201: ShareSerializer, **_WRITE_ERRORS}, tags=["projects"],
                   description="Share a dataset into this project. The caller must own the dataset's project.")
    def post(self, request, slug: str):  # noqa: ANN001, ANN201
        project = project_for_member(user=request.user, slug=slug)
        ser = ShareCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        share = sharing.grant_share(user=request.user, dataset_id=ser.validated_data["dataset_id"],
                                    to_project=project)
        return Response(ShareSerializer(share).data, status=201)


class ShareDetailView(APIView):
    required_scope = "manage"

    @extend_schema(operation_id="shares_revoke", responses={200: ShareSerializer, **_WRITE_ERRORS},
                   tags=["projects"], description="Revoke a share (kept for history).")
    def delete(self, request, slug: str, share_id: int):  # noqa: ANN001, ANN201
        project = project_for_member(user=request.user, slug=slug)
        share = sharing.revoke_share(user=request.user, share_id=share_id, project=project)
        return Response(ShareSerializer(share).data)
