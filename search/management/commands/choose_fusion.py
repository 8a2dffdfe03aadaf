"""`manage.py choose_fusion --project SLUG [--self-judged [--adopt]] [--min-queries N] [--min-gain X] [--dry-run]`:
pick a project's fusion from its feedback (search.quality.fusion_choice) or, with --self-judged, from its own
docstrings and, where a dataset follows a git source, its commit messages (search.quality.self_judged: code, no
labels; every kind of query with enough queries must confirm), on evidence, and show the grid and the decision.

Why a self-judged choice is stored only with --adopt: docstring queries are one kind of query. On encode/httpx
the setting they chose (+0.016 on held-out docstrings) lost on the commit-message queries of
bench/bench_code_commits.py (file recall@10 0.917 -> 0.892), so it is evidence to read, not to apply unasked."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from projects.models import Project
from search.engine.access import accessible_dataset_ids
from search.quality.fusion_choice import MIN_GAIN, MIN_QUERIES, choose_for_project
from search.quality.runs import NotReady, check_ready, search_store
from search.quality.self_judged import MAX_COMMITS, MAX_PAIRS, choose_self_judged


class Command(BaseCommand):
    help = "Choose a project's fusion (RRF k, leg weights, weighted or DBSF) from its judged queries."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--min-queries", type=int, default=MIN_QUERIES,
                            help=f"judged queries needed before anything is chosen (default {MIN_QUERIES})")
        parser.add_argument("--min-gain", type=float, default=MIN_GAIN,
                            help=f"nDCG@10 gain needed on the held-out half (default {MIN_GAIN})")
        parser.add_argument("--dry-run", action="store_true", help="show the decision, store nothing")
        parser.add_argument("--self-judged", action="store_true",
                            help="code projects without feedback: judge on the project's own docstring -> function "
                                 "queries, searched over its functions without their docstrings")
        parser.add_argument("--adopt", action="store_true",
                            help="with --self-judged: store the choice (without it, a self-judged run stores nothing)")
        parser.add_argument("--max-pairs", type=int, default=MAX_PAIRS,
                            help=f"with --self-judged: at most this many docstring queries (default {MAX_PAIRS})")
        parser.add_argument("--max-commits", type=int, default=MAX_COMMITS,
                            help=f"with --self-judged: at most this many commit-message queries, the newest "
                                 f"qualifying commits of each git source's history (default {MAX_COMMITS})")

    def handle(self, *args: object, **opts: Any) -> None:
        if opts["min_queries"] < 2:
            raise CommandError("--min-queries must be at least 2 (one query per half)")
        try:
            check_ready()  # Postgres down or unmigrated: say what to run
        except NotReady as exc:
            raise CommandError(str(exc)) from exc
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"no project {opts['project']!r}")
        if opts["max_pairs"] < 2:
            raise CommandError("--max-pairs must be at least 2")
        if opts["self_judged"]:  # its own evaluation dataset, searched in a throwaway store: fine beside the server
            opts["dry_run"] = opts["dry_run"] or not opts["adopt"]
            result = choose_self_judged(project=project, min_queries=opts["min_queries"], min_gain=opts["min_gain"],
                                        max_pairs=opts["max_pairs"], max_commits=opts["max_commits"],
                                        save=not opts["dry_run"], progress=True)
            ev = result.evidence
            self.stdout.write(f"self-judged queries: {ev['pairs']} documented functions, {ev.get('history', 0)} "
                              f"commit messages ({len(ev.get('git_sources', []))} git sources)")
            for row in ev.get("git_sources", []):
                self.stdout.write(f"  dataset {row['dataset']}: " + (row["why"] if "why" in row else
                                  f"{row['commits']} commits from {row['commit'][:12]} (skipped {row['skipped']})"))
        else:
            # beside the running server this searches a snapshot of the project's datasets (search_store says why)
            with search_store(dataset_ids=sorted(accessible_dataset_ids(project, include_global=True))) as (index, _):
                result = choose_for_project(project=project, min_queries=opts["min_queries"],
                                            min_gain=opts["min_gain"], save=not opts["dry_run"], index=index)
        ev = result.evidence
        if "pick" in ev:
            kinds = ev["pick"].get("kinds") or []
            mean = f" (the mean of the {' and '.join(kinds)} queries' means)" if len(kinds) > 1 else ""
            self.stdout.write(f"pick half: {ev['pick']['queries']} queries, nDCG@10 per setting{mean}:")
            for label, value in sorted(ev["pick"]["grid"].items(), key=lambda kv: -kv[1]):
                self.stdout.write(f"  {value:.4f}  {label}")
            if "legs" in ev:
                self.stdout.write(f"single legs on all judged queries: dense {ev['legs']['dense']:.4f}, "
                                  f"sparse {ev['legs']['sparse']:.4f}")
        types = ev.get("types") or {}
        if len(types) > 1 or any(not t.get("used") for t in types.values()):  # self-judged: each kind of query
            for name, t in types.items():
                if not t.get("used"):
                    self.stdout.write(f"{name} queries: {t['queries']}, too few to take part")
                    continue
                line = (f"{name} queries: {t['queries']}, pick-half best {t.get('pick_best', '-')}; single legs "
                        f"dense {t['legs']['dense']:.4f}, sparse {t['legs']['sparse']:.4f}") if "legs" in t else \
                    f"{name} queries: {t['queries']}"
                self.stdout.write(line)
                if "confirm" in t:
                    c = t["confirm"]
                    self.stdout.write(f"  {name} confirm half: {c['queries']} queries, default {c['default']:.4f}, "
                                      f"best {c['best']:.4f}, gain {c['gain']:+.4f} (95 % lower bound "
                                      f"{c['gain_lower_95']:+.4f}): {'passes' if t.get('passes') else 'fails'}")
        elif "confirm" in ev:
            c = ev["confirm"]
            self.stdout.write(f"confirm half: {c['queries']} queries, default {c['default']:.4f}, best "
                              f"{c['best']:.4f}, gain {c['gain']:+.4f} (95 % lower bound {c['gain_lower_95']:+.4f})")
        verdict = f"adopted {result.setting.label}" if result.adopted else f"kept the default ({result.evidence.get('baseline', 'rrf k=60')})"
        stored = " (dry run: nothing stored)" if opts["dry_run"] else ""
        self.stdout.write(f"{project.slug}: {verdict}: {result.reason}{stored}")
