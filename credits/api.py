from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.schema import ERROR_RESPONSES
from credits.ledger import get_balance, recent_entries
from credits.serializers import CreditsQuerySerializer, CreditsSerializer

if TYPE_CHECKING:
    from rest_framework.request import Request


class CreditsView(APIView):
    required_scope = None

    @extend_schema(operation_id="credits", tags=["account"],
                   parameters=[CreditsQuerySerializer],
                   responses={200: CreditsSerializer, **ERROR_RESPONSES})
    def get(self, request: Request) -> Response:
        ser = CreditsQuerySerializer(data=request.query_params)
        ser.is_valid(raise_exception=True)
        data = {"balance": get_balance(user=request.user),
                "entries": recent_entries(user=request.user, limit=ser.validated_data["limit"])}
        return Response(CreditsSerializer(data).data)
