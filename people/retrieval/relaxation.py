"""What a relaxed search gave up, said out loud.

Why: a search for "python developers in Pune who worked at Infosys" that reaches tier 3 returns people who never
worked at Infosys. That is the right fallback, but only if the searcher is told: every response names the tier it
reached, what was relaxed (still ranked by: a penalty for missing it) and what was dropped (ignored), with a
one-line notice for the page, and each returned person says which asked-for constraints they do not meet,
checked in SQL over all their public cards (not only the matched ones).
"""
from __future__ import annotations

from typing import Any

from django.db import connection

from people.constants import C
from people.retrieval.tiers import (
    INTENT_KEYS,
    has_company_team,
    has_intent,
    has_location,
    has_time,
    relaxation_policy,
    tier_of,
)

_KIND_NAMES = {"time": "time relaxed", "location": "location relaxed", "company": "company/team relaxed",
               "intent": "intent/domain/seniority relaxed"}


def tier_name(tier: int | None) -> str:
    """"strict", or what the tier relaxes last under the configured policy's order ("location relaxed")."""
    if tier is None:
        return ""
    if tier == C().FALLBACK_TIER_STRICT:
        return "strict"
    return next((name for kind, name in _KIND_NAMES.items() if tier_of(kind) == tier), "")


def _title(v: str) -> str:
    return " ".join(w.capitalize() for w in str(v).split())


def _place(must: dict) -> str:
    return _title(must.get("city") or must.get("location_text") or must.get("country") or "")


def _time(must: dict) -> str:
    s, e = (must.get("time_start") or "")[:4], (must.get("time_end") or "")[:4]
    if s.startswith("1900"):
        return f"until {e}"
    return f"in {s}" if s == e else f"between {s} and {e}"


def _orgs(must: dict) -> str:
    bits = []
    if must.get("company_norm"):
        bits.append("at " + " or ".join(_title(c) for c in must["company_norm"]))
    if must.get("team_norm"):
        bits.append("in the " + " or ".join(must["team_norm"]) + " team")
    return " ".join(bits)


def _intent(must: dict) -> str:
    return ", ".join(v for key in INTENT_KEYS for v in (must.get(key) or []))


def steps(must: dict[str, Any]) -> list[dict[str, Any]]:
    """The relaxable constraints this query has, in tier order: (tier, constraint, value, how, showing)."""
    out = []
    if has_time(must):
        out.append({"tier": tier_of("time"), "constraint": "time", "value": _time(must), "how": "relaxed",
                    "showing": "from other years"})
    if has_location(must):
        out.append({"tier": tier_of("location"), "constraint": "location", "value": _place(must),
                    "how": "relaxed", "showing": "from other cities" if must.get("city") else "from elsewhere"})
    if has_company_team(must):
        out.append({"tier": tier_of("company"), "constraint": "company",
                    "value": _orgs(must), "how": "dropped",
                    "showing": "from other companies" if must.get("company_norm") else "from other teams"})
    if has_intent(must):
        out.append({"tier": tier_of("intent"), "constraint": "intent", "value": _intent(must),
                    "how": "dropped", "showing": "in other roles"})
    return sorted(out, key=lambda s: s["tier"])


def describe(*, parsed: dict[str, Any], tier: int | None, people_per_tier: dict[int, int]) -> dict[str, Any]:
    """The response's `relaxation` object: tier, what was relaxed or dropped, and the page's notice."""
    must = parsed.get("must") or {}
    relaxed = [s for s in steps(must) if tier is not None and s["tier"] <= tier]
    out: dict[str, Any] = {
        "tier": tier, "tier_name": tier_name(tier),
        "people_per_tier": {str(t): n for t, n in sorted(people_per_tier.items())},
        "relaxed": [{"constraint": s["constraint"], "value": s["value"]} for s in relaxed if s["how"] == "relaxed"],
        "dropped": [{"constraint": s["constraint"], "value": s["value"]} for s in relaxed if s["how"] == "dropped"],
        "demoted_to_should": list(parsed.get("demoted_to_should") or []),
        "policy": relaxation_policy().name,
        "notice": "",
    }
    if relaxed:
        strict = " ".join(x for x in (_orgs(must), f"in {_place(must)}" if has_location(must) else "",
                                      _time(must) if has_time(must) else "") if x)
        roles = _intent(must) if any(s["constraint"] == "intent" for s in relaxed) else ""
        first = people_per_tier.get(C().FALLBACK_TIER_STRICT, 0)
        who = "No one" if first == 0 else f"Only {first} {'person' if first == 1 else 'people'}"
        if strict:  # the roles/levels given up are named too
            lead = f"{who} {strict}{f' ({roles})' if roles else ''} matched"
        else:
            lead = f"{who} matched {roles}"
        parts = list(dict.fromkeys(s["showing"] for s in relaxed))
        showing = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        out["notice"] = f"{lead}; {'also ' if first else ''}showing people {showing}."
        if relaxation_policy().met_first:
            out["notice"] += " People who meet more of what you asked for come first."
    return out


