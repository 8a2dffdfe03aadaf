"""A query is a QuerySpec run through a list of stages: resolve (access, filter, fusion setting) -> retrieve (the
dense and sparse legs) -> fuse -> re-check (access in SQL, rows loaded) -> path prior -> rerank -> pack; then log.

Why a spec and a list: the API, the pages, MCP, the rules lawyer and the evaluation harness all run queries. Each
builds one validated, frozen QuerySpec (the limits and checks live in it, once) and runs `STAGES`, or that list with
a stage added (the rules lawyer's policies and graph boost after fusion) or removed or replaced (evaluation's
ablations), so access control, the why and the logging cannot drift between them, and a new ranking stage is one
function here plus one line in a list (docs/architecture.md).
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction

from config import deadlines
from config.errors import BadInput
from inference.encoders import dense_model_id, embed_query
from search.engine.access import accessible_dataset_ids, filter_accessible_chunk_ids
from search.engine.applier import READ_GATE
from search.engine.dataset_models import CONFIGURED, model_arg, serving_groups
from search.engine.fusion import FUSIONS, WEIGHTED, Candidate, fuse, single_leg
from search.engine.fusion_settings import FusionSetting, kind_default, project_setting
from search.engine.globs import GLOB_CHARS, Glob, compile_glob
from search.engine.graph_context import Addition, graph_additions, graph_wanted
from search.engine.index import VectorIndex, get_index, model_index
from search.engine.index_schema import IndexFilter, merge_hits
from search.engine.packing import DEFAULT_BUDGET, build_pack
from search.engine.page_links import link_pack, link_results
from search.engine.rerank import CrossEncoderReranker, get_reranker, rerank_default, rerank_text
from search.engine.term_stats import weighted_query
from search.models import Chunk, Dataset, Document, QuerySession, RerankResult

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Project

MAX_Q = 2000
MAX_TOP_K = 50
MAX_CANDIDATES = 200
FILTER_KEYS = {"repo", "path", "lang", "dataset"}
EXTRA_FILTER_KEYS = {"book_id", "ruleset_id", "kind", "repo", "lang", "paths"}
MAX_GLOB_PATHS = 20000
LEGS = ("hybrid", "dense", "sparse")


@dataclass
class QueryResult:
    results: list[dict[str, Any]]
    pack: dict[str, Any]
    timings: dict[str, float]
    reranker: str | None
    session_id: str | None
    candidates: list[Candidate] = field(default_factory=list)
    fusion: str = "rrf"
    fusion_source: str = "default"  # request | project (adopted from its feedback) | default
    fusion_params: dict[str, Any] = field(default_factory=dict)
    embedding_models: list[str] = field(default_factory=list)  # the dense models that ran (per-dataset models)
    flt: IndexFilter | None = None  # what was searched: the accessible datasets, narrowed by the filters

    def as_dict(self) -> dict[str, Any]:
        return {"search_session_id": self.session_id, "results": self.results, "pack": self.pack,
                "timings_ms": self.timings, "reranker": self.reranker, "fusion": self.fusion,
                "fusion_source": self.fusion_source, "fusion_params": self.fusion_params,
                "embedding_models": self.embedding_models}


# --------------------------------------------------------------------------- validation
def _str_list(value: Any, field_name: str) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise BadInput("Must be a non-empty string or list of strings.", field=field_name)
    if len(values) > 100 or any(len(v) > 1000 for v in values):
        raise BadInput("Too many or too long values.", field=field_name)
    return [v.strip() for v in values]


def validate_query(*, q: Any, filters: Any = None, top_k: Any = 15, candidates: Any = 100, fusion: Any = None,
                   include_global: Any = True, rerank: Any = None) -> dict[str, Any]:
    """Every bad input becomes a 400 naming its field (never a 500)."""
    if not isinstance(q, str) or not q.strip():
        raise BadInput("Query must be a non-empty string.", field="q")
    if len(q) > MAX_Q:
        raise BadInput(f"Query is longer than {MAX_Q} characters.", field="q")
    if "\x00" in q:
        raise BadInput("Query contains a NUL character.", field="q")
    for name, value, hi in (("top_k", top_k, MAX_TOP_K), ("candidates", candidates, MAX_CANDIDATES)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
            raise BadInput(f"Must be an integer between 1 and {hi}.", field=name)
    if candidates < top_k:
        raise BadInput("Must be at least top_k.", field="candidates")
    if fusion is not None and fusion not in FUSIONS:
        raise BadInput(f"Must be one of {', '.join(FUSIONS)}.", field="fusion")
    if not isinstance(include_global, bool):
        raise BadInput("Must be a boolean.", field="include_global")
    if rerank is not None and not isinstance(rerank, bool):
        raise BadInput("Must be a boolean.", field="rerank")
    clean: dict[str, Any] = {}
    if filters not in (None, {}):
        if not isinstance(filters, Mapping):  # a dict, or a spec's own (dataclasses.replace)
            raise BadInput("Must be an object.", field="filters")
        unknown = set(filters) - FILTER_KEYS
        if unknown:
            raise BadInput(f"Unknown filter key(s): {', '.join(sorted(unknown))}; allowed: repo, path, lang, "
                           "dataset.",
                           field=f"filters.{sorted(unknown)[0]}")
        for key in ("repo", "lang", "dataset"):
            if filters.get(key) is not None:
                clean[key] = _str_list(filters[key], f"filters.{key}")
        if filters.get("path") is not None:
            path = filters["path"]
            if not isinstance(path, str) or not path.strip() or len(path) > 1000:
                raise BadInput("Must be a non-empty path prefix or glob.", field="filters.path")
            path = path.strip().lstrip("./") if path.strip().startswith("./") else path.strip()
            if GLOB_CHARS & set(path):
                clean["path_glob"] = compile_glob(path)
            else:
                clean["path_prefix"] = path
    return clean


# --------------------------------------------------------------------------- retrieval
def _resolve_glob(dataset_ids: list[int], glob: Glob) -> list[str]:
    """The paths a glob matches: the literal prefix narrows by index, the bounded regex checks the rest."""
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT path FROM search_chunk WHERE dataset_id = ANY(%s) AND path LIKE %s AND path ~ %s"
                    " LIMIT %s", [list(dataset_ids), glob.like, glob.regex, MAX_GLOB_PATHS + 1])
        return [r[0] for r in cur.fetchall()]


def narrow_datasets(*, dataset_ids: set[int] | list[int], wanted: list[str]) -> list[int]:
    """The searchable datasets a `filters.dataset` names (by name or id). A value that names none of them is a
    400: a typo must not silently search nothing, and a dataset the project cannot read is not revealed."""
    rows = list(Dataset.objects.filter(pk__in=list(dataset_ids)).values_list("id", "name"))
    out: set[int] = set()
    for value in wanted:
        hits = {pk for pk, name in rows if name == value or str(pk) == value}
        if not hits:
            raise BadInput(f"No dataset {value!r} among those this project can search.", field="filters.dataset")
        out |= hits
    return sorted(out)


def build_filter(*, dataset_ids: list[int], clean_filters: dict[str, Any] | None = None,
                 extra_filter: dict[str, Any] | None = None) -> IndexFilter:
    clean_filters = clean_filters or {}
    flt = IndexFilter(dataset_ids=sorted(dataset_ids), repo=clean_filters.get("repo"), lang=clean_filters.get("lang"),
                      path_prefix=clean_filters.get("path_prefix"))
    if clean_filters.get("path_glob"):
        paths = _resolve_glob(flt.dataset_ids, clean_filters["path_glob"])
        if len(paths) > MAX_GLOB_PATHS:
            raise BadInput("The path glob matches too many files; narrow it.", field="filters.path")
        flt.paths = paths
    for key, value in (extra_filter or {}).items():
        if key not in EXTRA_FILTER_KEYS:
            raise ValueError(f"unknown extra_filter key {key!r}")
        values = [value] if isinstance(value, str) else list(value)
        if key in ("repo", "lang", "paths") and getattr(flt, key):
            values = [v for v in getattr(flt, key) if v in values]  # intersect with the user's filter
        setattr(flt, key, values)
    return flt


def searched_kinds(flt: IndexFilter) -> frozenset[str]:
    """The content kinds a filter can return, so the sparse query is analysed like those documents.

    A kind filter (rules search, evaluation) is exact; otherwise the kinds of the searched datasets, whose
    ingest decides the chunks' kind (code datasets hold code chunks, web datasets web chunks, ...).
    """
    if flt.kind:
        return frozenset(flt.kind)
    return frozenset(Dataset.objects.filter(pk__in=flt.dataset_ids).values_list("kind", flat=True).distinct())


def dense_groups(*, flt: IndexFilter, dense_model: str | None = None) -> dict[str, list[int]]:
    """model name -> the filter's datasets searched with it (one group when `dense_model` overrides them all)."""
    if dense_model is not None:
        return {CONFIGURED: list(flt.dataset_ids)}
    return serving_groups(dataset_ids=flt.dataset_ids) or {CONFIGURED: list(flt.dataset_ids)}


