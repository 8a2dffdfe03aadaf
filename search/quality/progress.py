"""Progress bars for the quality work (evaluate, train, choose): on the terminal for a command, on the job's row
for an admin job.

Why one factory: the same evaluation runs from `manage.py evaluate` (a tqdm bar on stderr) and as an admin job in
the web process (no terminal: the admin's change list shows the row's stage and counts). The job sets a context
variable for its thread; every bar made while it is set reports to that row, whatever the caller's `enabled`.
"""
from __future__ import annotations

import contextvars
import io
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.utils import timezone
from tqdm import tqdm

from search.ingest.progress import Pace, pace
from search.models import QualityJob

_JOB: contextvars.ContextVar[str | None] = contextvars.ContextVar("quality_job", default=None)


class _JobBar(tqdm):
    """A tqdm bar that writes its description, count and total to a QualityJob row instead of a terminal.

    tqdm calls display() at most once per `mininterval` (and on close), so a job updates its row about once a
    second however fast the loop runs."""

    def __init__(self, *args: Any, job_id: str, **kwargs: Any) -> None:
        self._job_id = job_id
        self._stage_started_at = timezone.now()  # a bar is a stage: its rate is timed from here
        kwargs.update(file=io.StringIO(), mininterval=1.0, disable=False)
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        QualityJob.objects.filter(pk=self._job_id).update(
            stage=(self.desc or "").strip()[:100], done=int(self.n), total=int(self.total or 0),
            updated_at=timezone.now(), stage_started_at=self._stage_started_at)
        return True


def bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "", unit: str = "it",
        enabled: bool = True, leave: bool = True) -> tqdm:
    """A progress bar: the running job's row when a job is reporting, else tqdm on stderr (off unless `enabled`)."""
    job_id = _JOB.get()
    if job_id is not None:
        return _JobBar(iterable, total=total, desc=desc, unit=unit, job_id=job_id)
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, disable=not enabled, leave=leave)


@contextmanager
def reporting_to(job_id: str) -> Iterator[None]:
    """Every bar made inside reports to this job's row (the job runner wraps its work in this)."""
    token = _JOB.set(job_id)
    try:
        yield
    finally:
        _JOB.reset(token)


def quality_job_pace(job: QualityJob, *, now: datetime) -> Pace:
    """The current stage's items per second and time left (search.ingest.progress.pace), from the row's counters
    and stage_started_at: computed on read, so the admin's pages never write. A finished job has 0 left."""
    if job.status == QualityJob.Status.DONE:
        return Pace(eta_s=0.0, eta_at=job.finished_at)
    if job.status != QualityJob.Status.RUNNING:
        return Pace()
    return pace(done=job.done, total=job.total, started_at=job.stage_started_at or job.started_at, now=now)
