"""Celery tasks: card embeddings after save/import, and LLM refinement of why_matched."""
from __future__ import annotations

from celery import shared_task
from django.db.models import F

from people.models import ImportJob
from people.retrieval.indexing import embed_cards
from people.service.why import refine_with_llm


@shared_task(name="people.embed_cards", acks_late=True)
def embed_cards_task(parent_ids: list[str] | None = None, child_ids: list[str] | None = None,
                     job_id: str | None = None) -> int:
    """Embed the given cards; with an import's job id, advance its progress (shown in the admin)."""
    n = embed_cards(parent_ids=parent_ids or [], child_ids=child_ids or [])
    if job_id:
        ImportJob.objects.filter(pk=job_id).update(embed_done=F("embed_done") + len(parent_ids or [])
                                                   + len(child_ids or []))
    return n


@shared_task(name="people.refine_why_matched", acks_late=True)
def refine_why_matched_task(search_id: str) -> int:
    return refine_with_llm(search_id=search_id)
