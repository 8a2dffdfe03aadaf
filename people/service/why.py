"""why_matched: deterministic bullets now, an optional batched LLM refinement later.

Why two stages: the paid response must never wait on (or fail because of) an
LLM; the refinement is written onto the SearchResult rows by one Celery task
and GET /api/searches/{id} (and the page, which polls it) shows it beside the
deterministic bullets, which are kept: the refined ones are marked as such.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from inference.llm import LLMError, chat_json, is_configured
from people.constants import C
from people.models import ExperienceCard, ExperienceCardChild, Search, SearchResult

if TYPE_CHECKING:
    from people.models import PersonProfile, Search, SearchResult
    from people.retrieval.ranking import RankedPerson

log = logging.getLogger(__name__)

PROMPT_WHY_MATCHED = (
    "You explain why each person matches a recruiter's search. For every person, write at most 3 short, "
    "factual reasons grounded only in the evidence given (no invented facts). Answer JSON only: "
    '{"people": [{"id": "<person id>", "why_matched": ["...", "..."]}]}'
)


def sanitize(lines: Any, *, max_lines: int | None = None) -> list[str]:
    """Strings only, one line each, compacted, deduplicated (case-insensitive), length-bounded."""
    k = C()
    max_lines = max_lines or k.WHY_MAX_LINES_LLM
    if isinstance(lines, str):
        lines = [lines]
    if not isinstance(lines, list):
        return []
    out, seen = [], set()
    for line in lines:
        if not isinstance(line, str):
            continue
        s = re.sub(r"\s+", " ", line).strip().lstrip("-•*0123456789.) ").strip()
        if not s:
            continue
        if len(s) > k.WHY_MAX_LINE_CHARS:
            s = s[: k.WHY_MAX_LINE_CHARS - 1].rstrip() + "…"
        key = s.lower()
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
        if len(out) >= max_lines:
            break
    return out


def _period(card: dict[str, Any]) -> str:
    s, e = card.get("start_date"), card.get("end_date")
    if not s and not e:
        return ""
    a = str(s.year) if s else "?"
    b = "present" if card.get("is_current") or not e else str(e.year)
    return f" ({a}–{b})"


def deterministic_bullets(*, ranked: RankedPerson, parsed: dict[str, Any], profile: PersonProfile | None) -> list[str]:
    """Up to WHY_MAX_BULLETS (6 by default) reasons grounded in the matched cards and the constraints."""
    must = parsed["must"]
    bullets: list[str] = []
    cards = ranked.parents or ranked.children
    best = cards[0] if cards else None
    if best is not None:
        role = best.get("title") or "experience"
        where = f" at {best['company_norm'].title()}" if best.get("company_norm") else ""
        bullets.append(f"{role}{where}{_period(best)}")
    comp = [c for c in must.get("company_norm") or []
            if any(card.get("company_norm") == c for card in ranked.parents + ranked.children)]
    if comp:
        bullets.append("Worked at " + ", ".join(c.title() for c in comp))
    if must.get("city"):
        if any((card.get("city") or "").lower() == must["city"] for card in ranked.parents + ranked.children):
            bullets.append(f"Experience in {must['city'].title()}")
        elif profile is not None and (profile.current_city or "").lower() == must["city"]:
            bullets.append(f"Based in {must['city'].title()}")
    if ranked.should_hits:
        bullets.append("Mentions " + ", ".join(ranked.should_hits[:4]))
    if profile is not None and profile.open_to_work and must.get("open_to_work_only"):
        bullets.append("Open to work")
    if (profile is not None and must.get("offer_salary_inr_per_year") and profile.work_preferred_salary_min
            and profile.work_preferred_salary_min <= must["offer_salary_inr_per_year"]):
        bullets.append(f"Expects {profile.work_preferred_salary_min / 100_000:.0f} LPA, within budget")
    if ranked.lexical > 0:
        bullets.append("Profile text matches the query terms")
    return sanitize(bullets, max_lines=C().WHY_MAX_BULLETS)


def evidence_payload(*, search: Search, results: Iterable[SearchResult]) -> dict[str, Any]:
    people = []
    for r in results:
        ids = r.extra.get("matched_parent_ids", [])
        cids = r.extra.get("matched_child_ids", [])
        cards = list(ExperienceCard.objects.filter(pk__in=ids).values(
            "title", "company_norm", "team_norm", "city", "start_date", "end_date", "summary"))
        kids = list(ExperienceCardChild.objects.filter(pk__in=cids).values("title", "summary"))
        people.append({"id": str(r.person_id), "name": r.person.display_name, "cards": cards, "evidence": kids})
    return {"query": search.query_text, "people": people}


def mark_refinement(*, search_id: str, state: str) -> None:
    """Record the refinement's state on the search (pending, done, failed) for the detail endpoint and the page."""
    search = Search.objects.filter(pk=search_id).first()
    if search is not None:
        search.extra = {**search.extra, "refinement": state}
        search.save(update_fields=["extra"])


def refine_with_llm(*, search_id: str) -> int:
    """One batched LLM call for all results of a search; returns how many rows got refined reasons."""
    search = Search.objects.filter(pk=search_id).first()
    if search is None:
        return 0
    if not is_configured():  # a worker without the LLM settings: say so rather than leave the page waiting
        mark_refinement(search_id=search_id, state="failed")
        return 0
    results = list(SearchResult.objects.filter(search=search).select_related("person"))
    if not results:
        return 0
    payload = evidence_payload(search=search, results=results)
    n = 0
    try:
        reply = chat_json(system=PROMPT_WHY_MATCHED, user=json.dumps(payload, default=str))
    except LLMError as exc:
        log.info("why_matched refinement failed for %s: %s", search_id, exc)
        reply = {}
    items = reply.get("people") if isinstance(reply, dict) else None
    by_id = {str(i.get("id")): i.get("why_matched") for i in items if isinstance(i, dict)} \
        if isinstance(items, list) else {}
    for r in results:
        lines = sanitize(by_id.get(str(r.person_id)))
        if lines:  # the deterministic bullets stay in why_matched; the refined ones sit beside them
            r.extra = {**r.extra, "why_matched_refined": lines, "why_source": "llm"}
            r.save(update_fields=["extra"])
            n += 1
    mark_refinement(search_id=search_id, state="done" if n else "failed")
    return n
