"""Scheduling and running syncs (search.sources.sync): due sources are queued once even with two schedulers at
once, active and manual-only sources are left alone, failures back off, a failed sync is recorded once (not once
per Celery retry), `manage.py sync` runs one here.

A sync that must fail points at a closed port on 127.0.0.1 (allowed by the test's SOURCES_ALLOWED_NETWORKS), so
it fails fast whatever the git fetcher does. Queued jobs' Celery messages are removed from the session's queue at
the end of each test that commits them."""
from __future__ import annotations

import os
import socket
import threading
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from config.errors import NotFound
from search.models import IngestJob, Source
from search.sources import spec, sync
from tests.hardening.test_worker_crash import drop_messages, queued_ingest_messages
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture
from tests.search.sources.git_fixtures import git_remote  # noqa: F401 - fixture

PUBLIC_GIT = "https://93.184.216.34/org/repo.git"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def make_source(make_project, settings):
    """make(name, interval_s=..., url=...) -> a code dataset with a git source, via the service."""
    from search.models import Dataset

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    project = make_project("sched")

    def make(name: str, *, interval_s: int | None = 600, url: str = PUBLIC_GIT) -> Source:
        ds = Dataset.objects.create(project=project, name=name, kind="code")
        parsed = spec.parse_source({"type": "git", "url": url}, user=None, dataset_kind="code")
        return sync.set_source(user=None, dataset=ds, spec=parsed, interval_s=interval_s)

    return make


@pytest.fixture
def broker_messages(settings):
    """Removes the run_ingest_job messages a test committed (no worker consumes them here)."""
    before = queued_ingest_messages(settings)
    yield
    drop_messages(settings, [m for m in queued_ingest_messages(settings) if m not in before])


def _due(*sources: Source, ago_s: int = 5) -> None:
    Source.objects.filter(pk__in=[s.pk for s in sources]).update(
        next_sync_at=timezone.now() - timedelta(seconds=ago_s))


def failing_url() -> str:
    return f"http://127.0.0.1:{closed_port()}/org/repo.git"


