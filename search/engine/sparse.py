"""Sparse (BM25-style) term weights for Qdrant's sparse vector.

Why client-side weights on both sides: the document side carries the BM25
term-frequency saturation with length normalisation, and the query side
carries each term's IDF over the datasets being searched (search.engine.term_stats),
so a score depends only on the searched datasets: not on another tenant's
corpus, another kind of content, or an evaluation sharing the store (which is
what Qdrant's collection-wide IDF modifier would make it depend on).
Code needs its own tokenizer: `get_model_path` and `getModelPath` must match
"model path", so identifiers are split (snake_case, camelCase, dotted, `::` and
a/b/c.py path names) and the whole identifier is kept as a term too. Prose kinds
(web, rules, beir) use the plain analyzer, and a query is analysed like the
documents of the kinds it searches (`query_terms`). Terms are hashed with crc32
to stable uint32 indices, so no vocabulary has to be stored or shared.
"""
from __future__ import annotations

import re
import threading
import zlib
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import NamedTuple

import Stemmer
from bm25s.stopwords import STOPWORDS_EN

K1 = 1.2
B = 0.75
# Average document length (in terms) used for length normalisation; per-collection
# statistics would need a second pass over the corpus, a fixed prior is within noise here.
AVG_LEN = {"code": 120.0, "web": 150.0, "rules": 150.0, "beir": 180.0}

