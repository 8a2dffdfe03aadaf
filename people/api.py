"""People search API. Views parse, authorise, call one service, render."""
from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView

from config.ratelimits import enforce
from credits.idempotency import HEADER, request_fingerprint, run_idempotent
from people import profiles, service, unlocks
from people.serializers import (DiscoverQuerySerializer, ProfileQuerySerializer, SearchRequestSerializer,
                                UnlockRequestSerializer)


class SearchView(APIView):
    def post(self, request):  # noqa: ANN001, ANN201
        raw = request.body  # read before DRF parses, so the fingerprint sees the exact bytes
        enforce(request, group="search")
        ser = SearchRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        endpoint = "POST /api/search"
        return run_idempotent(
            user=request.user, key=request.headers.get(HEADER), endpoint=endpoint,
            request_hash=request_fingerprint(method="POST", path=endpoint, body=raw),
            work=lambda: Response(service.run_search(user=request.user, **ser.validated_data)))


class SearchDetailView(APIView):
    def get(self, request, search_id):  # noqa: ANN001, ANN201
        return Response(service.get_search(user=request.user, search_id=search_id))


class PeopleListView(APIView):
    def get(self, request):  # noqa: ANN001, ANN201
        ser = DiscoverQuerySerializer(data=request.query_params)
        ser.is_valid(raise_exception=True)
        return Response(profiles.list_people_for_discover(**ser.validated_data))


class PersonView(APIView):
    def get(self, request, person_id):  # noqa: ANN001, ANN201
        ser = ProfileQuerySerializer(data=request.query_params)
        ser.is_valid(raise_exception=True)
        return Response(profiles.get_person_profile(user=request.user, person_id=person_id,
                                                    search_id=ser.validated_data["search_id"]))


class PublicProfileView(APIView):
    def get(self, request, person_id):  # noqa: ANN001, ANN201
        return Response(profiles.get_public_profile(person_id=person_id))


class UnlockContactView(APIView):
    def post(self, request, person_id):  # noqa: ANN001, ANN201
        raw = request.body
        enforce(request, group="unlock")
        ser = UnlockRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        endpoint = f"POST /people/{person_id}/unlock-contact"
        return run_idempotent(
            user=request.user, key=request.headers.get(HEADER), endpoint=endpoint,
            request_hash=request_fingerprint(method="POST", path=endpoint, body=raw),
            work=lambda: Response(unlocks.unlock_contact(user=request.user, person_id=person_id,
                                                         search_id=ser.validated_data["search_id"])))
