"""A Celery worker killed with SIGKILL in the middle of a large ingest.

Real parts only: two real worker processes in sequence on the test database and
Redis queue, `os.kill(pid, SIGKILL)` while the job is between 20 % and 80 %, then
a fresh worker whose start-up recovery (search.ingest.recovery) resumes the job.
The result is compared with the same tree ingested cleanly into another dataset
and with the chunker's own count: Postgres chunks, the embedding cache, the
outbox as applied, and the points of each dataset in the Qdrant index.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]
N_FILES = int(os.environ.get("CRASH_TEST_FILES", "320"))
FUNCS_PER_FILE = 6
WORDS = ("ledger", "invoice", "parcel", "refund", "wallet", "coupon", "tariff", "voucher", "rebate", "escrow",
         "payout", "cursor", "bucket", "shard", "replica", "quorum", "beacon", "lantern", "harbor", "meadow")


def write_tree(root: Path, n_files: int) -> Path:
    """A generated repo: every function distinct, so every chunk is a real embedding (no cache hits)."""
    for i in range(n_files):
        pkg = root / f"pkg{i // 40:02d}"
        pkg.mkdir(parents=True, exist_ok=True)
        lines = [f'"""Module {i}: {WORDS[i % 20]} handling for the {WORDS[(i * 7) % 20]} service."""', ""]
        for j in range(FUNCS_PER_FILE):
            a, b, c = WORDS[(i + j) % 20], WORDS[(i * 3 + j) % 20], WORDS[(i + 5 * j) % 20]
            lines += ["", f"def {a}_{b}_{i}_{j}(amount, {c}=None):",
                      f'    """Apply the {a} rule {i}.{j} to a {b} and report the {c} total."""',
                      f"    total = amount * {i + 1} + {j * 13}",
                      f"    if {c} is not None:",
                      f"        total -= len(str({c})) * {j + 2}",
                      f"    return {{'{a}': total, '{b}': {i * j}}}", ""]
        (pkg / f"mod_{i:04d}.py").write_text("\n".join(lines) + "\n")
    return root


def start_worker(name: str, db_settings: dict, queue: str, *, ping: bool = True) -> subprocess.Popen:
    """A real worker process (solo pool, like tests/conftest.py), answering ping before we go on.

    ping=False for the second worker: its start-up recovery puts it straight to work, and a solo
    pool busy with a task does not answer control messages.
    """
    from config.celery import app

    env = dict(os.environ)
    env["DATABASE_URL"] = f"postgresql://{db_settings['USER']}:@/{db_settings['NAME']}?host={db_settings['HOST']}"
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--concurrency", "1",
           "-Q", queue, "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    if not ping:
        return proc
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5)
        if any(name + "@" in host for r in replies for host in r):
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"worker {name} exited during start-up")
    proc.kill()
    raise RuntimeError(f"worker {name} did not answer ping within 90 s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def wait_for(predicate, *, timeout: float, interval: float = 0.05, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def point_ids(index, dataset_id: int) -> set[int]:
    """Every point of one dataset in the embedded store (engine scroll with a payload filter)."""
    qe = index._qe
    flt = qe.Filter(must=[qe.FieldCondition(key="dataset_id", match=qe.MatchAny([int(dataset_id)]))])
    ids: set[int] = set()
    for shard in index._shards.values():
        offset = None
        while True:
            res = shard.scroll(qe.ScrollRequest(offset=offset, limit=1000, filter=flt, with_payload=False,
                                                with_vector=False))
            records, offset = res if isinstance(res, tuple) else (res, None)
            ids.update(int(r.id) for r in records)
            if offset is None or not records:
                break
    return ids


def chunker_count(root: Path, repo: str) -> tuple[int, int]:
    """(documents, chunks) the code chunker itself makes of the tree, without writing anything."""
    from search.ingest.code import read_code_document, walk

    docs = chunks = 0
    for rel, abs_path, reason in walk(root):
        if reason:
            continue
        draft, _ = read_code_document(root=root, rel=rel, abs_path=abs_path, repo=repo)
        if draft is not None:
            docs += 1
            chunks += len(draft.chunks)
    return docs, chunks


@pytest.mark.slow
def test_ingest_killed_mid_run_is_resumed_by_a_new_worker_with_nothing_lost_or_duplicated(
        transactional_db, settings, make_project, tmp_path, edge_index):
    from django.db import connection

    from inference.encoders import dense_model_id
    from inference.models import EmbeddingCache
    from search.engine.applier import apply_outbox, pending_outbox
    from search.ingest.jobs import start_ingest
    from search.ingest.locks import runner_alive
    from search.models import Chunk, Dataset, Document, IngestJob

    tree = write_tree(tmp_path / "bigrepo", N_FILES)
    exp_docs, exp_chunks = chunker_count(tree, "bigrepo")
    assert exp_docs == N_FILES and exp_chunks >= N_FILES * FUNCS_PER_FILE

    project = make_project("crashy")
    crashed = Dataset.objects.create(project=project, name="crashed", kind="code")
    db_settings, queue = connection.settings_dict, settings.CELERY_TASK_DEFAULT_QUEUE

    first = start_worker("crash1", db_settings, queue)
    second = None
    try:
        t0 = time.monotonic()
        job = start_ingest(job=IngestJob(dataset=crashed, source=str(tree), kind="code", options={"repo": "bigrepo"}))

        def mid_way():
            j = IngestJob.objects.get(pk=job.pk)
            assert j.status != IngestJob.Status.DONE, "ingest finished before the kill: raise CRASH_TEST_FILES"
            return j if j.files_total and 0.2 <= j.files_done / j.files_total <= 0.8 else None

        at_kill = wait_for(mid_way, timeout=300, interval=0.02, what="the ingest to reach 20 %")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        t_kill = time.monotonic()
        assert first.returncode == -signal.SIGKILL

        # the dead worker left the job "running" with part of the tree written
        job.refresh_from_db()
        partial = Chunk.objects.filter(dataset=crashed).count()
        partial_docs = Document.objects.filter(dataset=crashed).count()
        assert job.status == IngestJob.Status.RUNNING
        assert 0 < partial < exp_chunks
        # Postgres drops the dead session's advisory lock: that is how recovery tells "dead" from "slow"
        wait_for(lambda: not runner_alive(job.pk), timeout=30, what="the dead runner's lock to be released")
        t_released = time.monotonic()

        second = start_worker("crash2", db_settings, queue, ping=False)
        wait_for(lambda: runner_alive(job.pk) or second.poll() is not None or
                 IngestJob.objects.filter(pk=job.pk, status="done").exists(),
                 timeout=300, interval=0.1, what="the new worker to resume the job")
        t_resumed = time.monotonic()

        def finished():
            assert second.poll() is None, "the second worker exited"
            return IngestJob.objects.filter(pk=job.pk, status__in=("done", "failed")).first()

        done = wait_for(finished, timeout=600, interval=0.2, what="the resumed ingest to finish")
        t_done = time.monotonic()
    finally:
        for proc in (first, second):
            if proc is not None:
                stop(proc)
    assert done.status == IngestJob.Status.DONE, done.error
    # the second run resumed: files committed before the kill were skipped by content hash, not re-embedded
    assert done.files_total == N_FILES and done.files_done == N_FILES
    assert done.files_skipped == partial_docs > 0
    assert done.chunks_written == exp_chunks - partial

    # the same tree ingested cleanly, for reference
    clean = Dataset.objects.create(project=project, name="clean", kind="code")
    start_ingest(job=IngestJob(dataset=clean, source=str(tree), kind="code", options={"repo": "bigrepo"}), sync=True)

    def rows(ds):
        return sorted(Chunk.objects.filter(dataset=ds).values_list("path", "ordinal", "start_line", "end_line",
                                                                   "text_hash"))

    crashed_rows, clean_rows = rows(crashed), rows(clean)
    assert len(crashed_rows) == len(clean_rows) == exp_chunks
    assert crashed_rows == clean_rows
    assert Document.objects.filter(dataset=crashed).count() == exp_docs
    hashes = set(Chunk.objects.filter(dataset=crashed).values_list("text_hash", flat=True))
    assert EmbeddingCache.objects.filter(model_id=dense_model_id(), text_hash__in=hashes).count() == len(hashes)

    # the index is a projection: apply the whole outbox (this process owns the embedded store), then count
    wait_for(lambda: apply_outbox(index=edge_index) >= 0 and pending_outbox(index=edge_index) == 0,
             timeout=120, interval=0.5, what="the outbox to be applied")
    crashed_ids = set(Chunk.objects.filter(dataset=crashed).values_list("pk", flat=True))
    clean_ids = set(Chunk.objects.filter(dataset=clean).values_list("pk", flat=True))
    assert point_ids(edge_index, crashed.pk) == crashed_ids
    assert point_ids(edge_index, clean.pk) == clean_ids
    assert edge_index.count() == len(crashed_ids) + len(clean_ids) == 2 * exp_chunks

    print(f"\nworker-crash: files={N_FILES} chunks expected={exp_chunks} "
          f"killed at {at_kill.files_done}/{at_kill.files_total} files ({partial} chunks committed) "
          f"after {t_kill - t0:.1f}s; resumed run skipped {done.files_skipped} files, wrote "
          f"{done.chunks_written} chunks, embedded {done.embeddings_computed}; "
          f"got chunks={len(crashed_rows)} points={len(point_ids(edge_index, crashed.pk))} "
          f"(clean: {len(clean_rows)}); lock released {t_released - t_kill:.2f}s after the kill, "
          f"new worker resumed the job {t_resumed - t_released:.1f}s after its spawn, done "
          f"{t_done - t_resumed:.1f}s later (kill->done {t_done - t_kill:.1f}s)")


# --------------------------------------------------------------------------- the recovery rules, one by one
def queued_ingest_messages(settings) -> list[tuple[bytes, str]]:
    """run_ingest_job messages waiting in this session's Redis queue: (raw, job id)."""
    import redis

    r = redis.Redis.from_url(settings.REDIS_URL)
    out = []
    for raw in r.lrange(settings.CELERY_TASK_DEFAULT_QUEUE, 0, -1):
        headers = json.loads(raw)["headers"]
        if headers.get("task") == "search.tasks.run_ingest_job":
            out.append((raw, headers["argsrepr"].strip("()[]',\" ")))
    return out