def _conditions(must: dict[str, Any], *, split_intent: bool) -> list[tuple[str, str, list]]:
    """(constraint, SQL over card `c`, params) for each card constraint the query has, in the tier filters'
    semantics (people.retrieval.tiers.card_filter_sql). `split_intent`: intent, domain, sub-domain and seniority each
    count as one constraint (constraints_met) instead of one together (unmet_constraints)."""
    checks: list[tuple[str, str, list]] = []
    if has_time(must):
        checks.append(("time", "(c.start_date IS NOT NULL OR c.end_date IS NOT NULL) AND (c.start_date IS NULL OR "
                               "c.start_date <= %s::date) AND (c.end_date IS NULL OR c.end_date >= %s::date)",
                       [must["time_end"], must["time_start"]]))
    if has_location(must):
        conds, params = [], []
        for key, sql in (("city", "lower(c.city) = %s"), ("country", "lower(c.country) = %s"),
                         ("location_text", "c.location_text ILIKE %s")):
            if must.get(key):
                conds.append(sql)
                params.append(must[key] if key != "location_text" else f"%{must[key]}%")
        checks.append(("location", " AND ".join(conds), params))
    if has_company_team(must):
        conds, params = [], []
        for key in ("company_norm", "team_norm"):
            if must.get(key):
                conds.append(f"c.{key} = ANY(%s)")
                params.append(list(must[key]))
        checks.append(("company", " AND ".join(conds), params))
    intent = [(f"c.{key} = ANY(%s)", [list(must[key])]) for key in INTENT_KEYS if must.get(key)]
    if intent and split_intent:
        checks += [("intent", sql, params) for sql, params in intent]
    elif intent:
        checks.append(("intent", " AND ".join(sql for sql, _p in intent), [p for _s, ps in intent for p in ps]))
    return checks


def constraints_met(*, parsed: dict[str, Any], person_ids: list) -> dict[Any, float]:
    """person -> the most asked-for card constraints (time, location, company/team, and intent, domain,
    sub-domain and seniority one each) that one of their public cards meets: what a graded relaxation policy
    ranks by (people.retrieval.tiers.RelaxationPolicy.met_weight). One grouped query over the candidates' cards.

    Between equal counts the constraint the policy gives up later weighs a hundredth more (intent most, then in
    reverse relaxation order): under the seed's order a backend engineer at Flipkart in Pune comes before a
    backend engineer in Bangalore who was never at Flipkart, for "backend engineers in Bangalore who worked at
    Flipkart"."""
    checks = _conditions(parsed.get("must") or {}, split_intent=True)
    if not checks or not person_ids:
        return {}
    weights = [1 + 0.01 * tier_of(name) for name, _s, _p in checks]
    total = " + ".join(f"{w:.2f} * coalesce(({sql}), false)::int" for w, (_n, sql, _p) in zip(weights, checks,
                                                                                             strict=True))
    with connection.cursor() as cur:
        cur.execute(f"SELECT c.person_id, max({total}) FROM people_experiencecard c WHERE c.person_id = ANY(%s) "
                    "AND c.visibility = 'public' GROUP BY c.person_id",
                    [*(x for _n, _s, p in checks for x in p), list(person_ids)])
        return {pid: float(n) for pid, n in cur.fetchall()}


def unmet_constraints(*, parsed: dict[str, Any], tier: int | None, person_ids: list) -> dict[Any, list[str]]:
    """person -> the relaxed or dropped constraints none of their public cards meets (one grouped query)."""
    must = parsed.get("must") or {}
    relaxed = [s["constraint"] for s in steps(must) if tier is not None and s["tier"] <= tier]
    if not relaxed or not person_ids:
        return {}
    checks = [c for c in _conditions(must, split_intent=False) if c[0] in relaxed]
    cols = ", ".join(f"coalesce(bool_or({sql}), false)" for _n, sql, _p in checks)
    params = [x for _n, _s, p in checks for x in p]
    with connection.cursor() as cur:
        cur.execute(f"SELECT c.person_id, {cols} FROM people_experiencecard c WHERE c.person_id = ANY(%s) "
                    "AND c.visibility = 'public' GROUP BY c.person_id", [*params, list(person_ids)])
        met = {row[0]: row[1:] for row in cur.fetchall()}
    return {pid: [name for (name, _s, _p), ok in zip(checks, met.get(pid, [False] * len(checks)), strict=True)
                  if not ok] for pid in person_ids}
