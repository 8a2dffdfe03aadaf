"""One reranker interface: a sentence-transformers CrossEncoder when RERANKER_MODEL names a local path,
else an embedded reranker that needs no extra weights.

Why the embedded one is lexical: a CrossEncoder built from MiniLM has an
untrained head (no trained cross-encoder ships and none can be downloaded),
and re-scoring with the same bi-encoder adds nothing. The embedded reranker
blends the fused score with how much of the query the chunk's micro-summary,
symbol and path cover, which helps code queries that name a symbol. It is not
the default (see docs/context.md for the SciFact figures); `rerank=true` asks
for it explicitly.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

from config.errors import BadInput, DependencyDown
from inference.encoders import encoding_plan, inference_context, precision
from search.engine.project_ranking import reranker_of
from search.engine.reranker_store import NAME_RE, blend_scores, model_path, models_dir
from search.engine.sparse import tokenize

SNIPPET_CHARS = 1500
_lock = threading.Lock()


class Reranker(Protocol):
    name: str
    def score(self, query: str, docs: list[str], *, prior: list[float]) -> list[float]: ...


def rerank_text(*, micro_summary: str, text: str, path: str = "", symbol: str = "") -> str:
    """What a reranker reads: micro-summary + snippet (the path/symbol head is cheap context)."""
    head = " ".join(x for x in (path, symbol) if x)
    return "\n".join(x for x in (head, micro_summary, text[:SNIPPET_CHARS]) if x)


class CrossEncoderReranker:
    """A local CrossEncoder. A model trained here (its folder has manifest.json) ships with `blend`, the share of
    the fused score mixed into its own (search/quality/reranker_training.py); any other CrossEncoder scores alone.

    Cost: a forward pass per (query, candidate) pair, so inputs are cut at RERANK_MAX_LENGTH tokens and only the
    fused top RERANK_DEPTH are scored (bench/rerank_curve.py chose both: the README's cost/quality table). Scores
    are kept in an LRU of RERANK_CACHE_PAIRS (query, candidate text) pairs: a query asked again, a second page or
    a retry scores only what it has not seen. The cache holds the model's own score; the blend with the fused
    score, which depends on the other candidates, is applied on every call."""

    def __init__(self, path: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder  # noqa: PLC0415 - heavy: loads torch and transformers; only encoding needs it

        self.name = f"cross-encoder:{Path(path).name}"
        self.plan = encoding_plan()  # EMBEDDING_DEVICE's device and dtype: the CPU's bf16-or-fp32 rule there
        self.model = CrossEncoder(path, device=self.plan.device, max_length=settings.RERANK_MAX_LENGTH)
        self._cache: OrderedDict[tuple[str, bytes], float] = OrderedDict()
        self.scored = 0  # pairs the model has scored (cache misses)
        self.blend: float | None = None
        manifest = Path(path) / "manifest.json"
        if manifest.is_file():

            blend = json.loads(manifest.read_text()).get("blend")
            self.blend = float(blend) if isinstance(blend, int | float) else None

    def score(self, query: str, docs: list[str], *, prior: list[float]) -> list[float]:
        if not docs:
            return []
        keys = [(query, hashlib.blake2b(d.encode(), digest_size=16).digest()) for d in docs]
        with _lock:
            todo = list(dict.fromkeys(k for k in keys if k not in self._cache))
            if todo:
                text = dict(zip(keys, docs, strict=True))
                mode = self.plan.dtype if self.plan.is_cuda else precision()  # the CPU's rule read per call
                with inference_context(mode, device=self.plan.device):
                    fresh = self.model.predict([(query, text[k]) for k in todo], show_progress_bar=False)
                self.scored += len(todo)
                self._cache.update((k, float(v)) for k, v in zip(todo, fresh, strict=True))
            scores = [self._cache[k] for k in keys]
            for k in keys:
                self._cache.move_to_end(k)
            while len(self._cache) > settings.RERANK_CACHE_PAIRS:
                self._cache.popitem(last=False)
        if self.blend is None:
            return scores

        return blend_scores(model=scores, prior=prior, blend=self.blend)


class CoverageReranker:
    """fused (min-max over the candidates) blended with query-term coverage of the candidate's head text."""

    name = "embedded:coverage-v1"
    alpha = 0.7

    def score(self, query: str, docs: list[str], *, prior: list[float]) -> list[float]:
        q = set(tokenize(query))
        if not docs:
            return []
        lo, hi = min(prior), max(prior)
        out = []
        for doc, p in zip(docs, prior, strict=True):
            base = (p - lo) / (hi - lo) if hi > lo else 1.0
            head = "\n".join(doc.split("\n")[:3])  # path/symbol + micro-summary lines
            cov = len(q & set(tokenize(head))) / len(q) if q else 0.0
            out.append(self.alpha * base + (1 - self.alpha) * cov)
        return out


@lru_cache(maxsize=4)
def _cross_encoder(path: str, label: str = "") -> CrossEncoderReranker:
    ce = CrossEncoderReranker(path)
    if label:
        ce.name = label
    return ce


def get_reranker(*, project: Any = None) -> Reranker:
    """The project's trained reranker when it has one, else RERANKER_MODEL, else the embedded one."""
    trained = reranker_of(project)
    if trained:
        try:
            path = model_path(trained)
        except BadInput as exc:
            raise DependencyDown("reranker", f"project {project.slug!r} names reranker {trained!r}, which "
                                             "is not trained on this machine (var/models/rerankers/).") from exc
        return _cross_encoder(str(path), label=f"trained:{trained}")
    path = settings.RERANKER_MODEL
    if path:
        if not Path(path).expanduser().exists():
            raise DependencyDown("reranker", f"RERANKER_MODEL={path!r} is not a local path; this platform never "
                                             "downloads weights: point it at a CrossEncoder directory or unset it.")
        try:
            return _cross_encoder(str(Path(path).expanduser()))
        except Exception as exc:
            logging.getLogger(__name__).warning("could not load RERANKER_MODEL: %r", exc)
            raise DependencyDown("reranker", "Could not load RERANKER_MODEL; see the server log.") from exc
    return CoverageReranker()


def load_reranker(name_or_path: str) -> CrossEncoderReranker:
    """A cross-encoder by trained name (var/models/rerankers/<name>) or local folder; BadInput (field `reranker`)
    for anything else: weights are never downloaded."""
    if NAME_RE.fullmatch(name_or_path) and (models_dir() / name_or_path / "manifest.json").is_file():
        return _cross_encoder(str(model_path(name_or_path)), label=f"trained:{name_or_path}")
    path = Path(name_or_path).expanduser()
    if not (path / "config.json").is_file():
        raise BadInput(f"{name_or_path!r} is neither a reranker trained here (manage.py train_reranker) nor a local "
                       "CrossEncoder folder; this platform never downloads weights.", field="reranker")
    return _cross_encoder(str(path.resolve()), label=f"cross-encoder:{path.name}")


def rerank_default(*, project: Any = None) -> bool:
    """Rerank by default only with a real cross-encoder: the project's trained one or RERANKER_MODEL (the embedded
    one is opt-in)."""
    return bool(reranker_of(project) or settings.RERANKER_MODEL)