def drop_messages(settings, messages) -> None:
    import redis

    r = redis.Redis.from_url(settings.REDIS_URL)
    for raw, _ in messages:
        r.lrem(settings.CELERY_TASK_DEFAULT_QUEUE, 1, raw)


@pytest.fixture
def code_dataset(make_project, tmp_path):
    from search.models import Dataset
    from tests.search.ctx_fixtures import write_repo

    project = make_project("recov")
    return Dataset.objects.create(project=project, name="src", kind="code"), write_repo(tmp_path / "shop")


def test_recovery_requeues_a_running_job_whose_runner_died_once_and_leaves_a_live_one_alone(
        transactional_db, settings, code_dataset):
    from search.ingest.locks import hold_job_lock, runner_alive
    from search.ingest.recovery import recover_stalled_ingests
    from search.models import IngestJob

    ds, repo = code_dataset
    dead = IngestJob.objects.create(dataset=ds, source=str(repo), kind="code", status="running")
    live = IngestJob.objects.create(dataset=ds, source=str(repo), kind="code", status="running")
    before = queued_ingest_messages(settings)
    try:
        with hold_job_lock(live.pk) as got:  # this test process plays the live runner of `live`
            assert got
            assert runner_alive(live.pk) and not runner_alive(dead.pk)
            assert recover_stalled_ingests() == [str(dead.pk)]
            assert recover_stalled_ingests() == []  # pending now: not queued twice
        new = [m for m in queued_ingest_messages(settings) if m not in before]
        assert [job_id for _, job_id in new] == [str(dead.pk)]
    finally:
        drop_messages(settings, [m for m in queued_ingest_messages(settings) if m not in before])
    dead.refresh_from_db()
    live.refresh_from_db()
    assert (dead.status, live.status) == ("pending", "running")


