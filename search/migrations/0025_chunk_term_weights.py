"""Chunk.term_weights: the BM25 document weights of a chunk's `terms`, stored by the writer so the index applier
sends them instead of analysing the chunk's text again (search.ingest.base.row_sparse). Rows written before stay
null and are analysed by the applier as before."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('search', '0024_chunk_and_symbol_indexes_without_duplicates'),
    ]

    operations = [
        migrations.AddField(
            model_name='chunk',
            name='term_weights',
            field=django.contrib.postgres.fields.ArrayField(base_field=models.FloatField(), blank=True, null=True, size=None),
        ),
    ]
