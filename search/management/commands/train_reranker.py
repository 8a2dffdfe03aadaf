"""`manage.py train_reranker`: fine-tune a cross-encoder from the bundled MiniLM weights (search/quality/reranker_training.py).

    manage.py train_reranker --beir ../shared/data/scifact --name scifact-ce          # the train split's judgements
    manage.py train_reranker --beir ../shared/data/scifact --pseudo --name scifact-pq # pseudo-queries alone
    manage.py train_reranker --project acme --name acme-ce                           # ▲ feedback, else pseudo

A project's model becomes its default reranker only when it beats the project's fused ranking on the held-out
slice (`--no-activate` never sets it). Evaluate any of them with `manage.py evaluate --beir ... --reranker NAME`.
"""
from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import BadInput
from projects.models import Project
from search.models import Chunk
from search.quality import reranker_training as rt
from search.quality.runs import ingest_beir, search_store, throwaway_index


class Command(BaseCommand):
    help = "Train a cross-encoder reranker on judged queries, ▲ feedback or pseudo-queries, with hard negatives."

    def add_arguments(self, parser: CommandParser) -> None:
        src = parser.add_mutually_exclusive_group(required=True)
        src.add_argument("--beir", help="BEIR folder: trains on its --split judgements (default train)")
        src.add_argument("--project", help="project slug: trains on its ▲ feedback over its own datasets")
        parser.add_argument("--split", default="train", help="BEIR split whose judgements are the positives")
        parser.add_argument("--pseudo", action="store_true",
                            help="pseudo-queries from the corpus (titles, headings, docstrings) instead of judgements "
                                 "or feedback")
        parser.add_argument("--min-feedback", type=int, default=50,
                            help="project: fewer ▲-judged queries than this adds pseudo-queries")
        parser.add_argument("--name", required=True, help="model name (folder under var/models/rerankers/)")
        parser.add_argument("--max-pairs", type=int, default=10_000, help="query-document pairs to train on")
        parser.add_argument("--negatives", type=int, default=7, help="hard negatives per positive")
        parser.add_argument("--epochs", type=int, default=2, help="passes over the mined groups (within max-pairs)")
        parser.add_argument("--batch", type=int, default=4, help="queries per step (each with 1 + negatives docs)")
        parser.add_argument("--lr", type=float, default=7e-5)
        parser.add_argument("--max-length", type=int, default=256, help="tokens per query-document pair")
        parser.add_argument("--time-budget", type=float, default=1200.0, help="seconds of training at most")
        parser.add_argument("--seed", type=int, default=13)
        parser.add_argument("--pseudo-limit", type=int, default=2000, help="pseudo-queries to make at most")
        parser.add_argument("--no-activate", action="store_true",
                            help="project: never make the model the project's reranker")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **opts: Any) -> None:
        cfg = rt.TrainConfig(max_pairs=opts["max_pairs"], negatives=opts["negatives"], epochs=opts["epochs"],
                             batch_queries=opts["batch"], learning_rate=opts["lr"], max_length=opts["max_length"],
                             time_budget_s=opts["time_budget"], seed=opts["seed"])
        progress = not opts["no_progress"]
        project = None
        extra_filter = None
        try:
            with ExitStack() as stack:
                index = None
                if opts["beir"]:

                    examples, dataset_ids, data, extra_filter = self._beir_examples(opts, progress=progress)
                    # the collection is an evaluation dataset: its chunks are searched in a store of their own
                    index, _ = stack.enter_context(throwaway_index(dataset_ids=dataset_ids,
                                                                   kinds=extra_filter["kind"]))
                else:
                    project = Project.objects.filter(slug=opts["project"]).first()
                    if project is None:
                        raise CommandError(f"no project {opts['project']!r}")
                    examples, dataset_ids, data = rt.project_examples(
                        project=project, pseudo=opts["pseudo"], min_feedback=opts["min_feedback"],
                        pseudo_limit=opts["pseudo_limit"], seed=opts["seed"])
                    # beside the running server: a snapshot of the project's datasets (search_store says why)
                    index, _ = stack.enter_context(search_store(dataset_ids=dataset_ids, progress=progress))
                self.stderr.write(f"{len(examples)} training queries ({data})")
                result = rt.train_reranker(name=opts["name"], examples=examples, cfg=cfg, data=data,
                                           corpus=rt.Corpus(dataset_ids, extra_filter=extra_filter, index=index),
                                           progress=progress, log=lambda m: self.stderr.write(m))
        except (FileNotFoundError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        except BadInput as exc:
            raise CommandError(exc.detail) from exc
        m = result.manifest
        h = m["heldout"]
        self.stdout.write(f"trained {m['name']} in {m['train_seconds']} s ({m['steps_run']}/{m['steps_planned']} "
                          f"steps, {m['pairs_seen']} pairs, stopped: {m['stopped']}); held-out {h['queries']} "
                          f"queries: reranked nDCG@10 {h['reranked_ndcg@10']} vs fused {h['fused_ndcg@10']}")
        self.stdout.write(f"model: {result.path}")
        if project is not None:
            _, verdict = rt.adopt_if_better(project=project, result=result, activate=not opts["no_activate"])
            self.stdout.write(verdict)
        if opts["verbosity"] > 1:
            self.stdout.write(json.dumps(m, indent=2))

    def _beir_examples(self, opts: dict[str, Any], *, progress: bool) -> tuple[list, list[int], dict, dict]:
        coll, dataset, _ = ingest_beir(path=opts["beir"], progress=progress, split=opts["split"])
        extra_filter = {"kind": [coll.kind]}
        data = {"beir": coll.name, "split": opts["split"], "dataset_id": dataset.pk}
        if opts["pseudo"]:
            return (rt.pseudo_examples(dataset_ids=[dataset.pk], limit=opts["pseudo_limit"], seed=opts["seed"]),
                    [dataset.pk], {**data, "positives": "pseudo-queries"}, extra_filter)
        doc_to_chunks: dict[str, list[int]] = {}
        for cid, doc in Chunk.objects.filter(dataset=dataset).values_list("id", "path"):
            doc_to_chunks.setdefault(doc, []).append(cid)
        examples = rt.labelled_examples(qrels=coll.qrels, queries=coll.queries, doc_to_chunks=doc_to_chunks)
        return examples, [dataset.pk], {**data, "positives": f"qrels_{opts['split']}"}, extra_filter
