"""The audit tests' poisoned store, run and personas, shared with the client tests."""

from tests.audits.conftest import (  # noqa: F401 - fixtures
    _audit_test_settings,
    acme,
    globex,
    globex_store,
    housekeeping,
    org_a,
    org_b,
    poisoned,
)
from tests.audits.test_review import finished_run  # noqa: F401 - a fixture
