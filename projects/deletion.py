"""Deleting datasets (alone, or with their project) so that nothing is writing into them, or refusing cleanly.

Why a guard registry: ingest and sync jobs (search) write documents into datasets while they run; a delete that
collects a dataset's rows while a job inserts more ends in a foreign-key error. projects may not import search
(docs/architecture.md), so search registers its guard here when it starts (search.apps): it asks the datasets'
jobs to stop and waits for them, or raises 409. The delete then locks the dataset rows before collecting, so a
writer that starts meanwhile waits for the delete instead of racing it; should the database still refuse (a lock
wait past the statement timeout, a row that appeared regardless), the delete rolls back whole and answers 409
`dataset_busy`, never a 500 and never a half-deleted dataset.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from django.db import IntegrityError, OperationalError, transaction

from config.errors import Conflict
from projects.models import Dataset

Guard = Callable[..., None]  # guard(*, dataset_ids) raises an ApiError when the datasets may not be deleted now
_GUARDS: list[Guard] = []


def register_guard(guard: Guard) -> Guard:
    """Add a check run before any dataset is deleted (idempotent)."""
    if guard not in _GUARDS:
        _GUARDS.append(guard)
    return guard


@contextmanager
def deleting(*, dataset_ids: Collection[int]) -> Iterator[None]:
    """Run the block (the delete) once every guard let these datasets go, in one transaction holding their rows."""
    ids = sorted(int(i) for i in dataset_ids)
    for guard in _GUARDS:
        guard(dataset_ids=ids)
    try:
        with transaction.atomic():
            list(Dataset.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True))
            yield
    except (IntegrityError, OperationalError) as exc:  # a foreign key, a lock wait past the statement timeout
        raise _busy() from exc


def _busy() -> Conflict:
    return Conflict("The dataset is being written to right now; nothing was deleted. Try again in a moment.",
                    code="dataset_busy")
