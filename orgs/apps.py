from django.apps import AppConfig


class OrgsConfig(AppConfig):
    name = "orgs"
    verbose_name = "Organizations"

    def ready(self) -> None:
        from orgs import checks, health, signals  # noqa: F401  local: app loading (models first); registers checks and signals
