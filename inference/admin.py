from django.contrib import admin

from config.adminkit import ReadOnlyAdmin
from inference.models import EmbeddingCache


@admin.register(EmbeddingCache)
class EmbeddingCacheAdmin(ReadOnlyAdmin):
    list_display = ("model_id", "text_hash", "dim", "created_at")
    list_filter = ("model_id",)
    search_fields = ("text_hash",)
    exclude = ("vector",)
