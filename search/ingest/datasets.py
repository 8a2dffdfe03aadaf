"""A project's own datasets with their content counts (documents, chunks): the settings page and the API.

Why in search: the counts are of search's rows. projects owns the datasets and the rules for changing them
(projects.datasets); search, above it, adds what it holds for each.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from config.errors import NotFound
from projects.models import Project
from search.models import Chunk, Dataset, Document

if TYPE_CHECKING:
    from django.db.models import Model

    from accounts.models import User


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
