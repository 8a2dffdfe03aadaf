"""SRD rules ablations with the per-category breakdown (issue 29 §4): the API default (`rules_search`) and one
row per change, on a question file, over a snapshot of the project's rules chunks (as `manage.py evaluate`).

Run: VAR_DIR=... .venv/bin/python manage.py shell -c "exec(open('bench/results/srd_ablations.py').read())"
with SRD_QUERIES (a question file), SRD_ROWS (comma-separated row names, "default" first), SRD_OUT (a JSON path).
Why a script: the rows are RulesSpec overrides (search.rules.search.ABLATIONS) that search/quality/runs.py's
RULES_PIPELINES does not list yet; the metrics are the harness's own (ranx through compute_metrics).
"""
import json
import os
import time

from projects.models import Project
from search.engine.access import accessible_dataset_ids
from search.quality.evaluation import load_rules_queries, make_rankers, metrics_by_category, resolve_expected
from search.quality.metrics import compute_metrics, ranked_to_run
from search.quality.runs import RULES_FILTER, search_store
from search.rules.search import ABLATIONS, RulesSpec, rules_search

path = os.environ.get("SRD_QUERIES", "search/rules/demo_rules/srd51_dev_queries.json")
rows = os.environ.get("SRD_ROWS", "default").split(",")
out_path = os.environ.get("SRD_OUT", "")
project = Project.objects.get(slug=os.environ.get("SRD_PROJECT", "srd"))
dataset_ids = sorted(accessible_dataset_ids(project))
queries = load_rules_queries(path)
qrels = {rq.id: {str(c): 1 for c in resolve_expected(rq, dataset_ids=dataset_ids)} for rq in queries}
report = {"queries": path, "rows": {}}
with search_store(dataset_ids=dataset_ids, kinds=RULES_FILTER["kind"]) as (index, store):
    legs = make_rankers(project=project, dataset_ids=dataset_ids, extra_filter=RULES_FILTER, index=index)
    for row in rows:
        overrides = {} if row in ("default", *legs) else ABLATIONS[row]
        run, ranks, t0 = {}, {}, time.perf_counter()
        for rq in queries:
            if row in legs and row != "default":  # a harness leg (dense, sparse, fused, weighted): no rules stage
                docs = [(str(cid), s) for cid, s in legs[row](rq.query, {})]
            else:
                found = rules_search(user=None, project=project, index=index,
                                     spec=RulesSpec(q=rq.query, log=False, top_k=50, **overrides))
                scores = {r["chunk_id"]: r["score"] for r in found["results"]}
                docs = [(str(cid), scores.get(cid, 0.0)) for cid in found["candidate_ids"]]
            run[rq.id] = ranked_to_run(docs)
            ids = [d for d, _ in docs]
            ranks[rq.id] = next((i + 1 for i, d in enumerate(ids) if d in qrels[rq.id]), None)
        ms = round(1000 * (time.perf_counter() - t0) / len(queries), 1)
        overall = compute_metrics(qrels=qrels, run=run)
        cats = metrics_by_category(queries=queries, qrels=qrels, run=run)
        report["rows"][row] = {"overall": overall, "by_category": cats, "first_gold_rank": ranks, "ms_per_query": ms}
        print(f"{row:>24} ndcg@10 {overall['ndcg@10']:.4f} mrr@10 {overall['mrr@10']:.4f} "
              f"hit@1 {overall['hit@1']:.4f} hit@10 {overall['hit@10']:.4f}  {ms} ms/q  "
              + " ".join(f"{c[:5]} {m['ndcg@10']:.3f}" for c, m in cats.items()), flush=True)
if out_path:
    with open(out_path, "w") as fh:
        json.dump(report, fh, indent=1)
