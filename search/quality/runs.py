"""Whole evaluation runs: ingest/resolve a collection, run every pipeline, add the rules-only metrics.

Why separate from evaluation.py: that module is pure metrics and reporting (tested on
hand-made fixtures); this one touches the database, the index and the projects.
"""
from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from config.errors import DependencyDown
from inference.encoders import (
    EmbeddingModelError,
    dense_model_id,
    embedding_dim,
    fill_embedding_cache,
    resolve_model,
)
from projects.models import Project
from search.engine.access import accessible_dataset_ids
from search.engine.applier import build_points
from search.engine.dataset_models import CONFIGURED, serving_groups
from search.engine.fusion_settings import kind_default
from search.engine.index import get_index, model_index, open_index, searchable_here
from search.engine.pipeline import QuerySpec, build_filter, execute, retrieval_over
from search.engine.rerank import load_reranker
from search.ingest.maintenance import EMBED_FIELDS, chunk_embed_input, fill_missing_vectors
from search.ingest.writer import sync_documents
from search.models import Chunk, Dataset
from search.quality.evaluation import (
    PIPELINES,
    EvalReport,
    Ranker,
    answer_cosine,
    beir_documents,
    compute_metrics,
    cross_book_contamination,
    evaluability,
    expand_gold,
    load_beir,
    load_rules_queries,
    make_rankers,
    mean_or_none,
    metrics_by_category,
    ranked_to_run,
    resolve_expected,
    run_pipelines,
    token_f1,
)
from search.quality.progress import bar as progress_bar
from search.rules.answer import extractive_answer
from search.rules.chapter_routing import chapter_of
from search.rules.policies import SIMILARITY_RELATIONS, STRUCTURAL_RELATIONS
from search.rules.search import ABLATIONS, RulesSpec, rules_search

if TYPE_CHECKING:
    from projects.models import Project
    from search.engine.index import VectorIndex


class NotReady(RuntimeError):
    """The database or the index cannot serve an evaluation; the message says what to run instead."""


def check_ready() -> None:
    """Fail with the command to run when Postgres is down or unmigrated.

    Called after the input files are read (a bad file is named first) and before any other work.
    Why before any work: without this the first ORM query of an evaluation raises a ProgrammingError
    ("relation projects_project does not exist") or an OperationalError deep in a traceback, which tells a
    new user nothing about `manage.py migrate` or `manage.py platform up`. The index is not checked: quality work
    searches the live index only where this process may (search_store), else a snapshot of its own, so it runs
    while `make run` holds the embedded store."""
    name = connection.settings_dict.get("NAME") or "?"
    try:
        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise NotReady(f"Postgres is not reachable ({first}). Start the services with `manage.py platform up` "
                       "(or `make run`), or set DATABASE_URL to a running server.") from exc
    if plan:
        apps = sorted({m.app_label for m, _ in plan})
        raise NotReady(f"the database {name!r} is not migrated ({len(plan)} migrations not applied: "
                       f"{', '.join(apps)}). Run `manage.py migrate` first; `make demo` also loads the demo "
                       "rulebook that `manage.py evaluate` searches by default.")


# `--model-id`: the pipelines whose ranking depends on the embedding model, repeated as `<name>@<model id>` rows
# (sparse is model-independent; the API default runs the live configuration, except for rulebooks, whose
# `default@<model id>` row is the whole rules search over the model's vectors: what adopting it would serve)
MODEL_PIPELINES = ("default-fusion", "dense", "fused", "weighted", "fused+rerank", "fused+graph")
_POINTS_BATCH = 2000


