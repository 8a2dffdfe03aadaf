"""The directory's vocabulary (VocabTerm): every company, team, city, country, domain and skill its public cards
carry, with how many cards carry it.

Why counted in SQL: a GROUP BY over the cards is one pass inside Postgres, whatever the directory's size; Python
never reads the cards. Why a full rebuild after an import and a targeted refresh after a card change: an import
touches most values at once, while an admin edit touches a handful, whose counts are recomputed exactly (the old
values too, so a company nobody works at any more leaves the vocabulary).
Hidden cards do not count: the vocabulary is shown to searchers (what the parser understood), and a value only a
hidden card carries must not appear there.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, transaction

# kind -> SELECT producing one `norm` per public card (skills: one per short search phrase)
_SOURCES = {
    "company": "SELECT c.company_norm AS norm FROM people_experiencecard c WHERE c.visibility = 'public' {f}",
    "team": "SELECT c.team_norm AS norm FROM people_experiencecard c WHERE c.visibility = 'public' {f}",
    "city": "SELECT lower(c.city) AS norm FROM people_experiencecard c WHERE c.visibility = 'public' {f}",
    "country": "SELECT lower(c.country) AS norm FROM people_experiencecard c WHERE c.visibility = 'public' {f}",
    "domain": "SELECT c.domain AS norm FROM people_experiencecard c WHERE c.visibility = 'public' {f}",
    "skill": "SELECT lower(trim(p)) AS norm FROM people_experiencecard c, unnest(c.search_phrases) p "
             "WHERE c.visibility = 'public' AND length(trim(p)) BETWEEN 2 AND 40 "
             "AND array_length(regexp_split_to_array(trim(p), '\\s+'), 1) <= 3 {f}",
}
# the narrowing for a targeted refresh: an indexed column where there is one (company_norm, the phrases' GIN)
_NARROW = {
    "company": "AND c.company_norm = ANY(%s)",
    "team": "AND c.team_norm = ANY(%s)",
    "city": "AND lower(c.city) = ANY(%s)",
    "country": "AND lower(c.country) = ANY(%s)",
    "domain": "AND c.domain = ANY(%s)",
    "skill": "AND c.search_phrases && %s::varchar[]",
}
_CITY_COUNTRY = """
    SELECT DISTINCT ON (lower(c.city)) lower(c.city), lower(c.country)
    FROM people_experiencecard c
    WHERE c.visibility = 'public' AND c.city <> '' AND c.country <> '' {f}
    GROUP BY lower(c.city), lower(c.country) ORDER BY lower(c.city), count(*) DESC"""


def _counts(cur: Any, kind: str, norms: list[str] | None, raw: list[str] | None = None) -> dict[str, int]:
    narrow = "" if norms is None else _NARROW[kind]
    sql = f"SELECT norm, count(*) FROM ({_SOURCES[kind].format(f=narrow)}) s WHERE norm <> '' GROUP BY norm"
    params: list[Any] = []
    if norms is not None:
        params.append(list(raw or norms) if kind == "skill" else list(norms))
    cur.execute(sql, params)
    got = {n: int(c) for n, c in cur.fetchall()}
    return got if norms is None else {n: c for n, c in got.items() if n in set(norms)}


def _city_countries(cur: Any, cities: list[str] | None) -> dict[str, str]:
    narrow = "" if cities is None else "AND lower(c.city) = ANY(%s)"
    cur.execute(_CITY_COUNTRY.format(f=narrow), [] if cities is None else [list(cities)])
    return dict(cur.fetchall())


def _upsert(cur: Any, rows: list[tuple[str, str, int, str]]) -> None:
    if not rows:
        return
    values = ", ".join(["(%s, %s, %s, %s::jsonb, now())"] * len(rows))
    cur.execute(f"""INSERT INTO people_vocabterm (kind, norm, count, extra, updated_at) VALUES {values}
                    ON CONFLICT (kind, norm) DO UPDATE SET count = EXCLUDED.count, extra = EXCLUDED.extra,
                    updated_at = now()
                    WHERE people_vocabterm.count <> EXCLUDED.count OR people_vocabterm.extra <> EXCLUDED.extra""",
                [x for row in rows for x in row])


def _rows(kind: str, counts: Mapping[str, int], countries: Mapping[str, str]) -> list[tuple[str, str, int, str]]:
    return [(kind, norm[:200], n, json.dumps({"country": countries[norm]} if kind == "city" and norm in countries
                                             else {}))
            for norm, n in counts.items()]


def rebuild_vocabulary() -> int:
    """Recount every term from the public cards; terms no card carries any more are removed. Returns the count."""
    with transaction.atomic(), connection.cursor() as cur:
        countries = _city_countries(cur, None)
        seen: list[tuple[str, str]] = []
        for kind in _SOURCES:
            rows = _rows(kind, _counts(cur, kind, None), countries)
            for i in range(0, len(rows), 1000):
                _upsert(cur, rows[i:i + 1000])
            seen += [(kind, r[1]) for r in rows]
        cur.execute("CREATE TEMP TABLE _vocab_seen (kind varchar(20), norm varchar(200)) ON COMMIT DROP")
        if seen:
            with cur.copy("COPY _vocab_seen (kind, norm) FROM STDIN") as cp:
                for row in seen:
                    cp.write_row(row)
        cur.execute("DELETE FROM people_vocabterm t WHERE NOT EXISTS (SELECT 1 FROM _vocab_seen s "
                    "WHERE s.kind = t.kind AND s.norm = t.norm)")
        cur.execute("DROP TABLE _vocab_seen")
    return len(seen)


def card_terms(card: Any) -> dict[str, set[str]]:
    """The vocabulary values one card (a model instance or a dict of its fields) contributes."""
    get = card.get if isinstance(card, Mapping) else (lambda k, d=None: getattr(card, k, d))
    out: dict[str, set[str]] = {k: set() for k in _SOURCES}
    for kind, fieldname, lower in (("company", "company_norm", False), ("team", "team_norm", False),
                                   ("city", "city", True), ("country", "country", True),
                                   ("domain", "domain", False)):
        v = (get(fieldname) or "").strip()
        if v:
            out[kind].add(v.lower() if lower else v)
    out["skill"] = {p for p in (get("search_phrases") or []) if isinstance(p, str) and p.strip()}
    return out


def refresh_terms(*, changed: Iterable[Mapping[str, set[str]]]) -> None:
    """Recount exactly the given values (a saved card's old and new ones, a deleted card's): upsert those still
    carried, delete those no public card carries any more."""
    merged: dict[str, set[str]] = {k: set() for k in _SOURCES}
    for terms in changed:
        for kind, values in terms.items():
            merged[kind] |= set(values)
    if not any(merged.values()):
        return
    with transaction.atomic(), connection.cursor() as cur:
        cities = sorted(merged["city"])
        countries = _city_countries(cur, cities) if cities else {}
        for kind, values in merged.items():
            if not values:
                continue
            raw = sorted(values)
            norms = sorted({v.strip().lower() for v in values} if kind == "skill" else values)
            counts = _counts(cur, kind, norms, raw=raw + norms)
            _upsert(cur, _rows(kind, counts, countries))
            gone = [n for n in norms if n not in counts]
            if gone:
                cur.execute("DELETE FROM people_vocabterm WHERE kind = %s AND norm = ANY(%s)", [kind, gone])
