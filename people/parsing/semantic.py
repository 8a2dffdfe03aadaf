"""Role words the parser has never seen, mapped by meaning to the directory's own vocabulary.

Why: the deterministic parser knows role words through a curated alias table (people/parsing/curated.py), so "data
scientist", "growth marketer" or "test automation engineer" fell through to free text and built no filter or
boost. Here a run of words the parser could not use is embedded (inference.encoders, the model that embeds
the cards) and compared with the directory's vocabulary: the intents (through their aliases and the card titles
that carry them), the titles themselves and the skills (VocabTerm). The nearest intents become the role the query
asks for (a filter when the query named no role, a boost beside one it did), the nearest skills boost, the
nearest title joins the full-text phrases, and each is reported in `understood` with `how: "semantic"` and its
cosine score, so the page says what the words were taken to mean.
Why cached per vocabulary: the vocabulary's vectors are computed once per version of the gazetteer (its object
is rebuilt only when the vocabulary tables change) and of the cards (their titles and the roles present come from
the cards, not from the vocabulary tables: a directory whose cards changed under an unchanged vocabulary, an
import of cards with no new terms, or a test's directory after another's, must not be read through the old
cards' roles), and come from the EmbeddingCache, so a search embeds only its own unmatched phrases.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection

from inference.encoders import embed_cached, embed_texts
from people.constants import INTENTS, C
from people.parsing import curated

if TYPE_CHECKING:
    from people.parsing.gazetteer import Gazetteer

_WORD = re.compile(r"[a-z][a-z0-9+#.\-]*")
# words that join or qualify a role without being one: a phrase never starts or ends with them
_EDGE = frozenset(curated.STOP_WORDS | {"experience", "experienced", "skills", "background", "knowledge"})
# the nouns that end a role ("growth marketer", "test automation engineer"): kept on a phrase, singular
ROLE_NOUNS = frozenset("engineer developer analyst scientist specialist manager designer marketer architect tester "
                       "programmer consultant researcher administrator".split())


@dataclass(frozen=True)
class Vocabulary:
    """What a phrase can map to: texts, their kind (intent | title | skill), the value each stands for (an intent
    for intent aliases and titles, the skill itself), and their unit vectors (one row per text)."""

    texts: list[str]
    kinds: list[str]
    values: list[str]
    vectors: np.ndarray


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _titles() -> list[tuple[str, str]]:
    """(title, the intent most of its cards carry) for the directory's public card titles."""
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT ON (lower(title)) lower(title), intent_primary FROM ("
                    "  SELECT title, intent_primary, count(*) AS n FROM people_experiencecard"
                    "  WHERE visibility = 'public' AND title <> '' AND intent_primary <> ''"
                    "  GROUP BY title, intent_primary) t ORDER BY lower(title), n DESC LIMIT 5000")
        return [(t, i) for t, i in cur.fetchall() if i in INTENTS]


def _intents_present() -> set[str]:
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT intent_primary FROM people_experiencecard WHERE visibility = 'public'")
        return {i for (i,) in cur.fetchall() if i in INTENTS}


