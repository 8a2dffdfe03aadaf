"""Lexical bonus from Postgres FTS over parent and child search_document.

Why OR of plainto_tsquery per phrase (and not one plainto_tsquery of everything):
plainto ANDs every word, so a query with five phrases matched almost nobody;
each phrase stays an AND of its own words.
Why only candidate people: the bonus can only change the order of people that
retrieval found; ranking thousands of others costs time and changes nothing.
"""
from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError, connection, transaction

from people.constants import C

log = logging.getLogger(__name__)


def lexical_terms(parsed: dict[str, Any]) -> list[str]:
    terms = list(parsed.get("search_phrases") or []) + list(parsed["should"].get("keywords") or [])[:5]
    terms = [t for t in dict.fromkeys(t.strip() for t in terms) if t]
    if not terms:
        fallback = (parsed.get("query_cleaned") or parsed.get("query_original") or "")[:200].strip()
        terms = [fallback] if fallback else []
    return terms


def lexical_bonus(*, parsed: dict[str, Any], person_ids: list) -> dict[Any, float]:
    """person_id -> bonus in [0, LEXICAL_BONUS_MAX]; {} on any failure (the search goes on without it)."""
    terms = lexical_terms(parsed)
    if not terms or not person_ids:
        return {}
    tsq = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
    sql = f"""
        WITH q AS (SELECT ({tsq}) AS q),
        hits AS (
          SELECT c.person_id, ts_rank_cd(c.search_document, q.q) AS r
          FROM people_experiencecard c, q
          WHERE c.person_id = ANY(%s) AND c.visibility = 'public' AND c.search_document @@ q.q
          UNION ALL
          SELECT ch.person_id, ts_rank_cd(ch.search_document, q.q) AS r
          FROM people_experiencecardchild ch JOIN people_experiencecard c ON c.id = ch.parent_id, q
          WHERE ch.person_id = ANY(%s) AND c.visibility = 'public' AND ch.search_document @@ q.q)
        SELECT person_id, max(r) + 0.25 * (sum(r) - max(r)) FROM hits GROUP BY person_id"""
    try:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql, [*terms, list(person_ids), list(person_ids)])
            raw = {pid: float(score) for pid, score in cur.fetchall()}
    except DatabaseError as exc:
        log.warning("lexical bonus skipped: %s", exc)
        return {}
    top = max(raw.values(), default=0.0)
    if top <= 0:
        return {}
    cap = C().LEXICAL_BONUS_MAX
    return {pid: min(cap, max(0.0, cap * s / top)) for pid, s in raw.items()}
