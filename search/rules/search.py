"""Rules search: the context pipeline plus book/ruleset filters, intent detection and graph boost.

Why a thin layer over `search.engine.pipeline.run_query`: access control, fusion, rerank
and logging must be the same code for every product; what rules add is a filter
(book, ruleset), a post-fusion hook (graph boost) and the per-result "why" for
the boost (base score, boost, path). The evaluation harness's `default` pipeline
for rulebooks is this function with its defaults.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config.errors import BadInput
from config.fields import check_text
from search.engine.access import accessible_dataset_ids
from search.engine.fusion import RULES_FUSIONS, Candidate
from search.engine.pages import cite
from search.engine.pipeline import MAX_Q, STAGES, QueryRun, QuerySpec, fuse_legs, run_query, with_stage
from search.models import Chunk
from search.rules.aliases import expand_query
from search.rules.chapter_routing import in_chapters, route
from search.rules.graph import (
    DEFAULT_DECAY,
    DEFAULT_DEPTH,
    DEFAULT_SEED_TOP_N,
    DEFAULT_STRENGTH,
    DEFAULT_TOP_K,
    GraphWalk,
    apply_graph_boost,
)
from search.rules.headings import DEFAULT_RECALL_MAX, apply_heading_match
from search.rules.headings import DEFAULT_STRENGTH as DEFAULT_HEADING_STRENGTH
from search.rules.policies import PolicyWeights, apply_policies, chunk_facts, describe, graph_relations
from search.rules.policies import strengths as policy_strengths
from search.rules.traversal import DEFAULT_GM_KEYWORDS, detect, load_config

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Project
    from search.engine.index import VectorIndex
    from search.models import TraversalConfig

# fusion: the min-max weighted sum since the SRD development questions chose it. Chosen with the heading match on the SRD dev questions
# (nDCG@10 0.4939 RRF -> 0.5167 weighted + headings; RRF + headings 0.4995): RRF squeezes the fused scores into a
# narrow band, so any boost relative to the top score (policies, headings, graph) swamps the fusion's order.
# rerank: None, the project's default as for context retrieval (search.engine.rerank.rerank_default): on with a
# trained cross-encoder (a project's adopted one, or RERANKER_MODEL), else off; the embedded coverage reranker is
# asked for with rerank=true. It had been on for rules since the dev questions put it above the same setting
# without it (+0.010). Since the dense leg reads each section's headings (search.ingest.base.embed_input), which is
# what the coverage reranker added, the dev questions no longer separate it: +0.004 nDCG@10, 95 % interval +-0.018,
# 3 questions up and 4 down (README, "Rules questions: SRD"). A stage that its development questions cannot confirm
# is off, the cheaper pipeline; the 99 test questions, read afterwards, agree (0.8367 off, 0.8269 on).
DEFAULTS: dict[str, Any] = {"fusion": "weighted", "graph": True, "seed_top_n": DEFAULT_SEED_TOP_N, "depth": DEFAULT_DEPTH,
                            "decay": DEFAULT_DECAY, "graph_top_k": DEFAULT_TOP_K, "graph_strength": DEFAULT_STRENGTH,
                            "top_k": 8, "candidates": 100, "rerank": None}
# Rows for `evaluate` and bench/results/srd_ablations.py: the API default with one thing changed (RulesSpec fields);
# rrf-no-headings is the rules default before the heading match (RRF, no heading match, no rerank)
ABLATIONS: dict[str, dict[str, Any]] = {
    "rrf": {"fusion": "rrf"},
    "no-headings": {"heading_strength": 0.0},
    "rrf-no-headings": {"fusion": "rrf", "heading_strength": 0.0, "rerank": False},
    "heading-recall": {"heading_recall": 5},
    "headings-0.05": {"heading_strength": 0.05},
    "headings-0.1": {"heading_strength": 0.1},
    "headings-0.2": {"heading_strength": 0.2},
    "no-aliases": {"expand_aliases": False},
    "no-graph": {"graph": False},
    "no-policies": {"prefer_kinds": False, "audience": False},
    "rerank": {"rerank": True},
    "no-rerank": {"rerank": False},
}
_ID = re.compile(r"^[\w.:-]{1,100}$")


def _ids(value: Any, field: str) -> list[str]:
    if value in (None, "", []):
        return []
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and _ID.match(v) for v in values) or len(values) > 50:
        raise BadInput("Must be an id or a list of ids (letters, digits, . _ : -).", field=field)
    return values


def _num(params: dict, key: str, kind: type, lo: float, hi: float) -> Any:
    value = params.get(key, DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise BadInput(f"Must be a{'n integer' if kind is int else ' number'} between {lo} and {hi}.", field=key)
    if not lo <= value <= hi:
        raise BadInput(f"Must be between {lo} and {hi}.", field=key)
    return kind(value)


def validate_rules_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parse the rules-specific request fields; any bad value is a 400 naming its field."""
    if not isinstance(params, dict):
        raise BadInput("Body must be a JSON object.", field="body")
    q = params.get("q", params.get("query"))
    if not isinstance(q, str) or not q.strip():
        raise BadInput("Query must be a non-empty string.", field="q")
    if len(q) > MAX_Q:
        raise BadInput(f"Query is longer than {MAX_Q} characters.", field="q")
    check_text(q, field="q")
    fusion = params.get("fusion", DEFAULTS["fusion"])
    if fusion not in RULES_FUSIONS:
        raise BadInput(f"Must be one of {', '.join(RULES_FUSIONS)}.", field="fusion")
    graph = params.get("graph", DEFAULTS["graph"])
    if not isinstance(graph, bool):
        raise BadInput("Must be a boolean.", field="graph")
    rerank = params.get("rerank", DEFAULTS["rerank"])
    if rerank is not None and not isinstance(rerank, bool):
        raise BadInput("Must be a boolean.", field="rerank")
    return {
        "q": q.strip(), "books": _ids(params.get("book", params.get("books")), "book"),
        "rulesets": _ids(params.get("ruleset", params.get("rulesets")), "ruleset"), "fusion": fusion,
        "graph": graph, "rerank": rerank,
        "seed_top_n": _num(params, "seed_top_n", int, 0, 20), "depth": _num(params, "depth", int, 0, 4),
        "decay": _num(params, "decay", float, 0.0, 1.0), "graph_top_k": _num(params, "graph_top_k", int, 0, 200),
        "graph_strength": _num(params, "graph_strength", float, 0.0, 1.0),
        "top_k": _num(params, "top_k", int, 1, 50), "candidates": _num(params, "candidates", int, 1, 200),
    }


