"""The account that created each project and dataset, which the per-account limits count (accounts/limits.py).

Existing rows get their project's first owner (by membership id), so accounts that already hold projects and
datasets count them from the start; a project with no owner left keeps null and counts for nobody."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def backfill(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    Dataset = apps.get_model("projects", "Dataset")
    Membership = apps.get_model("projects", "Membership")
    first_owner = (Membership.objects.filter(project=models.OuterRef("pk"), role="owner").order_by("pk")
                   .values("user_id")[:1])
    Project.objects.filter(created_by__isnull=True).update(created_by=models.Subquery(first_owner))
    Dataset.objects.filter(created_by__isnull=True).update(
        created_by=models.Subquery(Project.objects.filter(pk=models.OuterRef("project_id")).values("created_by")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('projects', '0006_dataset_embedding_model'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='dataset',
            name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='project',
            name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
