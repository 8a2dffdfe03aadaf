"""A project's own datasets as its members manage them: changes and deletion (search.ingest.datasets adds the counts).

Why here and not in the page: the settings page, the API and the admin must apply the same rule
("editors and owners of the dataset's project delete content") and the delete must be the one that
keeps the vector index exact (a plain ORM delete; the search_chunk trigger queues the index deletes).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from config.errors import BadInput, Conflict, Forbidden
from projects import policy
from projects.deletion import deleting
from projects.models import Dataset

if TYPE_CHECKING:
    from accounts.models import User

WRITERS = policy.WRITERS  # the page's "can edit" (projects/pages.py)


def delete_dataset(*, user: User, dataset: Dataset) -> None:
    """Editors and owners of the dataset's project delete it with its documents, chunks and jobs.

    A non-member is answered 404 (the dataset's existence does not leak), a viewer 403. Projects it was
    shared into lose it with the share rows (CASCADE)."""
    policy.authorize("dataset.delete", user=user, project=dataset.project, what="Dataset")
    with deleting(dataset_ids=[dataset.pk]):  # its jobs stop first, or 409 (projects.deletion)
        dataset.delete()


def update_dataset(*, user: User, dataset: Dataset, name: str | None = None, description: str | None = None,
                   is_global: bool | None = None) -> Dataset:
    """Editors and owners rename or describe a dataset; only staff change `is_global` (every project sees it)."""
    policy.authorize("dataset.update", user=user, project=dataset.project, what="Dataset")
    if is_global is not None and is_global != dataset.is_global and not user.is_staff:
        raise Forbidden("Only staff can make a dataset global or local.", field="is_global")
    if name is not None:
        name = name.strip()
        if not name:
            raise BadInput("name may not be blank.", field="name")
        dataset.name = name
    if description is not None:
        dataset.description = description
    if is_global is not None:
        dataset.is_global = is_global
    try:
        with transaction.atomic():
            dataset.save(update_fields=["name", "description", "is_global"])
    except IntegrityError:
        raise Conflict(f"This project already has a dataset named {name!r}.", field="name",
                       code="dataset_exists") from None
    return dataset