# --------------------------------------------------------------------------- the scheduler
def test_two_schedulers_at_once_queue_each_due_source_exactly_once(transactional_db, make_source, broker_messages):
    from django.db import connection

    sources = [make_source(f"ds{i}") for i in range(24)]
    _due(*sources)
    barrier, results, errors = threading.Barrier(2), [], []

    def scheduler() -> None:
        try:
            barrier.wait(10)
            results.append(sync.enqueue_due_syncs())
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)
        finally:
            connection.close()

    for _ in range(3):  # a few rounds: each round's sources are due again
        results.clear()
        threads = [threading.Thread(target=scheduler) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        queued = [job_id for r in results for job_id in r]
        assert len(queued) == len(set(queued)) == len(sources)
        per_dataset = IngestJob.objects.filter(pk__in=queued).values_list("dataset_id", flat=True)
        assert sorted(per_dataset) == sorted(s.dataset_id for s in sources)
        IngestJob.objects.filter(pk__in=queued).update(status="done")  # as if a worker had run them
        _due(*sources)
    assert IngestJob.objects.filter(options__trigger="schedule").count() == 3 * len(sources)


def test_a_queued_sync_pushes_the_next_one_an_interval_later(db, make_source):
    source = make_source("a", interval_s=900)
    now = timezone.now()
    _due(source)
    [job_id] = sync.enqueue_due_syncs(now=now)
    job = IngestJob.objects.get(pk=job_id)
    assert job.options == {"origin": "sync", "trigger": "schedule", "source_type": "git"} and job.status == "pending"
    source.refresh_from_db()
    assert source.next_sync_at == now + timedelta(seconds=900)
    assert sync.enqueue_due_syncs(now=now + timedelta(seconds=899)) == []


def test_the_scheduler_skips_a_dataset_whose_sync_is_active_and_keeps_it_due(db, make_source):
    busy, idle = make_source("busy"), make_source("idle")
    _due(busy, idle)
    running = IngestJob.objects.create(dataset=busy.dataset, source=PUBLIC_GIT, kind="code", status="running",
                                       options={"origin": "sync", "trigger": "manual"})
    queued = sync.enqueue_due_syncs()
    assert [IngestJob.objects.get(pk=j).dataset_id for j in queued] == [idle.dataset_id]
    busy.refresh_from_db()
    assert busy.next_sync_at <= timezone.now()  # still due: picked up once its sync has ended
    running.status = "done"
    running.save()
    assert [IngestJob.objects.get(pk=j).dataset_id for j in sync.enqueue_due_syncs()] == [busy.dataset_id]


def test_manual_only_and_not_yet_due_sources_are_not_queued(db, make_source):
    manual = make_source("manual", interval_s=None)
    later = make_source("later", interval_s=600)
    assert manual.next_sync_at is None
    Source.objects.filter(pk=manual.pk).update(next_sync_at=timezone.now() - timedelta(days=1))  # stale value
    Source.objects.filter(pk=later.pk).update(next_sync_at=timezone.now() + timedelta(seconds=60))
    assert sync.enqueue_due_syncs() == []
    assert not IngestJob.objects.exists()


def test_beat_runs_the_scheduler_task(db, make_source, settings):
    from search.tasks import enqueue_due_syncs

    entry = next(e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "search.tasks.enqueue_due_syncs")
    assert entry["schedule"].total_seconds() == settings.SOURCES_SCHEDULER_INTERVAL_S
    source = make_source("beat")
    _due(source)
    queued = enqueue_due_syncs.apply().get()
    assert [IngestJob.objects.get(pk=j).dataset_id for j in queued] == [source.dataset_id]


# --------------------------------------------------------------------------- failures and back-off
def test_failures_back_off_doubling_the_interval_and_capped_at_a_day(db, make_source):
    source = make_source("flaky", interval_s=600, url=failing_url())
    gaps = []
    for _ in range(3):
        with pytest.raises(Exception):  # noqa: B017 - the fetcher's own error; what matters is what is recorded
            sync.start_sync(dataset=source.dataset, trigger="manual", run_now=True)
        source.refresh_from_db()
        gaps.append((source.next_sync_at - source.last_sync_at).total_seconds())
    assert gaps == [1200, 2400, 4800]
    assert source.consecutive_failures == 3 and source.last_error and source.last_success_at is None
    jobs = list(IngestJob.objects.filter(dataset=source.dataset).order_by("created_at"))
    assert [j.status for j in jobs] == ["failed"] * 3 and all(j.error == jobs[0].error for j in jobs)
    now = timezone.now()
    source.consecutive_failures = 30
    assert sync.next_sync_time(source=source, now=now) == now + timedelta(days=1)
    source.consecutive_failures = 0
    assert sync.next_sync_time(source=source, now=now) == now + timedelta(seconds=600)
    source.interval_s = None
    assert sync.next_sync_time(source=source, now=now) is None


def test_a_failed_sync_run_by_the_worker_task_counts_once_not_once_per_retry(db, make_source):
    from search.tasks import run_ingest_job

    source = make_source("once", url=failing_url())
    job = sync.start_sync(dataset=source.dataset, trigger="manual")
    assert run_ingest_job.apply(args=[str(job.pk)]).get() == {"status": "failed"}
    source.refresh_from_db()
    job.refresh_from_db()
    assert job.status == "failed" and source.consecutive_failures == 1 and source.last_error


def test_removing_a_source_cancels_its_queued_sync_and_its_message_then_does_nothing(db, make_source):
    from search.ingest.jobs import run_job

    source = make_source("removed")
    job = sync.start_sync(dataset=source.dataset, trigger="manual")
    sync.remove_source(user=None, dataset=source.dataset)
    job.refresh_from_db()
    assert job.status == "cancelled" and job.cancel_requested and job.error.startswith("job_cancelled: ")
    assert run_job(job=job).status == "cancelled"


def test_a_sync_whose_source_row_vanished_before_it_ran_fails_saying_so(db, make_source):
    from search.ingest.jobs import run_job

    source = make_source("vanished")
    job = sync.start_sync(dataset=source.dataset, trigger="manual")
    Source.objects.filter(pk=source.pk).delete()  # not through remove_source (e.g. the admin's delete)
    with pytest.raises(NotFound):  # an ApiError: its sentence is what the job tells its owner
        run_job(job=job)
    job.refresh_from_db()
    assert job.status == "failed" and "source was removed" in job.error


def test_changing_the_url_forgets_the_commit_but_a_new_interval_keeps_it(db, make_source):
    source = make_source("moved")
    Source.objects.filter(pk=source.pk).update(state={"commit": "a" * 40})
    same = spec.parse_source({"type": "git", "url": PUBLIC_GIT}, user=None, dataset_kind="code")
    assert sync.set_source(user=None, dataset=source.dataset, spec=same, interval_s=3600).state == {"commit": "a" * 40}
    moved = spec.parse_source({"type": "git", "url": PUBLIC_GIT.replace("repo", "fork")}, user=None,
                              dataset_kind="code")
    assert sync.set_source(user=None, dataset=source.dataset, spec=moved, interval_s=3600).state == {}


def test_describe_and_summarize_show_the_commit_and_what_changed_never_the_token(db, make_source):
    source = make_source("shown")
    Source.objects.filter(pk=source.pk).update(state={"commit": "b" * 40, "etags": {"x": "y"}},
                                               secret=sync.secrets.encrypt("tok-123"))
    shown = sync.describe_source(dataset=source.dataset)
    assert shown["commit"] == "b" * 40 and shown["has_token"] is True
    assert "tok-123" not in repr(shown) and "secret" not in shown and "etags" not in repr(shown)
    line = sync.summarize_result({"mode": "diff", "from": "a" * 40, "to": "c" * 40, "changed": ["src/app.py"],
                                  "deleted": []})
    assert line == "diff; aaaaaaaaaa..cccccccccc; 1 changed (src/app.py); 0 deleted"
    many = sync.summarize_result({"mode": "full", "to": "c" * 40, "changed": [f"f{i}.py" for i in range(5)]})
    assert many == "full; at cccccccccc; 5 changed (f0.py, f1.py, f2.py, ...)"
    capped = sync.summarize_result({"mode": "diff", "from": "a" * 40, "to": "c" * 40, "changed": ["a.py"],
                                    "changed_total": 250, "deleted": [], "deleted_total": 0,
                                    "renamed": [["old.py", "new.py"]], "renamed_total": 1})
    assert capped == "diff; aaaaaaaaaa..cccccccccc; 250 changed (a.py, ...); 0 deleted; 1 renamed (old.py -> new.py)"
    assert sync.summarize_result({"mode": "unchanged", "from": "c" * 40, "to": "c" * 40, "changed": [],
                                  "deleted": [], "renamed": []}) == \
        "unchanged; cccccccccc..cccccccccc; 0 changed; 0 deleted"
    crawl = sync.summarize_result({"mode": "crawl", "fetched": 12, "not_modified": 3, "unchanged": 2,
                                   "indexed": ["https://s/a", "https://s/b"], "indexed_count": 9,
                                   "removed": ["https://s/gone"], "removed_count": 1, "skipped": {"robots": []},
                                   "errors_count": 0, "stopped": ""})
    assert crawl == ("crawl; 9 indexed (https://s/a, https://s/b, ...); 1 removed (https://s/gone); 12 fetched; "
                     "3 not modified; 2 unchanged; 0 errors")
    assert sync.summarize_result({}) == ""
    remembered = sync.summarize_result({"mode": "diff", "from": "a" * 40, "to": "c" * 40, "changed": [],
                                        "history": {"added": 2, "remembered": 475, "rebuilt": True,
                                                    "stopped": "time budget"}})
    assert remembered.endswith("; history: 475 commits remembered (+2, rebuilt, stopped: time budget)")
    pending = sync.summarize_result({"mode": "unchanged", "to": "c" * 40,
                                     "history": {"added": 0, "remembered": 475, "functions_pending": 40}})
    assert pending.endswith("; history: 475 commits remembered (+0, 40 still to read for the functions they "
                            "changed)")
    unread = sync.summarize_result({"mode": "unchanged", "to": "c" * 40, "history": {"error": "encoder down"}})
    assert unread.endswith("; history not read: encoder down")


# --------------------------------------------------------------------------- manage.py sync
def test_the_sync_command_reports_a_missing_source_and_a_failed_sync(db, make_source, make_project):
    from search.models import Dataset

    Dataset.objects.create(project=make_project("sched"), name="plain", kind="code")
    with pytest.raises(CommandError, match="no_source"):
        call_command("sync", "sched", "plain")
    with pytest.raises(CommandError, match="no dataset"):
        call_command("sync", "sched", "nope")
    source = make_source("cmd", url=failing_url())
    with pytest.raises(CommandError, match="sync failed"):
        call_command("sync", "sched", "cmd")
    job = IngestJob.objects.get(dataset=source.dataset)
    assert job.status == "failed" and job.options["trigger"] == "command"


# --------------------------------------------------------------------------- a worker killed mid-sync
N_SYNC_FILES = int(os.environ.get("CRASH_SYNC_FILES", "160"))  # five batches of 32: the kill lands after 1 to 4
WORDS = ("ledger", "invoice", "parcel", "refund", "wallet", "coupon", "tariff", "voucher", "rebate", "escrow")


def crash_tree(n: int) -> dict[str, str]:
    """n small modules, every function distinct (no embedding cache hits), about three chunks each."""
    files = {}
    for i in range(n):
        a, b = WORDS[i % 10], WORDS[(i * 3 + 1) % 10]
        files[f"pkg{i // 40:02d}/mod_{i:04d}.py"] = (
            f'"""Module {i}: {a} handling for the {b} service."""\n\n\n'
            f"def {a}_{b}_{i}(amount, fee=None):\n"
            f'    """Apply the {a} rule {i} to a {b} and report the total."""\n'
            f"    total = amount * {i + 1} + {i % 7}\n"
            f"    return total if fee is None else total - fee * {i % 5 + 1}\n")
    return files

@pytest.mark.slow
def test_a_worker_killed_mid_sync_leaves_a_job_that_recovery_completes_with_nothing_lost_or_duplicated(
        transactional_db, settings, make_project, make_user, tmp_path, edge_index, git_remote, monkeypatch):
    """With real parts: a Celery worker syncing a file:// repository is SIGKILLed between 20 % and
    80 %; a new worker's start-up recovery re-queues the job, which skips what was committed (by content hash) and
    finishes. The dataset then equals a clean sync of the same commit: chunks row by row, points in the index."""
    import signal

    from django.db import connection

    from search.engine.applier import apply_outbox, pending_outbox
    from search.ingest.locks import runner_alive
    from search.models import Chunk, Dataset, Document
    from tests.hardening.test_worker_crash import point_ids, start_worker, stop, wait_for

    mirrors = tmp_path / "mirrors"
    monkeypatch.setenv("SOURCES_GIT_DIR", str(mirrors))  # the workers' mirrors (their settings come from the env)
    settings.SOURCES_GIT_DIR = mirrors
    head = git_remote.commit(crash_tree(N_SYNC_FILES), "big tree")
    staff = make_user("ops@example.com", staff=True)
    project = make_project("crashsync")

    def followed(name: str) -> Dataset:
        ds = Dataset.objects.create(project=project, name=name, kind="code")
        parsed = spec.parse_source({"type": "git", "url": git_remote.url, "ref": "main"}, user=staff,
                                   dataset_kind="code")
        sync.set_source(user=None, dataset=ds, spec=parsed, interval_s=None)
        return ds

    crashed = followed("crashed")
    db_settings, queue = connection.settings_dict, settings.CELERY_TASK_DEFAULT_QUEUE
    first = start_worker("sync1", db_settings, queue)
    second = None
    try:
        job = sync.start_sync(dataset=crashed, trigger="manual")  # committed at once: the worker is told

        def mid_way():
            j = IngestJob.objects.get(pk=job.pk)
            assert j.status != "done", "the sync finished before the kill: raise CRASH_TEST_FILES"
            return j if j.files_total and 0.2 <= j.files_done / j.files_total <= 0.8 else None

        at_kill = wait_for(mid_way, timeout=300, interval=0.02, what="the sync to reach 20 %")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        job.refresh_from_db()
        partial = Chunk.objects.filter(dataset=crashed).count()
        partial_docs = Document.objects.filter(dataset=crashed).count()
        assert job.status == "running" and 0 < partial
        source = Source.objects.get(dataset=crashed)
        assert source.state == {} and source.last_sync_at is None  # nothing recorded: the re-run starts over
        wait_for(lambda: not runner_alive(job.pk), timeout=30, what="the dead runner's lock to be released")

        second = start_worker("sync2", db_settings, queue, ping=False)  # its start-up recovery re-queues the job

        def finished():
            assert second.poll() is None, "the second worker exited"
            return IngestJob.objects.filter(pk=job.pk, status__in=("done", "failed")).first()

        done = wait_for(finished, timeout=600, interval=0.2, what="the resumed sync to finish")
    finally:
        for proc in (first, second):
            if proc is not None:
                stop(proc)
    assert done.status == "done", done.error
    assert done.result["mode"] == "full" and done.result["to"] == head
    assert done.files_skipped == partial_docs and done.chunks_written + partial == Chunk.objects.filter(
        dataset=crashed).count()
    source.refresh_from_db()
    assert source.state["commit"] == head and source.consecutive_failures == 0 and source.last_success_at
    assert IngestJob.objects.filter(dataset=crashed).count() == 1  # resumed, not a second sync

    clean = followed("clean")
    ref = sync.start_sync(dataset=clean, trigger="manual", run_now=True)
    assert ref.status == "done" and ref.embeddings_computed == 0  # every vector was cached by the crashed run

    def rows(ds):
        return sorted(Chunk.objects.filter(dataset=ds).values_list("path", "ordinal", "start_line", "end_line",
                                                                   "text_hash"))

    assert rows(crashed) == rows(clean) and len(rows(clean)) >= N_SYNC_FILES
    paths = list(Document.objects.filter(dataset=crashed).values_list("path", flat=True))
    assert len(paths) == len(set(paths)) == N_SYNC_FILES

    wait_for(lambda: apply_outbox(index=edge_index) >= 0 and pending_outbox(index=edge_index) == 0,
             timeout=120, interval=0.5, what="the outbox to be applied")
    assert point_ids(edge_index, crashed.pk) == set(Chunk.objects.filter(dataset=crashed).values_list("pk", flat=True))
    assert point_ids(edge_index, clean.pk) == set(Chunk.objects.filter(dataset=clean).values_list("pk", flat=True))
    print(f"\nsync-crash: {N_SYNC_FILES} files, killed at {at_kill.files_done}/{at_kill.files_total} ({partial} chunks "
          f"committed); the resumed sync skipped {done.files_skipped} files and wrote {done.chunks_written} chunks")
