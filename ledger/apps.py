from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger (MutMem)"

    def ready(self) -> None:
        from ledger import tasks  # noqa: F401  local: app loading (models first); registers its tasks (orgs.dispatch)
