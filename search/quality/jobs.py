"""Quality jobs: evaluate, train a reranker, choose fusion or adapt the embedding model from the admin, while the
platform serves.

Why jobs in the web process: an operator evaluates and trains while `make run` serves, and with the embedded store
only the web process may search the live index (docs/architecture.md, Data ownership). So the admin queues a
QualityJob and a thread of this process runs it, one at a time (each is CPU-bound; two at once would only share
the cores and slow the queries the server answers). Its bars report to the row (search.quality.progress), which
the admin's change list shows and refreshes. Liveness is the job's advisory lock, as for ingest jobs
(search.ingest.recovery): a job marked running whose lock is free was interrupted with its process, and the next
process to start one marks it failed.

Each kind checks its options when the job is submitted (BadInput naming the field), so a job that exists can run.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from config.errors import BadInput
from projects.models import Project
from search.engine.access import accessible_dataset_ids
from search.engine.reranker_store import NAME_RE
from search.ingest.locks import hold_job_lock
from search.models import Dataset, QualityJob
from search.quality import reranker_training as rt
from search.quality.adaptation import AdaptConfig, adapt
from search.quality.adoption import adopt_if_confirmed
from search.quality.evaluation import PIPELINES, save_run, write_report
from search.quality.fusion_choice import choose_for_project
from search.quality.judged import CHECK_MAX, judged_split
from search.quality.progress import reporting_to
from search.quality.runs import EvalOptions, evaluate_beir, evaluate_rules, search_store
from search.quality.schedule import SCHEDULE, memory_mark

if TYPE_CHECKING:
    from accounts.models import User

log = logging.getLogger(__name__)

DEMO_RULES_QUERIES = Path(__file__).resolve().parents[1] / "rules" / "demo_rules" / "eval_queries.json"
_RUN_LOCK = threading.Lock()  # one quality job at a time in this process
_STARTED = timezone.now()  # pending jobs older than this process were queued by one that stopped


# ------------------------------------------------------------------------------------------------ what may run
def data_dir() -> Path:
    """Where the admin looks for evaluation data: BEIR folders (with corpus.jsonl) and `rules/*.json` files.

    Why a fixed folder and not a path typed in a form: a job reads files on the server, and a staff member picks
    from what an operator put there rather than naming any path the process can read."""
    return Path(settings.EVALUATION_DATA_DIR)


def beir_collections() -> list[str]:
    """The BEIR collections under the data folder, by folder name."""
    root = data_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "corpus.jsonl").is_file())


def rules_query_files() -> list[str]:
    """Rules question files: the demo rulebook's (`demo`) and `rules/<name>.json` under the data folder."""
    root = data_dir() / "rules"
    found = sorted(p.stem for p in root.glob("*.json")) if root.is_dir() else []
    return ["demo", *(n for n in found if n != "demo")]


def _rules_path(name: str) -> Path:
    return DEMO_RULES_QUERIES if name == "demo" else data_dir() / "rules" / f"{name}.json"


def _project(slug: Any) -> Project:
    project = Project.objects.filter(slug=slug).first() if isinstance(slug, str) else None
    if project is None:
        raise BadInput("No such project.", field="project")
    return project


def _pipelines(value: Any, *, known: tuple[str, ...]) -> list[str]:
    names = value or []
    if not isinstance(names, list) or any(n not in known for n in names):
        raise BadInput(f"Pipelines must be a list drawn from: {', '.join(known)}.", field="pipelines")
    return names


