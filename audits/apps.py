from django.apps import AppConfig


class AuditsConfig(AppConfig):
    name = "audits"
    verbose_name = "Audits (MemAudit)"

    def ready(self) -> None:
        # The housekeeper resolves "proposal:<id>" label tasks through this app (the ledger does
        # not import the review app).
        from audits.decisions import proposal_specs  # local: app registry must be ready first
        from ledger.decisions import resolver_register  # local: app registry must be ready first

        resolver_register("proposal", proposal_specs)
