"""Every tunable of seed 001 §9 in one place, overridable from Django settings.

Why settings-backed: ranking experiments and tests change a weight with
`settings.PEOPLE_SEARCH = {...}` instead of editing code. Read through `C()` at
call time so overrides (pytest's `settings` fixture) apply immediately.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from django.conf import settings


@dataclass(frozen=True)
class PeopleSearchConstants:
    OVERFETCH_CARDS: int = 50
    TOP_PEOPLE: int = 6
    MATCHED_CARDS_PER_PERSON: int = 3
    MIN_RESULTS: int = 15
    TOP_K_CARDS: int = 5

    WEIGHT_PARENT_BEST: float = 0.65
    WEIGHT_CHILD_BEST: float = 0.25
    WEIGHT_AVG_TOP3: float = 0.10

    LEXICAL_BONUS_MAX: float = 0.25
    SHOULD_BOOST: float = 0.02
    SHOULD_CAP: int = 10
    SHOULD_BONUS_MAX: float = 0.25

    MISSING_DATE_PENALTY: float = 0.12
    LOCATION_MISMATCH_PENALTY: float = 0.10

    FALLBACK_TIER_STRICT: int = 0
    FALLBACK_TIER_TIME_SOFT: int = 1
    FALLBACK_TIER_LOCATION_SOFT: int = 2
    FALLBACK_TIER_COMPANY_TEAM_SOFT: int = 3

    SEARCH_RESULT_EXPIRY_HOURS: int = 24
    SEARCH_COST: int = 1
    UNLOCK_COST: int = 1

    # normalisation (§4.2)
    MAX_MUST_COMPANIES: int = 3
    MAX_MUST_TEAMS: int = 3
    MAX_MUST_LIST: int = 3
    MIN_CONFIDENCE_FOR_SOFT_MUST: float = 0.5
    MAX_LIST_ITEMS: int = 12
    MAX_TOKEN_LEN: int = 80

    WHY_MAX_BULLETS: int = 6
    WHY_MAX_LINES_LLM: int = 3
    WHY_MAX_LINE_CHARS: int = 160

    HNSW_EF_SEARCH: int = 100


def C() -> PeopleSearchConstants:  # noqa: N802
    overrides = getattr(settings, "PEOPLE_SEARCH", None) or {}
    names = {f.name for f in fields(PeopleSearchConstants)}
    return replace(PeopleSearchConstants(), **{k: v for k, v in overrides.items() if k in names})


INTENTS = ("backend", "frontend", "fullstack", "mobile", "data", "ml", "devops", "security", "qa", "product",
           "design", "management", "sales", "marketing", "research", "embedded", "sre", "analytics")
EMPLOYMENT_TYPES = ("full_time", "part_time", "contract", "internship", "freelance")
SENIORITY_LEVELS = ("intern", "junior", "mid", "senior", "staff", "principal", "lead", "manager", "director", "vp",
                    "cxo")
