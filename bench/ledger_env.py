"""A throwaway Django environment for the ledger benchmarks.

Each run gets its own SQLite database and key directories under a work folder (``--workdir``,
default a fresh temporary folder), migrates it, creates organization ``bench`` with a
housekeeper epoch, and holds the housekeeper role (a benchmark is an operator run). The
embedding cache lives in that database, so re-running with the same ``--workdir`` reuses the
vectors computed before.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"


def setup(workdir: str | None, *, embedder: str = "minilm") -> Path:
    """Point Django at a private database under ``workdir`` and migrate it; return the folder."""
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="memaudit-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "memaudit_site.settings"
    os.environ["SQLITE_PATH"] = str(work / "bench.sqlite3")
    # Its own database, whatever the caller's environment says (a DATABASE_URL inherited from a
    # PostgreSQL test run would point every run at one shared database and its old tenants).
    os.environ.pop("DATABASE_URL", None)
    os.environ["VAR_DIR"] = str(work / "var")
    os.environ["HOUSEKEEPER_KEY_DIR"] = str(work / "keys")
    os.environ["RECEIPT_KEY_DIR"] = str(work / "receipt-keys")
    os.environ["MEMAUDIT_ROLE"] = "housekeeper"
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    if embedder == "hashing":
        settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    call_command("migrate", verbosity=0)
    return work


def organization_get(slug: str = "bench"):
    from ledger.services import housekeeper_init
    from orgs.models import Organization

    org, created = Organization.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
    if created or not org.key_epochs.exists():
        housekeeper_init(organization=org)
    return org


def store_fresh(org, slug: str, **policy):
    """A new, empty store (a suffix is added when ``slug`` was used by an earlier run)."""
    from ledger.models import Store
    from ledger.services import store_create

    base, n = slug, 1
    while Store.objects.filter(organization=org, slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return store_create(organization=org, name=slug, slug=slug, **policy)


def percentile(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")