def model_ids_of(groups: dict[str, list[int]], *, dense_model: str | None = None) -> list[str]:
    """The ids of the dense models that ran (a response names them)."""
    if dense_model is not None:
        return [dense_model_id(model=dense_model)]
    return [dense_model_id() if name == CONFIGURED else name for name in groups]


_TEST_PATH = re.compile(r"(^|/)(tests?|spec|__tests__)/|(^|/)test_[^/]*$|_test\.[a-z]+$|\.spec\.[a-z]+$")
_MIGRATION_PATH = re.compile(r"(^|/)migrations/")
PATH_PRIORS = {"test": 0.8, "migration": 0.5}


def apply_path_prior(cands: list[Candidate], *, q: str) -> list[Candidate]:
    """Code only: tests and migrations mention everything; rank them below the code they exercise unless asked for.

    Multiplies the fused score (recorded in the why as path_prior) and re-sorts; rank_before is the rank after it.
    """
    ql = q.lower()
    changed = False
    for c in cands:
        if c.chunk.kind != "code":
            continue
        prior = 1.0
        if "test" not in ql and _TEST_PATH.search(c.chunk.path):
            prior = PATH_PRIORS["test"]
        elif "migrat" not in ql and _MIGRATION_PATH.search(c.chunk.path):
            prior = PATH_PRIORS["migration"]
        if prior != 1.0:
            c.fused_score *= prior
            c.extra["path_prior"] = prior
            changed = True
    if changed:
        cands.sort(key=lambda c: (-c.fused_score, c.rank_before))
        for i, c in enumerate(cands, start=1):
            c.rank_before = i
    return cands


