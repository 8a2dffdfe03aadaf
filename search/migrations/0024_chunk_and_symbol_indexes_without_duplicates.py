"""The indexes every chunk and symbol row wrote but no query read: the LIKE (varchar_pattern_ops) twins of
text_hash, ruleset_id and book_id (compared by equality and IN only), and single-column indexes on foreign keys
that a composite index already leads with (chunk: document by uniq_chunk_ordinal, dataset by the (dataset, path)
indexes; symbol and symbolref: dataset by *_dataset_name, document by symbol_document_line and
symbolref_document_kind).

Why: a first ingest writes a chunk row and about six symbol rows per chunk; each index is one more B-tree insert
per row in the database (measured: about 15% of the chunk COPY's and 25% of the symbol references' database time).
The equality indexes are kept under shorter names (chunk_text_hash, chunk_ruleset_id, chunk_book_id, declared in
the models' Meta so no LIKE twin comes back); the rows and every query's answer are unchanged.
"""
import django.db.models.deletion
from django.db import migrations, models

FORWARD = """
DROP INDEX IF EXISTS search_chunk_text_hash_56296be4_like;
DROP INDEX IF EXISTS search_chunk_ruleset_id_7dd63f68_like;
DROP INDEX IF EXISTS search_chunk_book_id_0abc0e61_like;
DROP INDEX IF EXISTS search_chunk_document_id_81fc35b9;
DROP INDEX IF EXISTS search_chunk_dataset_id_f2ecbb85;
DROP INDEX IF EXISTS search_symbol_dataset_id_0e9bc342;
DROP INDEX IF EXISTS search_symbol_document_id_15a366f6;
DROP INDEX IF EXISTS search_symbolref_dataset_id_5a75e24b;
DROP INDEX IF EXISTS search_symbolref_document_id_c707f4a7;
ALTER INDEX search_chunk_text_hash_56296be4 RENAME TO chunk_text_hash;
ALTER INDEX search_chunk_ruleset_id_7dd63f68 RENAME TO chunk_ruleset_id;
ALTER INDEX search_chunk_book_id_0abc0e61 RENAME TO chunk_book_id;
"""

BACKWARD = """
ALTER INDEX chunk_text_hash RENAME TO search_chunk_text_hash_56296be4;
ALTER INDEX chunk_ruleset_id RENAME TO search_chunk_ruleset_id_7dd63f68;
ALTER INDEX chunk_book_id RENAME TO search_chunk_book_id_0abc0e61;
CREATE INDEX search_chunk_text_hash_56296be4_like ON search_chunk (text_hash varchar_pattern_ops);
CREATE INDEX search_chunk_ruleset_id_7dd63f68_like ON search_chunk (ruleset_id varchar_pattern_ops);
CREATE INDEX search_chunk_book_id_0abc0e61_like ON search_chunk (book_id varchar_pattern_ops);
CREATE INDEX search_chunk_document_id_81fc35b9 ON search_chunk (document_id);
CREATE INDEX search_chunk_dataset_id_f2ecbb85 ON search_chunk (dataset_id);
CREATE INDEX search_symbol_dataset_id_0e9bc342 ON search_symbol (dataset_id);
CREATE INDEX search_symbol_document_id_15a366f6 ON search_symbol (document_id);
CREATE INDEX search_symbolref_dataset_id_5a75e24b ON search_symbolref (dataset_id);
CREATE INDEX search_symbolref_document_id_c707f4a7 ON search_symbolref (document_id);
"""


def _fk(to: str, related_name: str) -> models.ForeignKey:
    return models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name=related_name,
                             to=to)


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0023_document_originals"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="chunk", name="book_id",
                                      field=models.CharField(blank=True, default="", max_length=100)),
                migrations.AlterField(model_name="chunk", name="dataset", field=_fk("search.dataset", "chunks")),
                migrations.AlterField(model_name="chunk", name="document", field=_fk("search.document", "chunks")),
                migrations.AlterField(model_name="chunk", name="ruleset_id",
                                      field=models.CharField(blank=True, default="", max_length=100)),
                migrations.AlterField(model_name="chunk", name="text_hash", field=models.CharField(max_length=64)),
                migrations.AlterField(model_name="symbol", name="dataset", field=_fk("search.dataset", "+")),
                migrations.AlterField(model_name="symbol", name="document", field=_fk("search.document", "symbols")),
                migrations.AlterField(model_name="symbolref", name="dataset", field=_fk("search.dataset", "+")),
                migrations.AlterField(model_name="symbolref", name="document",
                                      field=_fk("search.document", "symbol_refs")),
                migrations.AddIndex(model_name="chunk",
                                    index=models.Index(fields=["text_hash"], name="chunk_text_hash")),
                migrations.AddIndex(model_name="chunk",
                                    index=models.Index(fields=["ruleset_id"], name="chunk_ruleset_id")),
                migrations.AddIndex(model_name="chunk", index=models.Index(fields=["book_id"], name="chunk_book_id")),
            ],
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
        ),
    ]
