"""The audit tests' poisoned store, run and personas, shared with the client tests."""

from tests.audits.conftest import (  # noqa: F401 - fixtures
    _audit_test_settings,
    acme,
    finished_run,
    globex,
    globex_store,
    housekeeping,
    org_a,
    org_b,
    poisoned,
)
