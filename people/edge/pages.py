"""Server-rendered people search, profile (through a search session), unlock and discover pages.

They call the same services as the API, through the same idempotency keys: each
rendered form carries a fresh key, so a double submit or a browser re-POST
replays the first response instead of charging twice.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods
from rest_framework.response import Response

from config.errors import ApiError, BadInput
from config.fields import parse_int
from config.ratelimits import enforce
from credits.idempotency import request_fingerprint, run_idempotent
from credits.ledger import get_balance
from people.constants import C
from people.edge.serializers import SearchRequestSerializer
from people.service import profiles, searches, unlocks

MESSAGES = {
    "insufficient_credits": "You are out of credits. Ask staff to grant more, then try again.",
    "contact_not_open": "This person is not open to work or contact, so their contact cannot be unlocked.",
    "rate_limited": "Too many searches in a short time. Wait a minute and try again.",
    "search_expired": "This search session has expired (24 h). Run the search again to open profiles.",
}


def _error(exc: ApiError) -> dict[str, Any]:
    return {"code": exc.code, "status": exc.status_code, "detail": MESSAGES.get(exc.code, exc.detail),
            "field": exc.field}


def _idempotent_json(request: HttpRequest, *, endpoint: str, payload: dict[str, Any],
                     work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    key = request.POST.get("idempotency_key") or None
    fp = request_fingerprint(method="POST", path=endpoint, body=json.dumps(payload, sort_keys=True).encode())
    resp = run_idempotent(user=request.user, key=key, endpoint=endpoint, request_hash=fp,
                          work=lambda: Response(work()))
    return json.loads(resp.content)


def _salary(raw: str) -> int | None:
    if not str(raw).strip():
        return None
    try:
        return parse_int(raw, field="salary_max", lo=0, hi=10**10)
    except ApiError as exc:
        exc.detail = "Salary must be a whole number of INR per year (digits 0-9)."
        raise


def _form_from(data: Any) -> dict[str, Any]:
    return {"query": data.get("query", ""), "open_to_work_only": data.get("open_to_work_only", ""),
            "salary_max": data.get("salary_max", ""), "preferred_locations": data.get("preferred_locations", "")}


@login_required
@require_http_methods(["GET", "POST"])
def people_search(request: HttpRequest) -> HttpResponse:
    ctx: dict[str, Any] = {"form": _form_from(request.POST if request.method == "POST" else request.GET),
                           "result": None, "error": None, "idempotency_key": str(uuid.uuid4())}
    status = 200
    try:
        if request.method == "POST":
            form = ctx["form"]
            payload = {"query": form["query"],
                       "open_to_work_only": {"yes": True, "no": False}.get(form["open_to_work_only"]),
                       "salary_max": _salary(form["salary_max"]),
                       "preferred_locations": [x.strip() for x in form["preferred_locations"].split(",") if x.strip()]}
            ser = SearchRequestSerializer(data=payload)
            if not ser.is_valid():
                field, errors = next(iter(ser.errors.items()))
                raise BadInput(str(errors[0]), field=field)
            enforce(request, group="search")
            ctx["result"] = _idempotent_json(request, endpoint="POST /api/search", payload=payload,
                                             work=lambda: searches.run_search(
                                                 user=request.user, asked=searches.SearchRequest(**ser.validated_data)))
        elif request.GET.get("search_id"):
            ctx["result"] = searches.get_search(user=request.user, search_id=request.GET["search_id"])
    except ApiError as exc:
        ctx["error"] = _error(exc)
        status = exc.status_code
    ctx["balance"] = get_balance(user=request.user)
    return render(request, "pages/people_search.html", ctx, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def person_profile(request: HttpRequest, person_id: uuid.UUID) -> HttpResponse:
    """GET shows the profile inside a search session; POST unlocks the contact (charged once per search)."""
    search_id = request.POST.get("search_id") if request.method == "POST" else request.GET.get("search_id", "")
    ctx: dict[str, Any] = {"profile": None, "error": None, "search_id": search_id, "unlock": None,
                           "unlock_cost": C().UNLOCK_COST, "idempotency_key": str(uuid.uuid4())}
    status = 200
    try:
        if request.method == "POST":
            enforce(request, group="unlock")
            endpoint = f"POST /people/{person_id}/unlock-contact"
            ctx["unlock"] = _idempotent_json(
                request, endpoint=endpoint, payload={"search_id": search_id},
                work=lambda: unlocks.unlock_contact(user=request.user, person_id=person_id, search_id=search_id))
        ctx["profile"] = profiles.get_person_profile(user=request.user, person_id=person_id, search_id=search_id)
    except ApiError as exc:
        ctx["error"] = _error(exc)
        status = exc.status_code
        if request.method == "POST" and exc.code in {"insufficient_credits", "contact_not_open", "rate_limited"}:
            try:
                ctx["profile"] = profiles.get_person_profile(user=request.user, person_id=person_id,
                                                             search_id=search_id)
            except ApiError:
                pass
    ctx["balance"] = get_balance(user=request.user)
    return render(request, "pages/person_profile.html", ctx, status=status)


@login_required
@require_http_methods(["GET"])
def discover(request: HttpRequest) -> HttpResponse:
    try:
        offset = parse_int(request.GET.get("offset", "0"), field="offset", lo=0, hi=10**6)
    except ApiError as exc:
        return render(request, "pages/discover.html", {"error": _error(exc), "data": None}, status=400)
    data = profiles.list_people_for_discover(limit=20, offset=offset)
    return render(request, "pages/discover.html", {"data": data, "next_offset": offset + 20,
                                                   "prev_offset": max(0, offset - 20), "offset": offset})