def rerank_candidates(*, q: str, cands: list[Candidate], project: Project | None = None,
                      reranker: Any = None) -> str:
    """Score loaded candidates in place (rerank_score, rank_after) and re-sort them; returns the reranker name.
    `reranker`: a given one (evaluation); else the project's (search.engine.rerank.get_reranker)."""
    reranker = reranker or get_reranker(project=project)
    # a cross-encoder costs a forward pass per candidate: it reorders the fused top RERANK_DEPTH, and the rest keep
    # their fused order below them (the cheap embedded reranker sees every candidate)
    depth = settings.RERANK_DEPTH if isinstance(reranker, CrossEncoderReranker) else len(cands)
    head, tail = cands[:depth], cands[depth:]
    docs = [rerank_text(micro_summary=c.chunk.micro_summary, text=c.chunk.text, path=c.chunk.path,
                        symbol=c.chunk.symbol) for c in head]
    scores = reranker.score(q, docs, prior=[c.fused_score for c in head])
    for c, s in zip(head, scores, strict=True):
        c.rerank_score = s
    head.sort(key=lambda c: (-(c.rerank_score or 0.0), c.rank_before))
    low = min((c.rerank_score or 0.0 for c in head), default=0.0)
    for n, c in enumerate(tail, start=1):
        c.rerank_score = low - n  # below every reranked candidate, in fused order
    cands[:] = head + tail
    for i, c in enumerate(cands, start=1):
        c.rank_after = i
    return reranker.name


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


