"""The console's own routes (console/urls.py includes them): home, the account pages and answers that show
several apps at once, the staff dashboard, /healthz and the API's schema and docs."""
from django.contrib import admin
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

import config.converters  # noqa: F401 - registers <id:...>
from console import api, key_pages
from console.dashboard import dashboard
from console.views import healthz, home

urlpatterns = [
    path("admin/dashboard/", admin.site.admin_view(dashboard), name="admin-dashboard"),
    path("healthz", healthz, name="healthz"),
    path("", home, name="home"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("api/me", api.MeView.as_view(), name="api-me"),
    path("api/signup/confirm", api.SignupConfirmView.as_view(), name="api-signup-confirm"),
    path("account/keys", key_pages.keys_page, name="account-keys"),
    path("account/keys/<id:key_id>/revoke", key_pages.revoke_key_page, name="account-key-revoke"),
]
