"""Hand-built people for tests: explicit vectors (geometry we control) or real MiniLM vectors."""
from __future__ import annotations

import math
from datetime import date

import numpy as np

from people.models import ExperienceCard, ExperienceCardChild, Person, PersonProfile

DIM = 384


def unit(theta_deg: float, axis: int = 1) -> list[float]:
    """cos θ·e0 + sin θ·e_axis: cosine distance to e0 is 1 - cos θ."""
    v = np.zeros(DIM, dtype=np.float32)
    t = math.radians(theta_deg)
    v[0], v[axis] = math.cos(t), math.sin(t)
    return v.tolist()


E0 = unit(0)


def dist_to_theta(dist: float) -> float:
    return math.degrees(math.acos(1 - dist))


def make_person(name: str, *, cards=(), profile=None, email: str = "") -> Person:
    p = Person.objects.create(display_name=name, headline=f"{name} headline", email=email or f"{name.lower()}@x.in")
    PersonProfile.objects.create(person=p, **({"open_to_work": False, "open_to_contact": False} | (profile or {})))
    for c in cards:
        c = dict(c)
        children = c.pop("children", [])
        if "dist" in c:
            c["embedding"] = unit(dist_to_theta(c.pop("dist")))
        c.setdefault("embedding", E0)
        for k in ("start_date", "end_date"):
            if isinstance(c.get(k), str):
                c[k] = date.fromisoformat(c[k])
        card = ExperienceCard.objects.create(person=p, **c)
        for ch in children:
            ch = dict(ch)
            if "dist" in ch:
                ch["embedding"] = unit(dist_to_theta(ch.pop("dist")))
            ch.setdefault("embedding", E0)
            ExperienceCardChild.objects.create(parent=card, person=p, **ch)
    return p


def embed_all() -> None:
    """Real MiniLM vectors for every card (for API tests that embed the query for real)."""
    from people.retrieval.indexing import embed_cards

    embed_cards(parent_ids=list(ExperienceCard.objects.values_list("id", flat=True)),
                child_ids=list(ExperienceCardChild.objects.values_list("id", flat=True)))
