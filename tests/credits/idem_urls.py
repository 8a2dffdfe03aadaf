"""A tiny credit-consuming endpoint wired through @idempotent, for the tests only."""
import os
import time
from pathlib import Path

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from console.urls import urlpatterns as base_patterns
from credits.idempotency import idempotent
from credits.ledger import deduct

WORK_SECONDS = {"value": 0.0}
GATE_ENV = "IDEM_TEST_GATE"


def hold_at_gate() -> None:
    """Stall and kill tests: with IDEM_TEST_GATE=<dir> and <dir>/hold present, the work announces itself (writes its
    pid to <dir>/entered) while it holds the reservation and its uncommitted charge, then waits until the hold file
    is removed (or the process is killed). Read from the environment so that a gunicorn worker obeys it too."""
    gate = os.environ.get(GATE_ENV)
    if not gate or not Path(gate, "hold").exists():
        return
    tmp = Path(gate, f"entered.{os.getpid()}")
    tmp.write_text(str(os.getpid()))
    tmp.replace(Path(gate, "entered"))
    deadline = time.monotonic() + 60  # never hang a test run for good
    while Path(gate, "hold").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


class ChargeView(APIView):
    @idempotent("test-charge")
    def post(self, request):
        time.sleep(WORK_SECONDS["value"])  # keep the reservation in progress while duplicates arrive
        entry = deduct(user=request.user, amount=int(request.data.get("amount", 1)), reason="test-charge",
                       reference_type="test", reference_id=str(request.data.get("ref", "")))
        hold_at_gate()
        return Response({"entry": entry.pk, "balance": entry.balance_after, "at": time.time()}, status=201)


urlpatterns = [path("api/test/charge", ChargeView.as_view())] + list(base_patterns)
