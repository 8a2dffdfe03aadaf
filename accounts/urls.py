from django.urls import path

import config.converters  # noqa: F401 - registers <id:...>
from accounts import api, pages

urlpatterns = [
    path("api/keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("api/keys/<id:key_id>", api.ApiKeyDetailView.as_view(), name="api-key-detail"),
    path("api/signup", api.SignupView.as_view(), name="api-signup"),
    path("accounts/signup/", pages.signup_page, name="signup"),
    path("accounts/signup/confirm/<str:token>", pages.signup_confirm_page, name="signup-confirm"),
]
