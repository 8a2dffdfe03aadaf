from django.urls import path

import config.converters  # noqa: F401 - registers <id:...>
from projects import api

urlpatterns = [
    path("api/projects", api.ProjectListView.as_view(), name="api-projects"),
    path("api/projects/<slug:slug>", api.ProjectDetailView.as_view(), name="api-project"),
    path("api/projects/<slug:slug>/datasets", api.DatasetListView.as_view(), name="api-project-datasets"),
    path("api/projects/<slug:slug>/shares", api.ShareListView.as_view(), name="api-project-shares"),
    path("api/projects/<slug:slug>/shares/<id:share_id>", api.ShareDetailView.as_view(), name="api-project-share"),
    path("api/projects/<slug:slug>/members", api.MemberListView.as_view(), name="api-project-members"),
    path("api/projects/<slug:slug>/members/<id:member_id>", api.MemberDetailView.as_view(),
         name="api-project-member"),
]
