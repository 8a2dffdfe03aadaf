"""The people relevance benchmark: graded queries written from a directory's own records, and the harness that
runs them through the real search under each relaxation policy.

Why gold from the records: nobody has judged people search, but every card says where, at which company, in
which role and level and when someone worked, and every profile whether they are open to work and what they ask
for. A query written from those fields has an answer the directory itself defines: a person who meets every
asked-for constraint on one card (and the profile ones) is grade 3, all but one 2, all but two 1, with the seed's
semantics for what a card meeting a constraint means (people.retrieval.tiers.card_filter_sql: lowercase city equality,
company in the list, a dated card overlapping the range; a salary offer is met by no stated minimum or one at
or below it). Queries are phrased several natural ways, and include roles and places the directory lacks and
role words the parser's vocabulary has never seen, so the parser is measured too: the gold is what the query
means, not what the parser understood.

Metrics (cutoff TOP_PEOPLE = 6, what a search shows): nDCG@6 with linear graded gains and a log2 discount (the
project's one definition, config.metrics, which search's evaluation uses too), precision@6 of fully matching people over
the queries that have one, and how often a fully matching person exists but is left out while a lesser one is
shown.
"""
from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from tqdm import tqdm

from accounts.models import User
from config.metrics import graded_ndcg
from credits.ledger import grant
from people.constants import C
from people.parsing import curated
from people.parsing.gazetteer import current as current_gazetteer
from people.parsing.normalize import normalize_date
from people.parsing.semantic import vocabulary as semantic_vocabulary
from people.retrieval.tiers import POLICIES
from people.service.searches import SearchRequest, run_search

FULL = 3
CARD_KINDS = ("intent", "seniority", "company", "city", "time")
PROFILE_KINDS = ("open_to_work", "salary")

# how people ask for each role: the vocabulary's words first, then words the parser has no entry for ("unseen"),
# which only the semantic role matching (people/parsing/semantic.py) can map
ROLE_PHRASES: dict[str, tuple[list[str], list[str]]] = {
    "backend": (["backend engineers", "backend developers", "back-end engineers"], ["server engineers"]),
    "frontend": (["frontend engineers", "front-end developers", "react developers"], ["web ui developers"]),
    "fullstack": (["full stack engineers", "fullstack developers"], ["generalist web engineers"]),
    "mobile": (["android engineers", "mobile developers"], ["app developers"]),
    "data": (["data engineers", "etl developers"], ["pipeline engineers"]),
    "ml": (["machine learning engineers", "ml engineers"], ["applied scientists"]),
    "devops": (["devops engineers", "cloud engineers"], ["infrastructure engineers"]),
    "sre": (["site reliability engineers", "sres"], ["reliability engineers"]),
    "security": (["security engineers", "appsec engineers"], ["cybersecurity specialists"]),
    "qa": (["qa engineers", "sdets"], ["test automation engineers"]),
    "product": (["product managers"], ["product owners"]),
    "analytics": (["data analysts", "business analysts"], ["bi analysts"]),
}
# roles no demo card has (the generator's ROLES lack them): the best a search can show is grade 2
ABSENT_ROLES = {"design": "ux designers", "embedded": "firmware engineers", "research": "research scientists"}
SENIORITY_PHRASES = {"junior": ["junior"], "mid": ["mid-level"], "senior": ["senior", "sr"], "lead": ["lead"],
                     "staff": ["staff"]}

# (name, constraint kinds): the shapes a query is drawn in
SHAPES: list[tuple[str, tuple[str, ...]]] = [
    ("role+city+company", ("intent", "city", "company")),
    ("role+company", ("intent", "company")),
    ("role+city", ("intent", "city")),
    ("level+role+city", ("seniority", "intent", "city")),
    ("role+company+years", ("intent", "company", "time")),
    ("role+city+open", ("intent", "city", "open_to_work")),
    ("role+open+salary", ("intent", "open_to_work", "salary")),
    ("level+role+company", ("seniority", "intent", "company")),
]


@dataclass
class Truth:
    """One person as the benchmark sees them: public cards' structured fields and the profile."""

    person_id: Any
    open_to_work: bool
    salary_min: int | None
    cards: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BenchQuery:
    text: str
    spec: dict[str, Any]  # kind -> value: intent, seniority, company, city, time (start, end), open_to_work, salary
    group: str            # full match drawn from a card | combined across people | absent role/place | unseen words
    shape: str
    gold: dict[str, int] = field(default_factory=dict)  # person id (as the response has it) -> grade (>0 only)

    @property
    def has_full(self) -> bool:
        return any(g == FULL for g in self.gold.values())


