from importlib import import_module

from django.apps import AppConfig

# The modules that register ingest job types (search.ingest.jobs.register): one line per job type's module.
JOB_TYPES = ("search.ingest.files", "search.ingest.staged", "search.rules.ingest", "search.sources.sync",
             "search.ingest.reembedding")


def _drop_git_mirror(sender: type, instance: object, **kwargs: object) -> None:
    """A deleted git source's mirror is a cache nobody will read again (a new source gets a new id): drop it
    once the delete commits, whether the source was removed or its dataset or project was deleted (CASCADE)."""
    from django.db import transaction

    from search.sources.git.sync import remove_mirror

    if getattr(instance, "type", "") == "git":
        source_id = instance.pk
        transaction.on_commit(lambda: remove_mirror(source_id))


def _close_index() -> None:
    from search.engine.index import close_index

    close_index()


class SearchConfig(AppConfig):
    name = "search"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """The embedded index holds files under VAR_DIR: teardown (tests, benchmarks) closes it before the
        services stop."""
        from django.db.models.signals import post_delete

        from config.embedded import on_teardown

        on_teardown(_close_index)
        # Each job type registers its handler with search.ingest.jobs when its module loads (docs/architecture.md).
        for module in JOB_TYPES:
            import_module(module)
        post_delete.connect(_drop_git_mirror, sender=self.get_model("Source"), dispatch_uid="search.drop_git_mirror")
        # A dataset (alone or with its project) is deleted only once its jobs stopped, holding its rows
        # (projects.deletion); a project's quota usage is what its datasets hold (projects.quotas).
        from projects.deletion import register_guard
        from projects.quotas import register_counter
        from search.ingest.datasets import lock_before_delete, stop_jobs_before_delete, usage_of

        register_guard(stop_jobs_before_delete, lock=lock_before_delete)
        register_counter(usage_of)
