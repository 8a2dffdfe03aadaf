"""The moved models' tables take search's names (projects_dataset -> search_dataset, projects_projectshare ->
search_projectshare: ALTER TABLE ... RENAME, no row is copied), and their content types move from the projects
app label to search's, in place, so the staff permissions granted on them and the admin's history keep pointing
at them. Both are undone exactly when migrating backwards."""

from django.db import migrations

MOVED = ("dataset", "projectshare")


def _relabel(apps, *, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=old, model=model).exists():
            continue  # a database whose content types were never created: post_migrate makes them
        # a row under the new label can only be one post_migrate created meanwhile, with its default permissions
        # and no grants of its own: drop it so the old row (with the grants) takes its place
        content_type.objects.filter(app_label=new, model=model).delete()
        content_type.objects.filter(app_label=old, model=model).update(app_label=new)
    content_type.objects.clear_cache()


def forwards(apps, schema_editor):
    _relabel(apps, old="projects", new="search")


def backwards(apps, schema_editor):
    _relabel(apps, old="search", new="projects")


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0019_dataset_moves_from_projects"),
        ("projects", "0008_dataset_moves_to_search"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelTable(name="dataset", table=None),
        migrations.AlterModelTable(name="projectshare", table=None),
        migrations.RunPython(forwards, backwards),
    ]