def _why(c: Candidate, project_id: int, commit: str | None = None) -> dict[str, Any]:
    ch = c.chunk
    return {"dense_score": c.dense_score, "dense_rank": c.dense_rank, "sparse_score": c.sparse_score,
            "sparse_rank": c.sparse_rank, "fused_score": c.fused_score, "rank_before_rerank": c.rank_before,
            "rerank_score": c.rerank_score, "graph_boost": c.graph_boost,
            "path_prior": c.extra.get("path_prior", 1.0), "final_rank": c.final_rank,
            "dataset_id": ch.dataset_id, "project_id": project_id, "owner_project_id": ch.dataset.project_id,
            "span": f"{ch.path}:{ch.start_line}-{ch.end_line}", "commit": commit}


def result_dict(c: Candidate, *, project_id: int, commit: str | None = None) -> dict[str, Any]:
    """One result as the API shows it; `commit`: the git commit its dataset reflects (None: not a git source)."""
    ch = c.chunk
    return {"rank": c.final_rank, "chunk_id": ch.pk, "document_id": ch.document_id, "dataset_id": ch.dataset_id,
            "repo": ch.repo, "path": ch.path, "lang": ch.lang, "kind": ch.kind, "symbol": ch.symbol,
            "heading_path": ch.heading_path, "start_line": ch.start_line, "end_line": ch.end_line,
            "span": f"{ch.path}:{ch.start_line}-{ch.end_line}", "url": (ch.meta or {}).get("url", ""),
            "page": ch.page, "micro_summary": ch.micro_summary,
            "text": ch.text, "score": c.rerank_score if c.rerank_score is not None else c.fused_score,
            "why": _why(c, project_id, commit)}


# --------------------------------------------------------------------------- the spec
@dataclass(frozen=True)
class QuerySpec:
    """One query, checked whole when it is built: every bad field is a 400 naming it (never a 500), so a spec that
    exists is valid. Built once by an Input serializer, the MCP adapter, the rules lawyer or evaluation.

    `filters` are the caller's (repo, path, lang, dataset); `extra_filter` the engine's own narrowing (rules: kind,
    book_id, ruleset_id, paths). `fusion` None: the project's adopted setting, else the default for the kinds
    searched. `rerank` None: the project's default. `sparse_q` replaces the sparse leg's text only (rules aliases);
    `dense_model` embeds the query with another local model (`evaluate --model-id`). `graph`: add the definitions
    the top code results use to the pack (None: CODE_GRAPH_PACK). `kind`, `source` and `log` say how the query is
    logged."""

    q: str
    filters: Mapping[str, Any] | None = None
    include_global: bool = True
    top_k: int = 15
    candidates: int = 100
    fusion: str | None = None
    rerank: bool | None = None
    legs: str = "hybrid"
    budget_tokens: int = DEFAULT_BUDGET
    extra_filter: Mapping[str, Any] | None = None
    sparse_q: str | None = None
    dense_model: str | None = None
    graph: bool | None = None
    kind: str = "context"
    source: str = "api"
    log: bool = True
    clean: Mapping[str, Any] = field(init=False, repr=False, compare=False)  # the checked `filters`

    def __post_init__(self) -> None:
        clean = validate_query(q=self.q, filters=self.filters, top_k=self.top_k, candidates=self.candidates,
                               fusion=self.fusion, include_global=self.include_global, rerank=self.rerank)
        if self.graph is not None and not isinstance(self.graph, bool):
            raise BadInput("Must be a boolean.", field="graph")
        if self.legs not in LEGS:
            raise BadInput(f"Must be one of {', '.join(LEGS)}.", field="legs")
        unknown = set(self.extra_filter or {}) - EXTRA_FILTER_KEYS
        if unknown:  # the engine's own narrowing, never a user's: a programming error, not a 400
            raise ValueError(f"unknown extra_filter key {sorted(unknown)[0]!r}")
        object.__setattr__(self, "filters", MappingProxyType(dict(self.filters or {})))
        object.__setattr__(self, "extra_filter", MappingProxyType(dict(self.extra_filter or {})))
        object.__setattr__(self, "clean", MappingProxyType(clean))


