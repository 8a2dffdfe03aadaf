"""Request/response shapes for the context API (OpenAPI docs; validation of `q`/filters lives in pipeline.validate_query
so the API, pages and commands reject the same inputs with the same field names)."""
from __future__ import annotations

from rest_framework import serializers


class QueryFiltersSerializer(serializers.Serializer):
    repo = serializers.ListField(child=serializers.CharField(), required=False, help_text="Repo name(s); a string works too.")
    path = serializers.CharField(required=False, help_text="Path prefix (`search/`) or glob (`search/**/*.py`).")
    lang = serializers.ListField(child=serializers.CharField(), required=False, help_text="Language(s), e.g. python.")


class QueryRequestSerializer(serializers.Serializer):
    q = serializers.CharField(max_length=2000)
    filters = QueryFiltersSerializer(required=False)
    include_global = serializers.BooleanField(default=True)
    top_k = serializers.IntegerField(default=15, min_value=1, max_value=50)
    candidates = serializers.IntegerField(default=100, min_value=1, max_value=200)
    fusion = serializers.ChoiceField(choices=["rrf", "dbsf", "weighted"], default="rrf")
    rerank = serializers.BooleanField(required=False, allow_null=True,
                                      help_text="Default: on only when RERANKER_MODEL is configured.")
    budget_tokens = serializers.IntegerField(default=8000, min_value=100, max_value=100000)


class WhySerializer(serializers.Serializer):
    dense_score = serializers.FloatField(allow_null=True)
    dense_rank = serializers.IntegerField(allow_null=True)
    sparse_score = serializers.FloatField(allow_null=True)
    sparse_rank = serializers.IntegerField(allow_null=True)
    fused_score = serializers.FloatField()
    rank_before_rerank = serializers.IntegerField()
    rerank_score = serializers.FloatField(allow_null=True)
    final_rank = serializers.IntegerField()
    dataset_id = serializers.IntegerField()
    project_id = serializers.IntegerField()
    span = serializers.CharField()


class ResultSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    chunk_id = serializers.IntegerField()
    dataset_id = serializers.IntegerField()
    repo = serializers.CharField()
    path = serializers.CharField()
    lang = serializers.CharField()
    symbol = serializers.CharField()
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    span = serializers.CharField()
    kind = serializers.CharField(help_text="code | web | rules | beir")
    heading_path = serializers.ListField(child=serializers.CharField(), help_text="Web/rules: the headings above.")
    url = serializers.CharField(help_text="Web pages: the page URL (canonical link) when known, else empty.")
    micro_summary = serializers.CharField()
    text = serializers.CharField()
    score = serializers.FloatField()
    why = WhySerializer()


class QueryResponseSerializer(serializers.Serializer):
    search_session_id = serializers.UUIDField()
    results = ResultSerializer(many=True)
    pack = serializers.DictField()
    timings_ms = serializers.DictField(child=serializers.FloatField())
    reranker = serializers.CharField(allow_null=True)
    fusion = serializers.CharField()


class IngestRequestSerializer(serializers.Serializer):
    dataset = serializers.CharField(max_length=200, help_text="Dataset name in this project (created if missing).")
    kind = serializers.ChoiceField(choices=["code", "web", "rules"])
    source = serializers.CharField(max_length=2000, help_text="Server-side path under INGEST_ALLOWED_ROOTS.")
    repo = serializers.CharField(max_length=200, required=False, allow_blank=True)


class IngestJobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    dataset_id = serializers.IntegerField()
    kind = serializers.CharField()
    source = serializers.CharField()
    status = serializers.CharField()
    percent = serializers.IntegerField()
    files_total = serializers.IntegerField()
    files_done = serializers.IntegerField()
    files_skipped = serializers.IntegerField()
    files_deleted = serializers.IntegerField()
    chunks_written = serializers.IntegerField()
    embeddings_computed = serializers.IntegerField()
    embeddings_cached = serializers.IntegerField()
    error = serializers.CharField()


class FeedbackRequestSerializer(serializers.Serializer):
    chunk_id = serializers.IntegerField(min_value=1)
    relevance = serializers.IntegerField(min_value=0, max_value=3)
