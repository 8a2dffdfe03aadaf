"""Contact unlocks: 1 credit per (searcher, person, search), the repeat is free.

Why the unique constraint and not only an exists() check: two concurrent unlocks
without an Idempotency-Key must still produce one row and one charge.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from config.errors import Forbidden
from credits.ledger import deduct, get_balance, require_balance
from people.constants import C
from people.models import UnlockContact
from people.service.profiles import _person, contact_of
from people.service.sessions import validate_search_session

if TYPE_CHECKING:
    from uuid import UUID

    from accounts.models import User


def unlock_contact(*, user: User, person_id: UUID | str, search_id: UUID | str | None) -> dict[str, Any]:
    person = _person(person_id)
    search = validate_search_session(user=user, search_id=search_id, person_id=person.pk)
    prof = getattr(person, "profile", None)
    if not (prof and (prof.open_to_work or prof.open_to_contact)):
        raise Forbidden("This person is not open to work or contact.", code="contact_not_open")
    if UnlockContact.objects.filter(searcher=user, target_person=person, search=search).exists():
        return {"unlocked": True, "charged": 0, "person_id": str(person.pk), "search_id": str(search.pk),
                "contact": contact_of(person), "balance": get_balance(user=user)}
    cost = C().UNLOCK_COST
    require_balance(user=user, amount=cost)
    try:
        with transaction.atomic():
            unlock = UnlockContact.objects.create(searcher=user, target_person=person, search=search)
            deduct(user=user, amount=cost, reason="unlock_contact", reference_type="unlock_contact",
                   reference_id=str(unlock.pk))
        charged = cost
    except IntegrityError:  # a concurrent unlock won; this one is the free repeat
        charged = 0
    return {"unlocked": True, "charged": charged, "person_id": str(person.pk), "search_id": str(search.pk),
            "contact": contact_of(person), "balance": get_balance(user=user)}
