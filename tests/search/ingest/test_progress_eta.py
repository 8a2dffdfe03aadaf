"""A job's rate and time to finish: measured from its own counters and timestamps, None until enough is measured,
shrinking as the job advances, and shown by the API's job resource, the admin and the demo's expected time."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from search.ingest.progress import (
    MIN_MEASURED_ITEMS,
    MIN_MEASURED_S,
    Pace,
    describe_pace,
    duration,
    ingest_job_pace,
    pace,
)
from search.models import IngestJob, QualityJob

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_rate_is_items_done_over_seconds_and_eta_is_what_is_left_at_that_rate():
    p = pace(done=100, total=400, started_at=T0, now=at(20))
    assert p.rate_per_s == 5.0 and p.eta_s == 60.0 and p.eta_at == at(80)


def test_nothing_is_reported_before_enough_is_measured():
    assert pace(done=0, total=400, started_at=T0, now=at(60)) == Pace()  # nothing done yet
    assert pace(done=10, total=400, started_at=T0, now=at(MIN_MEASURED_S - 1)) == Pace()  # too early, too few
    assert pace(done=10, total=400, started_at=None, now=at(60)) == Pace()  # not started
    assert pace(done=10, total=400, started_at=T0, now=at(MIN_MEASURED_S)).rate_per_s == 2.0  # long enough
    assert pace(done=MIN_MEASURED_ITEMS, total=400, started_at=T0, now=at(1)).rate_per_s == MIN_MEASURED_ITEMS


def test_eta_shrinks_as_progress_grows_at_a_steady_rate():
    etas = [pace(done=10 * t, total=1000, started_at=T0, now=at(t)).eta_s for t in (10, 20, 50, 90, 100)]
    assert etas == sorted(etas, reverse=True) and etas[-1] == 0.0 and len(set(etas)) == len(etas)


def test_a_stalled_job_gets_a_falling_rate_and_a_growing_eta():
    """The rate is measured up to now, not up to the last update: a stall shows."""
    moving, stalled = (pace(done=100, total=200, started_at=T0, now=at(s)) for s in (10, 100))
    assert stalled.rate_per_s < moving.rate_per_s and stalled.eta_s > moving.eta_s


def test_unknown_total_gives_a_rate_but_no_eta():
    assert pace(done=60, total=0, started_at=T0, now=at(30)) == Pace(rate_per_s=2.0)


def test_finished_job_is_measured_over_its_run_and_has_nothing_left():
    p = pace(done=30, total=30, started_at=T0, now=at(999), finished_at=at(3))
    assert p == Pace(rate_per_s=10.0, eta_s=0.0, eta_at=at(3))


@pytest.mark.parametrize(("status", "expected"), [
    ("pending", Pace()),
    ("running", Pace(rate_per_s=2.0, eta_s=50.0, eta_at=at(75))),
    ("done", Pace(rate_per_s=4.0, eta_s=0.0, eta_at=at(30))),
    ("failed", Pace(rate_per_s=4.0)),  # ended without finishing: its rate, no time to finish
])
def test_ingest_job_pace_follows_the_jobs_status(status, expected):
    job = IngestJob(status=status, files_done=50 if status == "running" else 120, files_total=150,
                    started_at=T0, finished_at=None if status == "running" else at(30))
    assert ingest_job_pace(job, now=at(25)) == expected


def test_pace_reads_as_one_line_for_the_admin():
    assert duration(42) == "42 s" and duration(600) == "10 min" and duration(7500) == "2 h 05 min"
    line = describe_pace(pace(done=100, total=400, started_at=T0, now=at(20)), unit="files")
    assert line == "5 files/s, about 60 s left (ETA 12:01 UTC)"
    assert describe_pace(Pace(), unit="files") == ""


@pytest.mark.django_db
def test_quality_job_stage_is_timed_from_its_own_start(make_user):
    """Each bar of a quality job is a stage: its rate counts from the stage's start, not the job's."""
    from search.quality.progress import bar, quality_job_pace, reporting_to

    job = QualityJob.objects.create(kind=QualityJob.Kind.ADAPT_EMBEDDINGS, status=QualityJob.Status.RUNNING,
                                    started_at=T0)
    with reporting_to(str(job.pk)):
        b = bar(total=100, desc="adapt", unit="step")
        b.update(60)
        b.refresh()
        b.close()
    job.refresh_from_db()
    assert job.done == 60 and job.total == 100 and job.stage == "adapt" and job.stage_started_at > T0
    p = quality_job_pace(job, now=job.stage_started_at + timedelta(seconds=10))
    assert p.rate_per_s == 6.0 and p.eta_s == round(40 / 6, 1)
    job.status = QualityJob.Status.DONE
    assert quality_job_pace(job, now=at(0)).eta_s == 0.0


def _write_files(root, n: int) -> None:
    for i in range(n):
        (root / f"mod_{i:03d}.py").write_text(f'def handler_{i}(request):\n    """Serve request kind {i}."""\n'
                                              f"    return {i} * request\n")


@pytest.mark.django_db
def test_job_resource_reports_rate_and_eta_while_an_ingest_runs_and_after(make_user, make_project, client_for,
                                                                         tmp_path, monkeypatch):
    """A real ingest, read through the API between files: the rate appears once enough is measured, the ETA is the
    files left at that rate, and the finished job says 0 s left at its finish time."""
    from search.ingest.jobs import start_ingest
    from search.models import Dataset

    files = MIN_MEASURED_ITEMS + 20
    # The writer counts files in batches of 32, so a running job reads 0, 32 and 64 done; with the model already
    # loaded the batch of 32 can land inside MIN_MEASURED_S, and only one reading would be measured. The thresholds
    # have their own test above; here every reading with files done is measured.
    monkeypatch.setattr("search.ingest.progress.MIN_MEASURED_S", 0.0)
    _write_files(tmp_path, files)
    owner = make_user("eta@example.com")
    project = make_project("eta", owner)
    ds = Dataset.objects.create(project=project, name="code", kind="code")
    client = client_for(owner)
    seen: list[dict] = []

    def progress(info: dict) -> None:
        job = IngestJob.objects.filter(dataset=ds).order_by("-created_at").first()
        body = client.get(f"/api/ingest-jobs/{job.pk}").json()
        if body["status"] == "running":
            seen.append(body)

    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code"), sync=True, progress=progress)
    assert job.status == "done" and job.files_total == files
    assert seen, "the job was never read while running"
    for body in seen:
        assert {"rate_per_s", "eta_s", "eta_at"} <= body.keys()
        if body["files_done"] == 0:
            assert body["rate_per_s"] is None and body["eta_s"] is None
    measured = [b for b in seen if b["eta_s"] is not None]
    assert measured, [(b["files_done"], b["rate_per_s"]) for b in seen]
    assert all(b["rate_per_s"] > 0 and b["eta_at"] for b in measured)
    by_progress = sorted(measured, key=lambda b: b["files_done"])
    assert by_progress[-1]["files_done"] > by_progress[0]["files_done"]
    for b in measured:  # the time left is what is left at the rate measured so far (the rate itself moves with the
        # machine's load, so a later ETA need not be smaller)
        assert b["eta_s"] == pytest.approx((files - b["files_done"]) / b["rate_per_s"], rel=0.02, abs=0.2)
    done = client.get(f"/api/ingest-jobs/{job.pk}").json()
    assert done["eta_s"] == 0.0 and done["rate_per_s"] > 0
    assert done["eta_at"].replace("Z", "+00:00")[:19] == job.finished_at.isoformat()[:19]


@pytest.mark.django_db
def test_admin_job_pages_show_the_pace_and_the_encoders_device(make_user, make_project, tmp_path):
    from inference.encoders import describe_devices
    from search.ingest.jobs import start_ingest
    from search.models import Dataset

    _write_files(tmp_path, 3)
    staff = make_user("staff-eta@example.com", staff=True)
    ds = Dataset.objects.create(project=make_project("eta-admin", staff), name="code", kind="code")
    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code"), sync=True)
    client = Client()
    client.force_login(staff)
    device = describe_devices()
    header = f"Encoders: batches on {device['device']} {device['precision']} (batch {device['batch_size']})"
    page = client.get("/admin/search/ingestjob/").content.decode()
    assert header in page and "Rate / time left" in page
    assert "files/s (done)" in page, page[page.find("result_list"):][:3000]
    detail = client.get(f"/admin/search/ingestjob/{job.pk}/change/").content.decode()
    assert "files/s (done)" in detail
    assert header in client.get("/admin/search/qualityjob/").content.decode()


@pytest.mark.django_db
def test_demo_estimate_counts_what_the_ingest_will_embed_and_writes_nothing(make_user, make_project, tmp_path):
    from inference.models import EmbeddingCache
    from search.ingest.demo import expected_ingest_line
    from search.ingest.jobs import start_ingest
    from search.ingest.progress import estimate_code_ingest
    from search.models import Dataset

    _write_files(tmp_path, 12)
    ds = Dataset.objects.create(project=make_project("eta-demo", make_user()), name="code", kind="code")
    cache_rows = EmbeddingCache.objects.count()
    before = estimate_code_ingest(root=tmp_path, dataset=ds, sample=4)
    assert before.files == 12 and before.chunks >= 12 and before.to_embed == before.chunks
    assert before.rate_per_s > 0 and before.seconds == round(before.to_embed / before.rate_per_s, 1)
    assert EmbeddingCache.objects.count() == cache_rows  # an estimate writes nothing
    line = expected_ingest_line(root=tmp_path, dataset=ds)
    assert f"{before.to_embed} of {before.chunks} chunks to embed at" in line and "expected about" in line
    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code"), sync=True)
    job.refresh_from_db()
    assert job.embeddings_computed == before.to_embed  # the count the estimate gave is the work the ingest did
    after = estimate_code_ingest(root=tmp_path, dataset=ds)
    assert after.to_embed == 0 and after.seconds == 0.0 and after.chunks == before.chunks
    assert "all already embedded" in expected_ingest_line(root=tmp_path, dataset=ds)
