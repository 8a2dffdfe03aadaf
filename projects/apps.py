from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "projects"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Answer accounts' questions about a key's project limit (accounts.apikeys.KeyProjects)."""
        from accounts.apikeys import use_key_projects  # here: apps must be ready first
        from projects.keys import KEY_PROJECTS  # here: it imports models

        use_key_projects(KEY_PROJECTS)
