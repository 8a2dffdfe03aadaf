"""Whole evaluation runs: ingest/resolve a collection, run every pipeline, add the rules-only metrics.

Why separate from evaluation.py: that module is pure metrics and reporting (tested on
hand-made fixtures); this one touches the database, the index and the projects.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from search.evaluation import (
    PIPELINES,
    EvalReport,
    beir_documents,
    evaluability,
    load_beir,
    load_rules_queries,
    make_rankers,
    resolve_expected,
    run_pipelines,
    token_f1,
)

if TYPE_CHECKING:
    from projects.models import Project


def _eval_project(slug: str) -> Project:
    from projects.models import Project

    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
    return project


def beir_dataset_name(coll: Any) -> str:
    """`beir:<name>`, or `beir:<name>:code` for a code collection: a document's chunks keep the kind they were
    ingested with (an unchanged document is skipped), so each kind gets its own dataset."""
    return f"beir:{coll.name}" if coll.kind == "beir" else f"beir:{coll.name}:{coll.kind}"


def ingest_beir(*, path: str | Path, project_slug: str = "eval", progress: bool = True,
                max_queries: int | None = None, kind: str | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """(collection, dataset, stats). Re-running skips unchanged documents and reuses cached embeddings."""
    from projects.models import Dataset
    from search.index import apply_outbox, get_index
    from search.ingest.runner import sync_documents

    coll = load_beir(path, max_queries=max_queries, kind=kind)
    project = _eval_project(project_slug)
    dataset, _ = Dataset.objects.get_or_create(project=project, name=beir_dataset_name(coll),
                                               defaults={"kind": coll.kind})
    drafts = beir_documents(coll)
    bar = tqdm(total=len(drafts), desc="ingest", file=sys.stderr, disable=not progress)
    last = {"files": 0}

    def tick(stats: dict[str, int]) -> None:
        bar.update(stats["files"] - last["files"])
        last["files"] = stats["files"]

    stats = sync_documents(dataset=dataset, drafts=drafts, progress=tick)
    bar.close()
    index = get_index()
    while apply_outbox(index=index):
        pass
    return coll, dataset, stats


def evaluate_beir(*, path: str | Path, project_slug: str = "eval", pipelines: list[str] | None = None,
                  max_queries: int | None = None, progress: bool = True, kind: str | None = None) -> EvalReport:
    from search.models import Chunk

    coll, dataset, stats = ingest_beir(path=path, project_slug=project_slug, progress=progress,
                                       max_queries=max_queries, kind=kind)
    id_to_doc = dict(Chunk.objects.filter(dataset=dataset).values_list("id", "path"))
    rankers = make_rankers(project=dataset.project, dataset_ids=[dataset.pk], extra_filter={"kind": [coll.kind]})
    metrics, _, timings = run_pipelines(queries=coll.queries, qrels=coll.qrels, rankers=rankers,
                                        to_doc=lambda ids: {i: id_to_doc[i] for i in ids if i in id_to_doc},
                                        pipelines=pipelines or list(PIPELINES), progress=progress)
    ev = evaluability(coll)
    for m in metrics.values():
        m["evaluability"] = ev
    timings["ingest"] = stats
    return EvalReport(collection=beir_dataset_name(coll), queries=len(coll.queries), pipelines=metrics,
                      timings=timings, extra={"corpus_docs": len(coll.corpus), "kind": coll.kind})


def evaluate_rules(*, path: str | Path, project_slug: str, pipelines: list[str] | None = None,
                   max_queries: int | None = None, progress: bool = True) -> EvalReport:
    """Rulebook queries over the project's rules datasets, with contamination and answer similarity."""
    from projects.access import accessible_dataset_ids
    from projects.models import Project
    from search.answer import extractive_answer
    from search.index import apply_outbox, get_index
    from search.models import Chunk
    from search.rules_search import rules_search

    project = Project.objects.filter(slug=project_slug).first()
    if project is None:
        raise LookupError(f"project {project_slug!r} does not exist (run `manage.py demo` or ingest a rulebook)")
    queries = load_rules_queries(path)[:max_queries or None]
    dataset_ids = sorted(accessible_dataset_ids(project))
    apply_outbox(index=get_index())
    qrels, texts, evaluable = {}, {}, 0
    for rq in queries:
        expected = resolve_expected(rq, dataset_ids=dataset_ids)
        texts[rq.id] = rq.query
        qrels[rq.id] = {str(c): 1 for c in expected}
        evaluable += bool(expected)

    def default(q: str, ctx: dict[str, Any]) -> list[tuple[int, float]]:
        found = rules_search(user=None, project=project, q=q, log=False, top_k=50)
        scores = {r["chunk_id"]: r["score"] for r in found["results"]}
        return [(cid, scores.get(cid, 0.0)) for cid in found["candidate_ids"]]

    rankers = make_rankers(project=project, dataset_ids=dataset_ids, extra_filter={"kind": ["rules"]},
                           default=default)
    metrics, ranked, timings = run_pipelines(queries=texts, qrels=qrels, rankers=rankers,
                                             pipelines=pipelines or list(PIPELINES), progress=progress)
    all_ids = {int(d) for per in ranked.values() for docs in per.values() for d, _ in docs[:10]}
    rows = {r["id"]: r for r in Chunk.objects.filter(id__in=all_ids).values("id", "book_id", "text")}
    by_id = {rq.id: rq for rq in queries}
    for name, per in ranked.items():
        contamination, sims = [], []
        for qid, docs in per.items():
            rq = by_id[qid]
            top = [rows[int(d)] for d, _ in docs[:10] if int(d) in rows]
            if rq.book_id and top:
                contamination.append(sum(1 for r in top if r["book_id"] != rq.book_id) / len(top))
            if rq.answer and top:
                answer, _ = extractive_answer(q=rq.query, results=top[:5])
                sims.append(token_f1(answer, rq.answer))
        metrics[name]["evaluability"] = round(evaluable / max(1, len(queries)), 4)
        metrics[name]["cross_book_contamination"] = round(sum(contamination) / len(contamination), 4) \
            if contamination else None
        metrics[name]["answer_similarity"] = round(sum(sims) / len(sims), 4) if sims else None
    return EvalReport(collection=f"rules:{Path(path).stem}@{project_slug}", queries=len(queries), pipelines=metrics,
                      timings=timings)
