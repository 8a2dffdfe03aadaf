"""Cached vectors are stored as they are, in the row: no compression attempt, no TOAST table.

Why: a 384-float vector is about 3 KB of float8, over Postgres's 2 KB TOAST threshold, so every cache row written
was run through pglz (which saves about a third on a float32 widened to float8) and moved to the TOAST table. The
compression was most of the database's time of an ingest's cache fill (about 0.2 ms a row, against 0.04 ms for the
rest of the insert), and reading a vector back had to fetch it from the TOAST table again. With the tuple target at
its maximum, a row up to about 8 KB (a vector of up to about 1,000 dimensions) stays in the heap page as it is; a
longer one goes to the TOAST table uncompressed (EXTERNAL). The cache takes about 40% more disk; the values and
every query are unchanged. Rows already written keep their compressed form until they are rewritten.
"""
from django.db import migrations

FORWARD = """
ALTER TABLE search_embeddingcache ALTER COLUMN vector SET STORAGE EXTERNAL;
ALTER TABLE search_embeddingcache SET (toast_tuple_target = 8160);
"""

BACKWARD = """
ALTER TABLE search_embeddingcache RESET (toast_tuple_target);
ALTER TABLE search_embeddingcache ALTER COLUMN vector SET STORAGE EXTENDED;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("inference", "0001_embedding_cache_from_search"),
    ]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
