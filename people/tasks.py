"""Celery tasks: card embeddings after save/import, and LLM refinement of why_matched."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="people.embed_cards", acks_late=True)
def embed_cards_task(parent_ids: list[str] | None = None, child_ids: list[str] | None = None) -> int:
    from people.indexing import embed_cards

    return embed_cards(parent_ids=parent_ids or [], child_ids=child_ids or [])


@shared_task(name="people.refine_why_matched", acks_late=True)
def refine_why_matched_task(search_id: str) -> int:
    from people.why import refine_with_llm

    return refine_with_llm(search_id=search_id)
