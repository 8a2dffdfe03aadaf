"""Sparse (BM25-style) term weights for Qdrant's sparse vector with the IDF modifier.

Why client-side weights: Qdrant multiplies by IDF (the IDF modifier) at query
time, so the document side only needs the BM25 term-frequency saturation with
length normalisation; the query side is a bag of unique terms with weight 1.
Code needs its own tokenizer: `get_model_path` and `getModelPath` must match
"model path", so identifiers are split (snake_case, camelCase, dotted paths)
and the whole identifier is kept as a term too. Terms are hashed with crc32 to
stable uint32 indices, so no vocabulary has to be stored or shared.
"""
from __future__ import annotations

import re
import threading
import zlib
from collections import Counter
from dataclasses import dataclass

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
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    st = getattr(_local, "stemmer", None)
    if st is None:
        st = _local.stemmer = Stemmer.Stemmer("english")
    return st


def tokenize(text: str, *, code: bool = True) -> list[str]:
    """Lowercased, stopword-free, stemmed terms; identifiers also contribute their parts."""
    out: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        parts: list[str] = []
        if code and ("." in word or "_" in word or any(c.isupper() for c in word[1:])):
            out.append(word.lower())  # the whole identifier, unstemmed: exact-symbol queries win
            for piece in re.split(r"[._]+", word):
                parts.extend(p.lower() for p in _CAMEL.findall(piece))
        else:
            parts.extend(p for p in re.split(r"[._]+", word.lower()) if p)
        out.extend(p for p in parts if p not in _STOP and len(p) > 1)
    if not out:
        return out
    return _stem_keep_identifiers(out)


def _stem_keep_identifiers(tokens: list[str]) -> list[str]:
    plain = [t for t in tokens if "." not in t and "_" not in t]
    stemmed = dict(zip(plain, _stemmer().stemWords(plain), strict=True))
    return [stemmed.get(t, t) for t in tokens]


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
    """BM25 document-side weights tf*(k1+1)/(tf+k1*(1-b+b*len/avg)); IDF comes from Qdrant."""
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


def encode_query(text: str, *, code: bool = True) -> SparseVec:
    """Unique query terms with weight 1 (Qdrant's IDF modifier supplies the rest)."""
    weights = {term_index(t): 1.0 for t in tokenize(text, code=code)}
    return _collapse(weights)


def sparse_document_text(*, text: str, path: str = "", symbol: str = "", heading_path: list[str] | None = None,
                         micro_summary: str = "") -> str:
    """What the sparse leg indexes: path, symbol and headings carry much of a code chunk's meaning.

    The symbol is counted twice: a query naming what a function does ("deducted") should reach the function named
    for it (`deduct`) before the code that merely calls it.
    """
    head = " ".join(x for x in [path, symbol, symbol, " ".join(heading_path or [])] if x)
    return f"{head}\n{text}" if head else text
