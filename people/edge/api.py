"""People search API. Views parse, authorise, call one service, render."""
from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from config.schema import DEPENDENCY_ERRORS, ERROR_RESPONSES, IDEMPOTENT_ERRORS, SESSION_ERRORS, ErrorSerializer
from credits.idempotency import HEADER, idempotent
from people.edge.serializers import (
    DiscoverQuerySerializer,
    DiscoverSerializer,
    PastSearchSerializer,
    PersonProfileSerializer,
    ProfileQuerySerializer,
    PublicProfileSerializer,
    SearchRequestSerializer,
    SearchResponseSerializer,
    UnlockRequestSerializer,
    UnlockResponseSerializer,
)
from people.service import profiles, searches, unlocks

if TYPE_CHECKING:
    from uuid import UUID

    from rest_framework.request import Request

_IDEMPOTENCY = OpenApiParameter(HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
                                description="Retry safely: the same key and body replays the first response.")
_SESSION_ERRORS = {**ERROR_RESPONSES, **SESSION_ERRORS}


class SearchView(APIView):
    required_scope = "people"

    @extend_schema(operation_id="people_search", tags=["people"], request=SearchRequestSerializer,
                   parameters=[_IDEMPOTENCY],
                   responses={200: SearchResponseSerializer, **ERROR_RESPONSES, **IDEMPOTENT_ERRORS,
                              **DEPENDENCY_ERRORS},
                   description="Natural-language people search; costs 1 credit (an empty result is charged too).")
    @idempotent("POST /api/search")
    def post(self, request: Request) -> Response:
        enforce(request, group="search")
        ser = SearchRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        return Response(SearchResponseSerializer(searches.run_search(
            user=request.user, asked=searches.SearchRequest(**ser.validated_data))).data)


class SearchDetailView(APIView):
    required_scope = "people"

    @extend_schema(operation_id="people_search_retrieve", tags=["people"],
                   responses={200: PastSearchSerializer, **_SESSION_ERRORS})
    def get(self, request: Request, search_id: UUID) -> Response:
        return Response(PastSearchSerializer(searches.get_search(user=request.user, search_id=search_id)).data)


class PeopleListView(APIView):
    required_scope = "people"

    @extend_schema(operation_id="people_discover", tags=["people"], parameters=[DiscoverQuerySerializer],
                   responses={200: DiscoverSerializer, **ERROR_RESPONSES})
    def get(self, request: Request) -> Response:
        ser = DiscoverQuerySerializer(data=request.query_params)
        ser.is_valid(raise_exception=True)
        return Response(DiscoverSerializer(profiles.list_people_for_discover(**ser.validated_data)).data)


class PersonView(APIView):
    required_scope = "people"

    @extend_schema(operation_id="people_profile", tags=["people"], parameters=[ProfileQuerySerializer],
                   responses={200: PersonProfileSerializer, **_SESSION_ERRORS},
                   description="Full profile of a person from one of your searches (within its 24 h session).")
    def get(self, request: Request, person_id: UUID) -> Response:
        ser = ProfileQuerySerializer(data=request.query_params)
        ser.is_valid(raise_exception=True)
        profile = profiles.get_person_profile(user=request.user, person_id=person_id,
                                              search_id=ser.validated_data["search_id"])
        return Response(PersonProfileSerializer(profile).data)


class PublicProfileView(APIView):
    required_scope = "people"

    @extend_schema(operation_id="people_public_profile", tags=["people"],
                   responses={200: PublicProfileSerializer, **ERROR_RESPONSES})
    def get(self, request: Request, person_id: UUID) -> Response:
        return Response(PublicProfileSerializer(profiles.get_public_profile(person_id=person_id)).data)


class UnlockContactView(APIView):
    required_scope = "people"

    @extend_schema(operation_id="people_unlock_contact", tags=["people"], request=UnlockRequestSerializer,
                   parameters=[_IDEMPOTENCY],
                   responses={200: UnlockResponseSerializer, 403: ErrorSerializer, **_SESSION_ERRORS,
                              **IDEMPOTENT_ERRORS, **DEPENDENCY_ERRORS},
                   description="Unlock a person's contact (1 credit per person and search; a repeat is free). "
                               "403 when the person is not open to work or contact.")
    @idempotent(lambda request, person_id: f"POST /people/{person_id}/unlock-contact")
    def post(self, request: Request, person_id: UUID) -> Response:
        enforce(request, group="unlock")
        ser = UnlockRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        return Response(UnlockResponseSerializer(unlocks.unlock_contact(
            user=request.user, person_id=person_id, search_id=ser.validated_data["search_id"])).data)