def load_truth() -> list[Truth]:
    """Every person with their public cards (one query each for cards and profiles)."""
    people: dict[Any, Truth] = {}
    with connection.cursor() as cur:
        cur.execute("SELECT p.id, coalesce(pp.open_to_work, false), pp.work_preferred_salary_min FROM people_person p "
                    "LEFT JOIN people_personprofile pp ON pp.person_id = p.id")
        for pid, otw, sal in cur.fetchall():
            people[pid] = Truth(person_id=pid, open_to_work=bool(otw), salary_min=sal)
        cur.execute("SELECT person_id, intent_primary, seniority_level, company_norm, lower(city), start_date, "
                    "end_date FROM people_experiencecard WHERE visibility = 'public'")
        for pid, intent, sen, company, city, start, end in cur.fetchall():
            if pid in people:
                people[pid].cards.append({"intent": intent, "seniority": sen, "company": company, "city": city,
                                          "start": start, "end": end})
    return [t for t in people.values() if t.cards]


def card_meets(card: dict[str, Any], kind: str, value: Any) -> bool:
    """The seed's semantics for one card and one constraint (people.retrieval.tiers.card_filter_sql)."""
    if kind == "time":
        start, end = value
        s, e = card["start"], card["end"]
        return (s is not None or e is not None) and (s is None or s <= end) and (e is None or e >= start)
    return card.get(kind) == value


def grade(person: Truth, spec: dict[str, Any]) -> int:
    """3 when one card meets every card constraint and the profile every profile one; one less per miss."""
    card_spec = [(k, v) for k, v in spec.items() if k in CARD_KINDS]
    best = max((sum(card_meets(c, k, v) for k, v in card_spec) for c in person.cards), default=0)
    missed = len(card_spec) - best
    if spec.get("open_to_work") and not person.open_to_work:
        missed += 1
    if spec.get("salary") is not None and person.salary_min is not None and person.salary_min > spec["salary"]:
        missed += 1
    return max(0, FULL - missed)


def _title(v: str) -> str:
    return " ".join(w.capitalize() for w in v.split())


def phrase(spec: dict[str, Any], *, role: str, rng: random.Random) -> str:
    """One natural wording of the constraints (the order and the glue words vary)."""
    bits = []
    lead = rng.choice(["", "", "find ", "looking for ", "show me "])
    sen = rng.choice(SENIORITY_PHRASES[spec["seniority"]]) + " " if "seniority" in spec else ""
    who = f"{sen}{role}"
    if "company" in spec and rng.random() < 0.25:
        who = f"{_title(spec['company'])} {who}" if not sen else who
        company_done = not sen
    else:
        company_done = False
    if "city" in spec:
        bits.append(rng.choice(["in {c}", "based in {c}", "in {c}", "located in {c}"]).format(c=_title(spec["city"])))
    if "company" in spec and not company_done:
        bits.append(rng.choice(["who worked at {x}", "at {x}", "with experience at {x}", "who were at {x}"]).format(
            x=_title(spec["company"])))
    if "time" in spec:
        s, e = spec["time"]
        bits.append(f"after {s.year - 1}" if e >= date.today() else
                    rng.choice([f"between {s.year} and {e.year}", f"from {s.year} to {e.year}"]))
    if spec.get("open_to_work"):
        bits.append(rng.choice(["open to work", "who are open to work", "actively looking"]))
    if spec.get("salary") is not None:
        bits.append(f"under {spec['salary'] // 100_000} LPA")
    if len(bits) > 2 and rng.random() < 0.3:
        rng.shuffle(bits)
    return (lead + who + " " + ", ".join(bits) if len(bits) > 2 else lead + who + " " + " ".join(bits)).strip()


def _time_range(card: dict[str, Any], rng: random.Random) -> tuple[date, date] | None:
    s, e = card["start"], card["end"] or date.today()
    if s is None:
        return None
    if rng.random() < 0.5 and e >= date(date.today().year - 1, 1, 1):  # "after Y": open-ended, closed today
        return date(max(s.year, 2010), 1, 1), date.today()
    y = rng.randint(s.year, max(s.year, e.year))
    return date(y, 1, 1), date.fromisoformat(normalize_date(str(min(y + rng.randint(0, 2), 2026)), end=True))


