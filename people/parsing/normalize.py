"""validate_and_normalize: whatever the parser said, the ranker gets a sane payload.

Why so defensive: the payload may come from an LLM. Every rule here protects
recall (too many hard MUSTs return nobody) or correctness (a swapped date range,
a salary in lakhs read as rupees).
"""
from __future__ import annotations

import calendar
import copy
import re
from datetime import date
from typing import Any

from people.constants import EMPLOYMENT_TYPES, INTENTS, SENIORITY_LEVELS, C
from people.parsing.parser import _money_to_inr, empty_payload

_LIST_MUST = ("company_norm", "team_norm", "intent_primary", "domain", "sub_domain", "employment_type",
              "seniority_level")
_WEAK_MUST = ("team_norm", "domain", "sub_domain", "employment_type", "seniority_level")  # demoted on low confidence
OPEN_START = "1900-01-01"
_DATE_RE = re.compile(r"^\s*(\d{4})(?:-(\d{1,2}))?(?:-(\d{1,2}))?\s*$")
_COMPANY_SUFFIX = re.compile(r"\b(?:pvt\.?|private|ltd\.?|limited|inc\.?|llp|corp(?:oration)?\.?|technologies|"
                             r"india)\s*$", re.I)


def clean_token(value: Any) -> str:
    if not isinstance(value, str):  # lists of names hold strings; numbers/objects are parser noise
        return ""
    s = re.sub(r"\s+", " ", str(value)).strip().strip(",;.\"'").lower()
    return s[: C().MAX_TOKEN_LEN]


def clean_list(values: Any) -> list[str]:
    """Strings only, trimmed, lowercased, deduplicated in order, bounded."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)):
        return []
    return list(dict.fromkeys(t for t in (clean_token(v) for v in values) if t))[: C().MAX_LIST_ITEMS]


def normalize_company(name: str) -> str:
    s = clean_token(name)
    for _ in range(3):
        s2 = _COMPANY_SUFFIX.sub("", s).strip(" ,.")
        if s2 == s:
            break
        s = s2
    return s


def normalize_date(value: Any, *, end: bool) -> str | None:
    """YYYY, YYYY-MM, YYYY-MM-DD -> ISO day; an end bound goes to the last day of its period."""
    if value is None:
        return None
    if isinstance(value, int) and 1900 <= value <= 2100:
        value = str(value)
    if not isinstance(value, str):
        return None
    m = _DATE_RE.match(value)
    if not m:
        return None
    y = int(m.group(1))
    if not 1900 <= y <= 2100:
        return None
    mo = int(m.group(2)) if m.group(2) else None
    d = int(m.group(3)) if m.group(3) else None
    if mo is not None and not 1 <= mo <= 12:
        return None
    if mo is None:
        return date(y, 12, 31).isoformat() if end else date(y, 1, 1).isoformat()
    last = calendar.monthrange(y, mo)[1]
    if d is None:
        return date(y, mo, last if end else 1).isoformat()
    if not 1 <= d <= last:
        return None
    return date(y, mo, d).isoformat()


def normalize_salary(value: Any) -> int | None:
    """Numbers or strings like '40 LPA', '1.2 cr', '4000000' -> INR per year; nonsense -> None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if value <= 0:
            return None
        return int(round(value * 100_000)) if value < 1000 else int(round(value))
    if isinstance(value, str):
        m = re.search(r"(\d+(?:\.\d+)?)\s*(lpa|lakhs?|lacs?|l\b|cr|crores?|k\b)?", value.replace(",", ""), re.I)
        if not m:
            return None
        v = _money_to_inr(m.group(1), m.group(2))
        return v if v and v > 0 else None
    return None


