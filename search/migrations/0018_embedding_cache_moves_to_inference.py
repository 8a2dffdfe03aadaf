"""The embedding cache's model now belongs to inference (inference/migrations/0001); the table stays, under its
name, so this removes it from search's state only."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0017_qualityjob_stage_started_at"),
        ("inference", "0001_embedding_cache_from_search"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="EmbeddingCache")],
            database_operations=[],
        ),
    ]
