"""Query text -> the §8.2 constraints payload.

Two parsers, one contract. With an LLM configured: a cleanup prompt, then a
single-extract prompt (both below, the only prompts of query parsing). Without
one, or when it fails in any way, a deterministic parser that really extracts
companies, teams, places, seniority, dates, salary and open-to-work, so the
product works offline and a flaky LLM never fails a paid search.
"""
from __future__ import annotations

import json
import re
from typing import Any

from people import vocab

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


_COMPANIES = _build_alias_index(vocab.COMPANIES)
_CITIES = _build_alias_index(vocab.CITIES)
_COUNTRIES = _build_alias_index(vocab.COUNTRIES)
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
_STOP = set("a an the and or of in at for to with who whose which that from on by as is are was were be been having "
            "has have worked working work experience experienced people person engineers engineer developers developer "
            "folks candidates profiles someone anyone find show me get looking search for us our india based not no "
            "excluding except exclude other apart".split())


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


def parse_deterministic(query: str) -> dict[str, Any]:  # noqa: C901, PLR0912, PLR0915 - one pass over a rule table; issue 17 replaces it with a learned vocabulary
    """Rule-based extraction; confidence reflects how much of the query it understood."""
    text = " ".join((query or "").split())
    p = empty_payload(text)
    must, should, exclude = p["must"], p["should"], p["exclude"]
    low = text.lower()

    # exclusions first: "not from TCS", "excluding Infosys and Wipro"
    excluded_spans: list[tuple[int, int]] = []
    for m in _EXCLUDE_LEAD.finditer(low):
        tail_end = len(low)
        nxt = re.search(r"[,.;]|\b(?:who|with|and\s+(?:open|in|at|after|before|under))\b", low[m.end():])
        if nxt:
            tail_end = m.end() + nxt.start()
        seg = low[m.end():tail_end]
        found = False
        for s, e, norm in _find_all(_COMPANIES, seg):
            exclude["company_norm"].append(norm)
            excluded_spans.append((m.end() + s, m.end() + e))
            found = True
        if not found:
            word = seg.split(" ")[0].strip() if seg.strip() else ""
            if word and word not in _STOP:
                exclude["keywords"].append(word)
                excluded_spans.append((m.end(), m.end() + len(word)))

    def excluded(s: int, e: int) -> bool:
        return any(s < xe and xs < e for xs, xe in excluded_spans)

    must["company_norm"] = _uniq([n for s, e, n in _find_all(_COMPANIES, low) if not excluded(s, e)])
    must["team_norm"] = _uniq([t for pat, t in _TEAMS if pat.search(low)])
    cities = [n for s, e, n in _find_all(_CITIES, low) if not excluded(s, e)]
    if cities:
        must["city"] = cities[0]
        must["country"] = vocab.CITY_COUNTRY.get(cities[0])
        if len(cities) > 1:
            should["keywords"].extend(cities[1:])
    else:
        countries = [n for s, e, n in _find_all(_COUNTRIES, low) if n != "united states" or " us " not in f" {low} "
                     or re.search(r"\b(?:in|from)\s+(?:the\s+)?us\b", low)]
        if countries:
            must["country"] = countries[0]
    must["intent_primary"] = _uniq([n for _s, _e, n in _find_all(_INTENTS, low + " ")])[:2]
    must["seniority_level"] = _uniq([n for _s, _e, n in _find_all(_SENIORITY, low)])
    must["employment_type"] = _uniq([n for _s, _e, n in _find_all(_EMPLOYMENT, low)])
    must["domain"] = _uniq([n for _s, _e, n in _find_all(_DOMAINS, low)])[:1]
    should["skills_or_tools"] = _uniq([s for pat, s in _SKILLS if pat.search(low)])

    # dates
    if (m := _BETWEEN.search(low)):
        must["time_start"], must["time_end"] = _date(m.group(1), m.group(2)), _date(m.group(3), m.group(4))
    else:
        if (m := _AFTER.search(low)):
            must["time_start"] = _bound(m.group(1), m.group(2), m.group(3), step=1)
        if (m := _BEFORE.search(low)):
            must["time_end"] = _bound(m.group(1), m.group(2), m.group(3), step=-1)
        if not must["time_start"] and not must["time_end"] and (m := _IN_YEAR.search(low)):
            must["time_start"] = must["time_end"] = _date(m.group(1), m.group(2))

    # salary
    if (m := _SAL_MAX.search(low)) and (m.group(2) or re.search(r"lpa|lakh|lac|salary|ctc|budget|inr|₹|rs", low)):
        must["offer_salary_inr_per_year"] = _money_to_inr(m.group(1), m.group(2))
    elif (m := _SAL_ANY.search(low)):
        must["offer_salary_inr_per_year"] = _money_to_inr(m.group(1), m.group(2))

    if _OPEN.search(low):
        must["open_to_work_only"] = True
    if _CURRENT.search(low):
        must["is_current"] = True
    elif _PAST.search(low) and must["company_norm"]:
        must["is_current"] = False

    # keywords: the words we did not turn into a structured field
    consumed = set()
    for lst in (must["company_norm"], must["team_norm"], should["skills_or_tools"], exclude["keywords"]):
        for item in lst:
            consumed.update(item.split())
    for v in (must["city"], must["country"]):
        if v:
            consumed.update(v.split())
    for norm in must["company_norm"] + exclude["company_norm"]:
        for alias in vocab.COMPANIES.get(norm, []):
            consumed.update(alias.split())
    for norm in [must["city"], must["country"]] + should["keywords"]:
        for alias in vocab.CITIES.get(norm or "", []) + vocab.COUNTRIES.get(norm or "", []):
            consumed.update(alias.split())
    words = re.findall(r"[a-z][a-z0-9+#.\-]*", low)
    kws = [w.strip(".-") for w in words if w not in _STOP and w.strip(".-") not in consumed and len(w) > 2
           and not re.fullmatch(r"(?:lpa|lakhs?|lacs?|crores?|under|below|after|before|since|open|than|less|"
                                r"between|until|till|currently|current|years?|yoe|more|most|least|max|min)", w)]
    intents = [i for i in must["intent_primary"]]
    should["keywords"] = _uniq(intents + [k for k in kws if k not in intents])[:10]

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
    """Cleanup then single-extract; raises search.llm.LLMError on any failure (the caller falls back)."""
    from search.llm import LLMError, chat_json

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


def parse_query(query: str) -> dict[str, Any]:
    """LLM when configured, deterministic otherwise or on any LLM failure."""
    from search.llm import LLMError, is_configured

    if is_configured():
        try:
            return parse_with_llm(query)
        except (LLMError, TypeError, ValueError, AttributeError) as exc:
            out = parse_deterministic(query)
            out["parser"] = "deterministic"
            out["parser_fallback_reason"] = str(exc)[:200]
            return out
    out = parse_deterministic(query)
    out["parser"] = "deterministic"
    return out


def dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True)
