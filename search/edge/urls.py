from django.urls import path

import config.converters  # noqa: F401 - registers <id:...>
from search.edge.api import code as code_api
from search.edge.api import content as content_api
from search.edge.api import context as api
from search.edge.api import datasets
from search.edge.api import locate as locate_api
from search.edge.api import originals as originals_api
from search.edge.api import projects as projects_api
from search.edge.api import rules as rules_api
from search.edge.api import sources as sources_api
from search.edge.mcp.http import mcp_endpoint
from search.edge.pages import content as content_pages
from search.edge.pages import context as search_pages
from search.edge.pages import projects as project_pages
from search.edge.pages import sources as sources_pages

_DATASET = "api/projects/<slug:slug>/datasets/<id:dataset_id>"

urlpatterns: list = [
    path("api/projects", projects_api.ProjectListView.as_view(), name="api-projects"),
    path("api/projects/<slug:slug>", projects_api.ProjectDetailView.as_view(), name="api-project"),
    path("api/projects/<slug:slug>/shares", projects_api.ShareListView.as_view(), name="api-project-shares"),
    path("api/projects/<slug:slug>/shares/<id:share_id>", projects_api.ShareDetailView.as_view(),
         name="api-project-share"),
    path("mcp", mcp_endpoint, name="mcp"),  # the MCP server over streamable HTTP (search/edge/mcp/http.py)
    path("search/", search_pages.context_search, name="context-search"),
    path("search/feedback", search_pages.context_feedback, name="context-feedback"),
    path("rules/", search_pages.rules_page, name="rules"),
    path("rules/stream", search_pages.rules_stream, name="rules-stream"),
    path("rules/chunk/<id:chunk_id>", search_pages.rules_chunk, name="rules-chunk"),
    path("api/projects/<slug:slug>/datasets", datasets.DatasetListView.as_view(), name="api-project-datasets"),
    path("api/projects/<slug:slug>/datasets/<id:dataset_id>", datasets.DatasetDetailView.as_view(),
         name="api-project-dataset"),
    path("api/projects/<slug:slug>/query", api.QueryView.as_view(), name="api-context-query"),
    path("api/projects/<slug:slug>/locate", locate_api.LocateView.as_view(), name="api-context-locate"),
    path("api/projects/<slug:slug>/ingest", api.IngestView.as_view(), name="api-context-ingest"),
    path("api/projects/<slug:slug>/code/definition", code_api.DefinitionView.as_view(), name="api-code-definition"),
    path("api/projects/<slug:slug>/code/references", code_api.ReferencesView.as_view(), name="api-code-references"),
    path("api/projects/<slug:slug>/code/outline", code_api.OutlineView.as_view(), name="api-code-outline"),
    path("api/projects/<slug:slug>/code/files", code_api.FilesView.as_view(), name="api-code-files"),
    path("api/projects/<slug:slug>/code/grep", code_api.GrepView.as_view(), name="api-code-grep"),
    path("api/ingest-jobs/<uuid:job_id>", api.IngestJobView.as_view(), name="api-ingest-job"),
    path("api/ingest-jobs/<uuid:job_id>/cancel", api.IngestJobCancelView.as_view(), name="api-ingest-job-cancel"),
    path("api/query-sessions/<uuid:session_id>/feedback", api.FeedbackView.as_view(), name="api-query-feedback"),
    path("api/projects/<slug:slug>/rules/search", rules_api.RulesSearchView.as_view(), name="api-rules-search"),
    path("api/projects/<slug:slug>/answer", rules_api.AnswerView.as_view(), name="api-rules-answer"),
    path("api/projects/<slug:slug>/originals/<str:sha256>", originals_api.OriginalView.as_view(), name="api-original"),
    path(f"{_DATASET}/documents", content_api.DocumentListView.as_view(), name="api-documents"),
    path(f"{_DATASET}/documents/<path:external_id>", content_api.DocumentDetailView.as_view(), name="api-document"),
    path(f"{_DATASET}/uploads", content_api.UploadView.as_view(), name="api-uploads"),
    path(f"{_DATASET}/source", sources_api.SourceView.as_view(), name="api-dataset-source"),
    path(f"{_DATASET}/sync", sources_api.SyncView.as_view(), name="api-dataset-sync"),
    path(f"{_DATASET}/syncs", sources_api.SyncHistoryView.as_view(), name="api-dataset-syncs"),
    path("projects/<slug:slug>/settings", project_pages.project_settings, name="project-settings"),
    path("projects/<slug:slug>/settings/rename", project_pages.project_rename, name="project-rename"),
    path("projects/<slug:slug>/settings/delete", project_pages.project_delete, name="project-delete"),
    path("projects/<slug:slug>/members/add", project_pages.member_add, name="project-member-add"),
    path("projects/<slug:slug>/members/<id:member_id>/role", project_pages.member_role, name="project-member-role"),
    path("projects/<slug:slug>/members/<id:member_id>/remove", project_pages.member_remove,
         name="project-member-remove"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/delete", project_pages.dataset_delete,
         name="project-dataset-delete"),
    path("projects/<slug:slug>/shares/<id:share_id>/revoke", project_pages.share_revoke, name="project-share-revoke"),
    path("projects/<slug:slug>/datasets/new", content_pages.dataset_create, name="dataset-create"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/", content_pages.dataset_page, name="dataset-page"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/upload", content_pages.dataset_upload, name="dataset-upload"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/documents/delete", content_pages.document_delete,
         name="dataset-document-delete"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/source", sources_pages.source_save, name="dataset-source-save"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/source/remove", sources_pages.source_remove,
         name="dataset-source-remove"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/sync", sources_pages.sync_now, name="dataset-sync"),
]
