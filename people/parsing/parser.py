"""Query text -> the constraints payload.

Two parsers, one contract. With an LLM configured: a cleanup prompt, then a
single-extract prompt (both below, the only prompts of query parsing). Without
one, or when it fails in any way, a deterministic parser that really extracts
companies, teams, places, seniority, dates, salary and open-to-work, so the
product works offline and a flaky LLM never fails a paid search. Its names come
from the directory's own vocabulary (people/parsing/gazetteer.py), not only from the
curated list, and it reports what it understood and which words it could not use.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from inference.llm import LLMError, chat_json, is_configured
from people.parsing import curated
from people.parsing.gazetteer import Gazetteer, Match, curated_gazetteer

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
    + ", ".join(sorted(curated.INTENT_WORDS)) + ". Put only explicit hard requirements in must."
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


_INTENTS = _build_alias_index(curated.INTENT_WORDS)
_SENIORITY = _build_alias_index(curated.SENIORITY_WORDS)
_EMPLOYMENT = _build_alias_index(curated.EMPLOYMENT_WORDS)
_DOMAINS = _build_alias_index(curated.DOMAINS)
_SKILLS = [(_alias_pattern(s), s) for s in sorted(curated.SKILLS, key=len, reverse=True)]
_TEAMS = [(re.compile(r"(?<![\w])" + re.escape(t) + r"\s+(?:team|org|group|vertical)\b", re.I), t)
          for t in sorted(curated.TEAMS, key=len, reverse=True)]

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
_STOP = curated.STOP_WORDS


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


@dataclass
class _Parse:
    """What the steps of one deterministic parse share: the text, the payload being filled, every span some rule or
    the vocabulary understood (what is left over is reported as unused), and what was understood, in order."""

    g: Gazetteer
    text: str
    low: str
    p: dict[str, Any]
    spans: list[tuple[int, int]] = field(default_factory=list)
    skill_spans: list[tuple[int, int]] = field(default_factory=list)
    understood: list[dict[str, Any]] = field(default_factory=list)

    @property
    def must(self) -> dict[str, Any]:
        return self.p["must"]

    @property
    def should(self) -> dict[str, Any]:
        return self.p["should"]

    def rule_hits(self, index: list[tuple[re.Pattern, str, str]], kind: str, src: str | None = None) -> list[str]:
        out = []
        for s, e, n in _find_all(index, self.low if src is None else src):
            self.spans.append((s, e))
            out.append(n)
            self.understood.append({"kind": kind, "text": self.text[s:e], "value": n, "how": "rule"})
        return out

    def free(self, start: int, end: int, spans: list[tuple[int, int]] | None = None) -> bool:
        return not any(start < xe and xs < end for xs, xe in (self.spans if spans is None else spans))


def parse_deterministic(query: str, *, gazetteer: Gazetteer | None = None) -> dict[str, Any]:
    """Rule-based extraction over the directory's vocabulary; confidence reflects how much of the query it
    understood. `understood` lists what became a constraint (and how: exact, alias, fuzzy, rule);
    `unused_terms` the words that matched nothing structured: they still count as free text (keywords for the
    lexical bonus and the embedding), but no filter or boost was built from them, and the page says so.
    The steps run in this order because each marks the spans it used: a later step reads only what is left."""
    text = " ".join((query or "").split())
    st = _Parse(g=gazetteer or curated_gazetteer(), text=text, low=text.lower(), p=empty_payload(text))
    _read_roles_and_skills(st=st)
    _read_dates(st=st)
    _read_salary_and_availability(st=st)
    excluded_places = _read_names(st=st)
    _read_current_or_past(st=st)
    _read_leftovers(st=st, excluded_places=excluded_places)
    _write_phrases_and_confidence(st=st)
    return st.p


def _read_roles_and_skills(*, st: _Parse) -> None:
    """Roles, seniority, employment type and domain from the rule tables; skills and teams from the curated lists,
    then the directory's own teams ("X team"), skills and domains."""
    must, should, low = st.must, st.should, st.low
    must["intent_primary"] = _uniq(st.rule_hits(_INTENTS, "intent", low + " "))[:2]
    must["seniority_level"] = _uniq(st.rule_hits(_SENIORITY, "seniority"))
    must["employment_type"] = _uniq(st.rule_hits(_EMPLOYMENT, "employment_type"))
    domains = st.rule_hits(_DOMAINS, "domain")
    skills = []
    for pat, s in _SKILLS:
        for m in pat.finditer(low):
            if st.free(m.start(), m.end()):
                st.spans.append((m.start(), m.end()))
                st.skill_spans.append((m.start(), m.end()))
                skills.append(s)
    teams = []
    for pat, t in _TEAMS:
        if (m := pat.search(low)):
            st.spans.append((m.start(), m.end()))
            teams.append(t)
    for m in st.g.scan(low, kinds=("team",)):
        if _TEAM_TAIL.match(low, m.end) and m.norm not in teams:
            tail = _TEAM_TAIL.match(low, m.end)
            st.spans.append((m.start, tail.end()))
            teams.append(m.norm)
    for m in st.g.scan(low, kinds=("skill",)):
        if st.free(m.start, m.end):
            st.spans.append((m.start, m.end))
            st.skill_spans.append((m.start, m.end))
            skills.append(m.norm)
    for m in st.g.scan(low, kinds=("domain",)):
        st.spans.append((m.start, m.end))
        domains.append(m.norm)
    for t in _uniq(teams):
        st.understood.append({"kind": "team", "text": t, "value": t, "how": "exact"})
    for s in _uniq(skills):
        st.understood.append({"kind": "skill", "text": s, "value": s, "how": "exact"})
    must["team_norm"] = _uniq(teams)
    must["domain"] = _uniq(domains)[:1]
    # a role word that is also a skill ("NLP", "computer vision") asks for the skill too: the role filters, the
    # skill ranks the people who have it first ("data scientist with NLP experience")
    skills += [u["text"].lower() for u in st.understood
               if u["kind"] == "intent" and u["text"].lower() in curated.SKILLS]
    should["skills_or_tools"] = _uniq(skills)


