"""What a saved card needs besides its row: its full-text document now, its vector from Celery, and the
directory's vocabulary recounted for the values it added or took away (people/parsing/vocabulary.py).

Why the tsvector here and at once: the card must be findable lexically in the same transaction as the save
(one UPDATE in Postgres). Why here and not in Model.save: the models stay free of indexing, so models and
indexing do not import each other (indexing reads the models; this module wires both).
Why the vector on_commit: the worker must see the row; why a task: embedding a card costs
~10 ms of CPU that a request or an admin save should not wait for.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from people.models import ExperienceCard, ExperienceCardChild
from people.parsing.vocabulary import card_terms, refresh_terms
from people.retrieval.indexing import refresh_search_documents
from people.tasks import embed_cards_task

_VOCAB_FIELDS = ("company_norm", "team_norm", "city", "country", "domain", "search_phrases", "visibility")


def _enqueue(**ids: list[str]) -> None:
    try:
        embed_cards_task.delay(**ids)
    except Exception:  # noqa: BLE001 - broker down: the card stays searchable lexically; import/reembed fixes it

        logging.getLogger(__name__).warning("could not enqueue embedding for %s", ids)


@receiver(pre_save, sender=ExperienceCard)
def _parent_saving(sender: type[ExperienceCard], instance: ExperienceCard, **kwargs: object) -> None:
    """Remember the values the card carried before, so a company it no longer names is recounted too."""
    old = None
    if not instance._state.adding:
        old = sender.objects.filter(pk=instance.pk).values(*_VOCAB_FIELDS).first()
    instance._vocab_before = card_terms(old) if old else None


@receiver(post_save, sender=ExperienceCard)
def _parent_saved(sender: type[ExperienceCard], instance: ExperienceCard, **kwargs: object) -> None:
    refresh_search_documents(parent_ids=[instance.pk])
    before = getattr(instance, "_vocab_before", None)
    refresh_terms(changed=[card_terms(instance)] + ([before] if before else []))
    if instance.embedding is None:
        transaction.on_commit(lambda: _enqueue(parent_ids=[str(instance.pk)]))


@receiver(post_save, sender=ExperienceCardChild)
def _child_saved(sender: type[ExperienceCardChild], instance: ExperienceCardChild, **kwargs: object) -> None:
    refresh_search_documents(child_ids=[instance.pk])
    if instance.embedding is None:
        transaction.on_commit(lambda: _enqueue(child_ids=[str(instance.pk)]))


@receiver(post_delete, sender=ExperienceCard)
def _parent_deleted(sender: type[ExperienceCard], instance: ExperienceCard, **kwargs: object) -> None:
    refresh_terms(changed=[card_terms(instance)])
