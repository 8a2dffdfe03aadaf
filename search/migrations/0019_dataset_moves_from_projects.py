"""Dataset and ProjectShare become search's models: state only, no row is copied and no table changes here.

The models are created in search's state on their existing tables (projects_dataset, projects_projectshare), and
every foreign key of search's to a dataset is pointed at search.Dataset, in the state only (the constraints in
the database already point at that table). projects 0008 then removes the models from projects' state, and 0020
renames the tables to search's names (a rename, not a copy) and moves their content types, so staff permissions
and admin history follow the models."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

FKS = {"document": ("documents", False), "chunk": ("chunks", False), "ingestjob": ("ingest_jobs", False),
       "source": ("source", True), "graphedge": ("graph_edges", False), "codefile": ("+", False),
       "symbol": ("+", False), "symbolref": ("+", False)}


def _point_at_search_dataset(model_name, related_name, one_to_one):
    field = models.OneToOneField if one_to_one else models.ForeignKey
    return migrations.AlterField(model_name=model_name, name="dataset",
                                 field=field(on_delete=django.db.models.deletion.CASCADE,
                                             related_name=related_name, to="search.dataset"))


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0018_embedding_cache_moves_to_inference"),
        ("projects", "0007_created_by"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Dataset",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("name", models.CharField(max_length=200)),
                        ("kind", models.CharField(choices=[("code", "Code"), ("web", "Web"), ("rules", "Rules"),
                                                           ("beir", "Beir")], default="code", max_length=16)),
                        ("is_global", models.BooleanField(db_index=True, default=False)),
                        ("is_evaluation", models.BooleanField(default=False)),
                        ("embedding_model", models.CharField(blank=True, default="", max_length=64)),
                        ("embedding_model_next", models.CharField(blank=True, default="", max_length=64)),
                        ("embedding_evidence", models.JSONField(blank=True, default=dict)),
                        ("description", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("created_by", models.ForeignKey(blank=True, null=True,
                                                         on_delete=django.db.models.deletion.SET_NULL,
                                                         related_name="+", to=settings.AUTH_USER_MODEL)),
                        ("project", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                      related_name="datasets", to="projects.project")),
                    ],
                    options={"ordering": ["project__slug", "name"], "db_table": "projects_dataset"},
                ),
                migrations.AddConstraint(
                    model_name="dataset",
                    constraint=models.UniqueConstraint(fields=("project", "name"), name="uniq_dataset_name"),
                ),
                migrations.CreateModel(
                    name="ProjectShare",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("granted_at", models.DateTimeField(auto_now_add=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        ("dataset", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                      related_name="shares", to="search.dataset")),
                        ("granted_by", models.ForeignKey(blank=True, null=True,
                                                         on_delete=django.db.models.deletion.SET_NULL,
                                                         related_name="+", to=settings.AUTH_USER_MODEL)),
                        ("project", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                      related_name="incoming_shares", to="projects.project")),
                    ],
                    options={"ordering": ["-granted_at"], "db_table": "projects_projectshare"},
                ),
                migrations.AddConstraint(
                    model_name="projectshare",
                    constraint=models.UniqueConstraint(condition=models.Q(("revoked_at__isnull", True)),
                                                       fields=("dataset", "project"), name="uniq_active_share"),
                ),
                *[_point_at_search_dataset(m, rel, one) for m, (rel, one) in FKS.items()],
            ],
        ),
    ]
