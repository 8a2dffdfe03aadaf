"""Per-dataset document frequencies, so BM25's IDF is taken over exactly the datasets a query searches.

Why not Qdrant's IDF modifier: it takes IDF over the whole collection, which every tenant, every kind of
content and every evaluation corpus in the store shares, so one team's upload (or `evaluate --beir`) moved
everyone else's sparse scores. Here `search_termstat` holds (dataset, term) -> how many of the dataset's chunks
contain the term, and the row with term -1 holds the dataset's chunk count. Statement-level triggers on
search_chunk (migration 0010) keep it in the chunk rows' own transaction, whatever path writes or removes them
(the ingest runner, an FK cascade from a dataset or project, the admin's bulk delete). A query reads it once:
one index lookup for its few terms, no write.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from django.db import connection

from search.engine.sparse import SparseVec, encode_query, query_terms, term_index
from search.models import Dataset

CHUNK_COUNT_TERM = -1
# First key of the two-int advisory lock the search_chunk triggers take per dataset (migration 0010), and that
# lock_dataset_writes takes before a write touches any row.
DATASET_WRITE_LOCK = 8280693


def lock_dataset_writes(*, dataset_id: int) -> None:
    """Make this transaction the dataset's only chunk writer until it ends.

    Why before the first statement: the triggers take the same lock, but only after their statement ran, and by
    then two writers of one path have both deleted the old chunks and both insert ordinal 0 (one fails on
    `uniq_chunk_ordinal`). Taken first, the second writer waits, then replaces the first one's rows."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [DATASET_WRITE_LOCK, int(dataset_id) % 2147483647])


def project_chunk_count(*, project_id: int) -> int:
    """The chunks of a project's datasets, summed from their term -1 rows: one index lookup per dataset instead of
    a count of the chunk rows, and as exact (the triggers keep it in the writing transaction)."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT coalesce(sum(s.df), 0) FROM search_termstat s JOIN {Dataset._meta.db_table} d "
                    "ON d.id = s.dataset_id WHERE d.project_id = %s AND s.term = %s", [project_id, CHUNK_COUNT_TERM])
        return int(cur.fetchone()[0])


def idf_weights(*, terms: Collection[int], dataset_ids: Sequence[int]) -> dict[int, float]:
    """term -> ln(1 + (N - df + 0.5) / (df + 0.5)) with N and df summed over `dataset_ids` (the formula of
    Qdrant's IDF modifier, so a single-dataset store ranks as before). Terms no searched chunk has are absent."""
    if not terms or not dataset_ids:
        return {}
    with connection.cursor() as cur:
        cur.execute("SELECT term, sum(df) FROM search_termstat WHERE dataset_id = ANY(%s) AND term = ANY(%s) "
                    "GROUP BY term", [[int(d) for d in dataset_ids], [CHUNK_COUNT_TERM, *map(int, terms)]])
        df = {int(t): int(n) for t, n in cur.fetchall()}
    n = df.pop(CHUNK_COUNT_TERM, 0)
    return {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items() if d > 0}


def weighted_query(text: str, *, kinds: Collection[str], dataset_ids: Sequence[int]) -> SparseVec:
    """The sparse query vector for `text` over these datasets: analysed like the searched kinds' documents,
    each term weighted by its IDF over the searched datasets only."""
    terms = {term_index(t) for t in query_terms(text, kinds=kinds)}
    return encode_query(text, kinds=kinds, idf=idf_weights(terms=terms, dataset_ids=dataset_ids))