def _spec_from(person: Truth, card: dict[str, Any], kinds: tuple[str, ...], rng: random.Random,
               salaries: list[int]) -> dict[str, Any] | None:
    spec: dict[str, Any] = {}
    for kind in kinds:
        if kind == "time":
            rng_t = _time_range(card, rng)
            if rng_t is None:
                return None
            spec["time"] = rng_t
        elif kind == "open_to_work":
            if not person.open_to_work:
                return None
            spec["open_to_work"] = True
        elif kind == "salary":
            # an offer 5 LPA above what this person asks (or above the lowest ask in the directory)
            base = person.salary_min or (salaries[0] if salaries else 3_000_000)
            spec["salary"] = base // 100_000 * 100_000 + 500_000
        elif kind == "seniority":
            if card["seniority"] not in SENIORITY_PHRASES:
                return None
            spec["seniority"] = card["seniority"]
        else:
            if not card.get(kind):
                return None
            spec[kind] = card[kind]
    return spec


def build_queries(truth: list[Truth], *, count: int = 96, seed: int = 30,
                  absent_cities: Iterable[str] = ()) -> list[BenchQuery]:
    """`count` graded queries: about half drawn from one card (a full match exists), a quarter combining fields of
    different people (the Flipkart-in-Bangalore case: often no one matches all), the rest for roles or places the
    directory lacks and in role words the vocabulary has never seen. Deterministic for a seed and a directory."""
    rng = random.Random(seed)
    people = sorted(truth, key=lambda t: str(t.person_id))
    salaries = sorted({t.salary_min for t in people if t.salary_min})
    roles_present = sorted({c["intent"] for t in people for c in t.cards if c["intent"] in ROLE_PHRASES})
    cities_present = {c["city"] for t in people for c in t.cards if c["city"]}
    absent = [c for c in (absent_cities or curated.CITIES) if c not in cities_present]
    out: list[BenchQuery] = []
    seen: set[str] = set()
    plan = (["drawn"] * 6 + ["combined"] * 3 + ["absent"] + ["unseen"] * 2)
    attempts = 0
    while len(out) < count and attempts < count * 50:
        attempts += 1
        group = plan[len(out) % len(plan)]
        shape, kinds = SHAPES[rng.randrange(len(SHAPES))]
        person = rng.choice(people)
        card = rng.choice(person.cards)
        if card["intent"] not in ROLE_PHRASES:
            continue
        spec = _spec_from(person, card, kinds, rng, salaries)
        if spec is None:
            continue
        known, unseen = ROLE_PHRASES[spec["intent"]]
        role = rng.choice(known)
        if group == "combined":
            other = rng.choice(rng.choice(people).cards)
            swap = [k for k in ("company", "city") if k in spec and other.get(k) and other[k] != spec[k]]
            if not swap:
                continue
            key = rng.choice(swap)
            spec[key] = other[key]
        elif group == "absent":
            if rng.random() < 0.5 and absent and "city" in spec:
                spec["city"] = rng.choice(absent)
            else:
                absent_role = rng.choice(sorted(ABSENT_ROLES))
                spec["intent"], role = absent_role, ABSENT_ROLES[absent_role]
        elif group == "unseen":
            role = rng.choice(unseen)
        text = phrase(spec, role=role, rng=rng)
        if text in seen or spec["intent"] not in roles_present and group != "absent":
            continue
        seen.add(text)
        q = BenchQuery(text=text, spec=spec, group=group, shape=shape)
        q.gold = {str(t.person_id): g for t in people if (g := grade(t, spec)) > 0}
        out.append(q)
    return out


def ndcg_at(ranked: list, gold: dict[Any, int], k: int) -> float:
    """Graded nDCG@k, the ideal taken over the whole directory's grades: the project's one definition
    (config.metrics, the same as search's evaluation reports)."""
    return graded_ndcg(ranked=ranked, grades=gold, k=k)


@dataclass
class QueryOutcome:
    query: BenchQuery
    shown: list[Any]
    ndcg: float
    full_shown: int
    full_missed: bool  # a fully matching person exists and was left out while a lesser one was shown
    tier: int | None
    ms: float


