"""A project's ranking settings (Project.reranker, Project.fusion) move to search's ProjectRanking, one row per
project that set one.

Why a copy and not a state-only move: the settings were two columns of projects_project, a table that stays
projects'; a column cannot change tables without being written again. The data is one short name and one small
JSON document per project, copied forwards here (then projects 0009 drops the columns) and back when migrating
backwards (projects 0009 re-adds the columns first)."""

import django.db.models.deletion
from django.db import migrations, models


def copy_forwards(apps, schema_editor):
    project = apps.get_model("projects", "Project")
    ranking = apps.get_model("search", "ProjectRanking")
    rows = project.objects.exclude(reranker="", fusion={}).values_list("pk", "reranker", "fusion")
    ranking.objects.bulk_create([ranking(project_id=pk, reranker=reranker or "", fusion=fusion or {})
                                 for pk, reranker, fusion in rows])


def copy_backwards(apps, schema_editor):
    project = apps.get_model("projects", "Project")
    ranking = apps.get_model("search", "ProjectRanking")
    for pk, reranker, fusion in ranking.objects.values_list("project_id", "reranker", "fusion"):
        project.objects.filter(pk=pk).update(reranker=reranker, fusion=fusion)


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0020_dataset_tables_and_content_types"),
        ("projects", "0008_dataset_moves_to_search"),
    ]

    operations = [
        migrations.CreateModel(
            name="ProjectRanking",
            fields=[
                ("project", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                                 related_name="ranking", serialize=False, to="projects.project")),
                ("reranker", models.CharField(blank=True, default="", help_text="Name of a reranker trained with "
                                              "manage.py train_reranker (blank: none).", max_length=64)),
                ("fusion", models.JSONField(blank=True, default=dict, editable=False)),
            ],
        ),
        migrations.RunPython(copy_forwards, copy_backwards),
    ]
