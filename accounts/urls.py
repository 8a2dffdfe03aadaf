from django.urls import path

import config.converters  # noqa: F401 - registers <id:...>
from accounts import api, key_pages, pages

urlpatterns = [
    path("api/me", api.MeView.as_view(), name="api-me"),
    path("api/keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("api/keys/<id:key_id>", api.ApiKeyDetailView.as_view(), name="api-key-detail"),
    path("account/keys", key_pages.keys_page, name="account-keys"),
    path("account/keys/<id:key_id>/revoke", key_pages.revoke_key_page, name="account-key-revoke"),
    path("api/signup", api.SignupView.as_view(), name="api-signup"),
    path("api/signup/confirm", api.SignupConfirmView.as_view(), name="api-signup-confirm"),
    path("accounts/signup/", pages.signup_page, name="signup"),
    path("accounts/signup/confirm/<str:token>", pages.signup_confirm_page, name="signup-confirm"),
]