def check_options(*, kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options a job of `kind` runs with, checked and normalised; BadInput names the bad field."""
    if kind == QualityJob.Kind.EVALUATE_BEIR:
        if options.get("collection") not in beir_collections():
            raise BadInput(f"Choose a BEIR collection under {data_dir()}: {', '.join(beir_collections()) or 'none'}.",
                           field="collection")
        return {"collection": options["collection"],
                "pipelines": _pipelines(options.get("pipelines"), known=tuple(p for p in PIPELINES
                                                                             if p != "trained-rerank")),
                "max_queries": _count(options.get("max_queries"), field="max_queries")}
    if kind == QualityJob.Kind.EVALUATE_RULES:
        if options.get("queries", "demo") not in rules_query_files():
            raise BadInput(f"Choose a rules question file: {', '.join(rules_query_files())}.", field="queries")
        return {"queries": options.get("queries", "demo"), "project": _project(options.get("project")).slug,
                "max_queries": _count(options.get("max_queries"), field="max_queries")}
    if kind == QualityJob.Kind.TRAIN_RERANKER:
        name = options.get("name")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise BadInput("Name the model: letters, digits, '.', '_' or '-' (at most 64).", field="name")
        return {"project": _project(options.get("project")).slug, "name": name,
                "pseudo": bool(options.get("pseudo", False)), "activate": bool(options.get("activate", True)),
                "time_budget_s": float(_count(options.get("time_budget_s"), field="time_budget_s") or 1200)}
    if kind == QualityJob.Kind.CHOOSE_FUSION:
        return {"project": _project(options.get("project")).slug}
    if kind == QualityJob.Kind.ADAPT_EMBEDDINGS:
        name = options.get("name")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise BadInput("Name the model: letters, digits, '.', '_' or '-' (at most 64).", field="name")
        steps = _count(options.get("steps"), field="steps") or AdaptConfig().steps
        # judged_max: at most this many judged queries check the model (0: none, all train); unset, the default
        # split (search.quality.judged.check_size), as `adapt_embeddings --judged-max`
        judged_max = CHECK_MAX if options.get("judged_max") in (None, "") else _count(options["judged_max"],
                                                                                      field="judged_max")
        out = {"project": _project(options.get("project")).slug, "name": name, "steps": steps,
               "activate": bool(options.get("activate", True)), "judged_max": judged_max}
        return out | ({"trigger": SCHEDULE} if options.get("trigger") == SCHEDULE else {})
    raise BadInput(f"Unknown job kind; choose from {', '.join(QualityJob.Kind.values)}.", field="kind")


def _count(value: Any, *, field: str) -> int:
    if value in (None, ""):
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput("Must be a whole number, 0 or more.", field=field)
    return value


# ------------------------------------------------------------------------------------------------ the kinds
def _evaluate_beir(job: QualityJob) -> dict[str, Any]:
    o = job.options
    report = evaluate_beir(path=data_dir() / o["collection"], options=EvalOptions(
        pipelines=o["pipelines"] or None, max_queries=o["max_queries"] or None, progress=False))
    return _kept(job, report)


def _evaluate_rules(job: QualityJob) -> dict[str, Any]:
    o = job.options
    report = evaluate_rules(path=_rules_path(o["queries"]), project_slug=o["project"],
                            options=EvalOptions(max_queries=o["max_queries"] or None, progress=False))
    return _kept(job, report)


def _kept(job: QualityJob, report: Any) -> dict[str, Any]:
    """Write the report and its chart, store the EvaluationRun and link it to the job."""
    report_dir = str(Path(settings.VAR_DIR) / "reports")
    files = write_report(report, report_dir=report_dir)
    job.evaluation = save_run(report, report_dir=report_dir)
    job.save(update_fields=["evaluation"])
    best = max(report.pipelines.items(), key=lambda kv: kv[1].get("ndcg@10") or 0.0)
    return {"collection": report.collection, "queries": report.queries, "chart": Path(files["png"]).name,
            "default_ndcg@10": report.pipelines.get("default", {}).get("ndcg@10"),
            "best": {"pipeline": best[0], "ndcg@10": best[1].get("ndcg@10")}}


def _train_reranker(job: QualityJob) -> dict[str, Any]:
    o = job.options
    project = _project(o["project"])
    examples, dataset_ids, data = rt.project_examples(project=project, pseudo=o["pseudo"])
    cfg = dataclasses.replace(rt.TrainConfig(), time_budget_s=o["time_budget_s"])
    with search_store(dataset_ids=dataset_ids) as (index, store):
        result = rt.train_reranker(name=o["name"], examples=examples, corpus=rt.Corpus(dataset_ids, index=index),
                                   cfg=cfg, data=data, progress=False, log=log.info)
    adopted, verdict = rt.adopt_if_better(project=project, result=result, activate=o["activate"])
    return {"model": result.name, "heldout": result.manifest["heldout"], "adopted": adopted, "verdict": verdict,
            "store": store}


def _choose_fusion(job: QualityJob) -> dict[str, Any]:
    project = _project(job.options["project"])
    with search_store(dataset_ids=sorted(accessible_dataset_ids(project, include_global=True))) as (index, store):
        result = choose_for_project(project=project, index=index)
    return {"adopted": result.adopted, "setting": result.setting.label, "reason": result.reason, "store": store}


def _adapt_embeddings(job: QualityJob) -> dict[str, Any]:
    """Adapt, then (with `activate`) let the adoption rule decide and switch the project's datasets if it holds."""
    project = _project(job.options["project"])
    mark = memory_mark(project=project)  # the commits remembered so far: a scheduled re-run counts from here
    dataset_ids = list(Dataset.objects.filter(project=project).values_list("id", flat=True))
    split = judged_split(dataset_ids=dataset_ids, project=project,  # the check's queries never train
                         check_max=job.options.get("judged_max", CHECK_MAX))
    result = adapt(name=job.options["name"], dataset_ids=dataset_ids, data={"project": project.slug}, progress=False,
                   judged=split.train, log=log.info, cfg=AdaptConfig(steps=job.options["steps"]))
    h = result.manifest["heldout"]
    out = {"model": result.name, "heldout": {k: h[k] for k in ("base_mrr@10", "adapted_mrr@10", "confirmed")},
           "cost_s": result.manifest["cost"]["total_seconds"],
           "judged": {"check": len(split.check), "train": split.train_queries},
           "history": {k: v for k, v in result.manifest["data"]["history"].items() if k in (
               "used", "why", "commits", "train_commits", "check_commits", "train_functions")},
           "verdict": ("confirmed on the held-out code pairs" if h["confirmed"] else "not confirmed") + "; compare "
                      f"with evaluate --model-id {result.path}",
           "memory_mark": mark, "trigger": job.options.get("trigger", "operator")}
    if job.options.get("activate", True):
        outcome = adopt_if_confirmed(name=result.name, dataset_ids=dataset_ids, manifest=result.manifest,
                                     split=split, log=log.info, history=result.history)
        out["adopted"] = outcome["adopted"]
        out["verdict"] = ("adopted: " if outcome["adopted"] else "not adopted: ") + outcome["reason"]
    return out


RUNNERS: dict[str, Callable[[QualityJob], dict[str, Any]]] = {
    QualityJob.Kind.EVALUATE_BEIR: _evaluate_beir,
    QualityJob.Kind.EVALUATE_RULES: _evaluate_rules,
    QualityJob.Kind.TRAIN_RERANKER: _train_reranker,
    QualityJob.Kind.CHOOSE_FUSION: _choose_fusion,
    QualityJob.Kind.ADAPT_EMBEDDINGS: _adapt_embeddings,
}


# ------------------------------------------------------------------------------------------------ running
def submit(*, kind: str, options: dict[str, Any], user: User | None = None, background: bool = True) -> QualityJob:
    """Check the options, store the job and start it in a thread of this process (`background=False`: run it
    here, now; the tests and a command use that). BadInput, with nothing stored, when an option is bad."""
    clean = check_options(kind=kind, options=options)
    fail_interrupted()
    job = QualityJob.objects.create(kind=kind, options=clean, created_by=user)
    if background:
        threading.Thread(target=_run_in_thread, args=(job.pk,), name=f"quality-{kind}", daemon=True).start()
    else:
        run(job_id=job.pk)
        job.refresh_from_db()
    return job


def _run_in_thread(job_id: Any) -> None:
    try:
        run(job_id=job_id)
    finally:
        close_old_connections()


def run(*, job_id: Any) -> None:
    """Run a pending job to done or failed, holding its advisory lock; one job at a time in this process."""
    with _RUN_LOCK, hold_job_lock(job_id) as got:
        if not got:
            return  # another runner has it
        job = QualityJob.objects.filter(pk=job_id, status=QualityJob.Status.PENDING).first()
        if job is None:
            return
        job.status, job.started_at = QualityJob.Status.RUNNING, timezone.now()
        job.save(update_fields=["status", "started_at"])
        try:
            with reporting_to(str(job.pk)):
                result = RUNNERS[job.kind](job)
        except BadInput as exc:
            _finish(job, status=QualityJob.Status.FAILED, error=f"{exc.field}: {exc.detail}")
        except Exception as exc:  # a failed job says why on its row instead of dying silently
            log.exception("quality job %s failed", job.pk)
            _finish(job, status=QualityJob.Status.FAILED,
                    error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
        else:
            _finish(job, status=QualityJob.Status.DONE, result=result)


def _finish(job: QualityJob, *, status: str, result: dict[str, Any] | None = None, error: str = "") -> None:
    QualityJob.objects.filter(pk=job.pk).update(status=status, result=result or {}, error=error[:5000],
                                                finished_at=timezone.now(), updated_at=timezone.now())


def fail_interrupted() -> list[str]:
    """Mark failed every job whose process stopped: running with its lock free, or pending since before this
    process started (a pending job of this process is queued behind the running one). A job the schedule queued
    belongs to no process: it waits for a web process's poller, whenever that starts. A job is re-run by
    submitting it again, not resumed: its work is one computation."""
    failed = []
    stale = (QualityJob.objects.filter(status=QualityJob.Status.RUNNING)
             | QualityJob.objects.filter(status=QualityJob.Status.PENDING, created_at__lt=_STARTED)
             .exclude(options__contains={"trigger": SCHEDULE}))  # a key lookup is NULL without the key
    for job in stale:
        with hold_job_lock(job.pk) as got:
            if got and QualityJob.objects.filter(pk=job.pk, status=job.status).update(
                    status=QualityJob.Status.FAILED, finished_at=timezone.now(),
                    error="interrupted: the process running it stopped; submit it again"):
                failed.append(str(job.pk))
    return failed


# ------------------------------------------------------------------------------------------------ the schedule
def run_scheduled() -> list[str]:
    """Run the jobs the schedule queued (search.quality.schedule), oldest first, one at a time behind any job
    this process runs; -> the ids it found."""
    ids = [str(pk) for pk in QualityJob.objects.filter(status=QualityJob.Status.PENDING,
                                                       options__contains={"trigger": SCHEDULE})
           .order_by("created_at").values_list("pk", flat=True)]
    for job_id in ids:
        run(job_id=job_id)
    return ids


class QualityPoller:
    """A daemon thread of the web process that runs what the schedule queued every `poll_s` seconds."""

    def __init__(self, *, poll_s: float) -> None:
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="quality-poller", daemon=True)

    def start(self) -> QualityPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                run_scheduled()
            except Exception:  # a broken pass (the database restarting) is logged; the next one tries again
                log.exception("quality poller pass failed")
            finally:
                close_old_connections()


_poller: QualityPoller | None = None
_poller_lock = threading.Lock()


def start_quality_poller(*, poll_s: float | None = None) -> QualityPoller | None:
    """Start this process's poller once (idempotent); None when QUALITY_POLL_S is 0. Called by the web entry
    points (console/wsgi.py, console/asgi.py), beside the index applier."""
    global _poller
    poll_s = settings.QUALITY_POLL_S if poll_s is None else poll_s
    if poll_s <= 0:
        return None
    with _poller_lock:
        if _poller is None or not _poller.alive:
            _poller = QualityPoller(poll_s=poll_s).start()
        return _poller


def stop_quality_poller() -> None:
    global _poller
    with _poller_lock:
        if _poller is not None:
            _poller.stop()
            _poller = None
