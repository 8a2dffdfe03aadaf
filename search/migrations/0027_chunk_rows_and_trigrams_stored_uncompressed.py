"""A chunk row and a code file's trigram array are stored as they are: no compression attempt on the write path.

Why: a first ingest's writer spent about 8 % of its database time in pglz (docs/benchmarks/context.md). Two kinds of
value went through it:
- a chunk row over Postgres's 2 KB TOAST threshold (about one in five of a code corpus's: its text, its term ids and
  their weights together) had its largest values compressed until it fit. With the tuple target at its maximum, a row
  up to about 8 KB stays in its heap page as it is, so a search reads its text without decompressing it; a longer
  one is still compressed and moved out as before. About 10 % more heap for a code corpus.
- a code file's trigram array (several thousand int8, sorted: about 2.3 to 1 under pglz) is stored out of line
  uncompressed (EXTERNAL). Grep reads it only to recheck the files its GIN index names, a slice of a file at a time.
  The array takes about twice the disk.
The values and every query are unchanged; rows already written keep their form until they are rewritten.
"""
from django.db import migrations

FORWARD = """
ALTER TABLE search_chunk SET (toast_tuple_target = 8160);
ALTER TABLE search_codefile ALTER COLUMN trigrams SET STORAGE EXTERNAL;
"""

BACKWARD = """
ALTER TABLE search_codefile ALTER COLUMN trigrams SET STORAGE EXTENDED;
ALTER TABLE search_chunk RESET (toast_tuple_target);
"""


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0026_document_rows_dataset_key_and_rulebook_indexes"),
    ]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
