"""The label-free adoption rule as a classifier: does "the held-out code pairs confirm" pick the models that help?

Why: for a code dataset with no judged queries and no git history, search/quality/adoption.py adopts an adapted
model when the held-out mined pairs confirm it (search.quality.adaptation.heldout_confirms). That check was shown
to move with test queries on two collections only; a model can raise it and still lower the served ranking. This
script measures, per docstring -> function collection (bench/build_code_collection.py):
- the product's label-free adaptation (`manage.py adapt_embeddings --label-free --no-history --no-adopt`);
- the per-pair held-out reciprocal ranks, base and adapted, from the same mined pairs with the product's own
  functions (mine -> capped -> heldout_ranks), kept beside the run; the product's evidence and verdict as the rule
  is NOW (heldout_evidence, `decide`), so running the script again after a rule change re-reads every saved run
  without training or encoding; and each pair type's own 95 % lower bound;
- the TEST split, base vs adapted, paired per query: `default-fusion` (what the default ranks with that model;
  the API default has no per-model row for a BEIR folder) and `dense`;
- "wrong adoption": adopted while the test default-fusion fell.
Candidate stricter rules are scored on the same runs (no extra training), so each collection is one point per
seed whatever rule is read.

Usage (heavy: run under nice on a shared machine; one collection after another, each saved as it finishes):
  nice -n 19 .venv/bin/python bench/adoption_classifier.py --collection networkx=/tmp/adopt/networkx \\
      --collection sympy=/tmp/adopt/sympy --time-budget 300 --work /tmp/adopt/work
  .venv/bin/python bench/adoption_classifier.py --work /tmp/adopt/work --report-only   # table from saved runs
Re-read saved runs under the current rule: the same --collection arguments again (models and ranks are reused).
Build the collections first, e.g.
  .venv/bin/python bench/build_code_collection.py --out /tmp/adopt/sympy --root <site-packages>/sympy --max-docs 1200
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, table, write_result

# imports of the platform sit inside the functions: Django is set up (setup_django) before any of them runs
SEED = 13  # the adaptation's default seed (AdaptConfig.seed): its held-out split and bootstrap


def paired(deltas: list[float], *, seed: int) -> dict[str, Any]:
    from search.quality.metrics import lower_bound_95

    return {"n": len(deltas), "mean": round(statistics.fmean(deltas), 4) if deltas else None,
            "lower_95": round(lower_bound_95(deltas, seed=seed), 4) if len(deltas) >= 2 else None}


def heldout_ranks_saved(*, dataset_ids: list[int], model_path: str, seed: int,
                        saved: Path) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Per-pair held-out reciprocal ranks, base and adapted, on the pairs the adaptation checked (same seed, the
    product's own mine -> capped -> heldout_ranks). Kept in `saved`, so a changed rule re-reads them without
    encoding again."""
    if saved.exists():
        kept = json.loads(saved.read_text())
        return [tuple(x) for x in kept["base"]], [tuple(x) for x in kept["adapted"]]
    from sentence_transformers import SentenceTransformer

    from inference.encoders import resolve_model
    from search.quality.adaptation import heldout_ranks, mine

    check = mine(dataset_ids=dataset_ids, seed=seed, heldout=0.1).checked(None).capped(seed=seed)
    base = heldout_ranks(SentenceTransformer(resolve_model()[1], device="cpu"), check)
    adapted = heldout_ranks(SentenceTransformer(model_path, device="cpu"), check)
    saved.write_text(json.dumps({"base": base, "adapted": adapted}))
    return base, adapted


def heldout_by_type(base: list[tuple[str, float]], adapted: list[tuple[str, float]], *,
                    seed: int) -> dict[str, Any]:
    """Mean and 95 % lower bound of the per-pair gain by pair type, all pairs, and all but the name pairs."""
    out: dict[str, Any] = {}
    pairs = [(t, a - b) for (t, b), (_, a) in zip(base, adapted, strict=True)]
    for t in sorted({t for t, _ in pairs}):
        out[t] = paired([d for ty, d in pairs if ty == t], seed=seed)
    out["all"] = paired([d for _, d in pairs], seed=seed)
    out["_non_name"] = paired([d for ty, d in pairs if ty != "name"], seed=seed)
    out["_base_mrr"] = round(statistics.fmean(r for _, r in base), 4)
    out["_adapted_mrr"] = round(statistics.fmean(r for _, r in adapted), 4)
    return out


