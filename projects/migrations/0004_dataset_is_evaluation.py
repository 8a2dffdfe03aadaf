"""Dataset.is_evaluation: evaluation corpora stay out of the live index.

The datasets `evaluate --beir` made before this release (named `beir:...`) are marked; the applier and the
reconciler then drop their points from the live store.
"""
from django.db import migrations, models


def mark_beir(apps, schema_editor):
    Dataset = apps.get_model("projects", "Dataset")
    Dataset.objects.filter(name__startswith="beir:").update(is_evaluation=True)


class Migration(migrations.Migration):

    dependencies = [
        ("projects", "0003_project_reranker"),
    ]

    operations = [
        migrations.AddField(
            model_name="dataset",
            name="is_evaluation",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_beir, migrations.RunPython.noop),
    ]
