"""The embedding cache's model moves from search to inference; its table, rows and constraint stay as they are."""
import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("search", "0001_initial"),  # the table this state describes is created there
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EmbeddingCache",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("model_id", models.CharField(max_length=200)),
                        ("text_hash", models.CharField(max_length=64)),
                        ("dim", models.PositiveSmallIntegerField()),
                        ("vector", django.contrib.postgres.fields.ArrayField(base_field=models.FloatField(),
                                                                              size=None)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "search_embeddingcache",
                        "constraints": [models.UniqueConstraint(fields=("model_id", "text_hash"),
                                                                name="uniq_embedding")],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
