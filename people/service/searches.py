"""POST /api/search as one function (run_search) whose numbered steps, in order, are named functions below it.

Why one function with the money at the end: every step that can fail (parse,
embed, SQL) runs before the Search row and the debit, and the caller wraps the
whole thing in one transaction (credits.idempotency.run_idempotent), so a failed
request leaves no row and no charge, and a replay never charges twice.
Steps 1 and 21 (idempotency) are the caller's: run_idempotent reserves the key
before this runs and stores the response bytes in the same transaction.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import transaction
from django.utils import timezone

from config.errors import ApiError, DependencyDown
from credits.ledger import deduct, require_balance
from inference.encoders import embed_texts
from inference.llm import is_configured
from people.constants import C
from people.models import ExperienceCard, Person, PersonProfile, Search, SearchResult
from people.parsing.gazetteer import current as current_gazetteer
from people.parsing.normalize import apply_overrides, validate_and_normalize
from people.parsing.parser import parse_query
from people.parsing.semantic import enrich as enrich_semantic
from people.parsing.semantic import phrases_to_map
from people.retrieval.lexical import lexical_bonus
from people.retrieval.ranking import apply_tiebreaks, collapse_and_rank, similarity_percent
from people.retrieval.relaxation import constraints_met, unmet_constraints
from people.retrieval.relaxation import describe as describe_relaxation
from people.retrieval.tiers import relaxation_policy, retrieve_with_fallback, set_scan_mode
from people.service.sessions import validate_search_session
from people.service.why import deterministic_bullets, mark_refinement
from people.tasks import refine_why_matched_task

if TYPE_CHECKING:
    from uuid import UUID

    from accounts.models import User

log = logging.getLogger(__name__)


@contextmanager
def _stage(timings: dict[str, float] | None, name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + (time.perf_counter() - t0) * 1000


def embed_query_texts(texts: list[str]) -> np.ndarray:
    """The query's vectors, one row per text (the query text, then the role phrases people.parsing.semantic maps); any
    failure of the embedding provider is a 503 (and, because it runs before the debit, no charge)."""
    try:
        vecs = embed_texts(texts)
    except ApiError:
        raise
    except Exception as exc:
        raise DependencyDown("embeddings", f"embedding provider failed: {type(exc).__name__}") from exc
    if vecs is None or len(vecs) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    return np.asarray(vecs, dtype=np.float32)


@dataclass(frozen=True)
class SearchRequest:
    """One people search as asked: the text, and the searcher's overrides, which beat what the text says.

    Why one value: the API and the page validate it (SearchRequestSerializer) and run_search carries it whole to
    the parse (the overrides applied) and to the stored Search row (its `filters`), so the four overrides cannot
    drift apart on the way."""

    query: str
    open_to_work_only: bool | None = None
    preferred_locations: list[str] | None = None
    salary_min: int | None = None
    salary_max: int | None = None

    def overrides(self) -> dict[str, Any]:
        """The overrides as the Search row keeps them (`filters`)."""
        return {"open_to_work_only": self.open_to_work_only, "preferred_locations": self.preferred_locations or [],
                "salary_min": self.salary_min, "salary_max": self.salary_max}


def _create_search(*, user: User, asked: SearchRequest, parsed: dict, tier: int | None, started: float,
                   relaxation: dict[str, Any], refinement: str) -> Search:
    k = C()
    search = Search.objects.create(
        searcher=user, query_text=asked.query, parsed_constraints=parsed, filters=asked.overrides(),
        latency_ms=int((time.perf_counter() - started) * 1000),
        extra={"fallback_tier": tier, "relaxation": relaxation, "refinement": refinement},
        expires_at=timezone.now() + timedelta(hours=k.SEARCH_RESULT_EXPIRY_HOURS))
    deduct(user=user, amount=k.SEARCH_COST, reason="search", reference_type="search_id", reference_id=str(search.pk))
    return search


def card_response(card: ExperienceCard, *, children: list | None = None) -> dict[str, Any]:
    out = {
        "id": str(card.pk), "title": card.title, "summary": card.summary, "company_norm": card.company_norm,
        "team_norm": card.team_norm, "intent_primary": card.intent_primary, "domain": card.domain,
        "sub_domain": card.sub_domain, "employment_type": card.employment_type,
        "seniority_level": card.seniority_level, "city": card.city, "country": card.country,
        "location_text": card.location_text,
        "start_date": card.start_date.isoformat() if card.start_date else None,
        "end_date": card.end_date.isoformat() if card.end_date else None,
        "is_current": card.is_current, "search_phrases": list(card.search_phrases or []),
    }
    if children is not None:
        out["children"] = [{"id": str(c.pk), "title": c.title, "summary": c.summary, "child_type": c.child_type}
                           for c in children]
    return out


def _understand(asked: SearchRequest, *, timings: dict[str, float] | None) -> tuple[dict[str, Any], np.ndarray]:
    """Steps 3-5: the parse, then one embedding call for the query text and the role phrases no vocabulary entry
    has (people.parsing.semantic), then those phrases mapped by meaning, the normalisation and the request's overrides.
    Why the embedding sits between parse and normalisation: a query with unknown role words then costs one model
    call, not two."""
    query = asked.query
    with _stage(timings, "parse"):
        gazetteer = current_gazetteer()
        payload = parse_query(query, gazetteer=gazetteer)
        deterministic = payload.get("parser") == "deterministic"
        phrases = phrases_to_map(payload) if deterministic else []
    # the text the normaliser keeps as query_embedding_text, else the query
    qet = payload.get("query_embedding_text")
    text = (qet.strip() if isinstance(qet, str) else "") or query
    with _stage(timings, "embed"):
        vecs = embed_query_texts([text, *phrases]) if text.strip() else np.zeros((0, 0), dtype=np.float32)
    with _stage(timings, "parse"):
        if deterministic:
            payload = enrich_semantic(payload, gazetteer=gazetteer, vectors=vecs[1:] if phrases else None)
        parsed = validate_and_normalize(payload, query=query)
        parsed = apply_overrides(parsed, open_to_work_only=asked.open_to_work_only, salary_max=asked.salary_max,
                                 preferred_locations=asked.preferred_locations)
    return parsed, (vecs[0] if len(vecs) else np.zeros(0, dtype=np.float32))


@dataclass
class _Ranking:
    """What retrieval and ranking hand to the writing steps: the tier reached, the people in their final order
    with their rows, and what the tiers gave up, per search and per person."""

    tier: int
    ranked: list
    persons: dict[Any, Person]
    profiles: dict[Any, PersonProfile]
    relaxation: dict[str, Any]
    unmet: dict[Any, list]


def run_search(*, user: User, asked: SearchRequest, timings: dict[str, float] | None = None,
               exact_scan: bool = False) -> dict[str, Any]:
    """Run one paid people search, `asked`. Must run inside a transaction (the view's run_idempotent gives one)."""
    k = C()
    started = time.perf_counter()
    assert transaction.get_connection().in_atomic_block, "run_search must run inside a transaction"
    # 2. credit pre-check
    require_balance(user=user, amount=k.SEARCH_COST)
    # 3-5. parse, embed, map role words by meaning, normalise, overrides
    parsed, qvec = _understand(asked, timings=timings)
    understanding = {"parser": parsed.get("parser", "deterministic"), "understood": parsed.get("understood", []),
                     "unused_terms": parsed.get("unused_terms", [])}
    # 6. empty vector -> empty (charged) response
    if qvec.size == 0 or not np.isfinite(qvec).all() or float(np.linalg.norm(qvec)) == 0.0:
        relaxation = describe_relaxation(parsed=parsed, tier=None, people_per_tier={})
        with _stage(timings, "persist"):
            search = _create_search(user=user, asked=asked, parsed=parsed, tier=None, started=started,
                                    relaxation=relaxation, refinement="off")
        return {"search_id": str(search.pk), "parsed": understanding, "relaxation": relaxation,
                "refinement": "off", "people": []}
    # 7-14. retrieve with fallback tiers, lexical bonus, rank, load, tiebreak
    result = _retrieve_and_rank(parsed=parsed, qvec=qvec, timings=timings, exact_scan=exact_scan)
    refinement = "pending" if result.ranked and is_configured() else "off"
    with _stage(timings, "persist"):
        # 12 / 15. Search row + debit (an empty ranking is still charged)
        search = _create_search(user=user, asked=asked, parsed=parsed, tier=result.tier, started=started,
                                relaxation=result.relaxation, refinement=refinement)
        if not result.ranked:
            return {"search_id": str(search.pk), "parsed": understanding, "relaxation": result.relaxation,
                    "refinement": refinement, "people": []}
        # 16-18. SearchResult rows with deterministic why_matched
        whys = _write_results(search=search, result=result, parsed=parsed)
        # 19. the people as shown
        people_out = _people_out(result=result, whys=whys)
    # 17 (async). one batched LLM refinement after commit
    if refinement == "pending":
        _refine_after_commit(search_id=str(search.pk))
    # 20. response; the row's latency now covers results and why_matched too (the dashboard plots it)
    Search.objects.filter(pk=search.pk).update(latency_ms=int((time.perf_counter() - started) * 1000))
    return {"search_id": str(search.pk), "parsed": understanding, "relaxation": result.relaxation,
            "refinement": refinement, "people": people_out}


def _retrieve_and_rank(*, parsed: dict[str, Any], qvec: np.ndarray, timings: dict[str, float] | None,
                       exact_scan: bool) -> _Ranking:
    """Steps 7-14: candidates through the fallback tiers, the lexical bonus for the people they found, collapse to
    people and keep the top N, load their rows, tiebreak; then what the tiers gave up."""
    k = C()
    # 9. candidates with fallback tiers
    with _stage(timings, "tiers"):
        set_scan_mode(exact=exact_scan)
        found = retrieve_with_fallback(parsed=parsed, qvec=qvec)
    # 7. lexical bonus (for the people retrieval found)
    with _stage(timings, "lexical"):
        lex = lexical_bonus(parsed=parsed, person_ids=list(found.person_ids))
    # 10-11. collapse to people, top N
    with _stage(timings, "rank"):
        # a graded policy ranks by the asked-for constraints each person meets on one card (strict tier: all)
        met = (constraints_met(parsed=parsed, person_ids=list(found.person_ids))
               if found.tier > k.FALLBACK_TIER_STRICT and relaxation_policy().counts_met else {})
        ranked = collapse_and_rank(parents=found.parents, children=found.children, parsed=parsed, tier=found.tier,
                                   lexical=lex, met=met)[: k.TOP_PEOPLE]
        # 13. load people + profiles
        ids = [r.person_id for r in ranked]
        persons = {p.pk: p for p in Person.objects.filter(pk__in=ids)}
        profiles = {p.person_id: p for p in PersonProfile.objects.filter(person_id__in=ids)}
        for r in ranked:
            prof = profiles.get(r.person_id)
            r.has_salary_min = bool(prof and prof.work_preferred_salary_min)
        # 14. tiebreaks
        ranked = apply_tiebreaks([r for r in ranked if r.person_id in persons], parsed=parsed)
        # what the tiers gave up, per search and per person
        relaxation = describe_relaxation(parsed=parsed, tier=found.tier, people_per_tier=found.people_per_tier)
        unmet = unmet_constraints(parsed=parsed, tier=found.tier, person_ids=[r.person_id for r in ranked])
    return _Ranking(tier=found.tier, ranked=ranked, persons=persons, profiles=profiles, relaxation=relaxation,
                    unmet=unmet)


def _write_results(*, search: Search, result: _Ranking, parsed: dict[str, Any]) -> dict[Any, list]:
    """Steps 16-18: one SearchResult row per person shown, with its deterministic why_matched (returned by person)."""
    rows, whys = [], {}
    for rank, r in enumerate(result.ranked, start=1):
        whys[r.person_id] = deterministic_bullets(ranked=r, parsed=parsed, profile=result.profiles.get(r.person_id))
        rows.append(SearchResult(
            search=search, person_id=r.person_id, rank=rank, score=round(r.score, 6),
            extra={"matched_parent_ids": [str(c["id"]) for c in r.parents],
                   "matched_child_ids": [str(c["id"]) for c in r.children],
                   "why_matched": whys[r.person_id], "why_source": "deterministic", "score_parts": r.parts(),
                   "unmet": result.unmet.get(r.person_id, [])}))
    SearchResult.objects.bulk_create(rows)
    return whys


def _people_out(*, result: _Ranking, whys: dict[Any, list]) -> list[dict[str, Any]]:
    """Step 19: each person as the response shows them, with their matched cards (a person matched only through
    child cards shows the parents behind them)."""
    k = C()
    want = {c["id"] for r in result.ranked for c in r.parents}
    want |= {c["parent_id"] for r in result.ranked if not r.parents for c in r.children}
    cards = {c.pk: c for c in ExperienceCard.objects.filter(pk__in=list(want))}
    people_out = []
    for r in result.ranked:
        p, prof = result.persons[r.person_id], result.profiles.get(r.person_id)
        card_ids = [c["id"] for c in r.parents] or list(dict.fromkeys(c["parent_id"] for c in r.children))
        otw = bool(prof and prof.open_to_work)
        people_out.append({
            "id": str(p.pk), "name": p.display_name or None, "headline": p.headline or None,
            "bio": (prof.bio if prof else "") or None, "similarity_percent": similarity_percent(r.score),
            "why_matched": whys[r.person_id], "unmet": result.unmet.get(r.person_id, []), "open_to_work": otw,
            "open_to_contact": bool(prof and prof.open_to_contact),
            "work_preferred_locations": list(prof.work_preferred_locations or []) if otw else [],
            "work_preferred_salary_min": prof.work_preferred_salary_min if otw else None,
            "matched_cards": [card_response(cards[i]) for i in card_ids[: k.MATCHED_CARDS_PER_PERSON]
                              if i in cards],
        })
    return people_out


def _refine_after_commit(*, search_id: str) -> None:
    """Step 17, after commit: one batched LLM refinement of the why_matched bullets; if it cannot be queued the
    deterministic bullets stay and the search says the refinement failed."""

    def _enqueue() -> None:
        try:
            refine_why_matched_task.delay(search_id)
        except Exception as exc:  # noqa: BLE001 - deterministic bullets stay
            log.warning("could not enqueue why_matched refinement: %s", exc)

            mark_refinement(search_id=search_id, state="failed")

    transaction.on_commit(_enqueue)


def get_search(*, user: User, search_id: UUID | str) -> dict[str, Any]:
    """A past search with its (possibly LLM-refined) why_matched; session expiry applies."""
    search = validate_search_session(user=user, search_id=search_id)
    results = list(SearchResult.objects.filter(search=search).select_related("person", "person__profile"))
    people = []
    for r in results:
        prof = getattr(r.person, "profile", None)
        refined = r.extra.get("why_matched_refined") or []
        people.append({"id": str(r.person_id), "name": r.person.display_name, "headline": r.person.headline or None,
                       "rank": r.rank, "score": r.score, "similarity_percent": similarity_percent(r.score),
                       "why_matched": refined or r.extra.get("why_matched", []),
                       "why_matched_deterministic": r.extra.get("why_matched", []),
                       "why_matched_refined": refined,
                       "why_source": "llm" if refined else "deterministic",
                       "unmet": r.extra.get("unmet", []),
                       "open_to_work": bool(prof and prof.open_to_work),
                       "open_to_contact": bool(prof and prof.open_to_contact),
                       "matched_parent_ids": r.extra.get("matched_parent_ids", []),
                       "matched_child_ids": r.extra.get("matched_child_ids", [])})
    return {"search_id": str(search.pk), "query": search.query_text, "created_at": search.created_at.isoformat(),
            "expires_at": search.expires_at.isoformat(), "fallback_tier": search.extra.get("fallback_tier"),
            "relaxation": search.extra.get("relaxation") or describe_relaxation(
                parsed=search.parsed_constraints, tier=search.extra.get("fallback_tier"), people_per_tier={}),
            "refinement": search.extra.get("refinement", "off"),
            "parsed": {"parser": search.parsed_constraints.get("parser", "deterministic"),
                       "understood": search.parsed_constraints.get("understood", []),
                       "unused_terms": search.parsed_constraints.get("unused_terms", [])},
            "parsed_constraints": search.parsed_constraints, "people": people}
