"""search.quality.schedule and the web process's poller: a project adapted before is re-adapted once its history
grew by ADAPT_EVERY_COMMITS remembered commits; the job beat queues survives a web restart and the poller runs it."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from inference.encoders import dense_model_id, embed_cached
from search.models import CommitMemory, Dataset, QualityJob
from search.quality import jobs
from search.quality.schedule import SCHEDULE, enqueue_due_adaptations, scheduled_name
from tests.search.ctx_fixtures import edge_index, ingest  # noqa: F401 - fixtures
from tests.search.quality.test_jobs import _code_package


def _remember(dataset: Dataset, n: int) -> None:
    texts = [f"Fix the parser for {word} headers" for word in ("empty", "long", "folded", "quoted", "binary")[:n]]
    for i, (text, vec) in enumerate(zip(texts, embed_cached(texts), strict=True)):
        CommitMemory.objects.create(dataset=dataset, sha=f"{dataset.pk:04d}{time.monotonic_ns()}{i}"[:40].ljust(40, "0"),
                                    subject=text, query=text, files=["m0.py"], model_id=dense_model_id(),
                                    embedding=vec.tolist(), committed_at=datetime.now(tz=UTC))


def _adapted(project, *, mark: int | None, name: str = "shop-adapted") -> QualityJob:
    """A finished operator adaptation, as the admin's job leaves it (`memory_mark`: where its count started)."""
    result = {"model": name} | ({"memory_mark": mark} if mark is not None else {})
    return QualityJob.objects.create(kind=QualityJob.Kind.ADAPT_EMBEDDINGS, status=QualityJob.Status.DONE,
                                     options={"project": project.slug, "name": name, "steps": 2, "activate": True,
                                              "judged_max": 100}, result=result, finished_at=datetime.now(tz=UTC))


@pytest.fixture
def shop(db, make_user, make_project):
    project = make_project("shop", make_user())
    return project, Dataset.objects.create(project=project, name="repo", kind="code")


def test_the_schedule_is_off_by_default(shop, settings):
    project, dataset = shop
    _adapted(project, mark=0)
    _remember(dataset, 5)
    assert settings.ADAPT_EVERY_COMMITS == 0 and enqueue_due_adaptations() == []


def test_enough_new_commits_queue_one_job_with_the_last_runs_options_and_a_fresh_name(shop, settings):
    project, dataset = shop
    settings.ADAPT_EVERY_COMMITS = 3
    _remember(dataset, 2)
    last = _adapted(project, mark=CommitMemory.objects.filter(dataset=dataset).latest("pk").pk)
    _remember(dataset, 2)
    assert enqueue_due_adaptations() == []  # two new commits: not yet
    _remember(dataset, 1)
    [queued] = enqueue_due_adaptations()
    job = QualityJob.objects.get(pk=queued)
    assert job.status == QualityJob.Status.PENDING and job.options["trigger"] == SCHEDULE
    assert {k: v for k, v in job.options.items() if k not in ("name", "trigger")} == \
        {k: v for k, v in last.options.items() if k != "name"}
    assert job.options["name"].startswith("shop-adapted-") and len(job.options["name"]) == len("shop-adapted-") + 14
    assert enqueue_due_adaptations() == []  # one queued already


def test_projects_never_adapted_or_adapted_before_the_mark_existed_are_left_alone(shop, settings, make_project):
    project, dataset = shop
    settings.ADAPT_EVERY_COMMITS = 1
    _remember(dataset, 3)
    assert enqueue_due_adaptations() == []  # never adapted: an operator opts in by running it once
    _adapted(project, mark=None)
    assert enqueue_due_adaptations() == []


def test_a_scheduled_name_replaces_the_previous_stamp_and_fits_the_model_name_limit():
    again = scheduled_name("shop-adapted-20260101120000")
    assert again.startswith("shop-adapted-2") and again.count("-") == 2 and again != "shop-adapted-20260101120000"
    assert len(scheduled_name("x" * 64)) <= 64


def test_a_queued_job_from_the_schedule_outlives_a_web_restart_and_others_do_not(transactional_db, make_user,
                                                                                 make_project):
    project = make_project("fuse", make_user())
    before = jobs._STARTED - timedelta(minutes=5)
    queued = QualityJob.objects.create(kind="choose_fusion", options={"project": project.slug, "trigger": SCHEDULE})
    orphan = QualityJob.objects.create(kind="choose_fusion", options={"project": project.slug})
    QualityJob.objects.filter(pk__in=[queued.pk, orphan.pk]).update(created_at=before)
    assert jobs.fail_interrupted() == [str(orphan.pk)]
    queued.refresh_from_db()
    assert queued.status == QualityJob.Status.PENDING


def test_beat_queues_and_the_web_processs_poller_runs_the_re_adaptation(transactional_db, edge_index, make_user,
                                                                        make_project, tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    settings.ADAPT_EVERY_COMMITS = 2
    project = make_project("tuned", make_user())
    dataset, _ = ingest(project, "pkg", _code_package(tmp_path / "pkg"))
    first = jobs.submit(kind="adapt_embeddings", options={"project": project.slug, "name": "tuned-a", "steps": 1,
                                                          "activate": False}, background=False)
    assert first.status == "done", first.error
    assert first.result["memory_mark"] == 0 and first.result["trigger"] == "operator"
    _remember(dataset, 2)
    [queued] = enqueue_due_adaptations()
    poller = jobs.start_quality_poller(poll_s=0.2)
    try:
        deadline = time.monotonic() + 300
        while QualityJob.objects.get(pk=queued).status in ("pending", "running") and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        jobs.stop_quality_poller()
    assert poller is not None and not poller.alive
    job = QualityJob.objects.get(pk=queued)
    assert job.status == "done", job.error
    assert job.result["trigger"] == SCHEDULE and job.result["model"].startswith("tuned-a-")
    assert job.result["memory_mark"] == CommitMemory.objects.filter(dataset=dataset).latest("pk").pk
    assert (settings.VAR_DIR / "models" / "embeddings" / job.result["model"] / "manifest.json").is_file()
    assert enqueue_due_adaptations() == []  # nothing new since this run's mark


def test_the_poller_is_off_when_its_interval_is_zero(settings):
    settings.QUALITY_POLL_S = 0
    assert jobs.start_quality_poller() is None
