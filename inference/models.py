"""The embedding cache, the one table of the encoders.

Why here and not in search: every product embeds through inference.encoders and reads its vectors from this cache
(people's cards as well as search's chunks), so the table lives with the encoders, below both products. It keeps
its table name from when search held it (search_embeddingcache): the chunk-delete trigger reads that table by name
(search/migrations/0002), and the move changed Django's state only.
"""
from django.contrib.postgres.fields import ArrayField
from django.db import models


class EmbeddingCache(models.Model):
    """(model id, text hash) -> vector, so a moved or renamed file re-embeds nothing."""

    model_id = models.CharField(max_length=200)
    text_hash = models.CharField(max_length=64)
    dim = models.PositiveSmallIntegerField()
    vector = ArrayField(models.FloatField())
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "search_embeddingcache"
        constraints = [models.UniqueConstraint(fields=["model_id", "text_hash"], name="uniq_embedding")]