def _cards_version() -> tuple[int, int]:
    """How many cards there are and the newest transaction that wrote one (Postgres's xmin: cards have uuid ids and
    no timestamp): one query, changed by any import, card edit or delete; run only when a query has words the
    vocabulary lacks."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), coalesce(max(xmin::text::bigint), 0) FROM people_experiencecard")
        count, newest = cur.fetchone()
    return int(count), int(newest)


def vocabulary(gazetteer: Gazetteer) -> Vocabulary:
    """The vocabulary's texts and vectors for this gazetteer and these cards (built once per version of both).
    Intents come only from roles the directory has: a phrase mapped to a role no card carries would filter
    everyone out."""
    cards = _cards_version()
    hit = _CACHE.get(gazetteer)
    if hit is not None and hit[0] == cards:
        return hit[1]
    rows: dict[tuple[str, str], str] = {}
    present = _intents_present()
    for intent, aliases in curated.INTENT_WORDS.items():
        if intent not in present:
            continue
        for alias in [intent, *aliases]:
            text = alias.strip()
            if len(text) > 2:
                rows.setdefault((text, "intent"), intent)
    for title, intent in _titles():
        rows.setdefault((title, "title"), intent)
    for skill in sorted(gazetteer.norms("skill") | set(curated.SKILLS)):
        rows.setdefault((skill, "skill"), skill)
    texts = [t for t, _k in rows]
    vectors = embed_cached(texts) if texts else np.zeros((0, 1), dtype=np.float32)
    out = Vocabulary(texts=texts, kinds=[k for _t, k in rows], values=list(rows.values()),
                     vectors=np.asarray(vectors, dtype=np.float32))
    _CACHE[gazetteer] = (cards, out)
    return out


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def unmatched_phrases(query: str, unused: list[str]) -> list[str]:
    """Runs of consecutive query words the parser could not use, with the role noun that follows them ("test
    automation engineers" -> "test automation engineer"; "data scientist" in "data scientist with NLP
    experience"), edge words trimmed."""
    unused_set = set(unused)
    words = [m.group().strip(".-") for m in _WORD.finditer((query or "").lower())]
    phrases: list[str] = []
    run: list[str] = []
    for i, w in enumerate(words + [""]):
        if w and w in unused_set:
            run.append(_singular(w) if w.rstrip("s") in ROLE_NOUNS else w)
            continue
        if run:
            if w.rstrip("s") in ROLE_NOUNS and i < len(words):
                run.append(_singular(w))
            phrases.append(run)
        run = []
    out = []
    for words_ in phrases:
        while words_ and words_[0] in _EDGE:
            words_.pop(0)
        while words_ and words_[-1] in _EDGE and words_[-1] not in ROLE_NOUNS:
            words_.pop()
        if words_:
            out.append(" ".join(words_))
    return list(dict.fromkeys(out))


def nearest(phrase_vec: np.ndarray, voc: Vocabulary) -> dict[str, list[tuple[str, float, str]]]:
    """kind -> [(value, score, detail)], best first, one entry per value: "intent" (an intent, through its best
    alias or title; detail: that text), "title" (a title; detail: its intent), "skill" (detail: the skill)."""
    if voc.vectors.shape[0] == 0:
        return {}
    sims = voc.vectors @ phrase_vec
    out: dict[str, dict[str, tuple[float, str]]] = {}
    for i in np.argsort(-sims):
        kind, value, text, score = voc.kinds[i], voc.values[i], voc.texts[i], float(sims[i])
        if kind in ("intent", "title"):
            out.setdefault("intent", {}).setdefault(value, (score, text))
        if kind == "title":
            out.setdefault("title", {}).setdefault(text, (score, value))
        elif kind == "skill":
            out.setdefault("skill", {}).setdefault(value, (score, text))
    return {g: [(v, s, d) for v, (s, d) in sorted(m.items(), key=lambda x: -x[1][0])] for g, m in out.items()}


def _note(understood: list[dict[str, Any]], *, kind: str, phrase: str, value: str, score: float) -> None:
    understood.append({"kind": kind, "text": phrase, "value": value, "how": "semantic", "score": round(score, 3)})


def phrases_to_map(payload: dict[str, Any]) -> list[str]:
    """The phrases enrich() would embed for this parse ([] when switched off): the service embeds them in one
    batch with the query text, so a query with unknown role words costs no second model call."""
    if not C().SEMANTIC_ROLES:
        return []
    return unmatched_phrases(payload.get("query_original") or "", list(payload.get("unused_terms") or []))


def enrich(payload: dict[str, Any], *, gazetteer: Gazetteer, vectors: np.ndarray | None = None) -> dict[str, Any]:
    """The deterministic parse with its unmatched role words mapped by meaning (in place, and returned).

    For each phrase whose nearest intent scores SEMANTIC_MIN_SCORE or more, the intents within
    SEMANTIC_INTENT_MARGIN of it: one alone becomes the role filter (must.intent_primary) when the query named no role, a boost
    (should.intent_secondary) beside one it did; two that near are boosts; three or more mean the words do not
    say which role (measured: "infrastructure engineer" is as near security and QA as DevOps), and nothing is
    built from them. The nearest title of a chosen intent joins the full-text phrases; skills that are not role
    phrases themselves (up to SEMANTIC_MAX_TERMS) boost. The phrase's words leave `unused_terms` only when
    something was built from them. `vectors`: the phrases' vectors, in phrases_to_map's order, when the caller
    has embedded them already."""
    k = C()
    phrases = phrases_to_map(payload)
    if not phrases:
        return payload
    voc = vocabulary(gazetteer)
    vecs = np.asarray(embed_texts(phrases) if vectors is None else vectors, dtype=np.float32)
    must, should = payload["must"], payload["should"]
    understood = list(payload.get("understood") or [])
    used_words: set[str] = set()
    had_role = bool(must.get("intent_primary"))
    for phrase, vec in zip(phrases, vecs, strict=True):
        near = nearest(vec, voc)
        ranked = [(v, s) for v, s, _d in near.get("intent", [])]
        # every role within the margin of the best competes, whether or not it reaches the threshold itself
        # ("pipeline engineer": QA 0.617, DevOps 0.600, data 0.595 says no role)
        intents = ([(v, s) for v, s in ranked if s >= ranked[0][1] - k.SEMANTIC_INTENT_MARGIN]
                   if ranked and ranked[0][1] >= k.SEMANTIC_MIN_SCORE else [])
        if len(intents) > 2:
            intents = []
        chosen = {v for v, _s in intents}
        titles = [(t, s) for t, s, intent in near.get("title", []) if s >= k.SEMANTIC_MIN_SCORE and intent in chosen]
        skills = [(v, s) for v, s, _d in near.get("skill", []) if s >= k.SEMANTIC_MIN_SCORE
                  and not ROLE_NOUNS & {_singular(w) for w in v.split()}][: k.SEMANTIC_MAX_TERMS]
        if not (intents or skills):
            continue
        used_words |= set(phrase.split())
        as_filter = len(intents) == 1 and not had_role
        for value, score in intents:
            target = must["intent_primary"] if as_filter else should["intent_secondary"]
            if value not in target and value not in must["intent_primary"]:
                target.append(value)
            _note(understood, kind="intent", phrase=phrase, value=value, score=score)
        for value, score in skills:
            if value not in should["skills_or_tools"]:
                should["skills_or_tools"].append(value)
            _note(understood, kind="skill", phrase=phrase, value=value, score=score)
        for value, score in titles[:1]:
            payload["search_phrases"] = list(dict.fromkeys([*payload.get("search_phrases", []), value]))
            _note(understood, kind="title", phrase=phrase, value=value, score=score)
    payload["understood"] = understood
    payload["unused_terms"] = [w for w in payload.get("unused_terms") or [] if w not in used_words]
    return payload