def books_named_in(*, q: str, dataset_ids: list[int]) -> list[str]:
    """Book ids the query names ("in the Player Handbook" -> player-handbook), among accessible rules books."""
    books = set(Chunk.objects.filter(dataset_id__in=dataset_ids, kind="rules").exclude(book_id="")
                .values_list("book_id", flat=True).distinct())
    norm = " " + re.sub(r"[^a-z0-9]+", " ", q.lower()) + " "
    return sorted(b for b in books if len(b) >= 3 and f" {re.sub(r'[^a-z0-9]+', ' ', b.lower()).strip()} " in norm)


@dataclass(frozen=True)
class RulesSpec:
    """One rules query, frozen: the shared query fields, the book and ruleset filters, the graph boost and the
    policy switches. Built by the Input serializer (validate_rules_params checks the bounds), the MCP adapter,
    the pages and evaluation, which changes one field per ablation row (dataclasses.replace).

    `prefer_kinds`, `audience` and `relations` switch the traversal config's policies (search.rules.policies):
    `relations=None` walks the edges the config names (`policies["graph"]["relations"]`). `expand_aliases`
    expands the sparse query with the config's abbreviations (search.rules.aliases). `route_chapters` > 0
    searches only the query's likeliest chapters (search.rules.chapter_routing); 0 searches the whole book.
    `heading_strength` lifts the sections whose heading the (alias-expanded) question names (search.rules.headings;
    0 turns it off); `heading_recall` > 0 lets that many well-named sections the legs missed join."""

    q: str
    books: tuple[str, ...] = ()
    rulesets: tuple[str, ...] = ()
    fusion: str = DEFAULTS["fusion"]
    graph: bool = DEFAULTS["graph"]
    seed_top_n: int = DEFAULTS["seed_top_n"]
    depth: int = DEFAULTS["depth"]
    decay: float = DEFAULTS["decay"]
    graph_top_k: int = DEFAULTS["graph_top_k"]
    graph_strength: float = DEFAULTS["graph_strength"]
    top_k: int = DEFAULTS["top_k"]
    candidates: int = DEFAULTS["candidates"]
    rerank: bool | None = DEFAULTS["rerank"]  # None: the project's default (search.engine.rerank.rerank_default)
    prefer_kinds: bool = True
    audience: bool = True
    relations: tuple[str, ...] | None = None
    expand_aliases: bool = True
    route_chapters: int = 0
    heading_strength: float = DEFAULT_HEADING_STRENGTH
    heading_recall: int = DEFAULT_RECALL_MAX
    log: bool = True
    source: str = "api"
    dense_model: str | None = None  # embed the query with this local model (a snapshot built with it; not an API field)

    def __post_init__(self) -> None:
        for name in ("books", "rulesets", "relations"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))


