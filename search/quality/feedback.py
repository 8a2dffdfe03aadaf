"""User judgments on served results (the input of the daily MRR/nDCG metrics)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from config.errors import BadInput, NotFound
from projects.access import limit_to_key_projects
from search.models import Feedback, QuerySession, RerankResult

if TYPE_CHECKING:
    from uuid import UUID

    from accounts.models import User
    from search.models import Feedback


def record_feedback(*, user: User, session_id: UUID | str, chunk_id: int, relevance: int) -> Feedback:
    """Store (or update) one judgment. Only members of the session's project may judge, only served chunks."""
    session = limit_to_key_projects(QuerySession.objects.filter(pk=session_id, project__memberships__user=user),
                                    user).first()
    if session is None:
        raise NotFound("Query session not found.")
    if not RerankResult.objects.filter(session=session, chunk_id=chunk_id).exists():
        raise BadInput("This chunk was not a result of the session.", field="chunk_id")
    fb, _ = Feedback.objects.update_or_create(session=session, chunk_id=chunk_id,
                                              defaults={"relevance": relevance, "user": user})
    return fb
