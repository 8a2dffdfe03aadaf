"""Logging in and asking for a password reset, limited: included by console/urls.py before the admin's and Django's
own views of the same paths (/admin/login/, /accounts/login/, /accounts/password_reset/), which these wrap or
replace. Django's remaining auth views (logout, the reset link, password change) stay as they are."""
from django.urls import path

from accounts import pages

urlpatterns = [
    path("admin/login/", pages.admin_login, name="admin-login"),
    path("accounts/login/", pages.login_page, name="login"),
    path("accounts/password_reset/", pages.password_reset_page, name="password_reset"),
]
