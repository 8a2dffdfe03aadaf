"""A tiny credit-consuming endpoint wired through @idempotent, for the tests only."""
import time

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import urlpatterns as base_patterns
from credits.idempotency import idempotent
from credits.ledger import deduct

WORK_SECONDS = {"value": 0.0}


class ChargeView(APIView):
    @idempotent("test-charge")
    def post(self, request):
        time.sleep(WORK_SECONDS["value"])  # keep the reservation in progress while duplicates arrive
        entry = deduct(user=request.user, amount=int(request.data.get("amount", 1)), reason="test-charge",
                       reference_type="test", reference_id=str(request.data.get("ref", "")))
        return Response({"entry": entry.pk, "balance": entry.balance_after, "at": time.time()}, status=201)


urlpatterns = [path("api/test/charge", ChargeView.as_view())] + list(base_patterns)
