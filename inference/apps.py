from django.apps import AppConfig


class InferenceConfig(AppConfig):
    """An app only because the encoders own one table: the embedding cache (inference.models)."""

    name = "inference"
    default_auto_field = "django.db.models.BigAutoField"
