"""A running job's budget and its stop: the wall-clock deadline and the cancel flag, checked between entries.

Why cooperative, between entries: a job writes whole file batches, each in one transaction (search.ingest.writer),
so a job stopped between files, pages or documents leaves every document whole (its old version or its new one),
never half-written; a thread cannot be interrupted mid-statement anyway. The runner (search.ingest.jobs) installs
the budget for the job it runs and hands every job type a progress callback that checks it, and the writer calls
that callback once per entry of every reader (files, git blobs, crawled pages, pushed documents). Code that waits
inside one entry (a fetch) can bound its wait with `remaining_s()`.

Why here and not in the runner: the writer and the readers below the runner consult it, and the runner imports
them; this module imports only the models, so everyone can.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from django.conf import settings

from config.errors import ApiError
from search.models import IngestJob

# How often a running job reads its cancel flag (one indexed row read); the deadline is checked at every entry.
CANCEL_POLL_S = 1.0

Progress = Callable[[dict[str, Any]], None]


class JobStopped(ApiError):
    """A job stopped between entries: what it wrote before stays, whole; what follows was not written."""

    status_code = 409


class JobTimedOut(JobStopped):
    code = "job_timeout"


class JobCancelled(JobStopped):
    code = "job_cancelled"


class JobBudget:
    """One run of one job: its deadline (time.monotonic) and when its cancel flag is next read."""

    def __init__(self, *, job_id: str, max_s: float) -> None:
        self.job_id = job_id
        self.max_s = max_s
        self.deadline = time.monotonic() + max_s
        self._next_poll = 0.0  # the first check reads the flag: a cancel that came while the job was queued

    def check(self) -> None:
        """Raise JobTimedOut past the deadline, JobCancelled once a cancel was asked (or the job row is gone)."""
        now = time.monotonic()
        if now >= self.deadline:
            raise JobTimedOut(f"The job ran past its limit of {self.max_s:g} s and was stopped; what it wrote "
                              f"before stopping is kept, and the next run continues from there.")
        if now >= self._next_poll:
            self._next_poll = now + CANCEL_POLL_S
            flag = IngestJob.objects.filter(pk=self.job_id).values_list("cancel_requested", flat=True).first()
            if flag is None or flag:
                raise JobCancelled("The job was cancelled; what it wrote before stopping is kept.")


_current: ContextVar[JobBudget | None] = ContextVar("ingest_job_budget", default=None)


@contextlib.contextmanager
def job_budget(*, job_id: str, max_s: float | None = None) -> Iterator[JobBudget]:
    """Run the block as job `job_id` with a budget of `max_s` (INGEST_JOB_MAX_S) seconds from now."""
    budget = JobBudget(job_id=str(job_id), max_s=float(settings.INGEST_JOB_MAX_S if max_s is None else max_s))
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def check() -> None:
    """Stop the running job here if its deadline passed or it was cancelled; no-op outside a job."""
    budget = _current.get()
    if budget is not None:
        budget.check()


def remaining_s() -> float | None:
    """Seconds left to the running job (0 when passed), or None outside a job: a fetch bounds its wait by it.
    Read it in the job's thread (a context variable does not follow work handed to a thread pool)."""
    budget = _current.get()
    return None if budget is None else max(0.0, budget.deadline - time.monotonic())


def checking(progress: Progress | None) -> Progress:
    """The progress callback a job's handler gets: checks the budget at every entry, then reports as before."""
    def report(info: dict[str, Any]) -> None:
        check()
        if progress is not None:
            progress(info)
    return report
