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
from people.tiers import INTENT_KEYS, has_company_team, has_intent, has_location, has_time

TIER_NAMES = {0: "strict", 1: "time relaxed", 2: "location relaxed", 3: "company/team relaxed",
              4: "intent/domain/seniority relaxed"}


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
    k = C()
    out = []
    if has_time(must):
        out.append({"tier": k.FALLBACK_TIER_TIME_SOFT, "constraint": "time", "value": _time(must), "how": "relaxed",
                    "showing": "from other years"})
    if has_location(must):
        out.append({"tier": k.FALLBACK_TIER_LOCATION_SOFT, "constraint": "location", "value": _place(must),
                    "how": "relaxed", "showing": "from other cities" if must.get("city") else "from elsewhere"})
    if has_company_team(must):
        out.append({"tier": k.FALLBACK_TIER_COMPANY_TEAM_SOFT, "constraint": "company",
                    "value": _orgs(must), "how": "dropped",
                    "showing": "from other companies" if must.get("company_norm") else "from other teams"})
    if has_intent(must):
        out.append({"tier": k.FALLBACK_TIER_INTENT_SOFT, "constraint": "intent", "value": _intent(must),
                    "how": "dropped", "showing": "in other roles"})
    return out


def describe(*, parsed: dict[str, Any], tier: int | None, people_per_tier: dict[int, int]) -> dict[str, Any]:
    """The response's `relaxation` object: tier, what was relaxed or dropped, and the page's notice."""
    must = parsed.get("must") or {}
    relaxed = [s for s in steps(must) if tier is not None and s["tier"] <= tier]
    out: dict[str, Any] = {
        "tier": tier, "tier_name": TIER_NAMES.get(tier, "") if tier is not None else "",
        "people_per_tier": {str(t): n for t, n in sorted(people_per_tier.items())},
        "relaxed": [{"constraint": s["constraint"], "value": s["value"]} for s in relaxed if s["how"] == "relaxed"],
        "dropped": [{"constraint": s["constraint"], "value": s["value"]} for s in relaxed if s["how"] == "dropped"],
        "demoted_to_should": list(parsed.get("demoted_to_should") or []),
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
    return out


def unmet_constraints(*, parsed: dict[str, Any], tier: int | None, person_ids: list) -> dict[Any, list[str]]:
    """person -> the relaxed or dropped constraints none of their public cards meets (one grouped query)."""
    must = parsed.get("must") or {}
    relaxed = [s["constraint"] for s in steps(must) if tier is not None and s["tier"] <= tier]
    if not relaxed or not person_ids:
        return {}
    checks: list[tuple[str, str, list]] = []
    if "time" in relaxed:
        checks.append(("time", "(c.start_date IS NOT NULL OR c.end_date IS NOT NULL) AND (c.start_date IS NULL OR "
                               "c.start_date <= %s::date) AND (c.end_date IS NULL OR c.end_date >= %s::date)",
                       [must["time_end"], must["time_start"]]))
    if "location" in relaxed:
        conds, params = [], []
        for key, sql in (("city", "lower(c.city) = %s"), ("country", "lower(c.country) = %s"),
                         ("location_text", "c.location_text ILIKE %s")):
            if must.get(key):
                conds.append(sql)
                params.append(must[key] if key != "location_text" else f"%{must[key]}%")
        checks.append(("location", " AND ".join(conds), params))
    if "company" in relaxed:
        conds, params = [], []
        for key in ("company_norm", "team_norm"):
            if must.get(key):
                conds.append(f"c.{key} = ANY(%s)")
                params.append(list(must[key]))
        checks.append(("company", " AND ".join(conds), params))
    if "intent" in relaxed:
        conds, params = [], []
        for key in INTENT_KEYS:
            if must.get(key):
                conds.append(f"c.{key} = ANY(%s)")
                params.append(list(must[key]))
        checks.append(("intent", " AND ".join(conds), params))
    cols = ", ".join(f"coalesce(bool_or({sql}), false)" for _n, sql, _p in checks)
    params = [x for _n, _s, p in checks for x in p]
    with connection.cursor() as cur:
        cur.execute(f"SELECT c.person_id, {cols} FROM people_experiencecard c WHERE c.person_id = ANY(%s) "
                    "AND c.visibility = 'public' GROUP BY c.person_id", [*params, list(person_ids)])
        met = {row[0]: row[1:] for row in cur.fetchall()}
    return {pid: [name for (name, _s, _p), ok in zip(checks, met.get(pid, [False] * len(checks)), strict=True)
                  if not ok] for pid in person_ids}