# --------------------------------------------------------------------------- the stages
@dataclass
class QueryRun:
    """What the stages share while one spec runs: each stage reads what earlier ones left and adds its part."""

    spec: QuerySpec
    project: Project | None
    user: User | None
    index: VectorIndex
    timings: dict[str, float] = field(default_factory=dict)
    flt: IndexFilter | None = None
    kinds: frozenset[str] = frozenset()
    setting: FusionSetting = field(default_factory=FusionSetting)
    fusion_source: str = "default"
    dense: list[tuple[int, float]] = field(default_factory=list)
    sparse: list[tuple[int, float]] = field(default_factory=list)
    cands: list[Candidate] = field(default_factory=list)
    do_rerank: bool = False
    reranker_name: str | None = None
    embedding_models: list[str] = field(default_factory=list)
    top: list[Candidate] = field(default_factory=list)
    additions: list[Addition] = field(default_factory=list)
    pack: dict[str, Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)


Stage = Callable[[QueryRun], None]


def resolve(run: QueryRun) -> None:
    """Access: the datasets the project may search (narrowed by `filters.dataset`), the index filter, the kinds
    searched (read once: the fusion default and the sparse analyzer both follow it) and the fusion setting."""
    t = time.perf_counter()
    spec = run.spec
    dataset_ids = accessible_dataset_ids(run.project, include_global=spec.include_global)
    if spec.clean.get("dataset"):
        dataset_ids = narrow_datasets(dataset_ids=dataset_ids, wanted=spec.clean["dataset"])
    run.flt = build_filter(dataset_ids=list(dataset_ids), clean_filters=dict(spec.clean),
                           extra_filter=dict(spec.extra_filter or {}))
    run.kinds = searched_kinds(run.flt)
    run.setting, run.fusion_source = fusion_for(project=run.project, fusion=spec.fusion, kinds=run.kinds)
    run.timings["access_ms"] = _ms(t)


def over(flt: IndexFilter, *, setting: FusionSetting | None = None) -> Stage:
    """A `resolve` for a caller that has its filter already (evaluation searches the datasets it built, whoever
    may read them): the kinds follow the filter as in `resolve`, and so does the fusion setting unless `setting`
    fixes it (a ranking served or mined without a project: the kinds' default, or plain RRF)."""
    def fixed(run: QueryRun) -> None:
        run.flt = flt
        run.kinds = searched_kinds(flt)
        if setting is not None:
            run.setting, run.fusion_source = setting, "request"
        else:
            run.setting, run.fusion_source = fusion_for(project=run.project, fusion=run.spec.fusion, kinds=run.kinds)
    return fixed