def resolve_other_model(model: str) -> tuple[str, int]:
    """(model id, dimension) of `--model-id`, loading its weights now, so that a hub name or a folder without a
    model is named before any ingest or embedding work (a ValueError, which the command reports)."""
    try:
        model_id, path = resolve_model(model=model)
        dim = embedding_dim(model=model)
    except EmbeddingModelError as exc:
        raise ValueError(f"--model-id {model!r}: {exc}") from exc
    except DependencyDown as exc:
        raise ValueError(f"--model-id {model!r}: {exc.detail}") from exc
    configured_id, configured = resolve_model()
    if model_id == configured_id and Path(path).resolve() != Path(configured).resolve():
        # the embedding cache is keyed by the folder name: two models with one name would share vectors
        raise ValueError(f"--model-id {model!r}: its folder name {model_id!r} is the configured EMBEDDING_MODEL's id "
                         "(the embedding cache is keyed by it); copy or link the model under another name")
    return model_id, dim


@contextmanager
def throwaway_index(*, dataset_ids: list[int], kinds: list[str] | None = None, model: str | None = None,
                    progress: bool = False) -> Iterator[tuple[VectorIndex, dict[str, Any]]]:
    """A store of its own holding these datasets' chunks, dropped on exit; -> (index, stats).

    Why: an evaluation (or a reranker's training on a BEIR collection) must not touch the live index, which
    serves every tenant; evaluation datasets are kept out of it (Dataset.is_evaluation). With `model` (a local
    sentence-transformers folder, `evaluate --model-id`) the points carry that model's vectors, through its
    embedding cache (a second run embeds nothing); without it, the configured model's vectors, cached at ingest.
    The store is an embedded one in a temporary folder, or, with QDRANT_URL, uniquely named collections on that
    server, deleted afterwards. A chunk with no vector under its text hash (its embed input changed since it was
    embedded: a migration such as 0015, before the next sync heals the live store) is embedded into the cache first,
    so the snapshot scores what the platform now embeds rather than leaving it out; the live index is not touched.
    stats: model_id, points, build_s, embedded, and (with `model`) cached."""
    t0 = time.perf_counter()
    qs = Chunk.objects.filter(dataset_id__in=dataset_ids)
    if kinds:
        qs = qs.filter(kind__in=kinds)
    stats: dict[str, Any] = {}
    if model:
        model_id, dim = resolve_other_model(model)
        chunks = list(qs.order_by("pk").only("pk", *EMBED_FIELDS))
        stats = fill_embedding_cache([chunk_embed_input(c) for c in chunks], model=model)
        groups = {CONFIGURED: [c.pk for c in chunks]}
    else:  # each dataset with the model it is served with (search.engine.dataset_models), as the live store holds it
        model_id, dim = dense_model_id(), embedding_dim()
        by_model = serving_groups(dataset_ids=dataset_ids)
        for name, ids in by_model.items():  # a chunk whose embed input changed (a migration) has no vector yet
            stats["embedded"] = stats.get("embedded", 0) + fill_missing_vectors(
                chunks=qs.filter(dataset_id__in=ids), name=name)[1]
        groups = {name: list(qs.filter(dataset_id__in=ids).order_by("pk").values_list("pk", flat=True))
                  for name, ids in by_model.items()}
    total = sum(map(len, groups.values()))
    with tempfile.TemporaryDirectory(prefix="eval-index-") as tmp:
        if settings.QDRANT_URL:
            index = open_index(url=settings.QDRANT_URL, model_id=model_id, dim=dim, prefix=f"eval-{uuid.uuid4().hex[:8]}-")
        else:
            index = open_index(path=tmp, model_id=model_id, dim=dim)
        stores = []
        try:
            bar = progress_bar(total=total, desc="snapshot", unit="chunk", enabled=progress)
            for name, ids in groups.items():
                store = index if model else model_index(index, name=name)
                stores.append(store)
                for i in range(0, len(ids), _POINTS_BATCH):
                    points, _ = build_points(ids[i:i + _POINTS_BATCH], model_id=store.model_id, evaluation=True)
                    store.upsert(points)
                    bar.update(len(ids[i:i + _POINTS_BATCH]))
                if hasattr(store, "flush"):
                    store.flush()
            bar.close()
            yield index, {"model_id": model_id, **stats, "points": sum(s.count() for s in stores),
                          "models": [s.model_id for s in stores], "build_s": round(time.perf_counter() - t0, 2)}
        finally:
            if settings.QDRANT_URL:
                for store in stores or [index]:
                    store.drop()
            index.close()


