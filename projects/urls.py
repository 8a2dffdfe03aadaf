from django.urls import path

import config.converters  # noqa: F401 - registers <id:...>
from projects import api, pages

# The project resource, its shares and its settings page are served by search's edge (search.edge.urls): they
# show search's rows. The paths are one namespace; these are the member endpoints and the new-project page.
urlpatterns = [
    path("api/projects/<slug:slug>/members", api.MemberListView.as_view(), name="api-project-members"),
    path("api/projects/<slug:slug>/members/<id:member_id>", api.MemberDetailView.as_view(),
         name="api-project-member"),
    # pages (session login; the same services as the API)
    path("projects/new", pages.project_new, name="project-new"),
]
