"""A rulebook chunk's `page` is the printed page it stands on, or empty: rows written before pages existed held the
book's file name there (`Conditions.md`), which a citation would show as a page.

Why a data migration: an unchanged rulebook is skipped by its content hash on the next ingest, so those rows would
keep the file name for ever. The file name is not lost: the document's path holds it. Backwards there is nothing
to restore that a citation needs, so the reverse does nothing."""

from django.db import migrations

FILE_NAME = r"\.(md|markdown|json)$"


def clear_file_name_pages(apps, schema_editor):
    chunk = apps.get_model("search", "Chunk")
    chunk.objects.filter(kind="rules", page__iregex=FILE_NAME).update(page="")


class Migration(migrations.Migration):

    dependencies = [("search", "0021_project_ranking")]

    operations = [migrations.RunPython(clear_file_name_pages, migrations.RunPython.noop)]