def retrieve_legs(run: QueryRun) -> None:
    """The dense and sparse top-N under the filter (a background apply in this process steps aside meanwhile):
    `run.dense` and `run.sparse`, each [(chunk_id, score)] best first, as deep as `spec.candidates`.

    Each dataset is searched in the collections of the model it is served with (dense_groups), the query embedded
    once per model; the hits of several models are merged on their cosine scores (the sparse leg's weights are one
    scale whatever the collection), and `run.embedding_models` names the models for the response. `spec.sparse_q`
    replaces the sparse leg's text only (rules aliases expand "AC" for BM25 while the dense leg embeds what the
    user wrote). With `spec.dense_model` every dataset is searched with that model in `run.index` (`evaluate
    --model-id`)."""
    spec, flt = run.spec, run.flt
    groups = dense_groups(flt=flt, dense_model=spec.dense_model)
    run.embedding_models = model_ids_of(groups, dense_model=spec.dense_model)
    dense_parts: list[list[tuple[int, float]]] = []
    sparse_parts: list[list[tuple[int, float]]] = []
    query_vec = None
    with READ_GATE.reading():
        for name, ids in groups.items():
            sub = flt if len(groups) == 1 else replace(flt, dataset_ids=ids)
            store = run.index if spec.dense_model is not None else model_index(run.index, name=name)
            if spec.legs in ("hybrid", "dense"):
                t = time.perf_counter()
                vec = embed_query(spec.q, model=spec.dense_model if spec.dense_model is not None else model_arg(name))
                run.timings["embed_ms"] = run.timings.get("embed_ms", 0.0) + _ms(t)
                t = time.perf_counter()
                dense_parts.append(store.search_dense(vec.tolist(), flt=sub, limit=spec.candidates))
                run.timings["dense_ms"] = run.timings.get("dense_ms", 0.0) + _ms(t)
            if spec.legs in ("hybrid", "sparse"):
                t = time.perf_counter()
                if query_vec is None:  # IDF over every searched dataset, whichever collection holds it
                    query_vec = weighted_query(spec.sparse_q or spec.q, kinds=run.kinds, dataset_ids=flt.dataset_ids)
                sparse_parts.append(store.search_sparse(query_vec, flt=sub, limit=spec.candidates))
                run.timings["sparse_ms"] = run.timings.get("sparse_ms", 0.0) + _ms(t)
    run.dense = merge_hits(dense_parts, limit=spec.candidates)
    run.sparse = merge_hits(sparse_parts, limit=spec.candidates)


def fuse_legs(run: QueryRun) -> None:
    """One ranked candidate list, each keeping its per-leg score and rank (the why); a single leg (`spec.legs`
    dense or sparse, evaluation's leg rows) is ranked alone."""
    t = time.perf_counter()
    legs, limit = run.spec.legs, run.spec.candidates
    if legs == "dense":
        run.cands = single_leg(run.dense, leg="dense", limit=limit)
    elif legs == "sparse":
        run.cands = single_leg(run.sparse, leg="sparse", limit=limit)
    else:
        run.cands = fuse(dense=run.dense, sparse=run.sparse, method=run.setting.method,
                         weights=run.setting.weights(), limit=limit, rrf_k=run.setting.rrf_k)
    run.timings["fuse_ms"] = _ms(t)


def recheck(run: QueryRun) -> None:
    """A stale payload (revoked share, moved dataset) must never leak: re-check access in SQL, then load the rows
    (and keep only paths a glob filter matches)."""
    t = time.perf_counter()
    allowed = filter_accessible_chunk_ids(run.project, [c.chunk_id for c in run.cands],
                                          include_global=run.spec.include_global)
    rows = {c.pk: c for c in Chunk.objects.filter(pk__in=allowed).select_related("dataset")}
    cands = [c for c in run.cands if c.chunk_id in rows]
    for c in cands:
        c.chunk = rows[c.chunk_id]
    if run.spec.clean.get("path_glob"):
        rx = re.compile(run.spec.clean["path_glob"].regex)
        cands = [c for c in cands if rx.search(c.chunk.path)]
    run.cands = cands
    run.timings["recheck_ms"] = _ms(t)


def path_prior(run: QueryRun) -> None:
    """Code only: tests and migrations below the code they exercise unless asked for (apply_path_prior)."""
    t = time.perf_counter()
    run.cands = apply_path_prior(run.cands, q=run.spec.q)
    run.timings["recheck_ms"] = round(run.timings.get("recheck_ms", 0.0) + _ms(t), 2)


def rerank(run: QueryRun) -> None:
    """The project's reranker, when the spec or the project's default asks for one."""
    run.do_rerank = rerank_default(project=run.project) if run.spec.rerank is None else run.spec.rerank
    if run.do_rerank and run.cands:
        t = time.perf_counter()
        run.reranker_name = rerank_candidates(q=run.spec.q, cands=run.cands, project=run.project)
        run.timings["rerank_ms"] = _ms(t)