def test_a_second_delivery_of_a_job_being_run_steps_aside(transactional_db, code_dataset):
    from search.ingest.jobs import run_job
    from search.ingest.locks import JobBusy, hold_job_lock
    from search.models import Chunk, IngestJob
    from search.tasks import run_ingest_job

    ds, repo = code_dataset
    job = IngestJob.objects.create(dataset=ds, source=str(repo), kind="code", status="running")
    with hold_job_lock(job.pk) as got:
        assert got
        with pytest.raises(JobBusy):
            run_job(job=job)
        assert run_ingest_job.apply(args=[str(job.pk)]).get() == {"status": "busy"}
    assert IngestJob.objects.get(pk=job.pk).status == "running" and not Chunk.objects.filter(dataset=ds).exists()


def test_a_redelivered_message_for_a_finished_job_changes_nothing(transactional_db, code_dataset):
    from search.ingest.jobs import run_job, start_ingest
    from search.models import Chunk, IndexOutbox, IngestJob

    ds, repo = code_dataset
    job = start_ingest(job=IngestJob(dataset=ds, source=str(repo), kind="code"), sync=True)
    assert job.status == "done" and job.chunks_written > 0
    chunks = sorted(Chunk.objects.filter(dataset=ds).values_list("pk", flat=True))
    outbox = IndexOutbox.objects.count()
    again = run_job(job=IngestJob.objects.get(pk=job.pk))
    assert (again.status, again.chunks_written, again.files_done, again.finished_at) == \
        ("done", job.chunks_written, job.files_done, job.finished_at)
    assert sorted(Chunk.objects.filter(dataset=ds).values_list("pk", flat=True)) == chunks
    assert IndexOutbox.objects.count() == outbox


def test_recovery_is_scheduled_on_beat_and_wired_to_worker_start(settings):
    from celery.signals import worker_ready

    from config.celery import app
    from search import tasks

    app.loader.import_default_modules()
    assert "search.tasks.recover_ingest_jobs" in app.tasks
    entry = next(e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "search.tasks.recover_ingest_jobs")
    assert entry["schedule"].total_seconds() > 0
    assert tasks._recover_on_worker_start in worker_ready._live_receivers(sender=None)