def score_query(q: BenchQuery, shown: list[Any], *, k: int) -> tuple[float, int, bool]:
    full_ids = {pid for pid, g in q.gold.items() if g == FULL}
    full_shown = sum(pid in full_ids for pid in shown[:k])
    missed = bool(full_ids) and full_shown < min(k, len(full_ids))
    return ndcg_at(shown, q.gold, k), full_shown, missed


def run_queries(*, user: User, queries: list[BenchQuery], overrides: dict[str, Any] | None = None,
                label: str = "", show_progress: bool = True) -> list[QueryOutcome]:
    """Each query through people.service.searches.run_search (parse, embed, tiers, lexical, ranking), under PEOPLE_SEARCH
    overrides, inside a transaction that is rolled back (no Search rows, no debit survive)."""
    k = C().TOP_PEOPLE
    out = []
    conf = {**(settings.PEOPLE_SEARCH or {}), **(overrides or {})}
    with override_settings(PEOPLE_SEARCH=conf):
        for q in tqdm(queries, desc=label or "people benchmark", disable=not show_progress, leave=False):
            t0 = time.perf_counter()
            with transaction.atomic():
                res = run_search(user=user, asked=SearchRequest(query=q.text))
                transaction.set_rollback(True)
            ms = (time.perf_counter() - t0) * 1000
            shown = [p["id"] for p in res["people"]]
            ids = shown
            nd, full_shown, missed = score_query(q, ids, k=k)
            out.append(QueryOutcome(query=q, shown=ids, ndcg=nd, full_shown=full_shown, full_missed=missed,
                                    tier=res["relaxation"]["tier"], ms=ms))
    return out


def summarise(outcomes: list[QueryOutcome], *, k: int) -> dict[str, float]:
    """nDCG@k over all queries; P@k of fully matching people and the miss rate over queries that have one."""
    with_full = [o for o in outcomes if o.query.has_full]
    return {
        "queries": len(outcomes),
        f"ndcg@{k}": round(statistics.fmean(o.ndcg for o in outcomes), 4) if outcomes else 0.0,
        f"p@{k}_full": round(statistics.fmean(o.full_shown / k for o in with_full), 4) if with_full else 0.0,
        "full_missed": round(statistics.fmean(o.full_missed for o in with_full), 4) if with_full else 0.0,
        "with_full": len(with_full),
        "p95_ms": round(sorted(o.ms for o in outcomes)[max(0, math.ceil(0.95 * len(outcomes)) - 1)], 1)
        if outcomes else 0.0,
    }


# the variants the harness compares: the relaxation presets, then blended-score weights under the default policy
WEIGHT_VARIANTS: dict[str, dict[str, Any]] = {
    "graded + intent tier (RELAX_INTENT_TIER)": {"RELAXATION_POLICY": "graded", "RELAX_INTENT_TIER": True},
    "graded, no semantic roles": {"RELAXATION_POLICY": "graded", "SEMANTIC_ROLES": False},
    "weights: parent-heavy 0.8/0.1/0.1": {"WEIGHT_PARENT_BEST": 0.8, "WEIGHT_CHILD_BEST": 0.1,
                                          "WEIGHT_AVG_TOP3": 0.1},
    "weights: lexical bonus 0.1": {"LEXICAL_BONUS_MAX": 0.1},
    "weights: lexical bonus 0.4": {"LEXICAL_BONUS_MAX": 0.4},
}


def variants(*, policies: Iterable[str] | None = None, weights: bool = True) -> dict[str, dict[str, Any]]:
    """label -> PEOPLE_SEARCH overrides: one row per relaxation preset (the design's first is "seed"), then the weights."""
    out: dict[str, dict[str, Any]] = {f"policy: {name}": {"RELAXATION_POLICY": name}
                                      for name in (policies or POLICIES)}
    if weights:
        out.update(WEIGHT_VARIANTS)
    return out


def evaluate(*, user: User, queries: list[BenchQuery], rows: dict[str, dict[str, Any]],
             show_progress: bool = True) -> dict[str, dict[str, Any]]:
    """label -> summary, plus per-group summaries under "groups". The vocabulary's vectors are built first, so no
    variant's latency carries that one-off cost."""
    k = C().TOP_PEOPLE
    semantic_vocabulary(current_gazetteer())
    report: dict[str, dict[str, Any]] = {}
    for label, overrides in rows.items():
        outcomes = run_queries(user=user, queries=queries, overrides=overrides, label=label,
                               show_progress=show_progress)
        groups = {g: summarise([o for o in outcomes if o.query.group == g], k=k)
                  for g in dict.fromkeys(q.group for q in queries)}
        report[label] = {**summarise(outcomes, k=k), "groups": groups, "outcomes": outcomes}
    return report


