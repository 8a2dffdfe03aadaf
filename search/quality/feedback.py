"""User judgments on served results (the input of the daily MRR/nDCG metrics)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from config.errors import BadInput, Forbidden, NotFound
from projects.access import limit_to_key_projects
from search.models import Feedback, QuerySession, RerankResult

if TYPE_CHECKING:
    from uuid import UUID

    from accounts.models import User
    from search.models import Feedback


def record_feedback(*, user: User, session_id: UUID | str, chunk_id: int, relevance: int) -> Feedback:
    """Store (or update) one judgment, only of a chunk the session served, only by the account that ran it.

    Why only that account: feedback trains embedding adaptation and chooses the project's fusion, so another
    member (a viewer included) must not overwrite someone else's judgments. A session outside the caller's
    projects is 404 (its existence does not leak); another member's session is 403."""
    session = limit_to_key_projects(QuerySession.objects.filter(pk=session_id, project__memberships__user=user),
                                    user).first()
    if session is None:
        raise NotFound("Query session not found.")
    if session.user_id != user.pk:
        raise Forbidden("Only the account that ran this query may judge its results.", field="session_id",
                        code="not_session_owner")
    if not RerankResult.objects.filter(session=session, chunk_id=chunk_id).exists():
        raise BadInput("This chunk was not a result of the session.", field="chunk_id")
    fb, _ = Feedback.objects.update_or_create(session=session, chunk_id=chunk_id,
                                              defaults={"relevance": relevance, "user": user})
    return fb