def _bool_or_none(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in {"true", "yes", "1"}:
        return True
    if isinstance(v, str) and v.lower() in {"false", "no", "0"}:
        return False
    return None


def validate_and_normalize(payload: Any, *, query: str) -> dict[str, Any]:
    k = C()
    src = payload if isinstance(payload, dict) else {}
    out = empty_payload(query)
    for key in ("parser", "parser_fallback_reason"):
        if key in src:
            out[key] = src[key]
    # what the parser understood and what it could not use, shown to the searcher
    out["unused_terms"] = clean_list(src.get("unused_terms"))
    out["understood"] = [{k: (v if isinstance(v, (int, float, bool)) else clean_token(v)) for k, v in item.items()
                          if k in ("kind", "text", "value", "how", "score")}
                         for item in (src.get("understood") or [])[: k.MAX_LIST_ITEMS * 2] if isinstance(item, dict)]
    out["query_original"] = query
    qc = src.get("query_cleaned")
    out["query_cleaned"] = qc.strip() if isinstance(qc, str) and qc.strip() else query
    must_in = src.get("must") if isinstance(src.get("must"), dict) else {}
    should_in = src.get("should") if isinstance(src.get("should"), dict) else {}
    excl_in = src.get("exclude") if isinstance(src.get("exclude"), dict) else {}
    must, should, exclude = out["must"], out["should"], out["exclude"]
    demoted: list[str] = []

    # lists: dedupe/cleanup
    for key in _LIST_MUST:
        vals = clean_list(must_in.get(key))
        if key == "company_norm":
            vals = list(dict.fromkeys(v for v in (normalize_company(x) for x in vals) if v))
        must[key] = vals
    for key in ("skills_or_tools", "keywords", "intent_secondary"):
        should[key] = clean_list(should_in.get(key))
    exclude["company_norm"] = list(dict.fromkeys(v for v in (normalize_company(x)
                                                             for x in clean_list(excl_in.get("company_norm"))) if v))
    exclude["keywords"] = clean_list(excl_in.get("keywords"))
    out["search_phrases"] = clean_list(src.get("search_phrases"))

    # enum validation: unknown values are not dropped, they become SHOULD keywords
    for key, allowed in (("intent_primary", INTENTS), ("employment_type", EMPLOYMENT_TYPES),
                         ("seniority_level", SENIORITY_LEVELS)):
        good = [v for v in must[key] if v in allowed]
        demoted += [v for v in must[key] if v not in allowed]
        must[key] = good
    should["intent_secondary"] = [v for v in should["intent_secondary"] if v in INTENTS]

    # a company both required and excluded is a contradiction: the exclusion wins
    must["company_norm"] = [c for c in must["company_norm"] if c not in exclude["company_norm"]]

    # MUST caps -> overflow demoted to SHOULD
    caps = {"company_norm": k.MAX_MUST_COMPANIES, "team_norm": k.MAX_MUST_TEAMS}
    for key in _LIST_MUST:
        cap = caps.get(key, k.MAX_MUST_LIST)
        if len(must[key]) > cap:
            demoted += must[key][cap:]
            must[key] = must[key][:cap]

    # confidence
    try:
        conf = float(src.get("confidence_score", 0.0))
    except (TypeError, ValueError):
        conf = 0.0
    conf = min(1.0, max(0.0, conf)) if conf == conf else 0.0
    out["confidence_score"] = conf
    if conf < k.MIN_CONFIDENCE_FOR_SOFT_MUST:
        for key in _WEAK_MUST:
            demoted += must[key]
            must[key] = []

    # scalars
    for key in ("location_text", "city", "country"):
        must[key] = clean_token(must_in.get(key)) or None
    must["is_current"] = _bool_or_none(must_in.get("is_current"))
    must["open_to_work_only"] = _bool_or_none(must_in.get("open_to_work_only"))
    must["offer_salary_inr_per_year"] = normalize_salary(must_in.get("offer_salary_inr_per_year"))

    # dates (three forms) and swap
    ts = normalize_date(must_in.get("time_start"), end=False)
    te = normalize_date(must_in.get("time_end"), end=True)
    if ts and te and ts > te:
        ts, te = normalize_date(must_in.get("time_end"), end=False), normalize_date(must_in.get("time_start"), end=True)
        out["dates_swapped"] = True
    # an open-ended range ("after 2020", "before 2019") is closed here, not dropped: the tier filter needs
    # both bounds
    if ts and not te:
        te, out["time_open_ended"] = date.today().isoformat(), "end"
    elif te and not ts:
        ts, out["time_open_ended"] = OPEN_START, "start"
    must["time_start"], must["time_end"] = ts, te

    should["keywords"] = list(dict.fromkeys(should["keywords"] + demoted))[: k.MAX_LIST_ITEMS]
    qet = src.get("query_embedding_text")
    out["query_embedding_text"] = qet.strip() if isinstance(qet, str) and qet.strip() else ""
    out["demoted_to_should"] = demoted
    return out


def apply_overrides(parsed: dict[str, Any], *, open_to_work_only: bool | None, salary_max: int | None,
                    preferred_locations: list[str] | None) -> dict[str, Any]:
    """The request body beats the parser; salary_min is validated but not used for filtering."""
    out = copy.deepcopy(parsed)
    must = out["must"]
    if open_to_work_only is not None:
        must["open_to_work_only"] = open_to_work_only
    if salary_max is not None:
        must["offer_salary_inr_per_year"] = int(salary_max)
    out["preferred_locations"] = clean_list(preferred_locations or [])
    return out
