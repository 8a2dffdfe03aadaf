"""`manage.py evaluate [--beir DIR | --rules QUERIES.json [--expand-gold] [--chapter-routing-report]]
[--model-id PATH] [--json] [--report-dir DIR]`: the ablation table.

BEIR: the corpus is ingested (incrementally, embeddings from the shared cache) into the dataset
`beir:<name>` of the project `--project` (default `eval`), then every pipeline runs every test query.
Rulebook: queries name expected section paths or chunk ids; the project's rules datasets are searched.
`--model-id PATH` (a local sentence-transformers folder) adds the default-fusion, dense, fused, weighted,
fused+rerank and fused+graph rows (those selected; rulebooks: default too) for that model, suffixed
`@<folder name>`, over a throwaway index (the live one is never touched), vectors from the per-model cache.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import BadInput
from search.quality.evaluation import PIPELINES, markdown_table, save_run, write_report
from search.quality.runs import (
    ALL_RULES_PIPELINES,
    RULES_PIPELINES,
    EvalOptions,
    NotReady,
    evaluate_beir,
    evaluate_rules,
    resolve_other_model,
)


class Command(BaseCommand):
    help = "Evaluate the retrieval pipelines (all ablations in one run) on a BEIR collection or rulebook queries."

    def add_arguments(self, parser: CommandParser) -> None:
        src = parser.add_mutually_exclusive_group()
        src.add_argument("--beir", help="BEIR folder: corpus.jsonl, queries.jsonl, qrels_test.tsv or qrels/test.tsv")
        src.add_argument("--rules", help="rulebook queries JSON (default: the demo rulebook's queries)")
        parser.add_argument("--kind", choices=("beir", "code"), default=None,
                            help="BEIR content kind (default: the folder's collection.json, else beir)")
        parser.add_argument("--project", default="", help="project slug (default: eval for BEIR, demo for rules)")
        parser.add_argument("--pipelines", default="", help="comma-separated subset (default: every pipeline; "
                            f"BEIR: {', '.join(PIPELINES)}; rules also: {', '.join(RULES_PIPELINES)})")
        parser.add_argument("--max-queries", type=int, default=0)
        parser.add_argument("--expand-gold", action="store_true",
                            help="rules: also score against expanded gold (children and continuations of a gold "
                                 "section count as relevant): *_expanded columns")
        parser.add_argument("--chapter-routing-report", action="store_true",
                            help="rules: add routing-top1/top3 rows with evaluability and hit@1/MRR@10 over the "
                                 "queries whose gold stays inside the routed chapters")
        parser.add_argument("--model-id", default="", metavar="PATH",
                            help="another local sentence-transformers model folder: adds default-fusion, dense, fused, "
                                 "weighted, fused+rerank and fused+graph rows suffixed @<folder name> (those selected; "
                                 "rules: default too) beside the configured EMBEDDING_MODEL's (a throwaway index; "
                                 "vectors cached per model, so a second run embeds nothing)")
        parser.add_argument("--reranker", default="", metavar="NAME|PATH",
                            help="BEIR: a reranker trained here (manage.py train_reranker) or a local CrossEncoder "
                                 "folder: adds the trained-rerank row (fused, top RERANK_DEPTH reordered by it)")
        parser.add_argument("--json", action="store_true", help="print the JSON report on stdout")
        parser.add_argument("--report-dir", default="var/reports", help="where the .md/.json/.png go")
        parser.add_argument("--no-save", action="store_true", help="do not store an EvaluationRun row")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **opts: Any) -> None:
        known = PIPELINES if opts["beir"] else ALL_RULES_PIPELINES
        pipelines = [p.strip() for p in (opts["pipelines"] or ",".join(known)).split(",") if p.strip()]
        bad = [p for p in pipelines if p not in known]
        if bad:
            raise CommandError(f"unknown pipeline(s) {bad}; choose from {', '.join(known)}")
        if opts["reranker"] and not opts["beir"]:
            raise CommandError("--reranker applies to --beir collections")
        if "trained-rerank" in pipelines and not opts["reranker"]:
            if opts["pipelines"]:
                raise CommandError("the trained-rerank pipeline needs --reranker NAME|PATH")
            pipelines.remove("trained-rerank")
        progress = not opts["no_progress"]
        t0 = time.perf_counter()
        model = opts["model_id"] or None
        try:
            if model:
                resolve_other_model(model)  # a hub name or a folder without a model fails before any work
            if opts["beir"]:
                options = EvalOptions(pipelines=pipelines, max_queries=opts["max_queries"] or None,
                                      progress=progress, model=model)
                report = evaluate_beir(path=opts["beir"], options=options, project_slug=opts["project"] or "eval",
                                       kind=opts["kind"], reranker=opts["reranker"] or None)
            else:
                default_q = Path(__file__).resolve().parents[2] / "rules" / "demo_rules" / "eval_queries.json"
                options = EvalOptions(pipelines=pipelines if opts["pipelines"] else None,
                                      max_queries=opts["max_queries"] or None, progress=progress, model=model)
                report = evaluate_rules(path=opts["rules"] or str(default_q), project_slug=opts["project"] or "demo",
                                        options=options, expand=opts["expand_gold"],
                                        chapter_routing_report=opts["chapter_routing_report"])
        except (FileNotFoundError, LookupError, ValueError, NotReady) as exc:
            raise CommandError(str(exc)) from exc
        except BadInput as exc:
            raise CommandError(exc.detail) from exc
        report.timings["wall_s"] = round(time.perf_counter() - t0, 2)
        files = write_report(report, report_dir=opts["report_dir"])
        if not opts["no_save"]:
            save_run(report, report_dir=opts["report_dir"])
        if opts["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:

            self.stdout.write(markdown_table(report))
        print(f"report: {files['markdown']}  chart: {files['png']}", file=sys.stderr)
