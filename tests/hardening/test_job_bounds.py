"""Ingest and sync jobs end, can be stopped, and share the workers (docs/security.md, "Jobs that end and share the
workers").

Real parts only: the hostile peers are web sites served on 127.0.0.1 by the test whose pages answer slowly (each
page held for a while, so a crawl of a long chain of pages holds its job for minutes); syncs run through the
real runner in threads of this process, or through a real Celery worker process (threads pool, two slots) on the
test database and the session's Redis queue.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.search.sources.site_server import LocalSite, html_page

ROOT = Path(__file__).resolve().parents[2]


def slow_chain(site: LocalSite, *, prefix: str, pages: int, sleep_s: float) -> str:
    """Pages prefix/0 -> prefix/1 -> ... each answered after `sleep_s`: a crawl of it holds its job for
    pages x sleep_s. Returns the seed URL."""
    for i in range(pages):
        links = [f"{prefix}/{i + 1}"] if i + 1 < pages else []
        site.page(f"{prefix}/{i}", html_page(f"Page {prefix} {i}", f"Slow page number {i} of the chain {prefix}.",
                                            links=links), sleep_s=sleep_s)
    return site.url(f"{prefix}/0")


@pytest.fixture
def site():
    s = LocalSite()
    yield s
    s.close()


@pytest.fixture
def web_settings(settings):
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.SOURCES_CRAWL_DELAY_S = 0.01
    settings.SOURCES_REQUEST_TIMEOUT_S = 10.0
    return settings


def web_source(dataset, seed: str, *, max_pages: int = 200):
    from search.models import Source

    return Source.objects.create(dataset=dataset, type="web", config={
        "seeds": [seed], "scope": "same-host", "max_pages": max_pages, "max_depth": max_pages, "include": [],
        "exclude": []})


def wait_for(predicate, *, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class SyncThread(threading.Thread):
    """Runs one sync of `dataset` here (the runner, as `manage.py sync` does) and keeps how it ended."""

    def __init__(self, dataset) -> None:
        super().__init__(daemon=True)
        self.dataset = dataset
        self.error: BaseException | None = None

    def run(self) -> None:
        from django.db import connection

        from search.sources.sync import start_sync

        try:
            start_sync(dataset=self.dataset, run_now=True)
        except BaseException as exc:  # noqa: BLE001 - the test reads how the sync ended
            self.error = exc
        finally:
            connection.close()


def running_job(dataset, *, min_done: int = 1):
    from search.models import IngestJob

    return wait_for(lambda: IngestJob.objects.filter(dataset=dataset, status="running",
                                                     files_done__gte=min_done).first(),
                    timeout=120, what=f"a running sync with {min_done} page(s) done")


def world(make_user, make_project, name: str):
    from search.models import Dataset

    owner = make_user(f"{name}@example.com")
    project = make_project(name, owner)
    return owner, project, Dataset.objects.create(project=project, name="site", kind="web")


# --------------------------------------------------------------------------- the wall-clock bound
def test_a_sync_past_its_wall_clock_bound_ends_job_timeout_at_the_next_page_keeping_whole_pages(
        transactional_db, web_settings, site, make_user, make_project):
    from search.models import Chunk, Document, IngestJob, Source

    web_settings.INGEST_JOB_MAX_S = 3.0
    _owner, _project, ds = world(make_user, make_project, "slowsite")
    source = web_source(ds, slow_chain(site, prefix="/p", pages=40, sleep_s=0.3))
    sync = SyncThread(ds)
    sync.start()
    sync.join(120)

    job = IngestJob.objects.get(dataset=ds)
    assert job.status == "failed", (job.status, job.error)
    assert job.error.startswith("job_timeout: "), job.error
    assert getattr(sync.error, "code", None) == "job_timeout"
    assert 0 < job.files_done < 40  # stopped at a page check, well before the chain's end (40 x 0.3 s)
    # what it wrote is whole: every stored page has its chunks, and the pages read before the stop are kept
    docs = list(Document.objects.filter(dataset=ds))
    assert docs and all(Chunk.objects.filter(document=d).exists() for d in docs)
    source = Source.objects.get(pk=source.pk)
    assert source.last_error.startswith("job_timeout: ") and source.consecutive_failures == 1


# --------------------------------------------------------------------------- cancel: the API and the admin
def test_the_cancel_endpoint_stops_a_running_sync_at_its_next_page(transactional_db, web_settings, site, make_user,
                                                                  make_project, client_for):
    from search.models import Document

    owner, _project, ds = world(make_user, make_project, "cancelme")
    web_source(ds, slow_chain(site, prefix="/c", pages=200, sleep_s=0.2))
    sync = SyncThread(ds)
    sync.start()
    job = running_job(ds)
    resp = client_for(owner).post(f"/api/ingest-jobs/{job.pk}/cancel", {}, format="json")
    assert resp.status_code == 200, resp.content
    assert resp.json()["cancel_requested"] is True and resp.json()["id"] == str(job.pk)
    sync.join(60)
    assert not sync.is_alive()
    job.refresh_from_db()
    assert job.status == "cancelled" and job.error.startswith("job_cancelled: ")
    assert job.files_done < 200
    assert Document.objects.filter(dataset=ds).count() <= job.files_done  # whole pages only, none after the stop
    # a second cancel: the job has ended
    again = client_for(owner).post(f"/api/ingest-jobs/{job.pk}/cancel", {}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "job_finished"


def test_cancel_answers_bad_input_with_clear_json_errors(transactional_db, make_user, make_project, client_for):
    from search.models import IngestJob

    owner, _p, ds = world(make_user, make_project, "mine")
    other, _q, theirs = world(make_user, make_project, "theirs")
    viewer = make_user("viewer@example.com")
    make_project("mine", viewer, role="viewer")
    queued = IngestJob.objects.create(dataset=ds, source="push", kind="web", options={"origin": "push"})
    foreign = IngestJob.objects.create(dataset=theirs, source="push", kind="web", options={"origin": "push"})
    done = IngestJob.objects.create(dataset=ds, source="push", kind="web", status="done")
    c = client_for(owner)

    unknown = c.post(f"/api/ingest-jobs/{uuid.uuid4()}/cancel", {}, format="json")
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"
    other_tenant = c.post(f"/api/ingest-jobs/{foreign.pk}/cancel", {}, format="json")
    assert other_tenant.status_code == 404 and other_tenant.json()["code"] == "not_found"
    finished = c.post(f"/api/ingest-jobs/{done.pk}/cancel", {}, format="json")
    assert finished.status_code == 409 and finished.json()["code"] == "job_finished"
    extra = c.post(f"/api/ingest-jobs/{queued.pk}/cancel", {"force": True}, format="json")
    assert extra.status_code == 400 and extra.json()["field"] == "force"
    read_only = client_for(viewer).post(f"/api/ingest-jobs/{queued.pk}/cancel", {}, format="json")
    assert read_only.status_code == 403 and read_only.json()["code"] == "forbidden"
    foreign.refresh_from_db()
    assert foreign.status == "pending" and not foreign.cancel_requested  # nothing changed by the refusals

    # a queued job (no runner yet) is cancelled at once, and its message then does nothing
    ok = c.post(f"/api/ingest-jobs/{queued.pk}/cancel", format="json")
    assert ok.status_code == 200 and ok.json()["status"] == "cancelled"
    from search.tasks import run_ingest_job

    assert run_ingest_job.run(str(queued.pk)) == {"status": "cancelled"}
    assert other.pk != owner.pk


def test_the_admin_action_cancels_jobs_and_says_which_had_ended(transactional_db, make_user, make_project, client):
    from search.models import IngestJob

    _owner, _p, ds = world(make_user, make_project, "adminjobs")
    queued = IngestJob.objects.create(dataset=ds, source="push", kind="web", options={"origin": "push"})
    done = IngestJob.objects.create(dataset=ds, source="push", kind="web", status="done")
    staff = make_user("ops@example.com", staff=True)
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    resp = client.post("/admin/search/ingestjob/", {"action": "cancel_jobs",
                                                    "_selected_action": [str(queued.pk), str(done.pk)]},
                       follow=True)
    assert resp.status_code == 200
    text = resp.content.decode()
    assert "cancelled." in text and "already ended" in text
    queued.refresh_from_db()
    done.refresh_from_db()
    assert queued.status == "cancelled" and done.status == "done"


# --------------------------------------------------------------------------- deletes while a sync writes
def test_removing_a_source_cancels_its_running_sync(transactional_db, web_settings, site, make_user, make_project,
                                                   client_for):
    from search.models import IngestJob

    owner, project, ds = world(make_user, make_project, "unfollow")
    web_source(ds, slow_chain(site, prefix="/r", pages=200, sleep_s=0.2))
    sync = SyncThread(ds)
    sync.start()
    job = running_job(ds)
    resp = client_for(owner).delete(f"/api/projects/{project.slug}/datasets/{ds.pk}/source")
    assert resp.status_code == 204, resp.content
    sync.join(60)
    assert not sync.is_alive()
    job = IngestJob.objects.get(pk=job.pk)
    assert job.status == "cancelled" and job.files_done < 200, (job.status, job.files_done, job.error)


@pytest.mark.parametrize("what", ["dataset", "project"])
def test_deleting_while_a_sync_writes_cancels_it_and_completes_never_a_500(
        transactional_db, web_settings, site, make_user, make_project, client_for, what):
    from projects.models import Project
    from search.models import Dataset, Document, IngestJob

    owner, project, ds = world(make_user, make_project, f"gone{what}")
    web_source(ds, slow_chain(site, prefix="/d", pages=300, sleep_s=0.02))
    sync = SyncThread(ds)
    sync.start()
    running_job(ds, min_done=40)  # past its first batch: documents are being written
    wait_for(lambda: Document.objects.filter(dataset=ds).exists(), timeout=60, what="the first written batch")
    url = f"/api/projects/{project.slug}" + (f"/datasets/{ds.pk}" if what == "dataset" else "")
    resp = client_for(owner).delete(url)
    assert resp.status_code in (204, 409), resp.content
    sync.join(60)
    assert not sync.is_alive()
    # the sync was stopped by the delete (not killed by a foreign key half-way through a write)
    assert getattr(sync.error, "code", None) == "job_cancelled", repr(sync.error)
    if resp.status_code == 204:
        assert not Dataset.objects.filter(pk=ds.pk).exists()
        assert not Document.objects.filter(dataset_id=ds.pk).exists()
        assert not IngestJob.objects.filter(dataset_id=ds.pk).exists()
        assert Project.objects.filter(pk=project.pk).exists() == (what == "dataset")
    else:  # nothing was deleted, and the answer says why
        assert resp.json()["code"] in ("jobs_running", "dataset_busy")
        assert Dataset.objects.filter(pk=ds.pk).exists()


# --------------------------------------------------------------------------- one tenant cannot hold every slot
def start_threads_worker(db_settings: dict, queue: str, env_extra: dict[str, str]) -> subprocess.Popen:
    """A real worker process with two thread slots (the default concurrency), answering ping before we go on."""
    from config.celery import app

    env = dict(os.environ)
    env["DATABASE_URL"] = f"postgresql://{db_settings['USER']}:@/{db_settings['NAME']}?host={db_settings['HOST']}"
    env.update(env_extra)
    name = f"slots{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads", "--concurrency", "2",
           "-Q", queue, "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5)
        if any(name + "@" in host for r in replies for host in r):
            return proc
        if proc.poll() is not None:
            raise RuntimeError("worker exited during start-up")
    proc.kill()
    raise RuntimeError("worker did not answer ping within 90 s")


def test_two_hostile_syncs_of_one_account_in_two_projects_leave_a_worker_slot_for_another_tenants_ingest(
        transactional_db, settings, site, make_user, make_project):
    from django.db import connection

    from search.ingest.content import push_documents
    from search.models import IngestJob
    from search.sources.sync import start_sync

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    worker = start_threads_worker(connection.settings_dict, settings.CELERY_TASK_DEFAULT_QUEUE, {
        "SOURCES_ALLOWED_NETWORKS": "127.0.0.1/32", "SOURCES_CRAWL_DELAY_S": "0.01",
        "CELERY_WORKER_CONCURRENCY": "2", "INGEST_SLOT_RETRY_S": "1"})
    try:
        # The hostile account spreads its syncs over two projects of its own: the limit counts the account.
        a_user, project_a, ds_a1 = world(make_user, make_project, "hostile")
        from projects.models import Project
        from search.models import Dataset

        project_a2 = make_project("hostile-two", a_user)
        Project.objects.filter(pk__in=[project_a.pk, project_a2.pk]).update(created_by=a_user)
        ds_a2 = Dataset.objects.create(project=project_a2, name="site2", kind="web")
        web_source(ds_a1, slow_chain(site, prefix="/h1", pages=200, sleep_s=1.0))
        web_source(ds_a2, slow_chain(site, prefix="/h2", pages=200, sleep_s=1.0))
        hostile = [start_sync(dataset=ds_a1), start_sync(dataset=ds_a2)]
        wait_for(lambda: IngestJob.objects.filter(pk__in=[j.pk for j in hostile], status="running").exists(),
                 timeout=60, what="a hostile sync to start")
        time.sleep(2)  # both hostile messages have reached the worker's two slots by now

        b_user, _pb, ds_b = world(make_user, make_project, "neighbour")
        ds_b.kind = "code"
        ds_b.save()
        job_b = push_documents(user=b_user, dataset=ds_b, documents=[
            {"external_id": "m", "path": "m.py", "text": "def neighbour():\n    return 'not starved'\n"}])
        most_running, queued_at = 0, time.monotonic()
        deadline = queued_at + 120
        while time.monotonic() < deadline:
            job_b.refresh_from_db()
            most_running = max(most_running, IngestJob.objects.filter(
                dataset__project__in=[project_a, project_a2], status="running").count())
            if job_b.status in ("done", "failed"):
                break
            time.sleep(0.2)
        if os.environ.get("JOB_BOUNDS_REPORT"):  # bench/bench_hostile_jobs.py reads what this run saw
            Path(os.environ["JOB_BOUNDS_REPORT"]).write_text(json.dumps({
                "b_status": job_b.status, "b_wait_s": round(time.monotonic() - queued_at, 1),
                "hostile_running_at_most": most_running}))
        assert job_b.status == "done", (job_b.status, job_b.error)
        assert most_running == 1  # the hostile tenant held one slot; its other sync waited as pending
        assert IngestJob.objects.filter(pk__in=[j.pk for j in hostile], status__in=["running", "pending"]).count() == 2
    finally:
        if hasattr(IngestJob, "cancel_requested"):  # the hostile syncs stop, so the worker's warm shutdown is quick
            IngestJob.objects.filter(status__in=["pending", "running"]).update(cancel_requested=True)
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(5)


@pytest.mark.parametrize("what", ["dataset", "project"])
def test_deleting_from_the_admin_while_a_runner_holds_a_job_deletes_nothing_and_says_why(
        transactional_db, settings, make_user, make_project, client, what):
    from projects.models import Project
    from search.ingest.locks import hold_job_lock
    from search.models import Dataset, IngestJob

    settings.INGEST_CANCEL_WAIT_S = 0.5
    _owner, project, ds = world(make_user, make_project, f"admindel{what}")
    job = IngestJob.objects.create(dataset=ds, source="push", kind="web", status="running",
                                   options={"origin": "push"})
    staff = make_user(f"ops-{what}@example.com", staff=True)
    client.force_login(staff)
    url = (f"/admin/search/dataset/{ds.pk}/delete/" if what == "dataset"
           else f"/admin/projects/project/{project.pk}/delete/")
    with hold_job_lock(job.pk) as held:  # a runner that has not reached its next entry yet
        assert held
        resp = client.post(url, {"post": "yes"}, follow=True)
    assert resp.status_code == 200
    text = resp.content.decode()
    assert "Nothing was deleted" in text and "deleted successfully" not in text
    assert Dataset.objects.filter(pk=ds.pk).exists() and Project.objects.filter(pk=project.pk).exists()
    job.refresh_from_db()
    assert job.cancel_requested  # asked to stop, so a retry succeeds once it has

    resp = client.post(url, {"post": "yes"}, follow=True)  # no runner any more: the delete goes through
    assert resp.status_code == 200 and "Nothing was deleted" not in resp.content.decode()
    assert not Dataset.objects.filter(pk=ds.pk).exists()