def _read_dates(*, st: _Parse) -> None:
    """A range ("between 2018 and 2020"), else open bounds ("after 2019", "before 2021-06"), else one year."""
    must, low = st.must, st.low
    if (m := _BETWEEN.search(low)):
        must["time_start"], must["time_end"] = _date(m.group(1), m.group(2)), _date(m.group(3), m.group(4))
        st.spans.append(m.span())
    else:
        if (m := _AFTER.search(low)):
            must["time_start"] = _bound(m.group(1), m.group(2), m.group(3), step=1)
            st.spans.append(m.span())
        if (m := _BEFORE.search(low)):
            must["time_end"] = _bound(m.group(1), m.group(2), m.group(3), step=-1)
            st.spans.append(m.span())
        if not must["time_start"] and not must["time_end"] and (m := _IN_YEAR.search(low)):
            must["time_start"] = must["time_end"] = _date(m.group(1), m.group(2))
            st.spans.append(m.span())
    if must["time_start"] or must["time_end"]:
        st.understood.append({"kind": "time", "text": "",
                              "value": f"{must['time_start'] or '…'} – {must['time_end'] or '…'}", "how": "rule"})


def _read_salary_and_availability(*, st: _Parse) -> None:
    """The offer ("under 40 lpa"), open-to-work, and the exclusion lead words (their words are understood)."""
    must, low = st.must, st.low
    if (m := _SAL_MAX.search(low)) and (m.group(2) or re.search(r"lpa|lakh|lac|salary|ctc|budget|inr|₹|rs", low)):
        must["offer_salary_inr_per_year"] = _money_to_inr(m.group(1), m.group(2))
        st.spans.append(m.span())
    elif (m := _SAL_ANY.search(low)):
        must["offer_salary_inr_per_year"] = _money_to_inr(m.group(1), m.group(2))
        st.spans.append(m.span())
    if must["offer_salary_inr_per_year"]:
        st.understood.append({"kind": "salary", "text": st.text[st.spans[-1][0]:st.spans[-1][1]].strip(),
                              "value": must["offer_salary_inr_per_year"], "how": "rule"})
    if (m := _OPEN.search(low)):
        must["open_to_work_only"] = True
        st.spans.append(m.span())
        st.understood.append({"kind": "open_to_work", "text": m.group(), "value": True, "how": "rule"})
    st.spans += [m.span() for m in _EXCLUDE_LEAD.finditer(low)]