@dataclass(frozen=True)
class ServedRanking:
    """The datasets' served fusion (their kinds' default) over a snapshot; `label` names the fusion for reports."""

    label: str
    rank: Callable[..., list[int]]  # rank(query, depth=SERVED_DEPTH) -> chunk ids, best first


SERVED_DEPTH = QuerySpec.candidates  # each leg's depth as the API serves it (DBSF and min-max normalise over it)


@contextmanager
def served_ranking(*, dataset_ids: list[int], model: str | None = None) -> Iterator[ServedRanking]:
    """Rank queries as the platform serves these datasets, in a throwaway snapshot with the vectors they are served
    with, or `model`'s: rulebooks through the rules search with its defaults (search.rules.search: fusion, heading
    match, policies, graph; the owning project's rerank default), anything else through its kinds' default fusion
    over legs as deep as the API's.

    Why one helper: adaptation's hard negatives (the mistakes made now) and the adoption check (the gain on judged
    queries) must read the same ranking the users get, and neither may write to the live index. The depth matters:
    the fusions normalise each leg over its hits, and a shallow leg also cuts ties at random (which of the points
    with equal scores Qdrant keeps differs from one snapshot to the next)."""
    rows = list(Dataset.objects.filter(pk__in=dataset_ids).values_list("kind", "project_id"))
    kinds, owners = frozenset(k for k, _ in rows), {p for _, p in rows}
    with throwaway_index(dataset_ids=dataset_ids, model=model) as (index, _):
        if kinds == {"rules"} and len(owners) == 1:
            project = Project.objects.get(pk=owners.pop())

            def rank_rules(q: str, depth: int = SERVED_DEPTH) -> list[int]:
                spec = RulesSpec(q=q, log=False, top_k=1, candidates=max(depth, SERVED_DEPTH), dense_model=model)
                return rules_search(user=None, project=project, spec=spec, index=index)["candidate_ids"]
            yield ServedRanking(label=f"rules search ({RulesSpec.fusion} fusion, heading match, graph)",
                                rank=rank_rules)
            return
        setting = kind_default(kinds)
        stages = retrieval_over(build_filter(dataset_ids=dataset_ids), setting=setting)

        def rank(q: str, depth: int = SERVED_DEPTH) -> list[int]:
            spec = QuerySpec(q=q, log=False, candidates=max(depth, SERVED_DEPTH), dense_model=model)
            return [c.chunk_id for c in execute(spec=spec, project=None, index=index, stages=stages).cands]
        yield ServedRanking(label=setting.label, rank=rank)


@contextmanager
def search_store(*, dataset_ids: list[int], kinds: list[str] | None = None,
                 progress: bool = False) -> Iterator[tuple[VectorIndex, str]]:
    """Where quality work on live datasets searches: -> (index, "live" | "snapshot").

    The live index where this process may search it (a Qdrant server, or the embedded store this process holds:
    the web process, where admin jobs run); else a snapshot of these datasets built from Postgres (the truth the
    index projects; docs/architecture.md, Data ownership), dropped afterwards. Why not open the live store: the
    embedded store admits one handle, held by `make run`'s web process, and a read must never write it (applying
    its outbox is the applier's job), so a command beside the server searches a copy instead of refusing."""
    if searchable_here():
        yield get_index(), "live"
        return
    with throwaway_index(dataset_ids=dataset_ids, kinds=kinds, progress=progress) as (index, _):
        yield index, "snapshot"


