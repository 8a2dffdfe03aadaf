"""`manage.py adapt_embeddings`: fine-tune a copy of the embedding model on pairs mined from a corpus, no labels
(search/quality/adaptation.py says which pairs and why).

    manage.py adapt_embeddings --beir var/data/stdlib-code --name stdlib-adapted   # a BEIR folder's corpus
    manage.py adapt_embeddings --project acme --name acme-adapted                  # a project's own datasets

The model and its manifest (pairs, cost, the held-out evidence) go to var/models/embeddings/<name>/; compare it
with `manage.py evaluate --beir DIR --model-id var/models/embeddings/<name>` (its dense/fused/weighted rows).

Judged queries (a project's feedback; a BEIR folder's train split, never its test split) beyond the
`--judged-max` that the adoption check reads join the training pairs as positives (search/quality/judged.py), each
against a hard negative the served retriever ranks high (search/quality/hard_negatives.py; `--no-hard-negatives`
trains them in-batch only), for at most `--judged-epochs` passes. `--label-free` leaves the judged queries out of
both the training and the decision: the corpus alone.
A dataset that follows a git source also trains on its history (commit message -> the functions it changed, up
to the synced commit) and its newest commits, never trained on, decide (a time split; `--no-history` leaves
history out; search/quality/history_training.py).
Then the adoption rule (search/quality/adoption.py) decides: the history's newest commits and those judged queries
where there are some, else the held-out code pairs for code, else no.
Adopted, the datasets are re-embedded with the model and switch to it once its vectors are in the index;
`--no-adopt` only trains. `manage.py switch_embeddings` switches (or reverts) by hand.
"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import BadInput, DependencyDown
from projects.models import Project
from search.models import Dataset
from search.quality.adaptation import AdaptConfig, adapt, existing_model, heldout_confirms
from search.quality.adoption import adopt_if_confirmed
from search.quality.judged import CHECK_MAX, JudgedSplit, judged_split
from search.quality.runs import NotReady, check_ready, ingest_beir


class Command(BaseCommand):
    help = "Adapt the embedding model to a corpus: pairs mined from its chunks, no labels; writes model + evidence."

    def add_arguments(self, parser: CommandParser) -> None:
        src = parser.add_mutually_exclusive_group(required=True)
        src.add_argument("--beir", help="BEIR folder: its corpus (ingested as an evaluation dataset) is mined")
        src.add_argument("--project", help="project slug: its own datasets are mined")
        parser.add_argument("--name", required=True, help="model name (folder under var/models/embeddings/)")
        defaults = AdaptConfig()
        parser.add_argument("--steps", type=int, default=defaults.steps, help="training steps (batches)")
        parser.add_argument("--batch", type=int, default=defaults.batch, help="pairs per step (in-batch negatives)")
        parser.add_argument("--lr", type=float, default=defaults.learning_rate)
        parser.add_argument("--doc-tokens", type=int, default=defaults.doc_tokens,
                            help="tokens of a positive in training")
        parser.add_argument("--time-budget", type=float, default=defaults.time_budget_s,
                            help="seconds of training at most")
        parser.add_argument("--seed", type=int, default=defaults.seed)
        parser.add_argument("--judged-epochs", type=int, default=defaults.judged_epochs,
                            help="passes over the judged training pairs at most")
        parser.add_argument("--no-hard-negatives", action="store_true",
                            help="judged pairs train with in-batch negatives only (no retrieval beforehand)")
        parser.add_argument("--no-history", action="store_true",
                            help="datasets that follow a git source neither train on their commit history nor are "
                                 "decided by its newest commits (search/quality/history_training.py)")
        parser.add_argument("--no-adopt", action="store_true", help="train and report; never switch the datasets")
        parser.add_argument("--existing", action="store_true",
                            help="do not train: decide on the model already adapted under this name (its manifest)")
        parser.add_argument("--judged-max", type=int, default=CHECK_MAX,
                            help="judged queries (train split / feedback) at most for the adoption check (up to "
                                 "30 judged, all check; beyond, half, at least 30); those beyond it train, as "
                                 "positives")
        parser.add_argument("--label-free", action="store_true",
                            help="judged queries neither train nor decide: the mined pairs alone, and the held-out "
                                 "pairs' rule (code adopts on them; prose is not adopted)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **opts: Any) -> None:
        if opts["steps"] < 1 or opts["batch"] < 2:
            raise CommandError("--steps must be at least 1 and --batch at least 2 (in-batch negatives)")
        if opts["judged_epochs"] < 1:
            raise CommandError("--judged-epochs must be at least 1")
        if opts["judged_max"] < 0:
            raise CommandError("--judged-max must be 0 or more (0: every judged query trains, none checks)")
        cfg = AdaptConfig(steps=opts["steps"], batch=opts["batch"], learning_rate=opts["lr"],
                          doc_tokens=opts["doc_tokens"], time_budget_s=opts["time_budget"], seed=opts["seed"],
                          judged_epochs=opts["judged_epochs"], hard_negatives=not opts["no_hard_negatives"],
                          history=not opts["no_history"])
        progress = not opts["no_progress"]
        try:
            check_ready()
            if opts["beir"]:
                coll, dataset, _ = ingest_beir(path=opts["beir"], progress=progress)
                dataset_ids, data = [dataset.pk], {"beir": coll.name, "kind": coll.kind}
            else:
                project = Project.objects.filter(slug=opts["project"]).first()
                if project is None:
                    raise CommandError(f"no project {opts['project']!r}")
                dataset_ids = list(Dataset.objects.filter(project=project).values_list("id", flat=True))
                data = {"project": project.slug}
            split: JudgedSplit | None = None  # the split the model trained with: the check reads the same one
            if opts["existing"]:
                result = existing_model(name=opts["name"])
            else:
                split = JudgedSplit() if opts["label_free"] else judged_split(
                    dataset_ids=dataset_ids, beir=opts["beir"], project=None if opts["beir"] else project,
                    check_max=opts["judged_max"])
                if split.train:
                    data["judged"] = {"source": split.source, "check_queries": len(split.check),
                                      "train_queries": split.train_queries}
                result = adapt(name=opts["name"], dataset_ids=dataset_ids, cfg=cfg, data=data, progress=progress,
                               judged=split.train, log=lambda m: self.stderr.write(m))
            m = result.manifest
            h = m["heldout"]
            confirmed, why = heldout_confirms(h)  # the rule as it is now, also for a model adapted under an older one
            verdict = f"{'confirmed' if confirmed else 'not confirmed'} ({why})"
            self.stdout.write(f"adapted {m['name']} in {m['cost']['total_seconds']} s "
                              f"({m['training']['steps_run']} steps); held-out pairs MRR@10 {h['base_mrr@10']} -> "
                              f"{h['adapted_mrr@10']}: {verdict}")
            self.stdout.write(f"model: {result.path}")
            if not opts["no_adopt"]:
                if split is None:  # an existing model: its check reads the judged queries as they are now
                    split = JudgedSplit() if opts["label_free"] else judged_split(
                        dataset_ids=dataset_ids, beir=opts["beir"], project=None if opts["beir"] else project,
                        check_max=opts["judged_max"])
                outcome = adopt_if_confirmed(name=result.name, dataset_ids=dataset_ids, manifest=m, split=split,
                                             progress=progress, log=lambda msg: self.stderr.write(msg),
                                             history=result.history)
                self.stdout.write(("adopted: " if outcome["adopted"] else "not adopted: ") + outcome["reason"])
                if outcome["adopted"]:
                    sw = outcome["switch"]
                    self.stdout.write(f"re-embedded {sw['chunks']} chunks ({sw['embedded']} computed) in "
                                      f"{sw['seconds']} s; the datasets now search with {sw['model']}")
        except (FileNotFoundError, ValueError, NotReady) as exc:
            raise CommandError(str(exc)) from exc
        except BadInput as exc:
            raise CommandError(exc.detail) from exc
        except DependencyDown as exc:
            raise CommandError(exc.detail) from exc
