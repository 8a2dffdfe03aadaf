"""Trained reranker: train on a BEIR train split (judgements) and on pseudo-queries alone, then evaluate on test.

Why: to know whether a cross-encoder fine-tuned here, from the bundled MiniLM, lifts nDCG@10 over the
fused ranking, measured on test queries it never saw, with its training cost. Everything runs through the
platform's own commands (`manage.py train_reranker`, `manage.py evaluate --reranker`) on private services.

    .venv/bin/python bench/bench_reranker.py --beir ../shared/data/scifact [--beir var/data/stdlib-code]
        [--max-pairs 10000] [--time-budget 1200] [--var-dir DIR]

Per collection: one model on the train split's judgements, one on pseudo-queries alone; then every pipeline on
the test split plus a trained-rerank row per model.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, table, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--beir", action="append", required=True, help="BEIR folder with train and test judgements")
    ap.add_argument("--max-pairs", type=int, default=10_000)
    ap.add_argument("--time-budget", type=float, default=1200.0, help="seconds of training per model at most")
    ap.add_argument("--pseudo-limit", type=int, default=2000)
    ap.add_argument("--pseudo-time-budget", type=float, default=None, help="default: --time-budget")
    ap.add_argument("--max-queries", type=int, default=0, help="evaluate on the first N test queries (0: all)")
    ap.add_argument("--var-dir", default=None)
    ap.add_argument("--out", default="reranker", help="results file name under bench/results/")
    args = ap.parse_args()
    var_dir = setup_django(var_dir=args.var_dir)
    from django.core.management import call_command

    from search.engine.reranker_store import models_dir

    sections = []
    for folder in args.beir:
        name = Path(folder).resolve().name
        manifests = {}
        budgets = {"qrels": args.time_budget, "pseudo": args.pseudo_time_budget or args.time_budget}
        for how, extra in (("qrels", []), ("pseudo", ["--pseudo", "--pseudo-limit", str(args.pseudo_limit)])):
            model = f"{name}-{how}"
            t0 = time.perf_counter()
            call_command("train_reranker", "--beir", folder, "--name", model, "--max-pairs", str(args.max_pairs),
                         "--time-budget", str(budgets[how]), *extra, stdout=sys.stderr)
            wall = time.perf_counter() - t0
            manifests[model] = {**json.loads((models_dir() / model / "manifest.json").read_text()), "wall_s": wall}
        reports = {}
        for model in manifests:
            out = StringIO()
            pipelines = [] if not reports else ["--pipelines", "trained-rerank"]
            if args.max_queries:
                pipelines += ["--max-queries", str(args.max_queries)]
            call_command("evaluate", "--beir", folder, "--reranker", model, *pipelines, "--json", "--no-save",
                         "--report-dir", str(var_dir / "reports"), stdout=out)
            reports[model] = json.loads(out.getvalue())
        first = next(iter(reports.values()))
        rows = []
        for pipe, m in first["pipelines"].items():
            label = f"trained-rerank ({next(iter(reports))})" if pipe == "trained-rerank" else pipe
            rows.append([label, m["ndcg@10"], m["mrr@10"], m["recall@100"],
                         first["timings"].get(pipe, {}).get("ms_per_query", "")])
        for model, rep in list(reports.items())[1:]:
            m = rep["pipelines"]["trained-rerank"]
            rows.append([f"trained-rerank ({model})", m["ndcg@10"], m["mrr@10"], m["recall@100"],
                         rep["timings"].get("trained-rerank", {}).get("ms_per_query", "")])
        fused = first["pipelines"]["fused"]["ndcg@10"]
        cost = [[model, m["data"]["positives"], m["data"]["train_queries"], m["data"]["groups"], m["pairs_seen"],
                 f"{m['steps_run']}/{m['steps_planned']}", m["stopped"], m["data"]["mine_seconds"],
                 m["train_seconds"], f"{m['heldout']['reranked_ndcg@10']} / "
                 f"{m['heldout']['cross_encoder_alone_ndcg@10']} / {m['heldout']['fused_ndcg@10']}", m["blend"],
                 round(reports[model]["pipelines"]["trained-rerank"]["ndcg@10"] - fused, 4)]
                for model, m in manifests.items()]
        sections += [
            f"### {first['collection']} — {first['queries']} test queries", "",
            table(["pipeline", "nDCG@10", "MRR@10", "recall@100", "ms/query"], rows), "",
            "Training (seed 13; from all-MiniLM-L6-v2's weights; group softmax over 1 positive + 7 hard negatives "
            "from the hybrid top 30; the best held-out state kept; `blend` = the fused score's share in the "
            "shipped score, chosen on the held-out slice):", "",
            table(["model", "positives", "train queries", "groups", "pairs seen", "steps", "stopped", "mining s",
                   "training s", "held-out nDCG@10: blended / cross-encoder alone / fused", "blend",
                   "test nDCG@10 minus fused"], cost), "",
        ]
    lines = ["## Trained reranker", "", *sections, machine(), "",
             "Reproduce: `.venv/bin/python bench/bench_reranker.py " + " ".join(f"--beir {b}" for b in args.beir)
             + f" --max-pairs {args.max_pairs} --time-budget {args.time_budget:g}"
             + (f" --pseudo-time-budget {args.pseudo_time_budget:g}" if args.pseudo_time_budget else "")
             + (f" --max-queries {args.max_queries}" if args.max_queries else "") + "`"]
    write_result(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
