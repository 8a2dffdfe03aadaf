from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

import config.converters  # noqa: F401 - registers <id:...>
from config.dashboard import dashboard
from config.views import healthz, home
from people import pages as people_pages
from search.edge.mcp.http import mcp_endpoint
from search.edge.pages import context as search_pages

handler400 = "config.errors.json_400"
handler404 = "config.errors.json_404"
handler500 = "config.errors.json_500"

urlpatterns = [
    # Logging in and password reset, limited (accounts/login_limits.py, accounts/password_reset.py): before the
    # admin's and Django's own views of the same paths, which they wrap or replace.
    path("", include("accounts.auth_urls")),
    path("admin/dashboard/", admin.site.admin_view(dashboard), name="admin-dashboard"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("mcp", mcp_endpoint, name="mcp"),  # the MCP server over streamable HTTP (search/edge/mcp/http.py)
    path("accounts/", include("django.contrib.auth.urls")),
    path("", home, name="home"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("search/", search_pages.context_search, name="context-search"),
    path("search/feedback", search_pages.context_feedback, name="context-feedback"),
    path("rules/", search_pages.rules_page, name="rules"),
    path("rules/stream", search_pages.rules_stream, name="rules-stream"),
    path("rules/chunk/<id:chunk_id>", search_pages.rules_chunk, name="rules-chunk"),
    path("people/", people_pages.people_search, name="people-search"),
    path("people/discover", people_pages.discover, name="people-discover"),
    path("people/p/<uuid:person_id>", people_pages.person_profile, name="people-profile"),
    path("", include("accounts.urls")),
    path("", include("projects.urls")),
    path("", include("credits.urls")),
    path("", include("search.edge.urls")),
    path("", include("people.urls")),
]