def _name_matches(*, st: _Parse) -> list[Match]:
    """Companies, cities and countries: exact, then typos among the words nothing else understood. A name that is
    also a skill ("aws", "postman") is the skill unless the query says "at"/"ex"/... before it."""
    low = st.low
    groups: dict[tuple[int, int], list[Match]] = {}
    for m in st.g.scan(low, kinds=("company", "city", "country")):
        if m.norm == "united states" and m.text == "us" and _prev_word(low, m.start) not in {"in", "from", "the"}:
            continue  # "find us", "show us": the pronoun, not the country
        groups.setdefault((m.start, m.end), []).append(m)
    names = [_pick_entity(opts, low) for span, opts in groups.items()
             if not (not st.free(span[0], span[1], st.skill_spans) and _prev_word(low, span[0]) not in _EMPLOYER_LEAD)]
    names += st.g.fuzzy(low, kinds=("company", "city", "country"), skip=st.spans + list(groups))
    names.sort(key=lambda m: m.start)
    return names


def _read_names(*, st: _Parse) -> list[str]:
    """Names become company filters, the place, or exclusions; an exclusion that named no company excludes its
    first word as a keyword ("not php"). Returns the places said after an exclusion: no "not in <city>" filter
    exists, so they are reported as unused rather than silently applied."""
    must, should, exclude, low = st.must, st.should, st.p["exclude"], st.low
    names = _name_matches(st=st)
    segments = _exclusion_segments(low)
    cities: list[Match] = []
    countries: list[Match] = []
    excluded_places: list[str] = []
    for m in names:
        st.spans.append((m.start, m.end))
        if any(s <= m.start and m.end <= e for s, e in segments):
            if m.kind == "company":
                exclude["company_norm"].append(m.norm)
                st.understood.append({**m.as_dict(), "kind": "exclude_company"})
            else:
                excluded_places.append(m.text)
            continue
        if m.kind == "company":
            must["company_norm"].append(m.norm)
            st.understood.append(m.as_dict())
        elif m.kind == "city":
            cities.append(m)
        else:
            countries.append(m)
    for s, e in segments:
        if any(s <= m.start and m.end <= e for m in names):
            continue
        word = low[s:e].split(" ")[0].strip() if low[s:e].strip() else ""
        if word and word not in _STOP:
            exclude["keywords"].append(word)
            st.spans.append((s, s + len(word)))
            st.understood.append({"kind": "exclude_keyword", "text": word, "value": word, "how": "rule"})
    must["company_norm"] = _uniq(must["company_norm"])
    exclude["company_norm"] = _uniq(exclude["company_norm"])
    if cities:
        first = cities[0]
        must["city"] = first.norm
        term = st.g.term("city", first.norm)
        must["country"] = (term.extra or {}).get("country") if term else None
        st.understood.append(first.as_dict())
        for extra_city in cities[1:]:
            should["keywords"].append(extra_city.norm)
    elif countries:
        must["country"] = countries[0].norm
        st.understood.append(countries[0].as_dict())
    return excluded_places


def _read_current_or_past(*, st: _Parse) -> None:
    """A current card when the query says "currently at"; a past one for "ex-", "formerly", once a company was named."""
    if (m := _CURRENT.search(st.low)):
        st.must["is_current"] = True
        st.spans.append(m.span())
    elif (m := _PAST.search(st.low)) and st.must["company_norm"]:
        st.must["is_current"] = False
        st.spans.append(m.span())


def _read_leftovers(*, st: _Parse, excluded_places: list[str]) -> None:
    """What is left: free-text keywords, and the words no rule or vocabulary entry understood."""
    left = []
    for m in re.finditer(r"[a-z][a-z0-9+#.\-]*", st.low):
        w = m.group().strip(".-")
        if (len(w) <= 2 or w in _STOP or m.group() in _STOP or _FILLER.fullmatch(w)
                or not st.free(m.start(), m.end())):
            continue
        left.append(w)
    intents = list(st.must["intent_primary"])
    st.should["keywords"] = _uniq(intents + [k for k in left if k not in intents] + st.should["keywords"])[:10]
    st.p["unused_terms"] = _uniq(left + [x.lower() for x in excluded_places])
    st.p["understood"] = st.understood


def _write_phrases_and_confidence(*, st: _Parse) -> None:
    """The phrases and the text the query is embedded with, and a confidence that grows with each kind of
    constraint understood."""
    must, should, p, text = st.must, st.should, st.p, st.text
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


def parse_with_llm(query: str) -> dict[str, Any]:
    """Cleanup then single-extract; raises inference.llm.LLMError on any failure (the caller falls back)."""
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
    `gazetteer` (the directory's vocabulary, people.parsing.gazetteer.current()); without one, the curated list only."""
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