@dataclass(frozen=True)
class EvalOptions:
    """How an evaluation runs, whatever it evaluates (a BEIR folder or rulebook questions).

    Why one value: the command, the admin's quality jobs, the benchmarks and the tests choose these, and they travel
    unchanged from the entry point down to the pipeline runs; one object keeps every signature on the way short and
    the defaults in one place. `pipelines`: the rows to run (None: every row the collection knows); `max_queries`:
    the first N questions only (None: all); `model`: a local sentence-transformers folder whose
    `<pipeline>@<model id>` rows run beside the configured model's (`evaluate --model-id`)."""

    pipelines: Sequence[str] | None = None
    max_queries: int | None = None
    progress: bool = True
    model: str | None = None


@dataclass(frozen=True)
class EvalScope:
    """What every row of one run searches: these datasets of the project, narrowed by `extra_filter` (the kinds).

    Why an object: the rankers, the other model's throwaway index and the run itself must all search the same
    datasets; handing them one value means no call can pair a project with another run's datasets."""

    project: Project
    dataset_ids: list[int]
    extra_filter: dict[str, Any]


def run_pipelines_with_model(*, scope: EvalScope, options: EvalOptions, rankers: dict[str, Ranker],
                              queries: dict[str, str], qrels: dict[str, dict[str, int]],
                              to_doc: Callable[[list[int]], dict[int, str]] | None = None,
                              model_default: Callable[[VectorIndex, str], Ranker] | None = None,
                              ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """run_pipelines over `options.pipelines` (None: PIPELINES), plus `<pipeline>@<model id>` rows for
    MODEL_PIPELINES when `options.model` is given: the same rankers over that model's throwaway index of `scope`,
    queries embedded by it. -> (metrics, ranked, timings, extra); extra = {"other_model": the index stats} or {}.
    `model_default(index, model)`: the collection's own default pipeline over that index (rulebooks: the rules
    search), added as `default@<model id>` when "default" runs."""
    extra: dict[str, Any] = {}
    model, pipelines = options.model, list(options.pipelines or PIPELINES)
    with ExitStack() as stack:
        if model:
            index, built = stack.enter_context(
                throwaway_index(model=model, dataset_ids=scope.dataset_ids, kinds=scope.extra_filter.get("kind")))
            extra["other_model"] = {k: v for k, v in built.items() if k not in ("build_s", "models")}
            other = make_rankers(project=scope.project, dataset_ids=scope.dataset_ids,
                                 extra_filter=scope.extra_filter, index=index, dense_model=model)
            names = MODEL_PIPELINES
            if model_default is not None:  # else the API default runs the live configuration only
                other["default"], names = model_default(index, model), ("default", *MODEL_PIPELINES)
            added = {f"{p}@{extra['other_model']['model_id']}": other[p] for p in names if p in pipelines}
            rankers, pipelines = {**rankers, **added}, [*pipelines, *added]
        metrics, ranked, timings = run_pipelines(queries=queries, qrels=qrels, rankers=rankers, to_doc=to_doc,
                                                 pipelines=pipelines, progress=options.progress)
    return metrics, ranked, timings, extra


def _eval_project(slug: str) -> Project:
    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
    return project


def beir_dataset_name(coll: Any) -> str:
    """`beir:<name>`, or `beir:<name>:code` for a code collection: a document's chunks keep the kind they were
    ingested with (an unchanged document is skipped), so each kind gets its own dataset."""
    return f"beir:{coll.name}" if coll.kind == "beir" else f"beir:{coll.name}:{coll.kind}"


def ingest_beir(*, path: str | Path, project_slug: str = "eval", progress: bool = True,
                max_queries: int | None = None, kind: str | None = None,
                split: str = "test") -> tuple[Any, Any, dict[str, Any]]:
    """(collection, dataset, stats). Re-running skips unchanged documents and reuses cached embeddings. `split`
    picks the judged queries (train for `train_reranker`); the corpus and its dataset are the same.

    The dataset is an evaluation dataset: its chunks live in Postgres (so a re-run is incremental) but never in
    the live index; a run searches them in a throwaway_index of its own."""
    coll = load_beir(path, max_queries=max_queries, kind=kind, split=split)
    check_ready()
    project = _eval_project(project_slug)
    dataset, _ = Dataset.objects.get_or_create(project=project, name=beir_dataset_name(coll),
                                               defaults={"kind": coll.kind, "is_evaluation": True})
    if not dataset.is_evaluation:
        raise ValueError(f"project {project.slug!r} already has a dataset named {dataset.name!r} that is not an "
                         "evaluation dataset; pass another --project")
    drafts = beir_documents(coll)
    bar = progress_bar(total=len(drafts), desc="ingest", unit="doc", enabled=progress)
    last = {"files": 0}

    def tick(stats: dict[str, int]) -> None:
        bar.update(stats["files"] - last["files"])
        last["files"] = stats["files"]

    stats = sync_documents(dataset=dataset, drafts=drafts, progress=tick)
    bar.close()
    return coll, dataset, stats


def evaluate_beir(*, path: str | Path, options: EvalOptions, project_slug: str = "eval", kind: str | None = None,
                  reranker: str | None = None) -> EvalReport:
    """`options.model` (a local sentence-transformers folder) adds `dense|fused|weighted@<model id>` rows: the same
    queries over a throwaway index of that model's vectors, side by side with the configured model's. `reranker`
    (BEIR only: a trained reranker's name or a CrossEncoder folder) adds the trained-rerank row."""
    if options.model:
        resolve_other_model(options.model)  # a bad path is named before the ingest
    trained = None
    if reranker:

        trained = load_reranker(reranker)  # a bad name is named before the ingest too
    coll, dataset, stats = ingest_beir(path=path, project_slug=project_slug, progress=options.progress,
                                       max_queries=options.max_queries, kind=kind)
    id_to_doc = dict(Chunk.objects.filter(dataset=dataset).values_list("id", "path"))
    scope = EvalScope(project=dataset.project, dataset_ids=[dataset.pk], extra_filter={"kind": [coll.kind]})
    with throwaway_index(dataset_ids=scope.dataset_ids, kinds=[coll.kind]) as (index, built):
        rankers = make_rankers(project=scope.project, dataset_ids=scope.dataset_ids, extra_filter=scope.extra_filter,
                               trained=trained, index=index)
        metrics, _, timings, extra = run_pipelines_with_model(
            scope=scope, options=options, rankers=rankers, queries=coll.queries, qrels=coll.qrels,
            to_doc=lambda ids: {i: id_to_doc[i] for i in ids if i in id_to_doc})
    timings["index"] = {"points": built["points"], "build_s": built["build_s"], "store": "throwaway, dropped"}
    ev = evaluability(coll)
    for m in metrics.values():
        m["evaluability"] = ev
    timings["ingest"] = stats
    if trained is not None:

        extra["trained_reranker"] = {"name": trained.name, "rerank_depth": settings.RERANK_DEPTH}
    return EvalReport(collection=beir_dataset_name(coll), queries=len(coll.queries), pipelines=metrics,
                      timings=timings, extra={"corpus_docs": len(coll.corpus), "kind": coll.kind, **extra})


# Rules-only ablations: the API default (rules_search) with one policy or experiment changed per row: these, then
# the rules search's own rows (search.rules.search.ABLATIONS: fusion, heading match, graph, rerank; its
# no-policies and no-aliases are the same overrides as here, so they keep their place).
RULES_PIPELINES: dict[str, dict[str, Any]] = {
    "no-prefer-kinds": {"prefer_kinds": False},
    "no-audience": {"audience": False},
    "no-policies": {"prefer_kinds": False, "audience": False},
    "no-aliases": {"expand_aliases": False},
    "graph-structural": {"relations": list(STRUCTURAL_RELATIONS)},
    "graph-similar": {"relations": list(SIMILARITY_RELATIONS)},
    "graph-both": {"relations": [*STRUCTURAL_RELATIONS, *SIMILARITY_RELATIONS]},
    **ABLATIONS,
}
# `--chapter-routing-report`: the API default searching only the likeliest chapters (routing off = "default")
ROUTING_PIPELINES: dict[str, dict[str, Any]] = {"routing-top1": {"route_chapters": 1},
                                                "routing-top3": {"route_chapters": 3}}
ALL_RULES_PIPELINES = (*PIPELINES, *RULES_PIPELINES, *ROUTING_PIPELINES)
RULES_FILTER: dict[str, Any] = {"kind": ["rules"]}


def evaluate_rules(*, path: str | Path, project_slug: str, options: EvalOptions, expand: bool = False,
                   chapter_routing_report: bool = False) -> EvalReport:
    """Rulebook queries over the project's rules datasets, with contamination and answer similarity.

    `expand` adds the metrics against expanded gold (`*_expanded`: a gold section's children and
    continuations count as relevant) beside the plain ones. `chapter_routing_report` adds the routing rows
    (top-1, top-3 chapters) with their evaluability (gold inside the routed chapters) and hit@1/MRR@10 over
    the queries that stay evaluable; routing off is the `default` row. Without it the routing rows run only
    when named in `options.pipelines`. `options.model` (a local sentence-transformers folder) adds
    `dense|fused|weighted@<model id>` rows over a throwaway index of the rules chunks embedded with that model. It
    searches search_store: the live index in the web process (an admin job), else a snapshot of the project's rules
    chunks (a command beside the running server)."""
    queries = load_rules_queries(path)[:options.max_queries or None]
    check_ready()
    project = Project.objects.filter(slug=project_slug).first()
    if project is None:
        raise LookupError(f"project {project_slug!r} does not exist (run `manage.py demo` or ingest a rulebook)")
    dataset_ids = sorted(accessible_dataset_ids(project))
    scope = EvalScope(project=project, dataset_ids=dataset_ids, extra_filter=RULES_FILTER)
    with search_store(dataset_ids=dataset_ids, kinds=scope.extra_filter["kind"], progress=options.progress) as (
            index, store):
        report = _evaluate_rules_on(index=index, queries=queries, scope=scope, options=options, expand=expand,
                                    chapter_routing_report=chapter_routing_report,
                                    collection=f"rules:{Path(path).stem}@{project_slug}")
    report.timings["index"] = {"store": store}
    return report


def _evaluate_rules_on(*, index: VectorIndex, queries: list[Any], scope: EvalScope, options: EvalOptions,
                       expand: bool, chapter_routing_report: bool, collection: str) -> EvalReport:
    """evaluate_rules over an opened store: resolve each question's gold, rank it with every row, add the
    rules-only figures (expanded gold, chapter routing, categories, contamination, answer similarity)."""
    project, dataset_ids = scope.project, scope.dataset_ids
    qrels, texts, evaluable = {}, {}, 0
    expanded: dict[str, dict[str, int]] = {}
    for rq in queries:
        expected = resolve_expected(rq, dataset_ids=dataset_ids)
        texts[rq.id] = rq.query
        qrels[rq.id] = {str(c): 1 for c in expected}
        evaluable += bool(expected)
        if expand:
            expanded[rq.id] = {str(c): 1 for c in expand_gold(expected, dataset_ids=dataset_ids)}
    routed: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (pipeline, query) -> chapters searched

    def variant(name: str, *, on: VectorIndex = index, dense_model: str | None = None,
                **overrides: Any) -> Callable[[str, dict[str, Any]], list[tuple[int, float]]]:
        def rank(q: str, ctx: dict[str, Any]) -> list[tuple[int, float]]:
            spec = RulesSpec(q=q, log=False, top_k=50, dense_model=dense_model, **overrides)
            found = rules_search(user=None, project=project, spec=spec, index=on)
            routed[(name, q)] = {(c["book_id"], c["chapter"]) for c in found["routing"]["chapters"]}
            scores = {r["chunk_id"]: r["score"] for r in found["results"]}
            return [(cid, scores.get(cid, 0.0)) for cid in found["candidate_ids"]]
        return rank

    rankers = make_rankers(project=project, dataset_ids=dataset_ids, extra_filter=scope.extra_filter,
                           default=variant("default"), index=index)
    rankers.update({name: variant(name, **kw) for name, kw in {**RULES_PIPELINES, **ROUTING_PIPELINES}.items()})
    names = list(options.pipelines or [p for p in ALL_RULES_PIPELINES
                                       if chapter_routing_report or p not in ROUTING_PIPELINES])
    if chapter_routing_report:
        names = list(dict.fromkeys([*names, "default", *ROUTING_PIPELINES]))
    metrics, ranked, timings, extra = run_pipelines_with_model(
        scope=scope, options=replace(options, pipelines=names), rankers=rankers, queries=texts, qrels=qrels,
        model_default=lambda other, name: variant(f"default@{name}", on=other, dense_model=name))
    runs = {name: {qid: ranked_to_run(docs) for qid, docs in per.items()} for name, per in ranked.items()}
    if expand:
        for name in ranked:
            full = compute_metrics(qrels=expanded, run=runs[name])
            metrics[name].update({f"{k}_expanded": full[k] for k in ("hit@1", "mrr@10", "ndcg@10", "recall@100")})
    if chapter_routing_report:
        chapter_of_chunk = {cid: (book, chapter_of(list(path))) for cid, book, path in Chunk.objects.filter(
            id__in={int(d) for docs in qrels.values() for d in docs}).values_list("id", "book_id", "section_path")}
        for name in ranked:
            if name not in ROUTING_PIPELINES and name != "default":
                continue
            reach = {qid for qid, docs in qrels.items() if docs and (name not in ROUTING_PIPELINES or any(
                chapter_of_chunk.get(int(d)) in routed.get((name, texts[qid]), set()) for d in docs))}
            within = compute_metrics(qrels={q: d for q, d in qrels.items() if q in reach}, run=runs[name])
            metrics[name]["routing_evaluability"] = round(len(reach) / max(1, len(queries)), 4)
            metrics[name]["hit@1_evaluable"] = within["hit@1"] if reach else None
            metrics[name]["mrr@10_evaluable"] = within["mrr@10"] if reach else None
    # each row's metrics by question category (the report's category table), when the questions have categories
    by_category = {name: metrics_by_category(queries=queries, qrels=qrels, run=runs[name]) for name in ranked}
    if any(by_category.values()):
        extra["by_category"] = by_category
    all_ids = {int(d) for per in ranked.values() for docs in per.values() for d, _ in docs[:10]}
    rows = {r["id"]: r for r in Chunk.objects.filter(id__in=all_ids).values("id", "book_id", "text")}
    by_id = {rq.id: rq for rq in queries}
    for name, per in ranked.items():
        contamination, pairs = [], []
        for qid, docs in per.items():
            rq = by_id[qid]
            top = [rows[int(d)] for d, _ in docs[:10] if int(d) in rows]
            share = cross_book_contamination(book_id=rq.book_id, top_books=[r["book_id"] for r in top])
            if share is not None:
                contamination.append(share)
            if rq.answer and top:
                answer, _ = extractive_answer(q=rq.query, results=top[:5])
                pairs.append((answer, rq.answer))
        routing_ev = metrics[name].pop("routing_evaluability", None)
        metrics[name]["evaluability"] = routing_ev if routing_ev is not None else \
            round(evaluable / max(1, len(queries)), 4)
        metrics[name]["cross_book_contamination"] = mean_or_none(contamination)
        metrics[name]["answer_similarity"] = mean_or_none([token_f1(a, b) for a, b in pairs])
        metrics[name]["answer_cosine"] = mean_or_none(answer_cosine(pairs))
    return EvalReport(collection=collection, queries=len(queries), pipelines=metrics, timings=timings, extra=extra)