_STOP = frozenset(STOPWORDS_EN) | frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with what which who whom why how where when does do did can could should would i me my we our "
    "you your he she him her its were been being have has had having".split()
)
_WORD = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# Code also joins `a/b/c.py` paths and `std::io::Read` paths into one token, so the whole name can be kept.
_CODE_WORD = re.compile(r"[A-Za-z0-9_]+(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*|/[A-Za-z0-9_][A-Za-z0-9_]*)*")
_SEP = re.compile(r"[./_:]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# A run of letters and digits inside a name (`p2g` in `write_p2g`, `utf8` in `test_utf8_decode`, `ipv6` in
# `ipv6Address`): the camel split cuts it into one-letter parts that are dropped, while a query keeps it whole.
_LETTER_DIGIT = re.compile(r"[A-Z]*[a-z]*\d+[a-z0-9]*")
_JOINER = re.compile(r"[._/:]")  # a word holding one is a symbol's name (identifier), kept whole and not stemmed
_SEGMENT = re.compile(r"\.|/|::")
_PROSE_SPLIT = re.compile(r"[._]+")
_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    st = getattr(_local, "stemmer", None)
    if st is None:
        st = _local.stemmer = Stemmer.Stemmer("english")
    return st


def _is_identifier(word: str) -> bool:
    """snake_case, dotted, path or `::` names, or camelCase/PascalCase with more than one part: a symbol, not a
    word. An all-capitals word (`ASCII`, `HTTP`) is a word: it has one part, and counting it twice (whole and
    part) would double its weight."""
    return _JOINER.search(word) is not None or len(_CAMEL.findall(word)) > 1


def _code_terms(word: str) -> list[str]:
    """The whole identifier, its named segments, then its word parts.

    `self.get_model_path` gives `self.get_model_path`, `get_model_path`, then `self get model path`;
    `search/engine/sparse.py` gives `search/engine/sparse.py`, `sparse.py`, then `search sparse py`. The segments matter
    because a query names `get_model_path` or `sparse.py` while the code says `self.get_model_path(...)` or
    the path is `search/engine/sparse.py`: without them only the stemmed parts could match. A letter-digit run
    is kept beside its parts (`write_p2g` also gives `p2g`): a query says `p2g`, and its parts are one letter each.
    """
    if not _is_identifier(word):
        return [word.lower()]  # it has no `.` or `_` to split on
    whole = word.lower()
    terms = [whole]
    if "/" in word:
        base = word.rsplit("/", 1)[1]
        if base and base.lower() != whole:
            terms.append(base.lower())
    if "." in word or "/" in word or ":" in word:
        for seg in _SEGMENT.split(word):
            if seg and seg.lower() != whole and ("_" in seg or seg[1:] != seg[1:].lower()):  # ASCII: a capital
                terms.append(seg.lower())
    for piece in _SEP.split(word):
        terms.extend(run.lower() for run in _LETTER_DIGIT.findall(piece)
                     if run.lower() != whole and not run.isdigit())
        terms.extend(p.lower() for p in _CAMEL.findall(piece))
    return terms


def tokenize(text: str, *, code: bool = True) -> list[str]:
    """Lowercased, stopword-free, stemmed terms; in code, identifiers also keep their whole name (unstemmed).

    `code=False` is the prose analyzer (web pages, rulebooks, BEIR abstracts): words split on `.` and `_`
    only, every term stemmed, no whole identifiers.
    """
    out: list[str] = []
    if code:
        for word in _CODE_WORD.findall(text):
            out.extend(_code_word_terms(word).terms)
    else:
        for word in _WORD.findall(text):
            out.extend(_prose_word_terms(word).terms)
    return out


# A word's terms (stemmed: the stemmer reads one word at a time) depend on the word alone, and code repeats its
# words (`self`, `return`, a module's names): a first ingest tokenises every chunk twice (the writer's term ids,
# the applier's weights) and spent most of that re-splitting and re-stemming the same words. Bounded: a corpus
# of many distinct words only evicts.
_WORD_CACHE = 1 << 16


class _Word(NamedTuple):
    """A word's terms (in order, repeats kept: tokenize) and their term indices (a set: document_term_ids)."""

    terms: tuple[str, ...]
    ids: frozenset[int]


_ids_of = attrgetter("ids")


def _word(terms: list[str]) -> _Word:
    return _Word(tuple(terms), frozenset(map(term_index, terms)))


@lru_cache(maxsize=_WORD_CACHE)
def _code_word_terms(word: str) -> _Word:
    return _word(_stem_keep_identifiers([t for t in _code_terms(word) if t and t not in _STOP and len(t) > 1]))


@lru_cache(maxsize=_WORD_CACHE)
def _prose_word_terms(word: str) -> _Word:
    return _word(_stem_keep_identifiers([p for p in _PROSE_SPLIT.split(word.lower())
                                         if p and p not in _STOP and len(p) > 1]))


def _stem_keep_identifiers(tokens: list[str]) -> list[str]:
    plain = [t for t in tokens if _JOINER.search(t) is None]
    if len(plain) == len(tokens):
        return _stemmer().stemWords(tokens)
    stems = iter(_stemmer().stemWords(plain))
    return [t if _JOINER.search(t) else next(stems) for t in tokens]


def term_index(term: str) -> int:
    return zlib.crc32(term.encode("utf-8")) & 0xFFFFFFFF


@dataclass(frozen=True)
class SparseVec:
    indices: list[int]
    values: list[float]

    def as_dict(self) -> dict[int, float]:
        return dict(zip(self.indices, self.values, strict=True))


def _collapse(weights: dict[int, float]) -> SparseVec:
    items = sorted(weights.items())
    return SparseVec([i for i, _ in items], [float(v) for _, v in items])


def encode_document(text: str, *, kind: str = "code") -> SparseVec:
    """BM25 document-side weights tf*(k1+1)/(tf+k1*(1-b+b*len/avg)); the query side carries the IDF."""
    tokens = tokenize(text, code=kind == "code")
    if not tokens:
        return SparseVec([], [])
    tf = Counter(tokens)
    norm = K1 * (1 - B + B * len(tokens) / AVG_LEN.get(kind, 150.0))
    weights: dict[int, float] = {}
    for term, n in tf.items():
        idx = term_index(term)
        weights[idx] = weights.get(idx, 0.0) + n * (K1 + 1) / (n + norm)
    return _collapse(weights)


def query_terms(text: str, *, kinds: Collection[str]) -> list[str]:
    """The query analysed the way the documents of the searched kinds were: code -> code, prose kinds -> prose.

    A term only matches if both sides produced it, so the query must use the documents' analyzer: analysed as
    prose, a code query loses `get_model_path`, the term that finds the exact symbol; analysed as code, a
    prose query carries whole-identifier terms no prose document was indexed with. When code and prose kinds
    are searched together (every kind other than code is prose) the query is the union of both term sets:
    each kind's documents find the terms they were indexed with, and a term both analyzers produce is sent
    once (query weights are per unique term), so the union does not double-count the shared words.
    """
    has_code = "code" in kinds
    has_prose = bool(set(kinds) - {"code"})
    if not has_code and not has_prose:  # nothing searchable: analyse as code, the historical default
        has_code = True
    terms: list[str] = []
    if has_code:
        terms.extend(tokenize(text, code=True))
    if has_prose:
        terms.extend(tokenize(text, code=False))
    return list(dict.fromkeys(terms))


def document_term_ids(text: str, *, kind: str) -> list[int]:
    """The distinct term indices a document's sparse vector has (sorted): what its chunk row stores in `terms`,
    so Postgres can keep per-dataset document frequencies (search.engine.term_stats) in the chunk's own transaction.

    The ids of `tokenize`'s terms, read per distinct word from the word's cached analysis: a chunk repeats its
    words, and hashing each occurrence's terms again was most of the writer's tokenising."""
    if kind == "code":
        words, analysed = _CODE_WORD.findall(text), _code_word_terms
    else:
        words, analysed = _WORD.findall(text), _prose_word_terms
    return sorted(set().union(*map(_ids_of, map(analysed, set(words)))))


def encode_query(text: str, *, kinds: Collection[str], idf: Mapping[int, float] | None = None) -> SparseVec:
    """Unique query terms analysed for `kinds`, each weighted by its IDF over the searched datasets (`idf`,
    from search.engine.term_stats; a term absent from it occurs in none of them and is left out). Without `idf`
    every term weighs 1 (a toy index, or tests of the analyzer)."""
    terms = {term_index(t) for t in query_terms(text, kinds=kinds)}
    if idf is None:
        return _collapse(dict.fromkeys(terms, 1.0))
    return _collapse({t: idf[t] for t in terms if t in idf})


def sparse_document_text(*, text: str, path: str = "", symbol: str = "", heading_path: list[str] | None = None,
                         micro_summary: str = "") -> str:
    """What the sparse leg indexes: path, symbol and headings carry much of a code chunk's meaning.

    The symbol is counted twice: a query naming what a function does ("deducted") should reach the function named
    for it (`deduct`) before the code that merely calls it.
    """
    head = " ".join(x for x in [path, symbol, symbol, " ".join(heading_path or [])] if x)
    return f"{head}\n{text}" if head else text
