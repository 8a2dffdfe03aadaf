"""Which dense model each dataset is searched and written with (docs/architecture.md, "Per-dataset embedding models").

Why per dataset: a model adapted to one tenant's content (search.quality.adaptation) must change that tenant's
results and nobody else's, so the model is a property of the dataset, like its term statistics. The configured
EMBEDDING_MODEL is the empty name; an adapted model is a folder under var/models/embeddings named by
Dataset.embedding_model. Each model has its own collections in the store (the index is keyed by model id) and its
own outbox rows, so switching a dataset re-embeds into the new model's collections while queries keep reading the
old ones; the switch is one row update once the new vectors are in (search.quality.adoption).
"""
from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q

from inference.encoders import adapted_model_path, dense_model_id, embedding_dim
from search.models import Dataset

CONFIGURED = ""  # the configured EMBEDDING_MODEL's name here


def serving_groups(*, dataset_ids: Iterable[int]) -> dict[str, list[int]]:
    """model name -> the datasets searched with it, "" (the configured model) first; one query."""
    ids = sorted({int(i) for i in dataset_ids})
    groups: dict[str, list[int]] = {}
    for pk, name in Dataset.objects.filter(pk__in=ids).order_by("pk").values_list("pk", "embedding_model"):
        groups.setdefault(name or CONFIGURED, []).append(pk)
    return dict(sorted(groups.items(), key=lambda kv: kv[0] != CONFIGURED))


def writing_models(*, dataset: Dataset) -> list[str]:
    """The models a new chunk of this dataset is embedded and queued with: the one it is searched with, and the one
    it is being switched to (so the switch does not miss what arrives meanwhile)."""
    names = [dataset.embedding_model or CONFIGURED]
    if dataset.embedding_model_next and dataset.embedding_model_next not in names:
        names.append(dataset.embedding_model_next)
    return names


def models_in_use() -> list[str]:
    """Every adapted model some live dataset is searched or written with: the stores the applier keeps current."""
    live = Dataset.objects.filter(is_evaluation=False)
    names = set(live.exclude(embedding_model="").values_list("embedding_model", flat=True))
    names |= set(live.filter(~Q(embedding_model_next="")).values_list("embedding_model_next", flat=True))
    return sorted(names)


def model_arg(name: str) -> str | None:
    """What the encoders take for `name`: None for the configured model, else the adapted model's folder."""
    return None if name == CONFIGURED else adapted_model_path(name)


def model_id_of(name: str) -> str:
    """The id vectors and collections are keyed by (an adapted model's id is its folder name, i.e. `name`)."""
    return dense_model_id(model=model_arg(name))


def dim_of(name: str) -> int:
    return embedding_dim(model=model_arg(name))
