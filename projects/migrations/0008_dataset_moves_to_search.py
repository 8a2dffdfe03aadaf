"""Dataset and ProjectShare are search's models now (search 0019 took them into its state on the same tables):
they leave projects' state only. No table is dropped or copied."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("projects", "0007_created_by"),
        ("search", "0019_dataset_moves_from_projects"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="ProjectShare"),
                migrations.DeleteModel(name="Dataset"),
            ],
        ),
    ]
