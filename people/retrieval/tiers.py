"""Candidate retrieval with fallback tiers.

Why HNSW with iterative scan: the tier filters are selective (one company, one
city); a plain filtered HNSW scan stops after ef_search rows and returns too
few. `hnsw.iterative_scan = relaxed_order` keeps scanning, and the outer
ORDER BY restores exact order among what it found. That scan is bounded too, and
dead index entries (a re-embedding, a rolled-back import) or a poorly linked graph
can spend the bound, so a tier's read that comes back with less than half of what
it asked for, while its filter admits more, is read again exactly (nearest_rows).
Children come in two steps: their own ANN scan finds
people through their evidence alone (child-only matches, no full scan), then a
window over every candidate person (row_number per person) takes each one's best
MATCHED_CARDS_PER_PERSON children exactly. A single global top-N of children
misses a person's best evidence once other people's children crowd it out.
Why B-tree indexes on the filter columns (people/models.py): an
iterative HNSW scan visits about LIMIT / selectivity tuples, so without them
"QA engineers in Pune" (one card in ~100) walked thousands of graph nodes, 70-90
ms per tier at 10k people and growing with the directory. With them the planner
picks a bitmap scan plus an exact sort of the few matching cards for a
selective tier and keeps the HNSW walk for a loose one; counting first and
choosing the plan by hand was measured too, and was slower on every query
(bench/bench_people.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from people.constants import C
from people.retrieval.indexing import vector_literal

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class TierPolicy:
    tier: int
    apply_time: bool
    apply_location: bool
    apply_company_team: bool
    apply_intent: bool = True


RELAXABLE = ("time", "location", "company")


@dataclass(frozen=True)
class RelaxationPolicy:
    """How a search that finds too few people gives way, and how what it gave up still counts.

    Why named presets (PEOPLE_SEARCH["RELAXATION_POLICY"]): the seed's order (time, then location, then
    company/team, each dropped for good) is one policy among several; the people benchmark
    (people/evaluation/benchmark.py) compares them on graded gold, and a preset keeps each one runnable by name.
    - `order`: which relaxable constraint gives way first (tier 1), second (tier 2), third (tier 3).
    - `keep_stricter`: people found by a stricter tier stay candidates at the looser one (the seed keeps only the
      last tier's nearest cards, so a person who met more constraints can fall out of the candidates).
    - `met_weight`: a score bonus per asked-for card constraint met on one card (0: relaxed constraints do not
      count beyond the seed's time and location penalties).
    - `met_first`: people are ordered by the constraints they meet on one card first, the blended score second.
    """

    name: str
    order: tuple[str, ...] = RELAXABLE
    keep_stricter: bool = False
    met_weight: float = 0.0
    met_first: bool = False
    about: str = ""

    @property
    def counts_met(self) -> bool:
        return self.met_first or self.met_weight > 0


POLICIES: dict[str, RelaxationPolicy] = {p.name: p for p in (
    RelaxationPolicy("seed", about="the design's first policy: time, location, company/team dropped in turn; last tier's candidates"),
    RelaxationPolicy("seed_keep", keep_stricter=True, about="seed order; stricter tiers' people stay candidates"),
    RelaxationPolicy("company_before_location", order=("time", "company", "location"),
                     about="company/team gives way before location"),
    RelaxationPolicy("location_first", order=("location", "time", "company"),
                     about="location gives way first"),
    RelaxationPolicy("graded_soft", keep_stricter=True, met_weight=0.08,
                     about="seed order, candidates kept, +0.08 per constraint met on one card"),
    RelaxationPolicy("graded", keep_stricter=True, met_first=True,
                     about="seed order, candidates kept, ranked by constraints met on one card first"),
    RelaxationPolicy("graded_company_before_location", order=("time", "company", "location"), keep_stricter=True,
                     met_first=True, about="graded, company/team giving way before location"),
)}


def relaxation_policy() -> RelaxationPolicy:
    """The configured preset (PEOPLE_SEARCH["RELAXATION_POLICY"], checked against POLICIES at every read)."""
    name = C().RELAXATION_POLICY
    if name not in POLICIES:
        raise ImproperlyConfigured(f"PEOPLE_SEARCH['RELAXATION_POLICY'] is {name!r}; known: {', '.join(POLICIES)}")
    return POLICIES[name]


def tier_of(kind: str) -> int:
    """The tier at which `kind` (time, location, company, intent) is first relaxed under the configured policy."""
    k = C()
    if kind == "intent":
        return k.FALLBACK_TIER_INTENT_SOFT
    return k.FALLBACK_TIER_STRICT + 1 + relaxation_policy().order.index(kind)


def policy_for(tier: int) -> TierPolicy:
    return TierPolicy(
        tier=tier,
        apply_time=tier < tier_of("time"),
        apply_location=tier < tier_of("location"),
        apply_company_team=tier < tier_of("company"),
        apply_intent=tier < tier_of("intent"),
    )


INTENT_KEYS = ("intent_primary", "domain", "sub_domain", "seniority_level")


def last_tier() -> int:
    """The last relaxable tier, or the intent tier when RELAX_INTENT_TIER is on."""
    k = C()
    return k.FALLBACK_TIER_INTENT_SOFT if k.RELAX_INTENT_TIER else k.FALLBACK_TIER_STRICT + len(RELAXABLE)


def has_time(must: dict) -> bool:
    return bool(must.get("time_start") and must.get("time_end"))


def has_location(must: dict) -> bool:
    return bool(must.get("city") or must.get("country") or must.get("location_text"))


def has_company_team(must: dict) -> bool:
    return bool(must.get("company_norm") or must.get("team_norm"))


def has_intent(must: dict) -> bool:
    return any(must.get(key) for key in INTENT_KEYS)


def relaxes_anything(tier: int, must: dict) -> bool:
    """Whether `tier` lifts a filter this query has (a tier that lifts nothing returns the same rows)."""
    return {tier_of("time"): has_time(must), tier_of("location"): has_location(must),
            tier_of("company"): has_company_team(must), tier_of("intent"): has_intent(must)}.get(tier, True)


def card_filter_sql(parsed: dict[str, Any], policy: TierPolicy, alias: str = "c") -> tuple[str, list, bool]:
    """WHERE fragments over parent card `alias` (+ profile `p`); returns (sql, params, needs_profile_join)."""
    must, exclude = parsed["must"], parsed["exclude"]
    where: list[str] = [f"{alias}.visibility = 'public'"]
    params: list[Any] = []
    for key in (INTENT_KEYS if policy.apply_intent else ()) + ("employment_type",):
        if must.get(key):
            where.append(f"{alias}.{key} = ANY(%s)")
            params.append(list(must[key]))
    if must.get("is_current") is not None:
        where.append(f"{alias}.is_current = %s")
        params.append(bool(must["is_current"]))
    if policy.apply_company_team:
        if must.get("company_norm"):
            where.append(f"{alias}.company_norm = ANY(%s)")
            params.append(list(must["company_norm"]))
        if must.get("team_norm"):
            where.append(f"{alias}.team_norm = ANY(%s)")
            params.append(list(must["team_norm"]))
    if policy.apply_location:
        if must.get("city"):
            where.append(f"lower({alias}.city) = %s")
            params.append(must["city"])
        if must.get("country"):
            where.append(f"lower({alias}.country) = %s")
            params.append(must["country"])
        if must.get("location_text"):
            where.append(f"{alias}.location_text ILIKE %s")
            params.append("%" + must["location_text"].replace("%", r"\%").replace("_", r"\_") + "%")
    if policy.apply_time and has_time(must):
        where.append(f"({alias}.start_date IS NOT NULL OR {alias}.end_date IS NOT NULL)")
        where.append(f"({alias}.start_date IS NULL OR {alias}.start_date <= %s::date)")
        where.append(f"({alias}.end_date IS NULL OR {alias}.end_date >= %s::date)")
        params += [must["time_end"], must["time_start"]]
    # excludes: never relaxed
    if exclude.get("company_norm"):
        where.append(f"NOT ({alias}.company_norm = ANY(%s))")
        params.append(list(exclude["company_norm"]))
    if exclude.get("keywords"):
        where.append(f"NOT ({alias}.search_phrases && %s::varchar[])")
        params.append(list(exclude["keywords"]))
    needs_profile = bool(must.get("open_to_work_only") or must.get("offer_salary_inr_per_year"))
    if needs_profile:
        if must.get("open_to_work_only"):
            where.append("p.open_to_work = true")
            if parsed.get("preferred_locations"):
                where.append("p.work_preferred_locations && %s::varchar[]")
                params.append(list(parsed["preferred_locations"]))
        if must.get("offer_salary_inr_per_year"):
            where.append("(p.work_preferred_salary_min IS NULL OR p.work_preferred_salary_min <= %s)")
            params.append(int(must["offer_salary_inr_per_year"]))
    return " AND ".join(where), params, needs_profile


CARD_COLS = ("id", "person_id", "dist", "title", "summary", "search_phrases", "company_norm", "team_norm", "city",
             "country", "location_text", "start_date", "end_date", "is_current")


@dataclass
class TierResult:
    tier: int
    parents: list[dict] = field(default_factory=list)
    children: list[dict] = field(default_factory=list)
    people_per_tier: dict[int, int] = field(default_factory=dict)  # tiers that ran -> people they found

    @property
    def person_ids(self) -> set:
        return {r["person_id"] for r in self.parents} | {r["person_id"] for r in self.children}


def set_scan_mode(*, exact: bool = False) -> None:
    """Per transaction: iterative HNSW scans (or an exact scan, for the benchmark's ratio)."""
    with connection.cursor() as cur:
        if exact:
            cur.execute("SET LOCAL enable_indexscan = off")
        else:
            cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cur.execute(f"SET LOCAL hnsw.ef_search = {int(C().HNSW_EF_SEARCH)}")


@dataclass(frozen=True)
class Nearest:
    """A filtered nearest-card read: the CTE's select list (its distance column `dist` takes the query vector),
    the FROM and WHERE it reads (`source`), the distance it orders by (the vector again), and the columns kept."""

    select: str
    source: str
    order: str
    outer: str


def nearest_rows(*, cur: Any, read: Nearest, vec: str, params: list[Any], limit: int) -> list[tuple]:
    """The `limit` cards nearest `vec` that `read.source` admits (`params`: its WHERE's), read again exactly when
    the approximate walk came back with less than half of them while the filter admits more.

    Why: the HNSW walk is bounded (hnsw.max_scan_tuples, its memory, and the part of the graph it can reach), and
    the index keeps an entry for every dead row version until VACUUM. After a re-embedding or a rolled-back
    import the entries nearest the query can all be dead; in a directory of templated cards many vectors are
    equal and the graph around them is poorly linked. Either way the walk can return a few cards or none while
    the filter admits thousands: measured on the 10,000-person demo directory, "site reliability engineer" walked
    408 cards and found none of the 3,933 it admits. An answer under half of `limit` is checked with a bounded
    count of the cards the filter admits; when more exist, up to EXACT_REREAD_MAX_CARDS, the rows are read again
    ordered by the distance plus zero, an expression no index serves, so the planner sorts exactly what the
    filter finds. A walk that found half or more keeps its answer (it reached the query's neighbourhood; what it
    missed lies past what it found), as does a short answer that holds every card the filter admits (an exact
    plan's), and one whose filter admits more than the bound (sorting them costs more than a search may spend)."""
    sql = (f"WITH x AS MATERIALIZED (SELECT {read.select} {read.source} ORDER BY {{order}} LIMIT %s) "
           f"SELECT {read.outer} FROM x ORDER BY x.dist")
    cur.execute(sql.replace("{order}", read.order), [vec, *params, vec, limit])
    rows = cur.fetchall()
    if 2 * len(rows) >= limit:
        return rows
    bound = C().EXACT_REREAD_MAX_CARDS
    cur.execute(f"SELECT count(*) FROM (SELECT 1 {read.source} LIMIT %s) n", [*params, bound + 1])
    admitted = cur.fetchone()[0]
    if admitted <= len(rows) or admitted > bound:
        return rows
    cur.execute(sql.replace("{order}", f"({read.order}) + 0"), [vec, *params, vec, limit])
    return cur.fetchall()


def fetch_tier(*, parsed: dict[str, Any], qvec: np.ndarray, tier: int) -> TierResult:
    k = C()
    policy = policy_for(tier)
    where, params, needs_profile = card_filter_sql(parsed, policy)
    join = "JOIN people_personprofile p ON p.person_id = c.person_id" if needs_profile else ""
    vec = vector_literal(qvec)
    cols = ", ".join(f"x.{c}" for c in CARD_COLS)
    parents_read = Nearest(
        select="c.id, c.person_id, c.embedding <=> %s::vector AS dist, c.title, c.summary, c.search_phrases, "
               "c.company_norm, c.team_norm, c.city, c.country, c.location_text, c.start_date, c.end_date, "
               "c.is_current",
        source=f"FROM people_experiencecard c {join} WHERE c.embedding IS NOT NULL AND {where}",
        order="c.embedding <=> %s::vector", outer=cols)
    children_read = Nearest(
        select="ch.person_id, ch.embedding <=> %s::vector AS dist",
        source=(f"FROM people_experiencecardchild ch JOIN people_experiencecard c ON c.id = ch.parent_id {join} "
                f"WHERE ch.embedding IS NOT NULL AND {where}"),
        order="ch.embedding <=> %s::vector", outer="x.person_id")
    # the per-person window: every candidate's best children, exactly
    window_sql = f"""
        SELECT {cols}, x.parent_id FROM (
          SELECT ch.id, ch.person_id, ch.embedding <=> %s::vector AS dist, ch.title, ch.summary, ch.search_phrases,
                 c.company_norm, c.team_norm, c.city, c.country, c.location_text, c.start_date, c.end_date,
                 c.is_current, ch.parent_id,
                 row_number() OVER (PARTITION BY ch.person_id ORDER BY ch.embedding <=> %s::vector, ch.id) AS rn
          FROM people_experiencecardchild ch JOIN people_experiencecard c ON c.id = ch.parent_id {join}
          WHERE ch.embedding IS NOT NULL AND ch.person_id = ANY(%s) AND {where}) x
        WHERE x.rn <= %s ORDER BY x.dist"""
    out = TierResult(tier=tier)
    with connection.cursor() as cur:
        parents = nearest_rows(cur=cur, read=parents_read, vec=vec, params=params, limit=k.OVERFETCH_CARDS)
        out.parents = [dict(zip(CARD_COLS, row, strict=True)) for row in parents]
        children = nearest_rows(cur=cur, read=children_read, vec=vec, params=params, limit=k.OVERFETCH_CARDS * 2)
        candidates = list(dict.fromkeys([r["person_id"] for r in out.parents] + [r[0] for r in children]))
        if candidates:
            cur.execute(window_sql, [vec, vec, candidates, *params, k.MATCHED_CARDS_PER_PERSON])
            out.children = [dict(zip(CARD_COLS + ("parent_id",), row, strict=True)) for row in cur.fetchall()]
    return out


def _merge(kept: TierResult, found: TierResult) -> TierResult:
    """`found` plus the cards of `kept` it lacks (each card once: a card counted twice would inflate avg_top3)."""
    out = TierResult(tier=found.tier, parents=list(found.parents), children=list(found.children))
    for mine, theirs in ((out.parents, kept.parents), (out.children, kept.children)):
        seen = {c["id"] for c in mine}
        mine.extend(c for c in theirs if c["id"] not in seen)
    return out


def retrieve_with_fallback(*, parsed: dict[str, Any], qvec: np.ndarray) -> TierResult:
    """Relax tier by tier until MIN_RESULTS people or the last tier. A tier that would relax nothing the
    query asked for returns the same rows as the one before, so it is skipped (same answer, fewer queries).
    The result records how many people each tier that ran found: the relaxation notice is built from it.
    Under a policy that keeps stricter tiers' people (RelaxationPolicy.keep_stricter), the result holds every
    card a tier that ran found, so a person who met more constraints is never lost to a looser tier's nearest cards."""
    k = C()
    keep = relaxation_policy().keep_stricter
    must = parsed["must"]
    result = None
    counts: dict[int, int] = {}
    for tier in range(k.FALLBACK_TIER_STRICT, last_tier() + 1):
        if result is not None and not relaxes_anything(tier, must):
            result.tier = tier
            continue
        found = fetch_tier(parsed=parsed, qvec=qvec, tier=tier)
        counts[tier] = len(found.person_ids)
        result = _merge(result, found) if keep and result is not None else found
        if len(result.person_ids) >= k.MIN_RESULTS:
            break
    assert result is not None
    result.people_per_tier = counts
    return result
