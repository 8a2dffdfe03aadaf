"""Deleting datasets (alone, or with their project) so that nothing is writing into them, or refusing cleanly.

Why a registry: ingest and sync jobs (search) write documents into datasets while they run; a delete that
collects a dataset's rows while a job inserts more ends in a foreign-key error. Datasets are search's and projects
may not import search (docs/architecture.md), so search registers here when it starts (search.apps) a guard, which
asks the jobs to stop and waits for them or raises 409, and a lock, which takes the dataset rows inside the
delete's transaction so that a writer starting meanwhile waits for the delete instead of racing it. Should the
database still refuse (a lock wait past the statement timeout, a row that appeared regardless), the delete rolls
back whole and answers 409 `dataset_busy`, never a 500 and never a half-deleted dataset.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from django.db import IntegrityError, OperationalError, transaction

from config.errors import Conflict

# guard(*, dataset_ids, project_ids) raises an ApiError when these may not be deleted now (before the transaction);
# lock(*, dataset_ids, project_ids) locks the rows the delete will collect (inside it)
Guard = Callable[..., None]
_GUARDS: list[Guard] = []
_LOCKS: list[Guard] = []


def register_guard(guard: Guard, *, lock: Guard | None = None) -> Guard:
    """Add a check run before any dataset or project is deleted, and its lock (idempotent)."""
    if guard not in _GUARDS:
        _GUARDS.append(guard)
    if lock is not None and lock not in _LOCKS:
        _LOCKS.append(lock)
    return guard


@contextmanager
def deleting(*, dataset_ids: Collection[int] = (), project_ids: Collection[int] = ()) -> Iterator[None]:
    """Run the block (the delete) once every guard let these datasets (and the datasets of these projects) go, in
    one transaction holding their rows."""
    ids = sorted(int(i) for i in dataset_ids)
    projects = sorted(int(i) for i in project_ids)
    for guard in _GUARDS:
        guard(dataset_ids=ids, project_ids=projects)
    try:
        with transaction.atomic():
            for lock in _LOCKS:
                lock(dataset_ids=ids, project_ids=projects)
            yield
    except (IntegrityError, OperationalError) as exc:  # a foreign key, a lock wait past the statement timeout
        raise _busy() from exc


def _busy() -> Conflict:
    return Conflict("The dataset is being written to right now; nothing was deleted. Try again in a moment.",
                    code="dataset_busy")
