"""A re-embed (the admin's "Recompute embeddings") runs as an ingest job: a row whose counters advance per batch, so
it gets the rate and the time left ingest jobs have, counted in chunks; it queues every chunk's upsert."""
from __future__ import annotations

from datetime import timedelta

from search.ingest import maintenance
from search.ingest.jobs import run_job
from search.ingest.progress import describe_pace, ingest_job_pace, pace_unit
from search.ingest.reembedding import ORIGIN, start_reembed
from search.models import Chunk, Dataset, IndexOutbox, IngestJob
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import emberfall, rules_index  # noqa: F401 - fixtures


def test_a_re_embed_job_reports_chunks_done_per_batch_with_a_rate_and_a_shrinking_eta(emberfall, monkeypatch):
    monkeypatch.setattr(maintenance, "REEMBED_BATCH", 7)  # several batches out of the demo's chunks
    dataset = Dataset.objects.get(pk=emberfall["dataset_id"])
    n = Chunk.objects.filter(dataset=dataset).count()
    assert n > 3 * 7
    job = IngestJob.objects.create(dataset=dataset, source="re-embed", kind=dataset.kind,
                                   options={"origin": ORIGIN, "force": False})
    queued = set(IndexOutbox.objects.values_list("pk", flat=True))
    seen = []

    def watch(info: dict) -> None:  # what the API and the admin read while the job runs
        row = IngestJob.objects.get(pk=job.pk)
        seen.append((row.status, row.files_done, row.files_total,
                     ingest_job_pace(row, now=row.started_at + timedelta(seconds=60))))

    job = run_job(job=job, progress=watch)

    assert job.status == IngestJob.Status.DONE
    assert (job.files_done, job.files_total) == (n, n) and job.result["unit"] == "chunks"
    assert len(seen) == -(-n // 7) and all(s[0] == IngestJob.Status.RUNNING and s[2] == n for s in seen)
    done = [s[1] for s in seen]
    assert done == sorted(done) and done[-1] == n
    etas = [s[3].eta_s for s in seen if s[3].eta_s is not None]
    assert etas == sorted(etas, reverse=True) and etas[0] > 0 and etas[-1] == 0
    assert all(s[3].rate_per_s == round(s[1] / 60, 3) for s in seen if s[3].rate_per_s is not None)
    finished = ingest_job_pace(job, now=job.finished_at)
    assert finished.rate_per_s and finished.eta_s == 0
    assert pace_unit(job) == "chunks" and "chunks/s" in describe_pace(finished, unit=pace_unit(job))
    assert job.embeddings_computed + job.embeddings_cached == n
    new_rows = IndexOutbox.objects.exclude(pk__in=queued)
    assert sorted(new_rows.values_list("chunk_id", flat=True)) == sorted(
        Chunk.objects.filter(dataset=dataset).values_list("pk", flat=True))


def test_start_reembed_queues_a_job_row_a_worker_runs_once_the_transaction_commits(emberfall,
                                                                                   django_capture_on_commit_callbacks):
    dataset = Dataset.objects.get(pk=emberfall["dataset_id"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = start_reembed(dataset=dataset, force=True)
    assert len(callbacks) == 1
    row = IngestJob.objects.get(pk=job.pk)
    assert row.status == IngestJob.Status.PENDING and row.options == {"origin": ORIGIN, "force": True}
    assert pace_unit(row) == "chunks"
    assert pace_unit(IngestJob(dataset=dataset, source="x", kind="code", options={})) == "files"
