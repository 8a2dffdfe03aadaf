from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The roof: composes the apps below it (the root URLs, the web process's entry points, the staff console,
    the account pages that show several apps at once, /healthz and the commands that run the whole platform).
    Nothing imports it; it may import every app."""

    name = "console"
    default_auto_field = "django.db.models.BigAutoField"
