"""Card-level hits -> person-level blended score, top-N, tiebreaks, similarity_percent.

Why pure functions over plain dicts: the scoring arithmetic is tested on a
hand-built fixture without a database, and the benchmark times it separately.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from people.constants import C
from people.retrieval.tiers import has_location, has_time, policy_for, relaxation_policy


def sim_from_distance(dist: float) -> float:
    return 1.0 / (1.0 + float(dist))


def should_terms(parsed: dict[str, Any]) -> list[str]:
    s = parsed["should"]
    terms = list(dict.fromkeys((s.get("skills_or_tools") or []) + (s.get("keywords") or [])
                               + (s.get("intent_secondary") or [])))
    return terms[: C().SHOULD_CAP]


def card_should_hits(card: dict[str, Any], terms: list[str]) -> set[str]:
    hay = " ".join([card.get("title") or "", card.get("summary") or "",
                    " ".join(card.get("search_phrases") or [])]).lower()
    return {t for t in terms if t and t in hay}


def card_overlaps_time(card: dict[str, Any], must: dict[str, Any]) -> bool:
    if not has_time(must):
        return True
    s, e = card.get("start_date"), card.get("end_date")
    if s is None and e is None:
        return False
    ts, te = date.fromisoformat(must["time_start"]), date.fromisoformat(must["time_end"])
    return (s is None or s <= te) and (e is None or e >= ts)


def card_full_date_overlap(card: dict[str, Any], must: dict[str, Any]) -> bool:
    s, e = card.get("start_date"), card.get("end_date")
    if s is None or (e is None and not card.get("is_current")):
        return False
    return card_overlaps_time(card, must)


def card_matches_location(card: dict[str, Any], must: dict[str, Any]) -> bool:
    if must.get("city") and (card.get("city") or "").lower() != must["city"]:
        return False
    if must.get("country") and (card.get("country") or "").lower() != must["country"]:
        return False
    if must.get("location_text") and must["location_text"] not in (card.get("location_text") or "").lower():
        return False
    return True


@dataclass
class RankedPerson:
    person_id: Any
    score: float
    parent_best: float = 0.0
    child_best: float = 0.0
    avg_top3: float = 0.0
    lexical: float = 0.0
    should_bonus: float = 0.0
    penalties: float = 0.0
    parents: list[dict] = field(default_factory=list)
    children: list[dict] = field(default_factory=list)
    should_hits: list[str] = field(default_factory=list)
    full_date_overlap: bool = False
    has_salary_min: bool = False
    met: float = 0.0        # asked-for card constraints met on one card (people.retrieval.relaxation.constraints_met)
    met_bonus: float = 0.0  # the relaxation policy's met_weight * met: orders people, not part of `score`
    met_first: bool = False  # the policy orders by `met` before the score

    @property
    def rank_score(self) -> float:
        """The blended score plus the policy's bonus for constraints met. Kept apart from `score` so
        similarity_percent stays the blended similarity whatever the policy orders by."""
        return self.score + self.met_bonus

    def order_key(self) -> tuple[float, float]:
        """Ascending sort key, best first: constraints met (when the policy puts them first), then rank_score."""
        return (-round(self.met, 4) if self.met_first else 0.0, -round(self.rank_score, 6))

    def parts(self) -> dict[str, float]:
        return {k: round(getattr(self, k), 6) for k in ("parent_best", "child_best", "avg_top3", "lexical",
                                                          "should_bonus", "penalties", "score", "met",
                                                          "met_bonus")}


def collapse_and_rank(*, parents: list[dict], children: list[dict], parsed: dict[str, Any], tier: int,
                      lexical: dict[Any, float], met: dict[Any, float] | None = None) -> list[RankedPerson]:
    """All candidate people, best first (before the top-N cut and the tiebreaks). `met`: person -> asked-for
    card constraints met on one card; the relaxation policy's met_weight turns it into an ordering bonus."""
    k = C()
    relax = relaxation_policy()
    must = parsed["must"]
    terms = should_terms(parsed)
    policy = policy_for(tier)
    by_person: dict[Any, dict[str, list]] = {}
    for card in parents:
        by_person.setdefault(card["person_id"], {"p": [], "c": []})["p"].append(card)
    for card in children:
        by_person.setdefault(card["person_id"], {"p": [], "c": []})["c"].append(card)

    out: list[RankedPerson] = []
    for pid, groups in by_person.items():
        hits: set[str] = set()
        pscores, cscores = [], []
        for card in groups["p"]:
            h = card_should_hits(card, terms)
            hits |= h
            card["card_score"] = sim_from_distance(card["dist"]) + min(len(h), k.SHOULD_CAP) * k.SHOULD_BOOST
            pscores.append(card["card_score"])
        for card in groups["c"]:
            h = card_should_hits(card, terms)
            hits |= h
            card["card_score"] = sim_from_distance(card["dist"]) + min(len(h), k.SHOULD_CAP) * k.SHOULD_BOOST
            cscores.append(card["card_score"])
        top_parents = sorted(groups["p"], key=lambda c: -c["card_score"])[: k.TOP_K_CARDS]
        top_children = sorted(groups["c"], key=lambda c: -c["card_score"])[: k.TOP_K_CARDS]
        parent_best = max(pscores, default=0.0)
        child_best = max(cscores, default=0.0)
        top3 = sorted(pscores + cscores, reverse=True)[:3]
        avg_top3 = sum(top3) / len(top3) if top3 else 0.0
        base = k.WEIGHT_PARENT_BEST * parent_best + k.WEIGHT_CHILD_BEST * child_best + k.WEIGHT_AVG_TOP3 * avg_top3
        should_bonus = min(len(hits) * k.SHOULD_BOOST, k.SHOULD_BONUS_MAX)
        # evidence cards for penalties: the parents, or the parents behind matched children
        evidence = groups["p"] + groups["c"]
        penalties = 0.0
        if has_time(must) and not policy.apply_time and not any(card_overlaps_time(c, must) for c in evidence):
            penalties += k.MISSING_DATE_PENALTY
        if has_location(must) and not policy.apply_location and not any(card_matches_location(c, must)
                                                                          for c in evidence):
            penalties += k.LOCATION_MISMATCH_PENALTY
        lex = float(lexical.get(pid, 0.0))
        score = max(0.0, base + lex + should_bonus - penalties)
        n_met = float((met or {}).get(pid, 0.0))
        out.append(RankedPerson(
            person_id=pid, score=score, parent_best=parent_best, child_best=child_best, avg_top3=avg_top3,
            lexical=lex, should_bonus=should_bonus, penalties=penalties, met=n_met, met_bonus=relax.met_weight * n_met,
            met_first=relax.met_first,
            parents=top_parents[: k.MATCHED_CARDS_PER_PERSON], children=top_children[: k.MATCHED_CARDS_PER_PERSON],
            should_hits=sorted(hits), full_date_overlap=any(card_full_date_overlap(c, must) for c in evidence)))
    out.sort(key=lambda r: (*r.order_key(), str(r.person_id)))
    return out


def apply_tiebreaks(people: list[RankedPerson], *, parsed: dict[str, Any]) -> list[RankedPerson]:
    """Equal scores put stated salary minimums first (when an offer exists), then full date overlap
    first (when the query has a full range). Stable sorts, so the earlier order survives among true ties."""
    must = parsed["must"]
    out = list(people)
    if must.get("offer_salary_inr_per_year"):
        out.sort(key=lambda r: (*r.order_key(), not r.has_salary_min))
    if has_time(must):
        out.sort(key=lambda r: (*r.order_key(), not r.full_date_overlap))
    return out


def similarity_percent(score: float) -> int:
    return int(round(min(1.0, max(0.0, float(score))) * 100))
