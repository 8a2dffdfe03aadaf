from django.urls import path

import config.converters  # noqa: F401 - registers <id:...>
from accounts import api

urlpatterns = [
    path("api/me", api.MeView.as_view(), name="api-me"),
    path("api/keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("api/keys/<id:key_id>", api.ApiKeyDetailView.as_view(), name="api-key-detail"),
]
