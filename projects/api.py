"""Member endpoints. Every one resolves the project with project_for_member, so non-members get 404.

The project resource itself (with its datasets' usage and its reranker) and its shares are served by search's
edge (search.edge.api.projects), which owns what they show."""
from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES, WRITE_ERRORS
from projects import membership
from projects.access import project_for_member
from projects.serializers import MemberCreateSerializer, MemberSerializer, MemberUpdateSerializer

if TYPE_CHECKING:
    from rest_framework.request import Request


class MemberListView(APIView):
    required_scope = "manage"

    @extend_schema(operation_id="members_list", responses={200: MemberSerializer(many=True), **ERROR_RESPONSES},
                   tags=["projects"], description="The project's members with their roles (any member may see).")
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        return Response(MemberSerializer(membership.members_of(user=request.user, project=project), many=True).data)

    @extend_schema(operation_id="members_create", request=MemberCreateSerializer,
                   responses={201: MemberSerializer, **WRITE_ERRORS}, tags=["projects"],
                   description="Add an existing account by email (owners). An email that cannot be added is 404 "
                               "`user_not_found`; a member already present is 409 `already_member`.")
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ser = MemberCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        enforce(request, group="members")
        added = membership.add_member(user=request.user, project=project, **ser.validated_data)
        return Response(MemberSerializer(added).data, status=201)


class MemberDetailView(APIView):
    required_scope = "manage"

    @extend_schema(operation_id="members_update", request=MemberUpdateSerializer,
                   responses={200: MemberSerializer, **WRITE_ERRORS}, tags=["projects"],
                   description="Change a member's role (owners). The last owner cannot be demoted: 409 "
                               "`last_owner`.")
    def patch(self, request: Request, slug: str, member_id: int) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ser = MemberUpdateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        changed = membership.change_role(user=request.user, project=project, membership_id=member_id,
                                         role=ser.validated_data["role"])
        return Response(MemberSerializer(changed).data)

    @extend_schema(operation_id="members_destroy", request=None,
                   responses={204: OpenApiResponse(description="Removed."), **WRITE_ERRORS}, tags=["projects"],
                   description="Remove a member (owners), or leave (your own membership). The last owner can do "
                               "neither: 409 `last_owner`.")
    def delete(self, request: Request, slug: str, member_id: int) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        membership.remove_member(user=request.user, project=project, membership_id=member_id)
        return Response(status=204)