def rerank_with(reranker: Any) -> Stage:
    """A rerank stage with a given reranker, always on (evaluation's reranker rows)."""
    def given(run: QueryRun) -> None:
        run.do_rerank = True
        if run.cands:
            run.reranker_name = rerank_candidates(q=run.spec.q, cands=run.cands, project=run.project,
                                                  reranker=reranker)
    return given


def graph_context(run: QueryRun) -> None:
    """Code: the definitions the top results call or inherit from, and a method's class header, for the pack
    (search.engine.graph_context), when the spec or CODE_GRAPH_PACK asks for them."""
    if graph_wanted(graph=run.spec.graph) and run.cands:
        t = time.perf_counter()
        run.additions = graph_additions(run.cands[:run.spec.top_k])
        run.timings["graph_ms"] = _ms(t)


def pack(run: QueryRun) -> None:
    """The top_k results with their why, and the context pack an agent pastes (macros and each result's commit:
    its dataset's git source's synced commit, else the commit its document was written at)."""
    top = run.cands[:run.spec.top_k]
    for i, c in enumerate(top, start=1):
        c.final_rank = i
    t = time.perf_counter()
    macros, commits = {}, {}
    for pk, macro, source_commit, doc_commit in Document.objects.filter(
            pk__in={c.chunk.document_id for c in top}).values_list(
            "pk", "macro_summary", "dataset__source__state__commit", "meta__commit"):
        macros[pk] = macro
        commits[pk] = source_commit or doc_commit or None
    for pk, macro in Document.objects.filter(pk__in={a.document_id for a in run.additions} - set(macros)).values_list(
            "pk", "macro_summary"):
        macros[pk] = macro
    run.pack = build_pack([c.chunk for c in top], budget_tokens=run.spec.budget_tokens, macro_by_document=macros,
                          additions=run.additions)
    run.timings["pack_ms"] = _ms(t)
    run.top = top
    run.results = [result_dict(c, project_id=run.project.pk, commit=commits.get(c.chunk.document_id)) for c in top]
    # where a cited page opens (a PDF whose original the asking project can reach): results and pack spans
    link_results(slug=run.project.slug, results=run.results)
    link_pack(slug=run.project.slug, pack=run.pack)


# The pipeline. A new ranking stage is a function above plus its line here (or in a caller's list, as the rules
# lawyer adds its policies and graph boost after `fuse_legs`).
STAGES: tuple[Stage, ...] = (resolve, retrieve_legs, fuse_legs, recheck, path_prior, rerank, graph_context, pack)
# Retrieval only: the fused candidates of the searched datasets (evaluation's leg and fusion rows).
RETRIEVAL: tuple[Stage, ...] = (resolve, retrieve_legs, fuse_legs)


def retrieval_over(flt: IndexFilter, *, setting: FusionSetting | None = None) -> tuple[Stage, ...]:
    """RETRIEVAL over a filter the caller built (`over`): what every ranking without a user runs (evaluation's
    rows, fusion choice, hard negatives, reranker training), so it ranks as the API does."""
    return replace_stage(RETRIEVAL, resolve, over(flt, setting=setting))


def with_stage(stages: tuple[Stage, ...], stage: Stage, *, after: Stage) -> tuple[Stage, ...]:
    """`stages` with `stage` inserted after `after`."""
    i = stages.index(after) + 1
    return (*stages[:i], stage, *stages[i:])


def replace_stage(stages: tuple[Stage, ...], old: Stage, new: Stage) -> tuple[Stage, ...]:
    """`stages` with `old` replaced by `new`."""
    return tuple(new if s is old else s for s in stages)


