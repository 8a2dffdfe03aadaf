from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.fields import parse_int
from config.schema import ERROR_RESPONSES
from credits.ledger import get_balance, recent_entries
from credits.serializers import CreditsSerializer

MAX_LIMIT = 200


class CreditsView(APIView):
    required_scope = None

    @extend_schema(operation_id="credits", tags=["account"],
                   parameters=[OpenApiParameter("limit", OpenApiTypes.INT, description=f"1..{MAX_LIMIT}, default 50")],
                   responses={200: CreditsSerializer, **ERROR_RESPONSES})
    def get(self, request):  # noqa: ANN001, ANN201
        limit = parse_int(request.query_params.get("limit", "50"), field="limit", lo=1, hi=MAX_LIMIT)
        data = {"balance": get_balance(user=request.user), "entries": recent_entries(user=request.user, limit=limit)}
        return Response(CreditsSerializer(data).data)
