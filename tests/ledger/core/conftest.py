import pytest

from tests.ledger.core.factories import Housekeeper, small_ledger


@pytest.fixture
def hk(tmp_path) -> Housekeeper:
    """Alice's tenant 'acme': 3 memories, transitions, labels, a rotation, 3 tree heads, a receipt."""
    return small_ledger(tmp_path / "keys")


@pytest.fixture
def bundle(hk) -> dict:
    return hk.bundle()
