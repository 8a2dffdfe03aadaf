"""A project's datasets as its members manage them: the list with content counts, changes, deletion, usage.

Why here: datasets are search's rows (search.models), and so are the counts. The rule for who may change one is
projects' (projects.policy), as is the deletion guard's registry (projects.deletion), which this module fills:
a delete stops the datasets' jobs first and holds their rows, so it keeps the vector index exact (a plain ORM
delete; the search_chunk trigger queues the index deletes).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from config.errors import BadInput, Conflict, Forbidden, NotFound
from projects import policy
from projects.deletion import deleting
from projects.models import Project
from projects.quotas import Usage
from search.engine.term_stats import project_chunk_count
from search.ingest.cancel import stop_dataset_jobs
from search.models import Chunk, Dataset, Document

if TYPE_CHECKING:
    from collections.abc import Collection

    from django.db.models import Model

    from accounts.models import User

WRITERS = policy.WRITERS  # the settings page's "can edit"


def _count_of(model: type[Model], dataset_field: str = "dataset") -> Coalesce:
    rows = (model.objects.filter(**{dataset_field: OuterRef("pk")}).order_by().values(dataset_field)
            .annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(rows), 0)


def datasets_overview(*, project: Project) -> list[Dataset]:
    """The project's own datasets, each with `document_count` and `chunk_count` (one query)."""
    return list(Dataset.objects.filter(project=project)
                .annotate(document_count=_count_of(Document), chunk_count=_count_of(Chunk))
                .order_by("name"))


def own_dataset(*, user: User, project: Project, dataset_id: int) -> Dataset:
    """One of the project's own datasets, with its counts; 404 for any other id (no existence leak)."""
    dataset = (Dataset.objects.filter(pk=dataset_id, project=project)
               .annotate(document_count=_count_of(Document), chunk_count=_count_of(Chunk)).first())
    if dataset is None:
        raise NotFound("Dataset not found.")
    return dataset


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


def _doomed(*, dataset_ids: Collection[int], project_ids: Collection[int]) -> Q:
    return Q(pk__in=list(dataset_ids)) | Q(project_id__in=list(project_ids))


def stop_jobs_before_delete(*, dataset_ids: Collection[int], project_ids: Collection[int]) -> None:
    """projects.deletion's guard: the jobs of these datasets, and of these projects' datasets, stop first (or 409)."""
    ids = list(Dataset.objects.filter(_doomed(dataset_ids=dataset_ids, project_ids=project_ids))
               .values_list("pk", flat=True))
    stop_dataset_jobs(dataset_ids=ids)


def lock_before_delete(*, dataset_ids: Collection[int], project_ids: Collection[int]) -> None:
    """projects.deletion's lock: the dataset rows, held until the delete commits, so a writer waits for it."""
    list(Dataset.objects.select_for_update().filter(_doomed(dataset_ids=dataset_ids, project_ids=project_ids))
         .values_list("pk", flat=True))


def usage_of(project: Project) -> Usage:
    """projects.quotas' counter: documents, chunks and source bytes over the project's own datasets (two aggregate
    queries).

    The chunks are the datasets' chunk counts that the term statistics keep (search.engine.term_stats, term -1),
    exact in the writer's own transaction: an ingest checks the quota twice per batch of files, and counting the
    project's chunk rows each time made a first ingest's checks grow with everything already written."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*), coalesce(sum(d.size_bytes), 0) FROM {Document._meta.db_table} d "
                    f"JOIN {Dataset._meta.db_table} ds ON ds.id = d.dataset_id WHERE ds.project_id = %s",
                    [project.pk])
        docs, size = cur.fetchone()
    return Usage(documents=int(docs), chunks=project_chunk_count(project_id=project.pk), bytes=int(size))
