"""Every tunable of people search in one place, overridable from Django settings.

Why settings-backed: ranking experiments and tests change a weight with
`settings.PEOPLE_SEARCH = {...}` instead of editing code. Read through `C()` at
call time so overrides (pytest's `settings` fixture) apply immediately. A key that
names no field is an error (ImproperlyConfigured), at start-up and at every read.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


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
    # Tiers 1-3 relax time, location and company/team in the order the relaxation policy names
    # (people/retrieval/tiers.py POLICIES; "seed" is the design's first order and ranking). The default is the policy the people
    # benchmark supports (people/evaluation/benchmark.py, README "People search relevance").
    RELAXATION_POLICY: str = "graded"
    # An optional last tier that also relaxes intent, domain, sub-domain and seniority. Off by default
    # (a query for "ML engineers" that finds only designers is worse than an honest empty answer);
    # when on, the response still says what was dropped.
    FALLBACK_TIER_INTENT_SOFT: int = 4
    RELAX_INTENT_TIER: bool = False

    SEARCH_RESULT_EXPIRY_HOURS: int = 24
    SEARCH_COST: int = 1
    UNLOCK_COST: int = 1

    # normalisation (people/parsing/normalize.py)
    MAX_MUST_COMPANIES: int = 3
    MAX_MUST_TEAMS: int = 3
    MAX_MUST_LIST: int = 3
    MIN_CONFIDENCE_FOR_SOFT_MUST: float = 0.5
    MAX_LIST_ITEMS: int = 12
    MAX_TOKEN_LEN: int = 80

    WHY_MAX_BULLETS: int = 6
    # the vocabulary's fuzzy match (people/parsing/gazetteer.py): words shorter than this are never corrected ("ola" must
    # stay "ola"); up to this many edits (OSA: a swap of two neighbours is one) for words of 8+ characters, one below
    FUZZY_MIN_LEN: int = 5
    FUZZY_MAX_EDITS_LONG: int = 2
    WHY_MAX_LINES_LLM: int = 3
    WHY_MAX_LINE_CHARS: int = 160

    HNSW_EF_SEARCH: int = 100
    # a tier's walk that comes back with less than half of what it asked for while the filter admits more cards is read
    # again exactly, up to this many admitted cards (people/retrieval/tiers.py nearest_rows); past it the walk's answer
    # is kept. At 5,000 the exact read costs up to about 100 ms on 2 cores (83 ms for 3,933 cards at 10,000 people)
    EXACT_REREAD_MAX_CARDS: int = 5000

    # role words the vocabulary lacks ("data scientist", "growth marketer"): mapped to the nearest intents, titles
    # and skills of the directory's vocabulary by embedding similarity (people/parsing/semantic.py)
    SEMANTIC_ROLES: bool = True
    # cosine similarity a phrase must reach to map to a term: at 0.5 "web" (from "web ui developers") became the
    # mobile role (0.51) and cost the benchmark's unseen-role queries; the clear cases score 0.68-0.88
    SEMANTIC_MIN_SCORE: float = 0.6
    SEMANTIC_INTENT_MARGIN: float = 0.05  # a second intent is kept when within this of the best
    SEMANTIC_MAX_TERMS: int = 3          # skills/titles kept per phrase


# the relaxation presets by name (people/retrieval/tiers.py POLICIES defines each; a test keeps the two lists equal), named
# here so a misspelled policy stops start-up like any other bad key
RELAXATION_POLICIES = ("seed", "seed_keep", "company_before_location", "location_first", "graded_soft", "graded",
                       "graded_company_before_location")


def validate_overrides(*, overrides: Mapping[str, Any]) -> None:
    """Refuse a misspelled or mistyped override: silently ignoring `MIN_RESULT` would run with the default while
    the operator believes the change is live. Raises ImproperlyConfigured naming the bad key and the valid ones."""
    if not isinstance(overrides, Mapping):
        raise ImproperlyConfigured(f"PEOPLE_SEARCH must be a mapping of names to values, not {type(overrides).__name__}")
    types = {f.name: f.type for f in fields(PeopleSearchConstants)}
    unknown = sorted(str(k) for k in overrides if k not in types)
    if unknown:
        raise ImproperlyConfigured(f"PEOPLE_SEARCH has unknown key(s) {', '.join(unknown)}; valid keys: "
                                   f"{', '.join(sorted(types))}")
    for key, value in overrides.items():
        # annotations are strings (from __future__ import annotations): "int" or "float"; bool is not a number here
        if types[key] == "str":
            if not isinstance(value, str):
                raise ImproperlyConfigured(f"PEOPLE_SEARCH[{key!r}] must be a string, not {value!r}")
            if key == "RELAXATION_POLICY" and value not in RELAXATION_POLICIES:
                raise ImproperlyConfigured(f"PEOPLE_SEARCH['RELAXATION_POLICY'] is {value!r}; known: "
                                           f"{', '.join(RELAXATION_POLICIES)}")
            continue
        if types[key] == "bool":
            if not isinstance(value, bool):
                raise ImproperlyConfigured(f"PEOPLE_SEARCH[{key!r}] must be true or false, not {value!r}")
            continue
        ok = (isinstance(value, int) if types[key] == "int" else isinstance(value, (int, float)))
        if not ok or isinstance(value, bool):
            raise ImproperlyConfigured(f"PEOPLE_SEARCH[{key!r}] must be {types[key]}, not {value!r}")


def C() -> PeopleSearchConstants:  # noqa: N802
    """The defaults with settings.PEOPLE_SEARCH applied, read at call time so a test's override applies at once.

    Validated on every call (a set difference): the app's ready() catches a bad key at start-up, this catches one
    that a later override (a test, a shell) brings in."""
    overrides = settings.PEOPLE_SEARCH or {}
    validate_overrides(overrides=overrides)
    return replace(PeopleSearchConstants(), **overrides)


INTENTS = ("backend", "frontend", "fullstack", "mobile", "data", "ml", "devops", "security", "qa", "product",
           "design", "management", "sales", "marketing", "research", "embedded", "sre", "analytics")
EMPLOYMENT_TYPES = ("full_time", "part_time", "contract", "internship", "freelance")
SENIORITY_LEVELS = ("intern", "junior", "mid", "senior", "staff", "principal", "lead", "manager", "director", "vp",
                    "cxo")
