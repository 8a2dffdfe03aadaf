"""Keeping `search_document` and `embedding` current.

Why SQL for search_document: one UPDATE builds the weighted tsvector for a whole
bulk load (or one saved card) inside Postgres; Python never tokenises.
Why COPY for vectors: bulk_create of 384-d vectors is ~50x slower.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from django.db import connection, transaction

from inference.encoders import embed_cached
from people.models import ExperienceCard, ExperienceCardChild

PARENT_DOC_SQL = """
UPDATE people_experiencecard SET search_document =
    setweight(to_tsvector('english', coalesce(title, '') || ' ' || coalesce(company_norm, '') || ' ' ||
                                      coalesce(team_norm, '')), 'A') ||
    setweight(to_tsvector('english', array_to_string(search_phrases, ' ')), 'A') ||
    setweight(to_tsvector('english', coalesce(summary, '')), 'B') ||
    setweight(to_tsvector('english', coalesce(intent_primary, '') || ' ' || coalesce(domain, '') || ' ' ||
                                      coalesce(sub_domain, '') || ' ' || coalesce(location_text, '') || ' ' ||
                                      coalesce(city, '')), 'C')
"""
CHILD_DOC_SQL = """
UPDATE people_experiencecardchild SET search_document =
    setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
    setweight(to_tsvector('english', array_to_string(search_phrases, ' ')), 'A') ||
    setweight(to_tsvector('english', coalesce(summary, '')), 'B')
"""


def refresh_search_documents(*, parent_ids: Sequence | None = None, child_ids: Sequence | None = None,
                             person_ids: Sequence | None = None) -> None:
    with connection.cursor() as cur:
        if parent_ids:
            cur.execute(PARENT_DOC_SQL + " WHERE id = ANY(%s)", [list(parent_ids)])
        if child_ids:
            cur.execute(CHILD_DOC_SQL + " WHERE id = ANY(%s)", [list(child_ids)])
        if person_ids:
            cur.execute(PARENT_DOC_SQL + " WHERE person_id = ANY(%s)", [list(person_ids)])
            cur.execute(CHILD_DOC_SQL + " WHERE person_id = ANY(%s)", [list(person_ids)])


def vector_literal(vec: Iterable[float]) -> str:
    return "[" + ",".join(f"{float(x):.6f}" for x in vec) + "]"


def copy_vectors(*, table: str, ids: Sequence, vectors: np.ndarray) -> None:
    """Write vectors for existing rows: COPY into a temp table, then one UPDATE ... FROM."""
    assert table in {"people_experiencecard", "people_experiencecardchild"}
    if not len(ids):
        return
    dim = int(vectors.shape[1])  # the embedding model's dimension, whatever model is configured
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS _vec_load (id uuid PRIMARY KEY, v vector({dim})) ON COMMIT DROP")
        cur.execute("TRUNCATE _vec_load")
        with cur.copy("COPY _vec_load (id, v) FROM STDIN") as cp:
            for i, v in zip(ids, vectors, strict=True):
                cp.write_row((str(i), vector_literal(v)))
        cur.execute(f"UPDATE {table} t SET embedding = l.v FROM _vec_load l WHERE t.id = l.id")
        cur.execute("DROP TABLE _vec_load")


def embed_cards(*, parent_ids: Sequence = (), child_ids: Sequence = (), show_progress: bool = False) -> int:
    """Compute and store embeddings for the given cards (what the Celery task runs)."""
    n = 0
    for model, ids, table in ((ExperienceCard, parent_ids, "people_experiencecard"),
                              (ExperienceCardChild, child_ids, "people_experiencecardchild")):
        if not ids:
            continue
        cards = list(model.objects.filter(pk__in=list(ids)).only("id", "title", "summary", "search_phrases"))
        if not cards:
            continue
        vecs = embed_cached([c.embedding_text() for c in cards], show_progress=show_progress)
        copy_vectors(table=table, ids=[c.pk for c in cards], vectors=vecs)
        n += len(cards)
    return n