def test_split(*, beir: str, model_path: str, seed: int) -> dict[str, Any]:
    """Per-query nDCG@10 on the test split, base vs adapted, for default-fusion and dense (evaluate's own rankers)."""
    from search.models import Chunk
    from search.quality.evaluation import make_rankers
    from search.quality.metrics import ndcg
    from search.quality.runs import EvalOptions, EvalScope, ingest_beir, run_pipelines_with_model, throwaway_index

    coll, dataset, _ = ingest_beir(path=beir, progress=False)
    id_to_doc = dict(Chunk.objects.filter(dataset=dataset).values_list("id", "path"))
    scope = EvalScope(project=dataset.project, dataset_ids=[dataset.pk], extra_filter={"kind": [coll.kind]})
    options = EvalOptions(pipelines=["default-fusion", "dense"], progress=False, model=model_path)
    with throwaway_index(dataset_ids=scope.dataset_ids, kinds=[coll.kind]) as (index, _built):
        rankers = make_rankers(project=scope.project, dataset_ids=scope.dataset_ids, extra_filter=scope.extra_filter,
                               index=index)
        metrics, ranked, _, extra = run_pipelines_with_model(
            scope=scope, options=options, rankers=rankers, queries=coll.queries, qrels=coll.qrels,
            to_doc=lambda ids: {i: id_to_doc[i] for i in ids if i in id_to_doc})
    suffix = "@" + extra["other_model"]["model_id"]
    out: dict[str, Any] = {"queries": len(coll.qrels)}
    for leg in ("default-fusion", "dense"):
        per = {}
        for which, name in (("base", leg), ("adapted", leg + suffix)):
            per[which] = {q: ndcg([d for d, _ in ranked[name].get(q, [])], rels) for q, rels in coll.qrels.items()}
        qs = sorted(coll.qrels)
        out[leg] = {"base": round(statistics.fmean(per["base"][q] for q in qs), 4),
                    "adapted": round(statistics.fmean(per["adapted"][q] for q in qs), 4),
                    "delta": paired([per["adapted"][q] - per["base"][q] for q in qs], seed=seed),
                    "reported": {"base": metrics[leg]["ndcg@10"], "adapted": metrics[leg + suffix]["ndcg@10"]}}
    return out


def run_one(*, label: str, beir: str, time_budget: float, seed: int, work: Path) -> dict[str, Any]:
    """Adapt (unless its model is there), then read the product's rule as it is now on the held-out ranks, and the
    test split (kept from an earlier run of the same model: it does not depend on the rule)."""
    from django.core.management import call_command

    from inference.encoders import adapted_models_dir
    from search.models import Dataset
    from search.quality.adaptation import heldout_evidence
    from search.quality.adoption import decide
    from search.quality.runs import beir_dataset_name, load_beir

    name = f"{label}-s{seed}"
    t0 = time.perf_counter()
    path = adapted_models_dir() / name
    if not (path / "manifest.json").exists():  # a run cut short after training resumes from its model
        call_command("adapt_embeddings", beir=beir, name=name, label_free=True, no_history=True, no_adopt=True,
                     time_budget=time_budget, seed=seed, no_progress=True)
    adapt_s = time.perf_counter() - t0
    manifest = json.loads((path / "manifest.json").read_text())
    dataset = Dataset.objects.get(project__slug="eval", name=beir_dataset_name(load_beir(beir)))
    t1 = time.perf_counter()
    base, adapted = heldout_ranks_saved(dataset_ids=[dataset.pk], model_path=str(path), seed=seed,
                                        saved=work / f"{name}.ranks")
    heldout = heldout_evidence(base, adapted, seed=seed)
    adopt, why = decide(kinds={"code"}, heldout=heldout, judged=None, history=None)
    t2 = time.perf_counter()
    earlier_path = work / f"{name}.json"
    earlier = json.loads(earlier_path.read_text()) if earlier_path.exists() else {}
    test = earlier.get("test") or test_split(beir=beir, model_path=str(path), seed=seed)
    seconds = {"adapt": earlier.get("seconds", {}).get("adapt", round(adapt_s)), "recheck": round(t2 - t1),
               "test": earlier.get("seconds", {}).get("test", round(time.perf_counter() - t2))}
    rec = {"collection": label, "seed": seed, "time_budget": time_budget, "model": str(path),
           "heldout": heldout, "training": manifest["training"], "train_pairs": manifest["data"]["train_pairs"],
           "steps_by_type": manifest["data"]["steps_by_type"], "adopt": adopt, "why": why,
           "by_type": heldout_by_type(base, adapted, seed=seed), "test": test, "seconds": seconds}
    earlier_path.write_text(json.dumps(rec, indent=2) + "\n")
    print(json.dumps({k: rec[k] for k in ("collection", "adopt", "why", "seconds")}), flush=True)
    return rec


