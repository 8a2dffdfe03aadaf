"""Per-dataset document frequencies for BM25 (search.term_stats), kept by triggers on search_chunk.

Chunk.terms holds the distinct sparse term indices of the chunk (search.engine.sparse.document_term_ids); the
statement-level triggers below add and subtract them per dataset in the same transaction as the chunk rows,
whatever path writes or removes them, as migration 0002 does for the index outbox. Term -1 counts the
dataset's chunks. search_termstat has no foreign key on purpose: a dataset's rows reach zero and are deleted by
the chunk-delete trigger as its chunks cascade away, in whatever order the collector deletes them.

Concurrent writers of one dataset would otherwise lock its term rows in different orders (an insert's sorted
upsert against a delete's hash-ordered update) and deadlock; each trigger first takes a transaction-level
advisory lock per dataset it touches (class 8280693, "termstat"; datasets in id order), so writers of one
dataset's statistics take turns until commit, and writers of different datasets never wait on each other.

Existing chunks get their terms here (with the analyzer of this release), before the triggers exist, and the
table is then filled in one aggregate.
"""
import django.contrib.postgres.fields
from django.db import migrations, models

BATCH = 2000

TABLE = r"""
CREATE TABLE search_termstat (
    dataset_id bigint NOT NULL,
    term bigint NOT NULL,
    df integer NOT NULL,
    PRIMARY KEY (dataset_id, term)
);
"""

FILL_AND_TRIGGERS = r"""
INSERT INTO search_termstat (dataset_id, term, df)
SELECT dataset_id, term, count(*) FROM (
    SELECT c.dataset_id, t AS term FROM search_chunk c, unnest(c.terms) t
    UNION ALL
    SELECT c.dataset_id, -1 FROM search_chunk c
) x GROUP BY dataset_id, term;

CREATE OR REPLACE FUNCTION search_chunk_terms_added() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(8280693, d) FROM (
        SELECT DISTINCT (dataset_id % 2147483647)::int AS d FROM added_chunks ORDER BY 1) x;
    INSERT INTO search_termstat AS s (dataset_id, term, df)
    SELECT dataset_id, term, count(*) FROM (
        SELECT n.dataset_id, t AS term FROM added_chunks n, unnest(n.terms) t
        UNION ALL
        SELECT n.dataset_id, -1 FROM added_chunks n
    ) x GROUP BY dataset_id, term ORDER BY dataset_id, term
    ON CONFLICT (dataset_id, term) DO UPDATE SET df = s.df + EXCLUDED.df;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION search_chunk_terms_removed() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(8280693, d) FROM (
        SELECT DISTINCT (dataset_id % 2147483647)::int AS d FROM removed_chunks ORDER BY 1) x;
    UPDATE search_termstat s SET df = s.df - d.n FROM (
        SELECT dataset_id, term, count(*) AS n FROM (
            SELECT o.dataset_id, t AS term FROM removed_chunks o, unnest(o.terms) t
            UNION ALL
            SELECT o.dataset_id, -1 FROM removed_chunks o
        ) x GROUP BY dataset_id, term
    ) d WHERE s.dataset_id = d.dataset_id AND s.term = d.term;
    DELETE FROM search_termstat s USING (
        SELECT DISTINCT o.dataset_id, t AS term FROM removed_chunks o, unnest(o.terms || (-1)::bigint) t
    ) d WHERE s.dataset_id = d.dataset_id AND s.term = d.term AND s.df <= 0;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION search_chunk_terms_changed() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(8280693, d) FROM (
        SELECT DISTINCT (dataset_id % 2147483647)::int AS d FROM old_chunks
        UNION SELECT DISTINCT (dataset_id % 2147483647)::int FROM new_chunks ORDER BY 1) x;
    INSERT INTO search_termstat AS s (dataset_id, term, df)
    SELECT dataset_id, term, sum(n) FROM (
        SELECT o.dataset_id, t AS term, -1 AS n FROM old_chunks o, unnest(o.terms || (-1)::bigint) t
        UNION ALL
        SELECT c.dataset_id, t, 1 FROM new_chunks c, unnest(c.terms || (-1)::bigint) t
    ) x GROUP BY dataset_id, term HAVING sum(n) <> 0 ORDER BY dataset_id, term
    ON CONFLICT (dataset_id, term) DO UPDATE SET df = s.df + EXCLUDED.df;
    DELETE FROM search_termstat s USING (
        SELECT DISTINCT o.dataset_id, t AS term FROM old_chunks o, unnest(o.terms || (-1)::bigint) t
    ) d WHERE s.dataset_id = d.dataset_id AND s.term = d.term AND s.df <= 0;
    RETURN NULL;
END
$fn$;

-- TRUNCATE fires no row-set trigger; without this the statistics of truncated chunks would stay behind
CREATE OR REPLACE FUNCTION search_chunk_terms_truncated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    TRUNCATE search_termstat;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER search_chunk_terms_truncate AFTER TRUNCATE ON search_chunk
FOR EACH STATEMENT EXECUTE FUNCTION search_chunk_terms_truncated();
CREATE TRIGGER search_chunk_terms_insert AFTER INSERT ON search_chunk
REFERENCING NEW TABLE AS added_chunks FOR EACH STATEMENT EXECUTE FUNCTION search_chunk_terms_added();
CREATE TRIGGER search_chunk_terms_delete AFTER DELETE ON search_chunk
REFERENCING OLD TABLE AS removed_chunks FOR EACH STATEMENT EXECUTE FUNCTION search_chunk_terms_removed();
CREATE TRIGGER search_chunk_terms_update AFTER UPDATE ON search_chunk
REFERENCING OLD TABLE AS old_chunks NEW TABLE AS new_chunks FOR EACH STATEMENT
EXECUTE FUNCTION search_chunk_terms_changed();
"""

REVERSE = r"""
DROP TRIGGER IF EXISTS search_chunk_terms_insert ON search_chunk;
DROP TRIGGER IF EXISTS search_chunk_terms_delete ON search_chunk;
DROP TRIGGER IF EXISTS search_chunk_terms_update ON search_chunk;
DROP TRIGGER IF EXISTS search_chunk_terms_truncate ON search_chunk;
DROP FUNCTION IF EXISTS search_chunk_terms_truncated();
DROP FUNCTION IF EXISTS search_chunk_terms_added();
DROP FUNCTION IF EXISTS search_chunk_terms_removed();
DROP FUNCTION IF EXISTS search_chunk_terms_changed();
DROP TABLE IF EXISTS search_termstat;
"""


def backfill_terms(apps, schema_editor):
    from search.engine.sparse import document_term_ids, sparse_document_text

    Chunk = apps.get_model("search", "Chunk")
    last = 0
    while True:
        rows = list(Chunk.objects.filter(pk__gt=last).order_by("pk")
                    .only("pk", "kind", "text", "path", "symbol", "heading_path")[:BATCH])
        if not rows:
            return
        for c in rows:
            c.terms = document_term_ids(sparse_document_text(text=c.text, path=c.path, symbol=c.symbol,
                                                             heading_path=c.heading_path), kind=c.kind)
        Chunk.objects.bulk_update(rows, ["terms"])
        last = rows[-1].pk


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0009_traversal_aliases_similar_edges"),
    ]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="terms",
            field=django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), blank=True,
                                                            default=list, size=None),
        ),
        migrations.RunSQL(TABLE, reverse_sql="DROP TABLE IF EXISTS search_termstat;"),
        migrations.RunPython(backfill_terms, migrations.RunPython.noop),
        migrations.RunSQL(FILL_AND_TRIGGERS, reverse_sql=REVERSE),
    ]
