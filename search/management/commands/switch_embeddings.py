"""`manage.py switch_embeddings`: search a project's datasets with another embedding model, or back with the
configured one, by hand (the adoption rule does it after `adapt_embeddings`; search/quality/adoption.py).

    manage.py switch_embeddings --project acme --model acme-adapted            # every dataset of the project
    manage.py switch_embeddings --project acme --dataset docs --model ""       # one dataset, the configured model

The datasets are re-embedded (cached vectors are reused) and switch once the new vectors are in the index; until
then queries keep the old ones. It runs beside the server: the web process's applier carries the vectors in.
"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import BadInput, DependencyDown
from projects.models import Project
from search.models import Dataset
from search.quality.adoption import switch_model
from search.quality.runs import NotReady, check_ready


class Command(BaseCommand):
    help = "Switch datasets to an adapted embedding model (or back to the configured one with --model '')."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--dataset", action="append", default=[], help="dataset name (repeatable; default all)")
        parser.add_argument("--model", required=True,
                            help="an adapted model's name (var/models/embeddings/<name>), or '' for the configured one")
        parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the index")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **opts: Any) -> None:
        try:
            check_ready()
        except NotReady as exc:
            raise CommandError(str(exc)) from exc
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"no project {opts['project']!r}")
        datasets = Dataset.objects.filter(project=project)
        if opts["dataset"]:
            missing = sorted(set(opts["dataset"]) - set(datasets.values_list("name", flat=True)))
            if missing:
                raise CommandError(f"project {project.slug!r} has no dataset {missing[0]!r}")
            datasets = datasets.filter(name__in=opts["dataset"])
        ids = list(datasets.values_list("id", flat=True))
        try:
            out = switch_model(dataset_ids=ids, name=opts["model"], timeout_s=opts["timeout"],
                               evidence={"reason": "switched by hand (manage.py switch_embeddings)"},
                               progress=not opts["no_progress"], log=lambda m: self.stderr.write(m))
        except (BadInput, DependencyDown) as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"{out['datasets']} dataset(s) now search with {out['model']}: {out['chunks']} chunks "
                          f"re-embedded ({out['embedded']} computed) in {out['seconds']} s")
