from django.apps import AppConfig


class CreditsConfig(AppConfig):
    name = "credits"
    default_auto_field = "django.db.models.BigAutoField"
