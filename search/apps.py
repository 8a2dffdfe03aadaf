from django.apps import AppConfig


def _close_index() -> None:
    from search.index import close_index

    close_index()


class SearchConfig(AppConfig):
    name = "search"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """The embedded index holds files under VAR_DIR: teardown (tests, benchmarks) closes it before the
        services stop."""
        from config.embedded import on_teardown

        on_teardown(_close_index)
