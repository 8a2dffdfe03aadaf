"""Profile reads: session-gated profile, discover list, public profile."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, Prefetch

from config.errors import BadInput, NotFound
from people.models import ExperienceCard, ExperienceCardChild, Person, UnlockContact
from people.service.searches import card_response
from people.service.sessions import validate_search_session

if TYPE_CHECKING:
    from uuid import UUID

    from accounts.models import User


def _person(person_id: UUID | str) -> Person:
    try:
        p = Person.objects.select_related("profile").filter(pk=person_id).first()
    except (ValidationError, ValueError):
        raise BadInput("person id must be a UUID", field="person_id") from None
    if p is None:
        raise NotFound("Person not found.")
    return p


def card_families(person: Person) -> list[dict[str, Any]]:
    cards = (ExperienceCard.objects.filter(person=person, visibility=ExperienceCard.Visibility.PUBLIC)
             .prefetch_related(Prefetch("children", queryset=ExperienceCardChild.objects.order_by("created_at")))
             .order_by("-is_current", "-start_date"))
    return [card_response(c, children=list(c.children.all())) for c in cards]


def contact_of(person: Person) -> dict[str, str]:
    prof = getattr(person, "profile", None)
    return {"email": (prof.contact_email if prof else "") or person.email,
            "phone": (prof.contact_phone if prof else "") or person.phone,
            "linkedin_url": person.linkedin_url}


def get_person_profile(*, user: User, person_id: UUID | str, search_id: UUID | str | None) -> dict[str, Any]:
    person = _person(person_id)
    search = validate_search_session(user=user, search_id=search_id, person_id=person.pk)
    prof = getattr(person, "profile", None)
    is_open = bool(prof and (prof.open_to_work or prof.open_to_contact))
    unlocked = UnlockContact.objects.filter(searcher=user, target_person=person, search=search).exists()
    families = card_families(person)
    otw = bool(prof and prof.open_to_work)
    return {
        "id": str(person.pk), "display_name": person.display_name, "headline": person.headline or None,
        "bio": (prof.bio if prof else "") or None, "current_city": (prof.current_city if prof else "") or None,
        "open_to_work": otw, "open_to_contact": bool(prof and prof.open_to_contact),
        "work_preferred_locations": list(prof.work_preferred_locations or []) if otw else [],
        "work_preferred_salary_min": prof.work_preferred_salary_min if otw else None,
        "contact_unlocked": unlocked, "contact": contact_of(person) if (is_open and unlocked) else None,
        "experience_cards": [{k: v for k, v in f.items() if k != "children"} for f in families],
        "card_families": families,
    }


def list_people_for_discover(*, limit: int = 20, offset: int = 0) -> dict[str, Any]:
    visible = ExperienceCard.objects.filter(person=OuterRef("pk"), visibility=ExperienceCard.Visibility.PUBLIC)
    qs = (Person.objects.annotate(has_card=Exists(visible)).filter(has_card=True)
          .select_related("profile").order_by("display_name", "id"))
    total = qs.count()
    people = list(qs[offset: offset + limit])
    summaries: dict = {}
    for pid, summary in (ExperienceCard.objects.filter(person__in=people, visibility="public").exclude(summary="")
                         .order_by("person_id", "-start_date").values_list("person_id", "summary")):
        lst = summaries.setdefault(pid, [])
        if len(lst) < 5:
            lst.append(summary)
    return {"count": total, "limit": limit, "offset": offset, "results": [
        {"id": str(p.pk), "display_name": p.display_name,
         "current_location": (getattr(p, "profile", None) and p.profile.current_city) or None,
         "summaries": summaries.get(p.pk, [])} for p in people]}


def get_public_profile(*, person_id: UUID | str) -> dict[str, Any]:
    person = _person(person_id)
    prof = getattr(person, "profile", None)
    return {"id": str(person.pk), "display_name": person.display_name, "bio": (prof.bio if prof else "") or None,
            "card_families": card_families(person)}
