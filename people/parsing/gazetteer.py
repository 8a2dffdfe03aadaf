"""The parser's gazetteers: every company, team, city, country, skill and domain the directory knows, with aliases.

Why tokens and n-grams, not one regex per alias: a real directory has thousands of companies, and a regex per
alias costs a pass over the query each; a dictionary lookup per n-gram does not grow with the vocabulary. Tokens
also give word boundaries for free: "ola" is a token of "ola cabs", never of "motorola".
Why a deletion index for typos (SymSpell): "flipkrat" and "flipkart" share a one-deletion neighbour ("flipkat"),
so a typo is found by a handful of dictionary lookups instead of an edit distance against every company; the
candidates are then checked with a real (optimal string alignment) edit distance.
Where the entries come from, strongest first: admin aliases (VocabAlias), the curated list (people/parsing/curated.py:
real aliases such as Bengaluru and Bombay that no directory row spells out), then the directory itself
(VocabTerm, counted by people/parsing/vocabulary.py), including its spacing variants ("dream 11" = "dream11").
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from people.constants import C
from people.models import VocabAlias, VocabTerm
from people.parsing import curated

KINDS = ("company", "team", "city", "country", "skill", "domain")
FUZZY_KINDS = ("company", "city", "country")  # names: skills and teams are common words, typo-correcting them guesses
_RANK = {"admin": 3, "curated": 2, "data": 1, "variant": 0}
_TOKEN = re.compile(r"[a-z0-9][a-z0-9+#]*(?:'[a-z]+)?|\+\+|#")


def tokens(text: str) -> list[tuple[int, int, str]]:
    """(start, end, key) per word of the lowercased text; the key drops apostrophes ("byju's" -> "byjus")."""
    return [(m.start(), m.end(), m.group().replace("'", "")) for m in _TOKEN.finditer(text.lower())]


def key_of(text: str) -> str:
    """The lookup form of a name: its tokens joined by one space ("Node.js" -> "node js", "CI/CD" -> "ci cd")."""
    return " ".join(k for _s, _e, k in tokens(text or ""))


def osa_distance(a: str, b: str, *, limit: int) -> int:
    """Optimal string alignment distance (a swap of neighbours is one edit), or limit + 1 once past the limit."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


@dataclass(frozen=True)
class Term:
    kind: str
    norm: str
    count: int
    source: str  # admin | curated | data | variant
    extra: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    kind: str
    norm: str
    text: str      # the words of the query it covers
    how: str       # exact | alias | fuzzy
    count: int

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "value": self.norm, "how": self.how}


class Gazetteer:
    """key -> kind -> Term, plus a deletion index over the names of FUZZY_KINDS."""

    def __init__(self) -> None:
        self._index: dict[str, dict[str, Term]] = {}
        self._deletes: dict[str, set[tuple[str, str]]] = {}
        self.size = 0

    def add(self, *, kind: str, alias: str, norm: str, count: int = 0, source: str = "data",
            extra: dict | None = None) -> None:
        key = key_of(alias)
        norm = (norm or "").strip().lower()
        if not key or not norm or kind not in KINDS:
            return
        if source in ("data", "variant") and (len(key) < 2 or key in curated.COMMON_WORDS):
            return  # a company called "search" or "the" would hijack ordinary words; an admin alias may say so
        self._put(key, Term(kind, norm, count, source, extra or {}))
        joined = key.replace(" ", "")
        if joined != key and len(joined) >= 4:
            self._put(joined, Term(kind, norm, count, "variant" if source == "data" else source, extra or {}))
        if kind in FUZZY_KINDS and len(joined) >= C().FUZZY_MIN_LEN:
            for d in _deletions(joined) | {joined}:
                self._deletes.setdefault(d, set()).add((joined, kind))

    def _put(self, key: str, term: Term) -> None:
        slot = self._index.setdefault(key, {})
        old = slot.get(term.kind)
        if old is None:
            self.size += 1
        if old is None or (_RANK[term.source], term.count) > (_RANK[old.source], old.count):
            slot[term.kind] = term

    def lookup(self, key: str) -> dict[str, Term]:
        return self._index.get(key, {})

    def norms(self, kind: str) -> set[str]:
        """Every value of one kind (the semantic role matching embeds the skills)."""
        return {t.norm for slot in self._index.values() for t in slot.values() if t.kind == kind}

    def knows(self, word: str) -> bool:
        return key_of(word) in self._index

    def term(self, kind: str, norm: str) -> Term | None:
        return self._index.get(key_of(norm), {}).get(kind)

    def scan(self, text: str, *, kinds: Iterable[str], max_words: int = 4) -> list[Match]:
        """Leftmost-longest exact matches of the given kinds, never overlapping one another (a span may carry
        several kinds: the caller decides between "Berlin" the city and "Berlin" a company)."""
        kinds = set(kinds)
        toks = tokens(text)
        out: list[Match] = []
        i = 0
        while i < len(toks):
            for n in range(min(max_words, len(toks) - i), 0, -1):
                words = [k for _s, _e, k in toks[i:i + n]]
                key = " ".join(words)
                hits = {k: t for k, t in self.lookup(key).items() if k in kinds}
                if not hits and n > 1:
                    hits = {k: t for k, t in self.lookup("".join(words)).items() if k in kinds}
                if hits:
                    s, e = toks[i][0], toks[i + n - 1][1]
                    for kind, t in hits.items():
                        how = "exact" if key_of(t.norm) == key else "alias"
                        out.append(Match(s, e, kind, t.norm, text[s:e], how, t.count))
                    i += n
                    break
            else:
                i += 1
        return out

    def fuzzy(self, text: str, *, kinds: Iterable[str], skip: Iterable[tuple[int, int]] = ()) -> list[Match]:
        """Typo matches for words (and two-word runs) that nothing else understood: one edit below
        8 characters, FUZZY_MAX_EDITS_LONG from 8 on; the closest wins, then the most common."""
        k = C()
        kinds = set(kinds)
        skip = list(skip)
        toks = tokens(text)
        out: list[Match] = []
        taken: list[tuple[int, int]] = []
        for n in (2, 1):
            for i in range(len(toks) - n + 1):
                s, e = toks[i][0], toks[i + n - 1][1]
                if any(s < xe and xs < e for xs, xe in skip + taken):
                    continue
                words = [w for _s, _e, w in toks[i:i + n]]
                if any(w in curated.COMMON_WORDS or self.knows(w) or w.isdigit() for w in words):
                    continue
                word = "".join(words)
                if len(word) < k.FUZZY_MIN_LEN:
                    continue
                limit = 1 if len(word) < 8 else k.FUZZY_MAX_EDITS_LONG
                best: tuple[int, int, Term] | None = None
                for d in _deletions(word) | {word}:
                    for cand, kind in self._deletes.get(d, ()):
                        if kind not in kinds:
                            continue
                        dist = osa_distance(word, cand, limit=limit)
                        term = self._index[cand][kind] if kind in self._index.get(cand, {}) else None
                        if dist > limit or term is None:
                            continue
                        if best is None or (dist, -term.count) < (best[0], -best[2].count):
                            best = (dist, term.count, term)
                if best is not None:
                    t = best[2]
                    out.append(Match(s, e, t.kind, t.norm, text[s:e], "fuzzy", t.count))
                    taken.append((s, e))
        out.sort(key=lambda m: m.start)
        return out


