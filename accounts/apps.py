from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Count failed logins (accounts/login_limits.py) from Django's own signal, sent on every path."""
        from django.contrib.auth.signals import user_login_failed  # here: apps must be ready first

        from accounts.login_limits import on_login_failed  # here: it imports auth forms

        user_login_failed.connect(on_login_failed, dispatch_uid="accounts.login_limits")
