"""Project.reranker and Project.fusion are search's now (search.ProjectRanking; search 0021 copied the values):
the columns go. Backwards, they come back empty and search 0021's reverse copies the values into them."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("projects", "0008_dataset_moves_to_search"),
        ("search", "0021_project_ranking"),
    ]

    operations = [
        migrations.RemoveField(model_name="project", name="reranker"),
        migrations.RemoveField(model_name="project", name="fusion"),
    ]
