"""Fusion per content kind, chosen on TRAIN splits and checked on TEST splits.

Why offline: each leg is queried once per query (depth 100), then every fusion in the grid (RRF k and leg
weights, min-max weighted, DBSF) is computed in Python from those two lists with search.engine.fusion.fuse, the same
function the pipeline runs; a grid of ~80 settings costs seconds instead of 80 evaluations. The pick for a kind
is the best nDCG@10 on the train split; the test split only reports it next to each single leg and the current
default (RRF k=60, equal weights), so the choice never sees a test judgement.

    .venv/bin/python bench/tune_fusion.py --beir var/data/stdlib-code --beir /work/shared/data/scifact \
        [--var-dir /tmp/fusion-var] [--max-train N] [--max-test N]

Each folder needs qrels for both splits (qrels_train.tsv / qrels/train.tsv, queries_train.jsonl if separate);
its kind comes from collection.json (code) or is beir (prose). Writes bench/results/fusion_by_kind.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, write_result

RRF_KS = (5, 10, 20, 40, 60, 100)
RRF_SPARSE_WEIGHTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
SCORE_SPARSE_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
DEPTH = 100


def grid() -> list[tuple[str, dict]]:
    """(label, fuse kwargs) for every setting tried; the current default first so it wins ties."""
    out = [("rrf k=60 w=1/1 (current default)", {"method": "rrf", "rrf_k": 60})]
    for k in RRF_KS:
        for w in RRF_SPARSE_WEIGHTS:
            if (k, w) != (60, 1.0):
                out.append((f"rrf k={k} sparse w={w}", {"method": "rrf", "rrf_k": k,
                                                        "weights": {"dense": 1.0, "sparse": w}}))
    for method in ("weighted", "dbsf"):
        for w in SCORE_SPARSE_WEIGHTS:
            out.append((f"{method} sparse {w:.1f} / dense {1 - w:.1f}",
                        {"method": method, "weights": {"dense": round(1 - w, 2), "sparse": w}}))
    return out


def legs_for(*, queries: dict[str, str], flt: object, kinds: frozenset[str], index: object) -> dict[str, tuple[list, list]]:
    from inference.encoders import embed_query
    from search.engine.term_stats import weighted_query

    out = {}
    for qid, text in queries.items():
        dense = index.search_dense(embed_query(text).tolist(), flt=flt, limit=DEPTH)
        sparse = index.search_sparse(weighted_query(text, kinds=kinds, dataset_ids=flt.dataset_ids), flt=flt,
                                     limit=DEPTH)
        out[qid] = (dense, sparse)
    return out


def score(*, legs: dict[str, tuple[list, list]], qrels: dict, to_doc: dict[int, str], how: str | dict) -> dict:
    from search.engine.fusion import fuse
    from search.quality.evaluation import compute_metrics, ranked_to_run

    run = {}
    for qid, (dense, sparse) in legs.items():
        if how == "dense":
            hits = dense
        elif how == "sparse":
            hits = sparse
        else:
            hits = [(c.chunk_id, c.fused_score) for c in fuse(dense=dense, sparse=sparse, limit=DEPTH, **how)]
        run[qid] = ranked_to_run([(to_doc[cid], s) for cid, s in hits if cid in to_doc])
    return compute_metrics(qrels=qrels, run=run)


def tune(path: str, *, max_train: int | None, max_test: int | None) -> dict:
    from search.engine.pipeline import build_filter
    from search.models import Chunk
    from search.quality.evaluation import load_beir
    from search.quality.runs import ingest_beir, throwaway_index

    t0 = time.perf_counter()
    test, dataset, _ = ingest_beir(path=path, progress=False, max_queries=max_test)
    train = load_beir(path, split="train", max_queries=max_train, kind=test.kind)
    ingest_s = time.perf_counter() - t0
    to_doc = dict(Chunk.objects.filter(dataset=dataset).values_list("id", "path"))
    flt = build_filter(dataset_ids=[dataset.pk], extra_filter={"kind": [test.kind]})
    kinds = frozenset([test.kind])
    t1 = time.perf_counter()
    with throwaway_index(dataset_ids=[dataset.pk], kinds=[test.kind]) as (index, _):
        train_legs = legs_for(queries=train.queries, flt=flt, kinds=kinds, index=index)
        test_legs = legs_for(queries=test.queries, flt=flt, kinds=kinds, index=index)
    query_s = time.perf_counter() - t1
    settings = grid()
    train_scores = [(label, how, score(legs=train_legs, qrels=train.qrels, to_doc=to_doc, how=how)["ndcg@10"])
                    for label, how in settings]
    best_label, best_how, best_train = max(train_scores, key=lambda r: r[2])  # max keeps the first of ties
    families: dict[str, tuple[str, float]] = {}
    for label, _, s in train_scores:
        fam = label.split()[0]
        if fam not in families or s > families[fam][1]:
            families[fam] = (label, s)
    rows = []
    for label, how in (("dense only", "dense"), ("sparse only", "sparse"),
                       ("rrf k=60 w=1/1 (current default)", {"method": "rrf", "rrf_k": 60}),
                       (f"chosen: {best_label}", best_how)):
        tr = score(legs=train_legs, qrels=train.qrels, to_doc=to_doc, how=how)
        te = score(legs=test_legs, qrels=test.qrels, to_doc=to_doc, how=how)
        rows.append((label, tr["ndcg@10"], te["ndcg@10"], te["mrr@10"], te["recall@100"]))
    test_scores = {label: score(legs=test_legs, qrels=test.qrels, to_doc=to_doc, how=how)["ndcg@10"]
                   for label, how in settings}
    return {"collection": f"{test.name} ({test.kind})", "kind": test.kind, "train_queries": len(train.queries),
            "train_by_label": {label: s for label, _, s in train_scores}, "test_by_label": test_scores,
            "test_queries": len(test.queries), "best": (best_label, best_how, best_train), "families": families,
            "rows": rows, "ingest_s": ingest_s, "query_s": query_s}


def pooled(results: list[dict]) -> list[str]:
    """For a kind with several collections: the one setting with the best mean train nDCG@10 over them (each
    collection weighs the same), then its test nDCG@10 on each next to the current default's. One default per kind
    must serve every collection of that kind, so it is chosen on all their train splits at once."""
    out = []
    for kind in sorted({r["kind"] for r in results}):
        group = [r for r in results if r["kind"] == kind]
        if len(group) < 2:
            continue
        labels = list(group[0]["train_by_label"])
        mean = {lab: sum(r["train_by_label"][lab] for r in group) / len(group) for lab in labels}
        pick = max(labels, key=lambda lab: mean[lab])  # max keeps the first of ties: the current default
        default = labels[0]
        out += [f"## Pooled over the {len(group)} `{kind}` collections: chosen on their train splits together", "",
                f"Pick: **{pick}** (mean train nDCG@10 {mean[pick]:.4f}; current default {mean[default]:.4f}).", "",
                "| collection | test nDCG@10, current default | test nDCG@10, pooled pick | Δ |", "|---|---:|---:|---:|"]
        for r in group:
            a, b = r["test_by_label"][default], r["test_by_label"][pick]
            out.append(f"| {r['collection']} | {a:.4f} | {b:.4f} | {b - a:+.4f} |")
        runner_up = sorted(labels, key=lambda lab: -mean[lab])[:5]
        out += ["", "Top five on pooled train: " + "; ".join(f"{lab} ({mean[lab]:.4f})" for lab in runner_up), ""]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--beir", action="append", required=True, help="a BEIR folder with train and test qrels")
    ap.add_argument("--var-dir", default=None, help="keep services and embeddings here (default: a temp dir)")
    ap.add_argument("--max-train", type=int, default=0, help="cap on train queries (0 = all)")
    ap.add_argument("--max-test", type=int, default=0, help="cap on test queries (0 = all)")
    ap.add_argument("--out", default="fusion_by_kind", help="bench/results/<out>.md")
    args = ap.parse_args()
    setup_django(var_dir=args.var_dir)
    lines = ["# Fusion per content kind: chosen on train, reported on test (nDCG@10)", "",
             machine(), "",
             f"Grid: RRF k in {RRF_KS} x sparse weight in {RRF_SPARSE_WEIGHTS} (dense 1); min-max weighted and "
             f"DBSF with sparse weight in {SCORE_SPARSE_WEIGHTS} (dense 1 - w). Legs queried once, depth {DEPTH}.",
             ""]
    results = []
    for path in args.beir:
        r = tune(path, max_train=args.max_train or None, max_test=args.max_test or None)
        results.append(r)
        lines += [f"## {r['collection']}: {r['train_queries']} train / {r['test_queries']} test queries", "",
                  "Best per family on train: " + "; ".join(f"{lab} ({s:.4f})" for lab, s in r["families"].values()),
                  "", "| pipeline | train nDCG@10 | test nDCG@10 | test MRR@10 | test recall@100 |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {lab} | {a:.4f} | {b:.4f} | {c:.4f} | {d:.4f} |" for lab, a, b, c, d in r["rows"]]
        best_leg = max(r["rows"][0][2], r["rows"][1][2])
        chosen = r["rows"][3][2]
        lines += ["", f"Chosen for kind `{r['kind']}`: {r['best'][0]} ({r['best'][1]}); on test "
                  f"{chosen:.4f} vs best single leg {best_leg:.4f} ({'not below' if chosen >= best_leg else 'BELOW'})."
                  f" Ingest {r['ingest_s']:.0f} s, legs for all queries {r['query_s']:.0f} s.", ""]
        print(f"[{r['collection']} done]", file=sys.stderr, flush=True)
    lines += pooled(results)
    write_result(args.out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
