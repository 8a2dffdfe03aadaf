from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from config.views import healthz, home
from search.dashboard_views import dashboard

handler404 = "config.errors.json_404"
handler500 = "config.errors.json_500"

urlpatterns = [
    path("admin/dashboard/", admin.site.admin_view(dashboard), name="admin-dashboard"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", home, name="home"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("", include("accounts.urls")),
    path("", include("projects.urls")),
    path("", include("credits.urls")),
    path("", include("search.urls")),
    path("", include("people.urls")),
]
