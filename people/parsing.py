"""Query text -> the constraints payload.

Two parsers, one contract. With an LLM configured: a cleanup prompt, then a
single-extract prompt (both below, the only prompts of query parsing). Without
one, or when it fails in any way, a deterministic parser that really extracts
companies, teams, places, seniority, dates, salary and open-to-work, so the
product works offline and a flaky LLM never fails a paid search. Its names come
from the directory's own vocabulary (people/gazetteer.py), not only from the
curated list, and it reports what it understood and which words it could not use.
"""
from __future__ import annotations

import json
import re
from typing import Any

from people import vocab
from people.gazetteer import Gazetteer, Match, curated_gazetteer
from search.engine.llm import LLMError, chat_json, is_configured

PROMPT_SEARCH_CLEANUP = (
    "You clean up a recruiter's search query for a people directory of Indian tech professionals. "
    "Fix typos, expand abbreviations (LPA = lakhs per annum, blr = Bangalore), keep every constraint, add nothing. "
    'Answer JSON only: {"query_cleaned": "..."}'
)
PROMPT_SEARCH_SINGLE_EXTRACT = (
    "Extract structured search constraints from the query. Answer one JSON object only, with keys: "
    '"must": {"company_norm": [], "team_norm": [], "intent_primary": [], "domain": [], "sub_domain": [], '
    '"employment_type": [], "seniority_level": [], "location_text": null, "city": null, "country": null, '
    '"time_start": null, "time_end": null, "is_current": null, "open_to_work_only": null, '
    '"offer_salary_inr_per_year": null}, "should": {"skills_or_tools": [], "keywords": [], '
    '"intent_secondary": []}, "exclude": {"company_norm": [], "keywords": []}, "search_phrases": [], '
    '"query_embedding_text": "", "confidence_score": 0.0}. '
    "Use lowercase normalised company, team and city names. Dates as YYYY, YYYY-MM or YYYY-MM-DD. "
    "Salary as a number of INR per year (40 LPA = 4000000). intent_primary values from: "
    + ", ".join(sorted(vocab.INTENT_WORDS)) + ". Put only explicit hard requirements in must."
)


def empty_payload(query: str) -> dict[str, Any]:
    return {
        "query_original": query, "query_cleaned": query,
        "must": {"company_norm": [], "team_norm": [], "intent_primary": [], "domain": [], "sub_domain": [],
                 "employment_type": [], "seniority_level": [], "location_text": None, "city": None,
                 "country": None, "time_start": None, "time_end": None, "is_current": None,
                 "open_to_work_only": None, "offer_salary_inr_per_year": None},
        "should": {"skills_or_tools": [], "keywords": [], "intent_secondary": []},
        "exclude": {"company_norm": [], "keywords": []},
        "search_phrases": [], "query_embedding_text": query, "confidence_score": 0.0,
    }


def _alias_pattern(alias: str) -> re.Pattern:
    return re.compile(r"(?<![\w])" + re.escape(alias) + r"s?(?![\w])", re.IGNORECASE)  # plural too


def _build_alias_index(mapping: dict[str, list[str]]) -> list[tuple[re.Pattern, str, str]]:
    rows = [(alias, norm) for norm, aliases in mapping.items() for alias in aliases]
    rows.sort(key=lambda r: -len(r[0]))  # longest alias first: "tata consultancy services" before "tcs"
    return [(_alias_pattern(a), a, n) for a, n in rows]


_INTENTS = _build_alias_index(vocab.INTENT_WORDS)
_SENIORITY = _build_alias_index(vocab.SENIORITY_WORDS)
_EMPLOYMENT = _build_alias_index(vocab.EMPLOYMENT_WORDS)
_DOMAINS = _build_alias_index(vocab.DOMAINS)
_SKILLS = [(_alias_pattern(s), s) for s in sorted(vocab.SKILLS, key=len, reverse=True)]
_TEAMS = [(re.compile(r"(?<![\w])" + re.escape(t) + r"\s+(?:team|org|group|vertical)\b", re.I), t)
          for t in sorted(vocab.TEAMS, key=len, reverse=True)]

_EXCLUDE_LEAD = re.compile(r"\b(?:not\s+(?:from|at|in)|excluding|except|exclude|but\s+not|other\s+than|without|"
                           r"no\s+one\s+from|apart\s+from)\s+", re.I)
