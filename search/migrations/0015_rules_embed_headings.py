"""A rules chunk's embed input gains the headings above it (search.ingest.base.embed_input), so its text hash, the
key of its vector, changes. This recomputes the stored hashes in place; chunk ids, and the feedback and logged
rankings that name them, stay. Until the chunks are re-embedded their old points keep serving: the next sync of the
dataset embeds what has no vector (search.ingest.maintenance.embed_missing), as does the admin's "Recompute
embeddings". The embed input is copied here, frozen, as a migration must not follow later code changes."""
import hashlib

from django.db import migrations

BATCH = 1000


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _rehash(apps, *, with_headings: bool) -> None:
    Chunk = apps.get_model("search", "Chunk")
    rows = Chunk.objects.filter(kind="rules", micro_summary="").exclude(heading_path=[]).order_by("pk")
    batch = []
    for c in rows.only("pk", "text", "heading_path").iterator(chunk_size=BATCH):
        c.text_hash = _hash(f"{' > '.join(c.heading_path)}\n{c.text}" if with_headings else c.text)
        batch.append(c)
        if len(batch) >= BATCH:
            Chunk.objects.bulk_update(batch, ["text_hash"])
            batch = []
    Chunk.objects.bulk_update(batch, ["text_hash"])


def forwards(apps, schema_editor):
    _rehash(apps, with_headings=True)


def backwards(apps, schema_editor):
    _rehash(apps, with_headings=False)


class Migration(migrations.Migration):
    dependencies = [("search", "0014_code_symbols")]
    operations = [migrations.RunPython(forwards, backwards)]
