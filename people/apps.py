from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "people"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Wire the indexing signals, and refuse to start with a misspelled PEOPLE_SEARCH key (people/constants.py)
        rather than fail, or silently run on a default, at the first search."""
        from django.conf import settings

        from people import signals  # noqa: F401
        from people.constants import validate_overrides

        validate_overrides(overrides=settings.PEOPLE_SEARCH)
