"""24 h search sessions that gate profile views and unlocks."""
from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db.models import Avg, Count
from django.db.models.functions import TruncDay
from django.utils import timezone

from config.errors import ApiError, BadInput, NotFound
from people.constants import C
from people.models import Search, SearchResult

if TYPE_CHECKING:
    from uuid import UUID

    from accounts.models import User


class SearchExpired(ApiError):
    status_code = 410
    code = "search_expired"


def is_expired(search: Search, *, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    if search.expires_at is not None:
        return search.expires_at < now
    return search.created_at + timedelta(hours=C().SEARCH_RESULT_EXPIRY_HOURS) < now


def validate_search_session(*, user: User, search_id: UUID | str | None, person_id: UUID | None = None) -> Search:
    """The search must exist, be the caller's, be unexpired, and (if given) contain the person."""
    if not search_id:
        raise BadInput("search_id is required", field="search_id")
    try:
        search = Search.objects.filter(pk=search_id, searcher=user).first()
    except (ValidationError, ValueError):
        raise BadInput("search_id must be a UUID", field="search_id") from None
    if search is None:
        raise NotFound("Search not found.", field="search_id")
    if is_expired(search):
        raise SearchExpired("This search session has expired; run the search again.", field="search_id")
    if person_id is not None and not SearchResult.objects.filter(search=search, person_id=person_id).exists():
        raise NotFound("This person is not part of that search.", field="search_id", code="person_not_in_search")
    return search


def searches_per_day(*, since: datetime) -> dict[date, tuple[int, float | None]]:
    """People searches per day since `since`: (count, mean latency in ms, None while no search has one).

    The staff dashboard plots it next to the context and rules queries."""
    rows = (Search.objects.filter(created_at__gte=since).annotate(day=TruncDay("created_at"))
            .values("day").annotate(n=Count("pk"), ms=Avg("latency_ms")).order_by())
    return {r["day"].date(): (r["n"], None if r["ms"] is None else float(r["ms"])) for r in rows}
