"""manage.py ingest handing its job to Celery: it says so when no worker would ever take it, and a cancelled job
ends the command instead of leaving it waiting (a real Redis queue; no worker is started)."""
from __future__ import annotations

import threading
import time

from django.core.management import CommandError, call_command
from django.db import connection

from search.management.commands import ingest as command
from search.models import IngestJob


def test_a_queued_job_no_worker_takes_is_explained_and_cancelling_it_ends_the_command(transactional_db, tmp_path,
                                                                                     monkeypatch, capsys):
    from config.celery import app

    monkeypatch.setattr(command, "WORKER_HINT_S", 0.0)
    (tmp_path / "a.py").write_text("def answer():\n    return 42\n")
    ended: dict[str, str] = {}

    def run() -> None:
        try:
            call_command("ingest", str(tmp_path), "--project", "p", "--dataset", "d")
        except CommandError as exc:
            ended["error"] = str(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while "no Celery worker is running" not in capsys.readouterr().err:
            assert time.monotonic() < deadline, "the command never said why it waits"
            time.sleep(0.2)
        job = IngestJob.objects.get()
        assert job.status == IngestJob.Status.PENDING and thread.is_alive()
        IngestJob.objects.filter(pk=job.pk).update(status=IngestJob.Status.CANCELLED)
        thread.join(30)
        assert not thread.is_alive()
        assert ended["error"] == f"ingest job {job.pk} was cancelled"
    finally:
        IngestJob.objects.filter(status=IngestJob.Status.PENDING).update(status=IngestJob.Status.CANCELLED)
        thread.join(30)
        app.control.purge()  # the queued message: no later test's worker should take it
