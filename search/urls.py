from django.urls import path

from search import api
from search import rules_api

urlpatterns: list = [
    path("api/projects/<slug:slug>/query", api.QueryView.as_view(), name="api-context-query"),
    path("api/projects/<slug:slug>/ingest", api.IngestView.as_view(), name="api-context-ingest"),
    path("api/ingest-jobs/<uuid:job_id>", api.IngestJobView.as_view(), name="api-ingest-job"),
    path("api/query-sessions/<uuid:session_id>/feedback", api.FeedbackView.as_view(), name="api-query-feedback"),
    path("api/projects/<slug:slug>/rules/search", rules_api.RulesSearchView.as_view(), name="api-rules-search"),
    path("api/projects/<slug:slug>/answer", rules_api.AnswerView.as_view(), name="api-rules-answer"),
]