def candidate_rules(rec: dict[str, Any]) -> dict[str, bool]:
    """The product's rule and stricter candidates, read on one run's held-out evidence."""
    bt = rec["by_type"]
    types = [t for t in bt if not t.startswith("_") and t != "all"]

    def low(t: str) -> float:
        v = bt.get(t, {}).get("lower_95")
        return v if v is not None else float("-inf")

    non_name = [t for t in types if t != "name"]
    return {"product now (code lb>0 and without names lb>0)": bool(rec["adopt"]),
            "earlier product (code lb>0)": (rec["heldout"].get("code_gain_lower_95") or 0) > 0,
            "every type lb>0": bool(types) and all(low(t) > 0 for t in types),
            "non-name types lb>0": bool(non_name) and all(low(t) > 0 for t in non_name),
            "code lb>0.05": (rec["heldout"].get("code_gain_lower_95") or 0) > 0.05}


def fmt(d: dict[str, Any] | None) -> str:
    if not d or d.get("mean") is None:
        return "-"
    return f"{d['mean']:+.3f} (lb {d['lower_95']:+.3f})"


def report(recs: list[dict[str, Any]]) -> str:
    types = sorted({t for r in recs for t in r["by_type"] if not t.startswith("_") and t != "all"})
    rows = []
    for r in recs:
        t = r["test"]
        wrong = r["adopt"] and t["default-fusion"]["delta"]["mean"] < 0
        rows.append([f"{r['collection']} (seed {r['seed']})",
                     f"{r['by_type']['_base_mrr']:.3f} -> {r['by_type']['_adapted_mrr']:.3f}",
                     fmt(r["by_type"]["all"]), *[fmt(r["by_type"].get(ty)) for ty in types],
                     fmt(r["by_type"].get("_non_name")),
                     "adopt" if r["adopt"] else "keep",
                     f"{t['default-fusion']['base']:.4f} -> {t['default-fusion']['adapted']:.4f} "
                     f"{fmt(t['default-fusion']['delta'])}",
                     f"{t['dense']['base']:.4f} -> {t['dense']['adapted']:.4f} {fmt(t['dense']['delta'])}",
                     "WRONG" if wrong else "no"])
    head = ["collection", "held-out MRR@10", "held-out gain (all)", *[f"gain: {ty}" for ty in types],
            "gain without the name pairs", "rule",
            "test default-fusion nDCG@10 (delta, lb)", "test dense nDCG@10 (delta, lb)", "wrong adoption"]
    rule_rows = []
    for r in recs:
        fell = r["test"]["default-fusion"]["delta"]["mean"] < 0
        rule_rows.append([f"{r['collection']} (seed {r['seed']})", "fell" if fell else "rose",
                          *["adopt" if v else "keep" for v in candidate_rules(r).values()]])
    rule_head = ["collection", "test default-fusion", *candidate_rules(recs[0]).keys()] if recs else []
    cost = [[f"{r['collection']} (seed {r['seed']})", r["training"]["steps_run"], r["training"]["steps_planned"],
             json.dumps(r["steps_by_type"]), r["seconds"]["adapt"], r["seconds"]["recheck"], r["seconds"]["test"]]
            for r in recs]
    lines = ["# The label-free adoption rule as a classifier", "",
             f"Script: `bench/adoption_classifier.py`. {len(recs)} adaptation run(s): each is ONE point for every rule "
             "below (candidate rules are read on the same run's held-out pairs, no extra training). Held-out gains: "
             "paired per-pair reciprocal-rank deltas (MRR@10) on the pairs the adaptation checked, mean and one-sided "
             "95 % bootstrap lower bound (search.quality.metrics.lower_bound_95). Test: the collection's test split, "
             "paired per-query nDCG@10 deltas; `default-fusion` is the default's fusion with that model (evaluate's "
             "`default-fusion@<model>` row; the API default has no per-model row for a BEIR folder).", "",
             table(head, rows), "", "## Candidate rules on the same runs", "", table(rule_head, rule_rows), "",
             "## Training actually run", "",
             table(["run", "steps run", "steps planned", "steps by pair type", "adapt s", "recheck s", "test s"],
                   cost), "", machine()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--collection", action="append", default=[], help="label=BEIR folder (repeatable)")
    ap.add_argument("--time-budget", type=float, default=300.0, help="adapt_embeddings --time-budget (seconds)")
    ap.add_argument("--seed", type=int, action="append", default=[], help="adaptation seed(s) (default 13)")
    ap.add_argument("--work", default="/tmp/adopt/work", help="keeps the services' data and each run's JSON")
    ap.add_argument("--report-only", action="store_true", help="write the table from the saved runs")
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        setup_django(var_dir=str(work / "var"))
        for seed in args.seed or [SEED]:
            for spec in args.collection:
                label, _, beir = spec.partition("=")
                run_one(label=label, beir=beir, time_budget=args.time_budget, seed=seed, work=work)
    recs = [json.loads(p.read_text()) for p in sorted(work.glob("*.json"))]
    if recs:
        write_result("adoption_classifier", report(recs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
