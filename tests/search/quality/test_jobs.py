"""Quality jobs: an operator evaluates, trains and chooses from the admin while the platform serves.

Everything is real: the job row in Postgres, its advisory lock, the thread the admin starts, the BEIR collection
ingested and searched in a throwaway embedded store, the report and chart on disk. Tests that start a thread use
transactional_db: the job's thread has a connection of its own and must see committed rows.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from django.test import override_settings
from django.urls import reverse

from config.errors import BadInput
from search.admin import QualityJobForm
from search.ingest.locks import hold_job_lock
from search.models import Chunk, EvaluationRun, Feedback, QualityJob, QuerySession
from search.quality import jobs
from search.quality.progress import bar, reporting_to
from tests.search.ctx_fixtures import edge_index, ingest  # noqa: F401 - fixture

TINY = Path(__file__).parents[1] / "fixtures" / "tiny_beir"


@pytest.fixture
def data_dir(tmp_path):
    """An EVALUATION_DATA_DIR holding the tiny BEIR collection as `tiny`."""
    root = tmp_path / "eval-data"
    shutil.copytree(TINY, root / "tiny")
    with override_settings(EVALUATION_DATA_DIR=root, VAR_DIR=tmp_path / "var"):
        yield root


def _wait_until_finished(job_id, *, timeout_s: float = 240.0) -> QualityJob:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = QualityJob.objects.get(pk=job_id)
        if job.status in (QualityJob.Status.DONE, QualityJob.Status.FAILED):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job.status} after {timeout_s} s")


def test_an_evaluation_job_runs_to_done_with_its_report_chart_and_progress(db, data_dir, edge_index):
    job = jobs.submit(kind="evaluate_beir", options={"collection": "tiny", "pipelines": ["sparse", "dense"]},
                      background=False)
    assert job.status == "done", job.error
    run = job.evaluation
    assert run is not None and set(run.results) == {"sparse", "dense"}
    assert job.result["best"]["ndcg@10"] == max(m["ndcg@10"] for m in run.results.values())
    # the last bar was the dense row over every judged query: the row shows it finished
    assert run.queries == 3
    assert (job.stage, job.done, job.total) == ("dense", 3, 3)
    assert (Path(run.report_dir) / job.result["chart"]).is_file()
    assert edge_index.count() == 0  # the live store was never written: the collection has a store of its own


def test_bad_options_are_refused_by_field_and_store_no_job(db, data_dir):
    cases = [("evaluate_beir", {"collection": "../etc"}, "collection"),
             ("evaluate_beir", {"collection": "tiny", "pipelines": ["nope"]}, "pipelines"),
             ("evaluate_beir", {"collection": "tiny", "max_queries": -3}, "max_queries"),
             ("evaluate_rules", {"project": "no-such-project"}, "project"),
             ("evaluate_rules", {"queries": "missing", "project": "x"}, "queries"),
             ("train_reranker", {"project": "x", "name": "bad name!"}, "name"),
             ("adapt_embeddings", {"project": "x", "name": "../up"}, "name"),
             ("adapt_embeddings", {"project": "x", "name": "ok", "steps": "many"}, "steps"),
             ("adapt_embeddings", {"project": "x", "name": "ok", "judged_max": -1}, "judged_max"),
             ("unknown", {}, "kind")]
    for kind, options, field in cases:
        with pytest.raises(BadInput) as err:
            jobs.submit(kind=kind, options=options, background=False)
        assert err.value.field == field, (kind, options)
    assert not QualityJob.objects.exists()


def test_a_bar_made_inside_a_job_reports_to_its_row_and_outside_it_does_not(db):
    job = QualityJob.objects.create(kind="choose_fusion", options={"project": "p"})
    with reporting_to(str(job.pk)):
        for _ in bar(range(7), desc="mine negatives", enabled=False):
            pass
    job.refresh_from_db()
    assert (job.stage, job.done, job.total) == ("mine negatives", 7, 7)
    for _ in bar(range(3), desc="elsewhere", enabled=False):
        pass
    job.refresh_from_db()
    assert job.stage == "mine negatives"


def test_a_job_that_fails_says_why_on_its_row(db, make_user, make_project):
    project = make_project("empty", make_user())
    job = jobs.submit(kind="train_reranker", options={"project": project.slug, "name": "empty-ce"}, background=False)
    assert job.status == "failed"
    assert "owns no dataset" in job.error
    assert job.finished_at is not None


def test_a_running_job_whose_process_stopped_reads_interrupted_and_is_failed_by_the_next_submit(
        transactional_db, make_user, make_project, client):
    project = make_project("fuse", make_user())
    dead = QualityJob.objects.create(kind="choose_fusion", options={"project": project.slug}, status="running")
    alive = QualityJob.objects.create(kind="choose_fusion", options={"project": project.slug}, status="running")
    client.force_login(make_user("boss@example.com", staff=True))
    with hold_job_lock(alive.pk) as got:  # a live runner holds its job's lock
        assert got
        page = client.get(reverse("admin:search_qualityjob_changelist")).content.decode()
        assert page.count("interrupted") == 1
        assert jobs.fail_interrupted() == [str(dead.pk)]
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert dead.status == "failed" and "interrupted" in dead.error
    assert alive.status == "running"


def test_the_admin_queues_a_job_that_runs_in_a_thread_of_the_web_process(transactional_db, data_dir, edge_index,
                                                                        make_user, client):
    client.force_login(make_user("boss@example.com", staff=True))
    form = client.get(reverse("admin:search_qualityjob_queue"))
    assert form.status_code == 200 and b'value="tiny"' in form.content
    bad = client.post(reverse("admin:search_qualityjob_queue"), {"kind": "choose_fusion"})
    assert bad.status_code == 200 and b"No such project" in bad.content and not QualityJob.objects.exists()
    done = client.post(reverse("admin:search_qualityjob_queue"),
                       {"kind": "evaluate_beir", "collection": "tiny", "max_queries": "3"})
    assert done.status_code == 302
    job = _wait_until_finished(QualityJob.objects.get().pk)
    assert job.status == "done", job.error
    assert job.evaluation.queries == 3 and "default" in job.evaluation.results
    listing = client.get(reverse("admin:search_qualityjob_changelist"))
    assert "Refresh" not in listing  # nothing active: the list stops reloading
    assert b"report and chart" in listing.content
    chart = client.get(reverse("admin:search_evaluationrun_chart", args=[job.evaluation_id]))
    assert chart.status_code == 200 and chart["Content-Type"] == "image/png"
    assert EvaluationRun.objects.count() == 1


def test_a_user_without_the_permission_cannot_queue_a_job(db, make_user, client):
    from django.contrib.auth.models import Permission

    user = make_user("viewer@example.com")
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="view_qualityjob"))
    client.force_login(user)
    response = client.post(reverse("admin:search_qualityjob_queue"), {"kind": "choose_fusion", "project": "x"})
    assert response.status_code == 302 and not QualityJob.objects.exists()


@pytest.mark.parametrize(("typed", "judged_max"), [("", 300), ("30", 30), ("0", 0)])
def test_the_admin_forms_judged_max_reaches_the_adaptation_job_and_blank_is_the_default_split(
        db, make_user, make_project, typed, judged_max):
    project = make_project("formed", make_user())
    form = QualityJobForm(data={"kind": "adapt_embeddings", "project": project.slug, "name": "formed-adapted",
                                "judged_max": typed, "queries": "demo"})
    assert form.is_valid(), form.errors
    assert jobs.check_options(kind="adapt_embeddings", options=form.options())["judged_max"] == judged_max


def test_the_admin_queue_page_shows_judged_max_and_refuses_a_negative_one_on_its_field(db, make_user, make_project,
                                                                                      client):
    project = make_project("formed", make_user())
    client.force_login(make_user("boss@example.com", staff=True))
    page = client.get(reverse("admin:search_qualityjob_queue"))
    assert page.status_code == 200 and b'name="judged_max"' in page.content
    bad = client.post(reverse("admin:search_qualityjob_queue"), {"kind": "adapt_embeddings", "project": project.slug,
                                                                 "name": "formed-adapted", "judged_max": "-1"})
    assert bad.status_code == 200 and not QualityJob.objects.exists()
    assert "judged_max" in bad.context["form"].errors


def test_choose_fusion_as_a_job_keeps_the_default_without_judged_queries(db, make_user, make_project, edge_index):
    project = make_project("fuse", make_user())
    job = jobs.submit(kind="choose_fusion", options={"project": project.slug}, background=False)
    assert job.status == "done", job.error
    assert job.result["adopted"] is False and "judged queries" in job.result["reason"]
    assert job.result["store"] == "live"  # this process holds the store, as the web process does


def _code_package(src: Path) -> Path:
    """24 small functions: enough mined pairs for an adaptation to run."""
    src.mkdir()
    pairs = [(v, o) for v in ("read", "write", "parse", "merge")
             for o in ("config", "ledger", "invoice", "session", "token", "header")]
    for n, (verb, noun) in enumerate(pairs):
        (src / f"m{n}.py").write_text(f"def {verb}_{noun}_items(items):\n    # {verb} every {noun} item we were given\n"
                                      f"    return [x for x in items if x]\n")
    return src


def test_an_adaptation_job_writes_the_model_and_reports_its_held_out_check(db, make_user, make_project, edge_index,
                                                                          tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    project = make_project("tuned", make_user())
    ingest(project, "pkg", _code_package(tmp_path / "pkg"))
    job = jobs.submit(kind="adapt_embeddings", options={"project": project.slug, "name": "tuned-adapted", "steps": 2},
                      background=False)
    assert job.status == "done", job.error
    assert job.result["model"] == "tuned-adapted" and isinstance(job.result["heldout"]["confirmed"], bool)
    assert (settings.VAR_DIR / "models" / "embeddings" / "tuned-adapted" / "manifest.json").is_file()
    assert job.stage == "adapt" and job.done == job.total == 2  # the training bar reported to the row


def test_an_adaptation_job_checks_with_at_most_the_judged_queries_it_is_told_and_trains_on_the_rest(
        db, make_user, make_project, edge_index, tmp_path, settings):
    """The admin's "judged max" is the command's --judged-max: without it 70 judged questions split 35 / 35."""
    settings.VAR_DIR = tmp_path / "var"
    owner = make_user()
    project = make_project("judged", owner)
    ds, _ = ingest(project, "pkg", _code_package(tmp_path / "pkg"))
    chunk = Chunk.objects.filter(dataset=ds).order_by("pk").first()
    for n in range(70):
        session = QuerySession.objects.create(project=project, query=f"how do I read file {n:02d}", kind="context")
        Feedback.objects.create(session=session, chunk=chunk, relevance=2, user=owner)
    job = jobs.submit(kind="adapt_embeddings", options={"project": project.slug, "name": "judged-30", "steps": 1,
                                                        "judged_max": 30, "activate": False}, background=False)
    assert job.status == "done", job.error
    assert job.options["judged_max"] == 30
    assert job.result["judged"] == {"check": 30, "train": 40}