_YEAR = r"((?:19|20)\d\d)(?:[-/](\d{1,2}))?"
_AFTER = re.compile(r"\b(after|since|from|post|starting|later than)\s+(?:year\s+)?" + _YEAR, re.I)
_BEFORE = re.compile(r"\b(before|until|till|prior to|pre|up to|upto)\s+(?:year\s+)?" + _YEAR, re.I)
_STRICT = {"after", "post", "later than", "before", "prior to", "pre"}  # exclusive bounds; since/until include
_BETWEEN = re.compile(r"\b(?:between|from)\s+" + _YEAR + r"\s*(?:and|to|-|–)\s*" + _YEAR, re.I)
_IN_YEAR = re.compile(r"\b(?:in|during)\s+" + _YEAR + r"\b", re.I)
_MONEY = r"(\d+(?:\.\d+)?)\s*(lpa|l\b|lakhs?|lacs?|lac\b|cr\b|crores?|k\b|inr|rs\.?|₹)?"
_SAL_MAX = re.compile(r"(?:under|below|less than|upto|up to|within|max(?:imum)?|budget(?: of)?|<=?|at most|not more than)"
                      r"\s*(?:rs\.?|inr|₹)?\s*" + _MONEY, re.I)
_SAL_ANY = re.compile(r"(?:rs\.?|inr|₹)?\s*(\d+(?:\.\d+)?)\s*(lpa|lakhs? per annum|lakhs?|lacs?|cr|crores?)\b", re.I)
_OPEN = re.compile(r"\b(open to work|open for work|open to opportunities|actively looking|looking for (?:a )?(?:job|"
                   r"new role|roles|opportunities|a change)|job seekers?|available (?:to join|immediately)|"
                   r"immediate joiners?|serving notice)\b", re.I)
_CURRENT = re.compile(r"\b(?:currently|presently|right now|now)\s+(?:at|in|working|with)\b|\bcurrent(?:ly)? employees?\b",
                      re.I)
_PAST = re.compile(r"\b(?:ex-|former(?:ly)?|previously|used to work|alumni)\b", re.I)
_STOP = vocab.STOP_WORDS


def _money_to_inr(num: str, unit: str | None) -> int | None:
    v = float(num)
    u = (unit or "").lower().strip(". ")
    if u in {"lpa", "l", "lakh", "lakhs", "lac", "lacs", "lakhs per annum", "lakh per annum"}:
        return int(round(v * 100_000))
    if u in {"cr", "crore", "crores"}:
        return int(round(v * 10_000_000))
    if u == "k":
        return int(round(v * 1000 * 12))  # "150k" in India is monthly pay
    if v < 1000:  # a bare "40" in a salary phrase means lakhs
        return int(round(v * 100_000))
    return int(round(v))


def _find_all(index: list[tuple[re.Pattern, str, str]], text: str) -> list[tuple[int, int, str]]:
    hits, taken = [], []
    for pat, _alias, norm in index:
        for m in pat.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            taken.append((m.start(), m.end()))
            hits.append((m.start(), m.end(), norm))
    hits.sort()
    return hits


