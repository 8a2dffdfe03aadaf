from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("projects", "0004_dataset_is_evaluation"),
    ]

    operations = [
        migrations.AddField(
            model_name="project",
            name="fusion",
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
    ]