def add_curated(g: Gazetteer) -> None:
    for kind, mapping in (("company", curated.COMPANIES), ("city", curated.CITIES), ("country", curated.COUNTRIES)):
        for norm, aliases in mapping.items():
            extra = {"country": curated.CITY_COUNTRY[norm]} if kind == "city" and norm in curated.CITY_COUNTRY else {}
            for alias in [norm, *aliases]:
                g.add(kind=kind, alias=alias, norm=norm, source="curated", extra=extra)


def curated_gazetteer() -> Gazetteer:
    """The curated list alone: what the parser knows with no directory (and what unit tests parse with)."""
    g = Gazetteer()
    add_curated(g)
    return g


def build(*, terms: Iterable[tuple[str, str, int, dict]], aliases: Iterable[tuple[str, str, str]]) -> Gazetteer:
    """terms: (kind, norm, count, extra) from the directory; aliases: (kind, alias, norm) from the admin."""
    g = Gazetteer()
    counts: dict[tuple[str, str], tuple[int, dict]] = {}
    for kind, norm, count, extra in terms:
        counts[(kind, norm)] = (count, extra or {})
        g.add(kind=kind, alias=norm, norm=norm, count=count, source="data", extra=extra)
    add_curated(g)
    for kind, alias, norm in aliases:
        count, extra = counts.get((kind, norm), (0, {}))
        g.add(kind=kind, alias=alias, norm=norm, count=count, source="admin", extra=extra)
    return g


_CACHE: dict[str, tuple[tuple, Gazetteer]] = {}


def current() -> Gazetteer:
    """The directory's gazetteer, rebuilt in this process only when the vocabulary tables changed.

    Why the version is read from Postgres (row counts and newest update of both tables, one indexed query):
    another process (an import, an admin edit) may have changed the vocabulary, and a rolled-back change
    must not leave a stale cache behind, which a counter kept elsewhere would."""
    with connection.cursor() as cur:
        cur.execute("SELECT (SELECT count(*) FROM people_vocabterm), (SELECT max(updated_at) FROM people_vocabterm),"
                    " (SELECT count(*) FROM people_vocabalias), (SELECT max(updated_at) FROM people_vocabalias)")
        version = (connection.settings_dict["NAME"], *cur.fetchone())
    hit = _CACHE.get(connection.alias)
    if hit is not None and hit[0] == version:
        return hit[1]
    g = build(terms=VocabTerm.objects.values_list("kind", "norm", "count", "extra").iterator(),
              aliases=VocabAlias.objects.values_list("kind", "alias", "norm"))
    _CACHE[connection.alias] = (version, g)
    return g