def execute(*, spec: QuerySpec, project: Project | None, user: User | None = None,
            index: VectorIndex | None = None, stages: tuple[Stage, ...] = STAGES) -> QueryRun:
    """Run the stages in order; no logging (run_query logs). `project` None: a ranking without a tenant
    (`retrieval_over` with its setting fixed); the stages that read the project (resolve, recheck, rerank, pack)
    need one. The request's deadline (config.deadlines) is checked
    before each stage: every stage's own work is capped (leg depth, rerank depth, the graph pack's uses), so a
    request past its deadline stops at the next stage with 504 `request_timeout` instead of running the rest."""
    run = QueryRun(spec=spec, project=project, user=user, index=index or get_index())
    for stage in stages:
        deadlines.check()
        stage(run)
    return run


# --------------------------------------------------------------------------- the service
def run_query(*, user: User | None, project: Project, spec: QuerySpec, index: VectorIndex | None = None,
              stages: tuple[Stage, ...] = STAGES) -> QueryResult:
    """The one query service. Caller must already be authorised for `project` (membership).

    A read: it never applies the index outbox (that is the applier's job, search/engine/applier.py), so it never
    waits on an ingest's write; a chunk not applied yet is simply not found, and one applied but since
    removed or unshared is dropped by the SQL re-check. Its only writes are the query log (`spec.log`).
    """
    t_total = time.perf_counter()
    run = execute(spec=spec, project=project, user=user, index=index, stages=stages)
    session_id = None
    if spec.log:
        t = time.perf_counter()
        session_id = log_query(run)
        run.timings["log_ms"] = _ms(t)
    run.timings["total_ms"] = _ms(t_total)
    return QueryResult(results=run.results, pack=run.pack, timings=run.timings, reranker=run.reranker_name,
                       session_id=session_id, candidates=run.cands, fusion=run.setting.method,
                       fusion_source=run.fusion_source, fusion_params=run.setting.as_dict(),
                       embedding_models=run.embedding_models,
                       flt=run.flt)


def fusion_for(*, project: Project, fusion: str | None, kinds: frozenset[str]) -> tuple[FusionSetting, str]:
    """(setting, source): the request's method with its default parameters, else the project's adopted setting,
    else the default for the kinds searched (search.quality.fusion_choice.kind_default)."""
    if fusion is not None:
        weights = WEIGHTED if fusion == "weighted" else {"dense": 1.0, "sparse": 1.0}
        return FusionSetting(method=fusion, dense=weights["dense"], sparse=weights["sparse"]), "request"
    adopted = project_setting(project)
    return (adopted, "project") if adopted is not None else (kind_default(kinds), "default")


def log_query(run: QueryRun) -> str:
    """One QuerySession (the spec as it ran: its filters, the fusion setting and where it came from, the dense
    models) + one RerankResult per candidate, in one transaction and one bulk insert."""
    spec, project, user, cands = run.spec, run.project, run.user, run.cands
    filters = {"filters": dict(spec.filters or {}), "include_global": spec.include_global, "top_k": spec.top_k,
               "candidates": spec.candidates, "fusion": run.setting.method,
               "fusion_setting": {**run.setting.as_dict(), "source": run.fusion_source}, "rerank": run.do_rerank,
               "extra_filter": dict(spec.extra_filter or {}), "embedding_models": run.embedding_models}
    with transaction.atomic():
        session = QuerySession.objects.create(user=user if getattr(user, "pk", None) else None, project=project,
                                              kind=spec.kind, source=spec.source, query=spec.q, filters=filters,
                                              reranker=run.reranker_name or "", timings=dict(run.timings),
                                              result_count=len(run.results))
        RerankResult.objects.bulk_create([
            RerankResult(session=session, chunk_id=c.chunk_id, dataset_id=c.chunk.dataset_id, project_id=project.pk,
                         dense_score=c.dense_score, dense_rank=c.dense_rank, sparse_score=c.sparse_score,
                         sparse_rank=c.sparse_rank, fused_score=c.fused_score, rank_before=c.rank_before,
                         rerank_score=c.rerank_score, rank_after=c.rank_after, final_rank=c.final_rank,
                         graph_boost=c.graph_boost)
            for c in cands
        ])
    return str(session.search_session_id)
