from django.urls import path

import config.converters  # noqa: F401 - registers <id:...>
from projects import api, pages

urlpatterns = [
    path("api/projects", api.ProjectListView.as_view(), name="api-projects"),
    path("api/projects/<slug:slug>", api.ProjectDetailView.as_view(), name="api-project"),
    path("api/projects/<slug:slug>/shares", api.ShareListView.as_view(), name="api-project-shares"),
    path("api/projects/<slug:slug>/shares/<id:share_id>", api.ShareDetailView.as_view(), name="api-project-share"),
    path("api/projects/<slug:slug>/members", api.MemberListView.as_view(), name="api-project-members"),
    path("api/projects/<slug:slug>/members/<id:member_id>", api.MemberDetailView.as_view(),
         name="api-project-member"),
    # pages (session login; the same services as the API)
    path("projects/new", pages.project_new, name="project-new"),
    path("projects/<slug:slug>/settings", pages.project_settings, name="project-settings"),
    path("projects/<slug:slug>/settings/rename", pages.project_rename, name="project-rename"),
    path("projects/<slug:slug>/settings/delete", pages.project_delete, name="project-delete"),
    path("projects/<slug:slug>/members/add", pages.member_add, name="project-member-add"),
    path("projects/<slug:slug>/members/<id:member_id>/role", pages.member_role, name="project-member-role"),
    path("projects/<slug:slug>/members/<id:member_id>/remove", pages.member_remove, name="project-member-remove"),
    path("projects/<slug:slug>/datasets/<id:dataset_id>/delete", pages.dataset_delete,
         name="project-dataset-delete"),
    path("projects/<slug:slug>/shares/<id:share_id>/revoke", pages.share_revoke, name="project-share-revoke"),
]
