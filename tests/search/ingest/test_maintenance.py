"""Dataset upkeep: a stored chunk re-embeds to the hash it was written with, and a sync heals chunks that have no
vector under their hash (what a change of the embed input, migration 0015, leaves behind) without re-chunking."""
from __future__ import annotations

import importlib

from inference.encoders import dense_model_id, text_hash
from inference.models import EmbeddingCache
from search.ingest.maintenance import EMBED_FIELDS, chunk_embed_input, embed_missing
from search.models import Chunk, Dataset, IndexOutbox
from search.rules.demo import load_demo_rules
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import emberfall, rules_index  # noqa: F401 - fixtures


def test_every_stored_chunk_re_embeds_to_the_hash_it_was_written_with(emberfall):
    chunks = list(Chunk.objects.filter(dataset_id=emberfall["dataset_id"]).only("pk", "text_hash", *EMBED_FIELDS))
    assert any(c.kind == "rules" and c.heading_path for c in chunks)
    assert [text_hash(chunk_embed_input(c)) for c in chunks] == [c.text_hash for c in chunks]


def test_a_sync_embeds_the_chunks_left_without_a_vector_and_queues_only_their_upserts(emberfall):
    dataset_id = emberfall["dataset_id"]
    stale = list(Chunk.objects.filter(dataset_id=dataset_id).order_by("pk")[:3])
    hashes = [c.text_hash for c in stale]
    EmbeddingCache.objects.filter(text_hash__in=hashes).delete()  # as migration 0015 leaves them: no vector yet
    ids = sorted(Chunk.objects.filter(dataset_id=dataset_id, text_hash__in=hashes).values_list("pk", flat=True))
    queued = set(IndexOutbox.objects.values_list("pk", flat=True))

    stats = load_demo_rules()  # every file unchanged: nothing is re-chunked

    assert all(b["chunks"] == 0 for b in stats["books"].values())
    assert sorted(Chunk.objects.filter(pk__in=ids).values_list("text_hash", flat=True)) == sorted(hashes)
    assert EmbeddingCache.objects.filter(model_id=dense_model_id(), text_hash__in=hashes).count() == len(set(hashes))
    new_rows = IndexOutbox.objects.exclude(pk__in=queued)
    assert sorted(new_rows.values_list("chunk_id", flat=True)) == ids  # the upserts of these, no others
    assert embed_missing(dataset=Dataset.objects.get(pk=dataset_id)) == 0  # healed: a second pass finds nothing


def test_the_migration_rehashes_rules_sections_to_their_new_embed_input_and_back(emberfall):
    from django.apps import apps

    migration = importlib.import_module("search.migrations.0015_rules_embed_headings")
    chunks = Chunk.objects.filter(dataset_id=emberfall["dataset_id"], kind="rules").exclude(heading_path=[])
    new = dict(chunks.values_list("pk", "text_hash"))
    migration.backwards(apps, None)
    assert dict(chunks.values_list("pk", "text_hash")) == {c.pk: text_hash(c.text) for c in chunks}
    migration.forwards(apps, None)
    assert dict(chunks.values_list("pk", "text_hash")) == new
    assert all(new[c.pk] == text_hash(chunk_embed_input(c)) for c in chunks.only("pk", *EMBED_FIELDS))


def test_an_evaluation_snapshot_embeds_chunks_without_a_vector_and_leaves_the_live_index_alone(emberfall):
    from search.quality.runs import throwaway_index

    dataset_id = emberfall["dataset_id"]
    hashes = list(Chunk.objects.filter(dataset_id=dataset_id).order_by("pk").values_list("text_hash", flat=True)[:2])
    EmbeddingCache.objects.filter(text_hash__in=hashes).delete()
    queued = IndexOutbox.objects.count()
    with throwaway_index(dataset_ids=[dataset_id]) as (_, stats):
        assert stats["points"] == Chunk.objects.filter(dataset_id=dataset_id).count()  # none left out
        assert stats["embedded"] == len(set(hashes))
    assert IndexOutbox.objects.count() == queued