def _uniq(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _date(year: str, month: str | None) -> str:
    return f"{year}-{int(month):02d}" if month else year


def _bound(word: str, year: str, month: str | None, *, step: int) -> str:
    """'after 2020' starts in 2021 and 'before 2019' ends in 2018; 'since'/'until' keep their period."""
    if word.lower() not in _STRICT:
        return _date(year, month)
    if not month:
        return str(int(year) + step)
    y, mo = int(year), int(month) + step
    if mo == 13:
        y, mo = y + 1, 1
    elif mo == 0:
        y, mo = y - 1, 12
    return f"{y}-{mo:02d}"


_PLACE_LEAD = {"in", "near", "around", "based", "across", "within", "located"}
_ORG_LEAD = {"at", "ex", "with", "for", "joined", "by", "alumni", "ex-"}
_EMPLOYER_LEAD = {"at", "ex", "ex-", "joined", "alumni", "from", "former", "formerly"}  # "with aws" is a skill
_TEAM_TAIL = re.compile(r"\s+(?:team|org|group|vertical|squad)\b")
_FILLER = re.compile(r"(?:lpa|lakhs?|lacs?|crores?|under|below|after|before|since|open|than|less|between|until|till|"
                     r"currently|current|years?|yoe|more|most|least|max|min)")


def _prev_word(low: str, start: int) -> str:
    m = re.search(r"([a-z][a-z\-]*)\W*$", low[:start])
    return m.group(1) if m else ""


def _pick_entity(options: list[Match], low: str) -> Match:
    """One span, several kinds ("Berlin" a city and a company): the word before decides, then specificity
    (a city before a country), then how common each is in the directory."""
    by_kind = {m.kind: m for m in options}
    prev = _prev_word(low, options[0].start)
    place = by_kind.get("city") or by_kind.get("country")
    if prev in _PLACE_LEAD and place:
        return place
    if prev in _ORG_LEAD and "company" in by_kind:
        return by_kind["company"]
    if "company" in by_kind and place and by_kind["company"].count > place.count:
        return by_kind["company"]
    return place or by_kind["company"]


def _exclusion_segments(low: str) -> list[tuple[int, int]]:
    """Where "not from X", "excluding X and Y" applies: from the lead words to the next clause."""
    segs = []
    for m in _EXCLUDE_LEAD.finditer(low):
        tail_end = len(low)
        nxt = re.search(r"[,.;]|\b(?:who|with|and\s+(?:open|in|at|after|before|under))\b", low[m.end():])
        if nxt:
            tail_end = m.end() + nxt.start()
        segs.append((m.end(), tail_end))
    return segs


def parse_deterministic(query: str, *, gazetteer: Gazetteer | None = None) -> dict[str, Any]:  # noqa: C901, PLR0912, PLR0915 - one pass over a rule table
    """Rule-based extraction over the directory's vocabulary; confidence reflects how much of the query it
    understood. `understood` lists what became a constraint (and how: exact, alias, fuzzy, rule);
    `unused_terms` the words that matched nothing structured: they still count as free text (keywords for the
    lexical bonus and the embedding), but no filter or boost was built from them, and the page says so."""
    g = gazetteer or curated_gazetteer()
    text = " ".join((query or "").split())
    p = empty_payload(text)
    must, should, exclude = p["must"], p["should"], p["exclude"]
    low = text.lower()
    spans: list[tuple[int, int]] = []  # every span some rule or the vocabulary understood
    understood: list[dict[str, Any]] = []

    def rule_hits(index: list[tuple[re.Pattern, str, str]], kind: str, src: str = low) -> list[str]:
        out = []
        for s, e, n in _find_all(index, src):
            spans.append((s, e))
            out.append(n)
            understood.append({"kind": kind, "text": text[s:e], "value": n, "how": "rule"})
        return out

    must["intent_primary"] = _uniq(rule_hits(_INTENTS, "intent", low + " "))[:2]
    must["seniority_level"] = _uniq(rule_hits(_SENIORITY, "seniority"))
    must["employment_type"] = _uniq(rule_hits(_EMPLOYMENT, "employment_type"))
    domains = rule_hits(_DOMAINS, "domain")
    skills = []
    skill_spans: list[tuple[int, int]] = []
    for pat, s in _SKILLS:
        for m in pat.finditer(low):
            if not any(m.start() < xe and xs < m.end() for xs, xe in spans):
                spans.append((m.start(), m.end()))
                skill_spans.append((m.start(), m.end()))
                skills.append(s)
    teams = []
    for pat, t in _TEAMS:
        if (m := pat.search(low)):
            spans.append((m.start(), m.end()))
            teams.append(t)
    # the directory's own teams ("X team"), skills and domains
    for m in g.scan(low, kinds=("team",)):
        if _TEAM_TAIL.match(low, m.end) and m.norm not in teams:
            tail = _TEAM_TAIL.match(low, m.end)
            spans.append((m.start, tail.end()))
            teams.append(m.norm)
    for m in g.scan(low, kinds=("skill",)):
        if not any(m.start < xe and xs < m.end for xs, xe in spans):
            spans.append((m.start, m.end))
            skill_spans.append((m.start, m.end))
            skills.append(m.norm)
    for m in g.scan(low, kinds=("domain",)):
        spans.append((m.start, m.end))
        domains.append(m.norm)
    for t in _uniq(teams):
        understood.append({"kind": "team", "text": t, "value": t, "how": "exact"})
    for s in _uniq(skills):
        understood.append({"kind": "skill", "text": s, "value": s, "how": "exact"})
    must["team_norm"] = _uniq(teams)
    must["domain"] = _uniq(domains)[:1]
    # a role word that is also a skill ("NLP", "computer vision") asks for the skill too: the role filters, the
    # skill ranks the people who have it first (issue 30: "data scientist with NLP experience")
    skills += [u["text"].lower() for u in understood if u["kind"] == "intent" and u["text"].lower() in vocab.SKILLS]
    should["skills_or_tools"] = _uniq(skills)

    # dates, salary, availability: rules over the text
    if (m := _BETWEEN.search(low)):
        must["time_start"], must["time_end"] = _date(m.group(1), m.group(2)), _date(m.group(3), m.group(4))
        spans.append(m.span())
    else:
        if (m := _AFTER.search(low)):
            must["time_start"] = _bound(m.group(1), m.group(2), m.group(3), step=1)
            spans.append(m.span())
        if (m := _BEFORE.search(low)):
            must["time_end"] = _bound(m.group(1), m.group(2), m.group(3), step=-1)
            spans.append(m.span())
        if not must["time_start"] and not must["time_end"] and (m := _IN_YEAR.search(low)):
            must["time_start"] = must["time_end"] = _date(m.group(1), m.group(2))
            spans.append(m.span())
    if must["time_start"] or must["time_end"]:
        understood.append({"kind": "time", "text": "", "value": f"{must['time_start'] or '…'} – {must['time_end'] or '…'}",
                           "how": "rule"})
    if (m := _SAL_MAX.search(low)) and (m.group(2) or re.search(r"lpa|lakh|lac|salary|ctc|budget|inr|₹|rs", low)):
        must["offer_salary_inr_per_year"] = _money_to_inr(m.group(1), m.group(2))
        spans.append(m.span())
    elif (m := _SAL_ANY.search(low)):
        must["offer_salary_inr_per_year"] = _money_to_inr(m.group(1), m.group(2))
        spans.append(m.span())
    if must["offer_salary_inr_per_year"]:
        understood.append({"kind": "salary", "text": text[spans[-1][0]:spans[-1][1]].strip(),
                           "value": must["offer_salary_inr_per_year"], "how": "rule"})
    if (m := _OPEN.search(low)):
        must["open_to_work_only"] = True
        spans.append(m.span())
        understood.append({"kind": "open_to_work", "text": m.group(), "value": True, "how": "rule"})
    leads = list(_EXCLUDE_LEAD.finditer(low))
    spans += [m.span() for m in leads]

    # names: companies, cities, countries (exact, then typos among the words nothing else understood)
    exact = g.scan(low, kinds=("company", "city", "country"))
    groups: dict[tuple[int, int], list[Match]] = {}
    for m in exact:
        if m.norm == "united states" and m.text == "us" and _prev_word(low, m.start) not in {"in", "from", "the"}:
            continue  # "find us", "show us": the pronoun, not the country
        groups.setdefault((m.start, m.end), []).append(m)
    # a name that is also a skill ("aws", "postman") is the skill unless the query says "at"/"ex"/... before it
    names = [_pick_entity(opts, low) for span, opts in groups.items()
             if not (any(span[0] < xe and xs < span[1] for xs, xe in skill_spans)
                     and _prev_word(low, span[0]) not in _EMPLOYER_LEAD)]
    names += g.fuzzy(low, kinds=("company", "city", "country"), skip=spans + list(groups))
    names.sort(key=lambda m: m.start)
    segments = _exclusion_segments(low)

    def in_exclusion(m: Match) -> bool:
        return any(s <= m.start and m.end <= e for s, e in segments)

    cities: list[Match] = []
    countries: list[Match] = []
    excluded_places: list[str] = []
    for m in names:
        spans.append((m.start, m.end))
        if in_exclusion(m):
            if m.kind == "company":
                exclude["company_norm"].append(m.norm)
                understood.append({**m.as_dict(), "kind": "exclude_company"})
            else:
                excluded_places.append(m.text)  # no "not in <city>" filter exists: said, not silently applied
            continue
        if m.kind == "company":
            must["company_norm"].append(m.norm)
            understood.append(m.as_dict())
        elif m.kind == "city":
            cities.append(m)
        else:
            countries.append(m)
    # an exclusion that named no company excludes its first word as a keyword ("not php")
    for s, e in segments:
        if any(s <= m.start and m.end <= e for m in names):
            continue
        word = low[s:e].split(" ")[0].strip() if low[s:e].strip() else ""
        if word and word not in _STOP:
            exclude["keywords"].append(word)
            spans.append((s, s + len(word)))
            understood.append({"kind": "exclude_keyword", "text": word, "value": word, "how": "rule"})
    must["company_norm"] = _uniq(must["company_norm"])
    exclude["company_norm"] = _uniq(exclude["company_norm"])
    if cities:
        first = cities[0]
        must["city"] = first.norm
        term = g.term("city", first.norm)
        must["country"] = (term.extra or {}).get("country") if term else None
        understood.append(first.as_dict())
        for extra_city in cities[1:]:
            should["keywords"].append(extra_city.norm)
    elif countries:
        must["country"] = countries[0].norm
        understood.append(countries[0].as_dict())

    if _CURRENT.search(low):
        must["is_current"] = True
        spans.append(_CURRENT.search(low).span())
    elif (m := _PAST.search(low)) and must["company_norm"]:
        must["is_current"] = False
        spans.append(m.span())

    # what is left: free-text keywords, and the words no rule or vocabulary entry understood
    left = []
    for m in re.finditer(r"[a-z][a-z0-9+#.\-]*", low):
        w = m.group().strip(".-")
        if (len(w) <= 2 or w in _STOP or m.group() in _STOP or _FILLER.fullmatch(w)
                or any(m.start() < xe and xs < m.end() for xs, xe in spans)):
            continue
        left.append(w)
    intents = list(must["intent_primary"])
    should["keywords"] = _uniq(intents + [k for k in left if k not in intents] + should["keywords"])[:10]
    p["unused_terms"] = _uniq(left + [x.lower() for x in excluded_places])
    p["understood"] = understood

    phrases = []
    for i in must["intent_primary"]:
        phrases.append(f"{i} engineer" if i not in {"product", "design", "analytics", "management"} else i)
    for t in must["team_norm"]:
        phrases.append(f"{t} team")
    phrases.extend(should["skills_or_tools"][:5])
    p["search_phrases"] = _uniq(phrases)[:8]

    cleaned = _EXCLUDE_LEAD.split(text)[0].strip(" ,.") or text
    p["query_cleaned"] = text
    bits = [cleaned] + [f"at {c}" for c in must["company_norm"] if c not in cleaned.lower()]
    p["query_embedding_text"] = " ".join(bits)
    structured = sum(bool(x) for x in (must["company_norm"], must["team_norm"], must["city"] or must["country"],
                                        must["intent_primary"], must["seniority_level"], must["time_start"]
                                        or must["time_end"], must["offer_salary_inr_per_year"],
                                        must["open_to_work_only"], should["skills_or_tools"]))
    p["confidence_score"] = round(min(0.95, 0.45 + 0.1 * structured), 2)
    return p


def parse_with_llm(query: str) -> dict[str, Any]:
    """Cleanup then single-extract; raises search.engine.llm.LLMError on any failure (the caller falls back)."""
    cleaned = chat_json(system=PROMPT_SEARCH_CLEANUP, user=query).get("query_cleaned")
    if not isinstance(cleaned, str) or not cleaned.strip():
        cleaned = query
    data = chat_json(system=PROMPT_SEARCH_SINGLE_EXTRACT, user=cleaned)
    if not isinstance(data.get("must", {}), dict) or not isinstance(data.get("should", {}), dict):
        raise LLMError("extraction reply has the wrong shape")
    base = empty_payload(query)
    for section in ("must", "should", "exclude"):
        sect = data.get(section) or {}
        if not isinstance(sect, dict):
            raise LLMError(f"extraction reply: {section} is not an object")
        base[section].update({k: v for k, v in sect.items() if k in base[section]})
    for key in ("search_phrases", "query_embedding_text", "confidence_score"):
        if key in data:
            base[key] = data[key]
    base["query_cleaned"] = cleaned
    base["parser"] = "llm"
    return base


def llm_unused_terms(query: str, payload: dict[str, Any]) -> list[str]:
    """For the LLM's extraction: the (cleaned) query's words that appear in no extracted value. The LLM reports
    nothing like `understood`, so this compares words; the cleanup pass has already expanded "blr" to
    "Bangalore", but a word the extraction rephrased may still be listed although it was used."""
    used = set(re.findall(r"[a-z0-9+#]+", json.dumps({k: payload.get(k) for k in ("must", "should", "exclude",
                                                                                   "search_phrases")}).lower()))
    return _uniq([w for w in re.findall(r"[a-z][a-z0-9+#]*", (query or "").lower())
                  if len(w) > 2 and w not in _STOP and w not in used and not _FILLER.fullmatch(w)])


def parse_query(query: str, *, gazetteer: Gazetteer | None = None) -> dict[str, Any]:
    """LLM when configured, deterministic otherwise or on any LLM failure. The deterministic parser reads
    `gazetteer` (the directory's vocabulary, people.gazetteer.current()); without one, the curated list only."""
    if is_configured():
        try:
            out = parse_with_llm(query)
            out["unused_terms"] = llm_unused_terms(out.get("query_cleaned") or query, out)
            return out
        except (LLMError, TypeError, ValueError, AttributeError) as exc:
            out = parse_deterministic(query, gazetteer=gazetteer)
            out["parser"] = "deterministic"
            out["parser_fallback_reason"] = str(exc)[:200]
            return out
    out = parse_deterministic(query, gazetteer=gazetteer)
    out["parser"] = "deterministic"
    return out


def dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True)
