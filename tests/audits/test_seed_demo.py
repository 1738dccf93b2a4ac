import pytest
from django.core.management import call_command

from audits.demo import DEFAULT_DATA
from audits.models import Incident
from ledger.models import Memory, Store

pytestmark = pytest.mark.django_db

if not (DEFAULT_DATA / "ehragent").is_dir():
    pytest.skip(f"{DEFAULT_DATA} has no EHRAgent records", allow_module_level=True)


def test_the_demo_loads_a_signed_poisoned_store_with_incidents_once(settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"  # the real model is covered elsewhere
    call_command("seed_demo", "--size", "150")
    store = Store.objects.get(organization__slug="demo", slug="clinical-assistant")
    assert store.memories.count() == 150
    assert not Memory.objects.filter(store=store, chain_head__isnull=True).exists()  # every genesis signed
    assert Incident.objects.filter(store=store).exists()
    assert "Demo store loaded" in capsys.readouterr().out
    call_command("seed_demo", "--size", "150")
    assert "already loaded" in capsys.readouterr().out
    assert store.memories.count() == 150
