from django.db import migrations, models


class Migration(migrations.Migration):
    """When a quality job's current stage started, so its rate and time to finish are measured per stage."""

    dependencies = [
        ("search", "0016_ingest_job_cancel"),
    ]

    operations = [
        migrations.AddField(
            model_name="qualityjob",
            name="stage_started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