def rules_search(*, user: User | None, project: Project, spec: RulesSpec,
                 index: VectorIndex | None = None) -> dict[str, Any]:
    """Search the project's rulebooks. Returns {results, analysis, filters, graph, timings_ms, search_session_id}.

    The context pipeline's stages with one added after fusion: the traversal policies and the graph boost.
    `index`: where the legs search (default the live index; evaluation passes a store of its own)."""
    q, rulesets, fusion, graph = spec.q, list(spec.rulesets), spec.fusion, spec.graph
    seed_top_n, depth, decay, graph_top_k = spec.seed_top_n, spec.depth, spec.decay, spec.graph_top_k
    graph_strength, prefer_kinds, audience = spec.graph_strength, spec.prefer_kinds, spec.audience
    relations, expand_aliases, route_chapters = spec.relations, spec.expand_aliases, spec.route_chapters
    dataset_ids = sorted(accessible_dataset_ids(project))
    books = list(spec.books)
    named = [] if books else books_named_in(q=q, dataset_ids=dataset_ids)
    if named:
        books = named  # the query names a book: other books are not mixed in
    config = _config_for(dataset_ids, ruleset_id=rulesets[0] if rulesets else None)
    analysis = detect(query=q, config=config)
    extra: dict[str, Any] = {"kind": ["rules"]}
    if books:
        extra["book_id"] = books
    if rulesets:
        extra["ruleset_id"] = list(rulesets)

    routed: list[tuple[str, str]] = []
    if route_chapters > 0:
        routed, paths = route(q=q, top_n=route_chapters, dataset_ids=dataset_ids, analysis=analysis,
                              books=books or None, rulesets=list(rulesets or []) or None)
        if paths:  # no chapter at all means no rules chunk to search: the filter above already finds nothing
            extra["paths"] = paths
    sparse_q = expand_query(q, config.aliases or {}) if expand_aliases and config is not None else q
    graph_walk = GraphWalk(seed_top_n=seed_top_n, depth=depth, decay=decay, top_k=graph_top_k, strength=graph_strength,
                           relations=tuple(relations) if relations is not None else graph_relations(config))
    kind_strength, audience_strength = policy_strengths(config)

    def hook(cands: list[Candidate]) -> list[Candidate]:
        if routed:  # two chapters can share a document (the path filter's unit): keep the routed ones only
            cands = in_chapters(cands, chapters=routed)
        if (prefer_kinds and analysis.prefer_kinds) or (audience and analysis.audience):
            kind_of, audience_of = chunk_facts([c.chunk_id for c in cands],
                                               gm_keywords=config.gm_keywords if config else DEFAULT_GM_KEYWORDS)
            cands = apply_policies(cands, analysis=analysis, kind_of=kind_of, audience_of=audience_of,
                                   weights=PolicyWeights(use_kinds=prefer_kinds, use_audience=audience,
                                                         kind_strength=kind_strength,
                                                         audience_strength=audience_strength))
        if spec.heading_strength > 0:
            cands = apply_heading_match(cands, q=sparse_q, dataset_ids=dataset_ids, strength=spec.heading_strength,
                                        recall_max=spec.heading_recall,
                                        scope={"book_id": books, "ruleset_id": list(rulesets or []),
                                               "path": extra.get("paths", [])})
            if routed:
                cands = in_chapters(cands, chapters=routed)
        if graph:
            cands = apply_graph_boost(cands, dataset_ids=dataset_ids, walk=graph_walk,
                                      missing_filter={"book_id": books, "ruleset_id": list(rulesets or []),
                                                      "kind": ["rules"], "path": extra.get("paths", [])})
            if routed:  # a linked neighbour joins only from inside the routed chapters
                cands = in_chapters(cands, chapters=routed)
        return cands

    def rules_stage(run: QueryRun) -> None:
        t = time.perf_counter()
        run.cands = hook(run.cands)
        run.timings["hook_ms"] = round((time.perf_counter() - t) * 1000, 2)

    query = QuerySpec(q=q, top_k=spec.top_k, candidates=spec.candidates, fusion=fusion, rerank=spec.rerank,
                      extra_filter=extra, log=spec.log, kind="rules", source=spec.source,
                      sparse_q=sparse_q if sparse_q != q else None, dense_model=spec.dense_model)
    res = run_query(user=user, project=project, spec=query, index=index,
                    stages=with_stage(STAGES, rules_stage, after=fuse_legs))
    by_id = {c.chunk_id: c for c in res.candidates}
    results = []
    for r in res.results:
        c = by_id.get(r["chunk_id"])
        ch = c.chunk
        extra_why = getattr(c, "extra", {}) or {}
        r.update(book_id=ch.book_id, ruleset_id=ch.ruleset_id, section_path=ch.section_path, page=ch.page,
                 cite=cite(book=ch.book_id, page=ch.page),
                 content_kind=ch.content_kind, tags=ch.tags, traits=ch.traits, is_rule_bearing=ch.is_rule_bearing)
        # score = base (fusion) + policy boost + heading boost + graph boost; the graph's own base already holds the
        # policy and heading boosts
        r["policy_boost"] = extra_why.get("policy_boost", 0.0)
        r["heading_boost"] = extra_why.get("heading_boost", 0.0)
        r["base_score"] = extra_why.get("base_score", c.fused_score) - r["policy_boost"] - r["heading_boost"]
        r["graph_boost"] = extra_why.get("graph_boost", 0.0)
        r["graph_path"] = extra_why.get("graph_path", [])
        results.append(r)
    return {"search_session_id": res.session_id, "results": results, "analysis": analysis.as_dict(),
            "filters": {"book": books, "ruleset": list(rulesets or []), "book_from_query": bool(named)},
            "fusion": fusion, "reranker": res.reranker,
            "graph": {"enabled": graph, "seed_top_n": seed_top_n, "depth": depth, "decay": decay,
                      "top_k": graph_top_k, "strength": graph_strength},
            "policies": {**describe(analysis=analysis, use_kinds=prefer_kinds, use_audience=audience, relations=graph_walk.relations),
                         "sparse_query": sparse_q},
            "routing": {"top_n": route_chapters, "chapters": [{"book_id": b, "chapter": c} for b, c in routed]},
            "timings_ms": res.timings, "candidate_ids": [c.chunk_id for c in res.candidates]}


def _config_for(dataset_ids: list[int], *, ruleset_id: str | None = None) -> TraversalConfig | None:
    """The traversal config of the named ruleset, else of the first ruleset among the accessible rules chunks.

    Only a ruleset the caller can read counts: the config's entity names would otherwise confirm what an
    inaccessible rulebook contains (`analysis.entities`)."""
    qs = Chunk.objects.filter(dataset_id__in=dataset_ids, kind="rules").exclude(ruleset_id="")
    if ruleset_id is not None:
        qs = qs.filter(ruleset_id=ruleset_id)
    rs = qs.values_list("ruleset_id", flat=True).first()
    return load_config(ruleset_id=rs) if rs else None