def markdown(report: dict[str, dict[str, Any]], *, title: str) -> str:
    """The table, one row per variant. Latency is left to bench/bench_people.py (its p95 at 10k people is the
    goal's figure); each variant's p95 on the benchmark directory stays in the JSON (`p95_ms`)."""
    k = C().TOP_PEOPLE
    groups = list(next(iter(report.values()))["groups"]) if report else []
    head = ["variant", f"nDCG@{k}", f"P@{k} full", "full match not shown"] + [f"nDCG@{k} {g}" for g in groups]
    lines = [f"#### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, r in report.items():
        cells = [label, f"{r[f'ndcg@{k}']:.3f}", f"{r[f'p@{k}_full']:.3f}", f"{r['full_missed']:.0%}"] + [
            f"{r['groups'][g][f'ndcg@{k}']:.3f}" for g in groups]
        lines.append("| " + " | ".join(cells) + " |")
    any_r = next(iter(report.values())) if report else None
    if any_r:
        counts = ", ".join(f"{g}: {any_r['groups'][g]['queries']}" for g in groups)
        lines += ["", f"{any_r['queries']} queries ({counts}); {any_r['with_full']} have a fully matching person."]
    return "\n".join(lines)


def chart(reports: dict[str, dict[str, dict[str, Any]]], *, path: Path) -> Path:
    """nDCG@6, P@6 full and the miss rate per variant, one panel per directory (matplotlib, like
    search.quality.evaluation.write_report)."""
    import matplotlib  # noqa: PLC0415 - heavy: charts load only when a report is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - heavy: charts load only when a report is drawn

    k = C().TOP_PEOPLE
    metrics = [f"ndcg@{k}", f"p@{k}_full", "full_missed"]
    fig, axes = plt.subplots(1, len(reports), figsize=(7.5 * len(reports), 5), squeeze=False)
    for ax, (name, report) in zip(axes[0], reports.items(), strict=True):
        labels = list(report)
        width = 0.8 / len(metrics)
        for i, m in enumerate(metrics):
            ax.bar([x + (i - 1) * width for x in range(len(labels))], [report[lb][m] for lb in labels], width,
                   label=m)
        ax.set_xticks(range(len(labels)), [lb.split(": ", 1)[-1] for lb in labels], rotation=35, ha="right",
                      fontsize=8)
        ax.set_ylim(0, 1.15)
        ax.set_title(name, fontsize=10)
        ax.legend(loc="upper center", ncol=len(metrics), fontsize=8, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summaries(report: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The report without its per-query outcomes (what the JSON files hold)."""
    return {label: {k: v for k, v in r.items() if k != "outcomes"} for label, r in report.items()}


def worst(report: dict[str, Any], *, n: int = 5, key: Callable[[QueryOutcome], float] | None = None
          ) -> list[QueryOutcome]:
    """The n lowest-nDCG queries of one variant (for reading what still goes wrong)."""
    return sorted(report["outcomes"], key=key or (lambda o: o.ndcg))[:n]


def evaluate_directory(*, count: int = 96, seed: int = 30, rows: dict[str, dict[str, Any]] | None = None,
                       absent_cities: Iterable[str] = (), show_progress: bool = True
                       ) -> tuple[list[BenchQuery], dict[str, dict[str, Any]]]:
    """The loaded directory's benchmark, leaving nothing behind: a throwaway searcher with credits, every search and
    debit, all inside one transaction that is rolled back (what `manage.py evaluate_people` runs)."""
    with transaction.atomic():
        user = User.objects.create_user(email="people-benchmark@invalid.example", password=None)
        grant(user=user, amount=10 * count * max(1, len(rows or variants())), reason="people benchmark")
        queries = build_queries(load_truth(), count=count, seed=seed, absent_cities=absent_cities)
        report = evaluate(user=user, queries=queries, rows=rows or variants(), show_progress=show_progress)
        transaction.set_rollback(True)
    return queries, report
