"""Tenant isolation of sparse scores: does another tenant's ingest move a tenant's ranking?

Tenant A owns the even-numbered half of a BEIR corpus (SciFact by default), tenant B the odd half, both of the
same kind and in the same live store. A's sparse and fused rankings for the test queries are taken before B
ingests and after, each the way the platform computes them now (IDF over the searched datasets,
search.engine.term_stats) and, as the baseline in the same run, the way a collection-wide IDF computes them (Qdrant's
IDF modifier, what the platform did before: the IDF over every dataset in the store). Then what the statistics
cost: the IDF lookup per query, beside the sparse leg it weights, and the triggers' share of B's ingest
(the same write with the term-statistics triggers disabled, in a rolled-back transaction).

Vectors come from the embedding cache when the var dir has embedded the corpus before (`--var-dir`), so a
re-run embeds nothing.

    .venv/bin/python bench/bench_isolation.py [--beir DIR] [--var-dir DIR] [--max-queries N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, table, write_result


def _half(coll: object, parity: int) -> list:
    from search.quality.evaluation import beir_documents

    drafts = beir_documents(coll)
    return [d for n, d in enumerate(sorted(drafts, key=lambda d: d.path)) if n % 2 == parity]


def _ingest(project_slug: str, name: str, drafts: list) -> tuple[object, float]:
    from projects.models import Project
    from search.engine.applier import apply_outbox
    from search.engine.index import get_index
    from search.ingest.writer import sync_documents
    from search.models import Dataset

    project, _ = Project.objects.get_or_create(slug=project_slug, defaults={"name": project_slug})
    dataset, _ = Dataset.objects.get_or_create(project=project, name=name, defaults={"kind": "beir"})
    t0 = time.perf_counter()
    sync_documents(dataset=dataset, drafts=drafts)
    write_s = time.perf_counter() - t0
    while apply_outbox(index=get_index()):
        pass
    return dataset, write_s


def _rankings(queries: dict[str, str], *, dataset_ids: list[int], idf_scope: list[int] | None,
              legs: str) -> dict[str, list[tuple[int, float]]]:
    """Each query's top 10 (chunk id, score); `idf_scope` None = the platform's (the searched datasets)."""
    from search.engine import term_stats
    from search.engine.fusion_settings import DEFAULT
    from search.engine.pipeline import QuerySpec, build_filter, execute, retrieval_over

    stages = retrieval_over(build_filter(dataset_ids=dataset_ids, extra_filter={"kind": ["beir"]}), setting=DEFAULT)
    original = term_stats.idf_weights
    if idf_scope is not None:
        term_stats.idf_weights = lambda *, terms, dataset_ids: original(terms=terms, dataset_ids=idf_scope)
    try:
        return {qid: [(c.chunk_id, round(c.fused_score, 6)) for c in execute(
                    spec=QuerySpec(q=q, log=False, top_k=10, candidates=10, legs=legs), project=None,
                    stages=stages).cands]
                for qid, q in queries.items()}
    finally:
        term_stats.idf_weights = original


def _moved(a: dict, b: dict) -> tuple[int, int]:
    """(queries whose top-10 order changed, queries whose scores changed)."""
    order = sum([i for i, _ in a[q]] != [i for i, _ in b[q]] for q in a)
    scores = sum(a[q] != b[q] for q in a)
    return order, scores


def _ndcg(rankings: dict, *, qrels: dict, to_doc: dict[int, str]) -> float:
    from search.quality.evaluation import compute_metrics, ranked_to_run

    run = {q: ranked_to_run([(to_doc[i], s) for i, s in hits if i in to_doc]) for q, hits in rankings.items()}
    return compute_metrics(qrels=qrels, run=run)["ndcg@10"]


def _trigger_cost(drafts: list) -> tuple[float, float]:
    """(seconds to write `drafts` into a fresh dataset with the term-statistics triggers, without); both rolled
    back, so nothing stays."""
    from django.db import connection, transaction

    from projects.models import Project
    from search.ingest.writer import write_documents
    from search.models import Dataset

    out = []
    for enabled in (True, False):
        with transaction.atomic():
            project, _ = Project.objects.get_or_create(slug="bench-trigger", defaults={"name": "t"})
            ds = Dataset.objects.create(project=project, name=f"probe-{enabled}", kind="beir")
            if not enabled:
                with connection.cursor() as cur:
                    for trig in ("insert", "delete", "update"):
                        cur.execute(f"ALTER TABLE search_chunk DISABLE TRIGGER search_chunk_terms_{trig}")
            t0 = time.perf_counter()
            write_documents(dataset=ds, drafts=drafts)
            out.append(time.perf_counter() - t0)
            transaction.set_rollback(True)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--beir", default="/work/shared/data/scifact")
    ap.add_argument("--var-dir", default=None)
    ap.add_argument("--max-queries", type=int, default=0)
    args = ap.parse_args()
    setup_django(var_dir=args.var_dir)
    from search.engine.pipeline import build_filter
    from search.engine.sparse import query_terms, term_index
    from search.engine.term_stats import idf_weights, weighted_query
    from search.ingest.writer import cache_vectors
    from search.models import Chunk
    from search.quality.evaluation import load_beir

    coll = load_beir(args.beir, max_queries=args.max_queries or None)
    mine, theirs = _half(coll, 0), _half(coll, 1)
    t0 = time.perf_counter()
    cached = cache_vectors(drafts=mine + theirs)
    embed_s = time.perf_counter() - t0
    a, a_write = _ingest("tenant-a", "papers-even", mine)
    to_doc = dict(Chunk.objects.filter(dataset=a).values_list("id", "path"))
    in_a = {d.path for d in mine}
    qrels = {q: {d: r for d, r in rel.items() if d in in_a} for q, rel in coll.qrels.items()}
    qrels = {q: rel for q, rel in qrels.items() if rel}
    queries = {q: coll.queries[q] for q in qrels}

    before = {legs: _rankings(queries, dataset_ids=[a.pk], idf_scope=None, legs=legs) for legs in ("sparse", "hybrid")}
    b, b_write = _ingest("tenant-b", "papers-odd", theirs)
    after = {legs: _rankings(queries, dataset_ids=[a.pk], idf_scope=None, legs=legs) for legs in ("sparse", "hybrid")}
    shared = {legs: _rankings(queries, dataset_ids=[a.pk], idf_scope=[a.pk, b.pk], legs=legs)
              for legs in ("sparse", "hybrid")}

    rows = []
    for legs, label in (("sparse", "sparse"), ("hybrid", "fused (RRF)")):
        o_after, s_after = _moved(before[legs], after[legs])
        o_shared, s_shared = _moved(before[legs], shared[legs])
        rows.append([label, "IDF over the searched datasets (now)", f"{o_after} / {len(queries)}",
                     f"{s_after} / {len(queries)}", f"{_ndcg(before[legs], qrels=qrels, to_doc=to_doc):.4f}",
                     f"{_ndcg(after[legs], qrels=qrels, to_doc=to_doc):.4f}"])
        rows.append([label, "IDF over the whole store (before; baseline)", f"{o_shared} / {len(queries)}",
                     f"{s_shared} / {len(queries)}", f"{_ndcg(before[legs], qrels=qrels, to_doc=to_doc):.4f}",
                     f"{_ndcg(shared[legs], qrels=qrels, to_doc=to_doc):.4f}"])

    flt = build_filter(dataset_ids=[a.pk], extra_filter={"kind": ["beir"]})
    from search.engine.index import get_index

    index = get_index()
    lookup, sparse_leg = [], []
    for _ in range(3):
        for q in queries.values():
            terms = {term_index(t) for t in query_terms(q, kinds=("beir",))}
            t = time.perf_counter()
            idf_weights(terms=terms, dataset_ids=[a.pk])
            lookup.append((time.perf_counter() - t) * 1000)
            vec = weighted_query(q, kinds=("beir",), dataset_ids=[a.pk])
            t = time.perf_counter()
            index.search_sparse(vec, flt=flt, limit=100)
            sparse_leg.append((time.perf_counter() - t) * 1000)

    def pct(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]

    with_trig, without_trig = _trigger_cost(theirs)
    chunks_b = Chunk.objects.filter(dataset=b).count()
    cost = [["IDF lookup (search_termstat, one query)", f"{statistics.median(lookup):.2f}", f"{pct(lookup, .95):.2f}"],
            ["sparse leg in Qdrant (top 100)", f"{statistics.median(sparse_leg):.2f}", f"{pct(sparse_leg, .95):.2f}"]]
    ingest = [[f"write {len(theirs)} documents ({chunks_b} chunks), triggers on", f"{with_trig:.2f}"],
              [f"write {len(theirs)} documents ({chunks_b} chunks), term-statistics triggers off", f"{without_trig:.2f}"]]
    text = "\n\n".join([
        f"# Tenant isolation: {coll.name}, tenant A = {len(mine)} documents, tenant B = {len(theirs)} (same kind, "
        f"same store); {len(queries)} test queries with a relevant document in A's half",
        machine(),
        f"Embedding: {cached} in {embed_s:.0f} s (cached vectors are reused). Ingest (Postgres write) A "
        f"{a_write:.1f} s, B {b_write:.1f} s.",
        "## A's top 10 after B ingests, compared with before it\n\n"
        + table(["ranking", "IDF taken over", "queries whose order moved", "queries whose scores moved",
                 "A's nDCG@10 before B", "A's nDCG@10 after B"], rows),
        "## What the statistics cost (ms, 3 passes over the queries)\n\n" + table(["step", "p50", "p95"], cost),
        "## The triggers' share of an ingest (seconds, rolled back)\n\n" + table(["write", "s"], ingest),
    ])
    write_result("isolation", text)


if __name__ == "__main__":
    main()
