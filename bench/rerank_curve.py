"""The trained reranker's cost/quality curve: nDCG@10 against the latency it adds, by depth, input length and layers.

Why: a cross-encoder trained here lifts nDCG@10 over fusion, but at depth 30 and 256 tokens it adds about 0.75 s per
query on 2 cores, so no project keeps it on. This measures, on a BEIR test split the model never saw, what each
cheaper setting keeps of the gain: fewer candidates reordered (depth), shorter inputs (max tokens per query-document
pair) and fewer transformer layers (the trained model's first K layers, no retraining). The knee of the curve is what
ships (RERANK_DEPTH, RERANK_MAX_LENGTH).

Quality: each query's candidates are the API default's fused list (the kind's default fusion), re-checked as the API
does; the top `depth` are reordered by the model's score blended with the fused one (the manifest's `blend`), the rest
keep their order. Scores are computed once at the largest depth (a pair's score does not depend on the others), so
every depth's nDCG comes from the same forward passes. Latency: the model's scoring of `depth` candidates for one
query, timed separately on the first --latency-queries queries (p50/p95), one process, torch threads as the server.

    .venv/bin/python bench/rerank_curve.py --beir ../shared/data/scifact --reranker sf-len128 --var-dir var
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, table, write_result

DEPTHS = (5, 10, 20, 30)
LENGTHS = (64, 128, 256)
LAYERS = (6, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--beir", required=True)
    ap.add_argument("--reranker", required=True, help="a reranker trained here (var/models/rerankers/<name>)")
    ap.add_argument("--latency-queries", type=int, default=60)
    ap.add_argument("--max-queries", type=int, default=0)
    ap.add_argument("--out", default="rerank_curve")
    ap.add_argument("--var-dir", default=None, help="reuse a VAR_DIR (its trained rerankers, cached embeddings)")
    args = ap.parse_args()
    setup_django(var_dir=args.var_dir)
    import json

    import numpy as np
    from sentence_transformers import CrossEncoder

    from inference.encoders import inference_context, precision
    from search.engine.pipeline import (
        RETRIEVAL,
        QuerySpec,
        build_filter,
        execute,
        over,
        recheck,
        replace_stage,
        resolve,
    )
    from search.engine.rerank import rerank_text
    from search.engine.reranker_store import blend_scores, model_path
    from search.models import Chunk
    from search.quality.metrics import compute_metrics, ranked_to_run
    from search.quality.runs import ingest_beir, throwaway_index

    path = model_path(args.reranker)
    blend = json.loads((path / "manifest.json").read_text()).get("blend")
    coll, dataset, _ = ingest_beir(path=args.beir, max_queries=args.max_queries or None, progress=False)
    to_doc = dict(Chunk.objects.filter(dataset=dataset).values_list("id", "path"))
    flt = build_filter(dataset_ids=[dataset.pk], extra_filter={"kind": [coll.kind]})
    stages = (*replace_stage(RETRIEVAL, resolve, over(flt)), recheck)
    top = max(DEPTHS)
    cands: dict[str, list[tuple[int, float, str]]] = {}
    t_fused: list[float] = []
    with throwaway_index(dataset_ids=[dataset.pk], kinds=[coll.kind]) as (index, _):
        for qid, q in coll.queries.items():
            t0 = time.perf_counter()
            run = execute(spec=QuerySpec(q=q, candidates=100, top_k=50, include_global=False, log=False, kind="eval"),
                          project=dataset.project, index=index, stages=stages)
            t_fused.append((time.perf_counter() - t0) * 1000)
            cands[qid] = [(c.chunk_id, c.fused_score, rerank_text(micro_summary=c.chunk.micro_summary,
                                                                   text=c.chunk.text, path=c.chunk.path,
                                                                   symbol=c.chunk.symbol)) for c in run.cands]
        fusion_label = run.setting.label

    def ndcg(order: dict[str, list[int]]) -> float:
        runs = {qid: ranked_to_run([(to_doc[c], 1.0 / (i + 1)) for i, c in enumerate(ids) if c in to_doc])
                for qid, ids in order.items()}
        return compute_metrics(qrels=coll.qrels, run=runs)["ndcg@10"]

    fused_ndcg = ndcg({qid: [c for c, _, _ in cs] for qid, cs in cands.items()})
    rows = []
    lat_ids = list(cands)[:args.latency_queries]
    for layers in LAYERS:
        for length in LENGTHS:
            model = CrossEncoder(str(path), device="cpu", max_length=length)
            enc = model.model.base_model.encoder
            enc.layer = enc.layer[:layers]
            model.model.config.num_hidden_layers = layers
            scores: dict[str, list[float]] = {}
            with inference_context(precision()):
                for qid, cs in cands.items():
                    head = cs[:top]
                    scores[qid] = [float(s) for s in model.predict([(coll.queries[qid], t) for _, _, t in head],
                                                                   show_progress_bar=False)] if head else []
                for depth in DEPTHS:
                    order = {}
                    for qid, cs in cands.items():
                        head, tail = cs[:depth], cs[depth:]
                        mixed = blend_scores(model=scores[qid][:depth], prior=[f for _, f, _ in head], blend=blend) \
                            if blend is not None else scores[qid][:depth]
                        ranked = [c for (c, _, _), _ in sorted(zip(head, mixed, strict=True), key=lambda x: -x[1])]
                        order[qid] = ranked + [c for c, _, _ in tail]
                    times = []
                    for qid in lat_ids:
                        pairs = [(coll.queries[qid], t) for _, _, t in cands[qid][:depth]]
                        t0 = time.perf_counter()
                        model.predict(pairs, show_progress_bar=False)
                        times.append((time.perf_counter() - t0) * 1000)
                    value = ndcg(order)
                    rows.append({"layers": layers, "max tokens": length, "depth": depth, "nDCG@10": round(value, 4),
                                 "gain over fused": round(value - fused_ndcg, 4),
                                 "added p50 ms": round(statistics.median(times), 1),
                                 "added p95 ms": round(float(np.percentile(times, 95)), 1)})
                    print(rows[-1], file=sys.stderr, flush=True)
    header = ["layers", "max tokens", "depth", "nDCG@10", "gain over fused", "added p50 ms", "added p95 ms"]
    base = [{"layers": "—", "max tokens": "—", "depth": 0, "nDCG@10": round(fused_ndcg, 4), "gain over fused": 0.0,
             "added p50 ms": 0.0, "added p95 ms": 0.0}]
    text = (f"# Reranker cost/quality — `bench/rerank_curve.py --beir {Path(args.beir).name} --reranker "
            f"{args.reranker}`\n\n{len(cands)} test queries; candidates: the API default's fused list ({fusion_label}),"
            f" re-checked; blend {blend} (the manifest's). Fused p50 {statistics.median(t_fused):.1f} ms per query "
            f"(retrieval + fusion + re-check). Latency: the model scoring `depth` candidates of one query, "
            f"{len(lat_ids)} queries.\n\n" + table(header, [[r[h] for h in header] for r in base + rows])
            + "\n\n" + machine() + "\n")
    write_result(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
