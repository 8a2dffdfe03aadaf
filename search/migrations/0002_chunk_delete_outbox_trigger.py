"""Every removed Chunk row queues its index delete in the same transaction, whatever removed it.

Why a trigger: chunks leave by many paths (the ingest runner, an instance or
queryset delete, the admin's bulk "delete selected", the FK cascade from a
Document, Dataset or Project, raw SQL). A Python signal would have to be
remembered by each of them and would stop Django's collector from
fast-deleting; a statement-level AFTER DELETE trigger with a transition table
sees every path, costs one set-based INSERT ... SELECT per DELETE statement,
and commits or rolls back with the delete itself.

Which model ids get a row: the applier of a store reads only the outbox rows
of its own embedding model (search.engine.applier.apply_outbox filters on model_id),
and SQL cannot ask Python which model is configured. A store of model M can
hold a point for chunk c only if it was written by the applier (which needs an
outbox row (c, M)) or by a rebuild (which needs an EmbeddingCache row for M:
build_points skips chunks without a vector). So the trigger writes one delete
per removed chunk for

  * every model id present in search_embeddingcache (found with a loose index
    scan over the (model_id, text_hash) unique index: a few probes, however
    large the cache), and
  * every model id of an earlier outbox row for that chunk (indexed on
    chunk_id), which still covers a model whose cached vectors were wiped.

That set always contains the configured model once anything was embedded with
it, and any extra row is harmless: the applier re-reads each chunk id and
deletes a point that is already gone as a no-op. Rows take clock_timestamp()
as created_at, the moment their id is drawn, as Django's auto_now_add does,
which is what the applier's young-gap rule (GAP_GRACE_S) reasons about.

TRUNCATE does not fire it (no row set); `manage.py reconcile_index --fix`
repairs an index after one.
"""
from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION search_chunk_queue_index_deletes() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO search_indexoutbox (op, chunk_id, model_id, created_at)
    SELECT 'delete', k.chunk_id, k.model_id, clock_timestamp()
    FROM (
        SELECT o.id AS chunk_id, m.model_id
        FROM removed_chunks o
        CROSS JOIN (
            WITH RECURSIVE models(model_id) AS (
                (SELECT e.model_id FROM search_embeddingcache e ORDER BY e.model_id LIMIT 1)
                UNION ALL
                SELECT (SELECT e.model_id FROM search_embeddingcache e
                        WHERE e.model_id > models.model_id ORDER BY e.model_id LIMIT 1)
                FROM models WHERE models.model_id IS NOT NULL
            )
            SELECT model_id FROM models WHERE model_id IS NOT NULL
        ) m
        UNION
        SELECT x.chunk_id, x.model_id
        FROM search_indexoutbox x
        WHERE x.chunk_id IN (SELECT id FROM removed_chunks)
    ) k
    ORDER BY k.chunk_id, k.model_id;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER search_chunk_index_deletes
AFTER DELETE ON search_chunk
REFERENCING OLD TABLE AS removed_chunks
FOR EACH STATEMENT
EXECUTE FUNCTION search_chunk_queue_index_deletes();
"""

REVERSE = r"""
DROP TRIGGER IF EXISTS search_chunk_index_deletes ON search_chunk;
DROP FUNCTION IF EXISTS search_chunk_queue_index_deletes();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(FORWARD, reverse_sql=REVERSE),
    ]
