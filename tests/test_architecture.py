"""Import rules: which package may import which (docs/architecture.md, "Layers").

Every import in the product's source is read from the AST, including imports inside functions,
so a rule cannot be dodged by importing late. A known violation that a later change is meant to
remove is listed in ``KNOWN`` with where it is; the test fails when a new one appears *and* when
a listed one is gone (so the list only ever shrinks and never rots).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("memaudit_site", "orgs", "ledger", "audits", "interchange", "egress")

# Each layer and the first-party layers it may import (besides itself). Order matters: the most
# specific prefix wins ("ledger.core" before "ledger").
ALLOWED: dict[str, set[str]] = {
    "interchange": set(),
    "egress": set(),
    "ledger.core": set(),
    "ledger.classifier": set(),
    "audits.engine": {"interchange", "egress"},
    "orgs": {"memaudit_site", "egress"},
    "ledger": {"ledger.core", "ledger.classifier", "orgs", "interchange", "egress", "memaudit_site"},
    "audits": {"audits.engine", "ledger", "ledger.core", "orgs", "interchange", "egress", "memaudit_site"},
    "memaudit_site": {"orgs", "ledger", "ledger.core", "audits", "audits.engine", "interchange", "egress"},
}
LAYERS = sorted(ALLOWED, key=len, reverse=True)
FIRST_PARTY = set(PRODUCT) | {"bench", "tests"}

# Third-party packages the portable cores may use: the verifier ships as its own wheel with PyNaCl
# only, and file formats are read with the standard library.
PURE_THIRD_PARTY = {"ledger.core": {"nacl"}, "ledger.classifier": set(), "interchange": set(), "egress": set()}
# The audit engine may use numerical and model libraries, but no web framework, queue or database.
FRAMEWORKS = {"django", "rest_framework", "drf_spectacular", "celery", "kombu", "psycopg", "redis"}

# (importing file, imported module): known violations, each to be removed by issue 12.
KNOWN: set[tuple[str, str]] = {
    ("audits/management/commands/seed_demo.py", "bench.scenarios"),
}


def _layer(module: str) -> str | None:
    for layer in LAYERS:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def _imports(path: Path, module: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.append(".".join(base + ([node.module] if node.module else [])))
            else:
                found.append(node.module or "")
    return found


def _product_files():
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else []:
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts:
                continue
            module = ".".join(rel.with_suffix("").parts)
            yield rel.as_posix(), module.removesuffix(".__init__"), path


def _violations() -> set[tuple[str, str]]:
    bad = set()
    for rel, module, path in _product_files():
        src = _layer(module)
        for imported in _imports(path, module):
            top = imported.split(".")[0]
            dst = _layer(imported)
            if top in ("bench", "tests"):
                bad.add((rel, imported))
            elif dst is not None and dst != src and dst not in ALLOWED[src]:
                bad.add((rel, imported))
            elif dst is None and src in PURE_THIRD_PARTY and top not in FIRST_PARTY \
                    and top not in sys.stdlib_module_names and top not in PURE_THIRD_PARTY[src]:
                bad.add((rel, imported))
            elif src == "audits.engine" and top in FRAMEWORKS:
                bad.add((rel, imported))
    return bad


def test_no_import_points_the_wrong_way():
    new = _violations() - KNOWN
    assert not new, "imports against docs/architecture.md's layers:\n" + "\n".join(
        f"  {f} imports {m}" for f, m in sorted(new))


def test_known_violations_are_still_there():
    gone = KNOWN - _violations()
    assert not gone, "fixed, so remove from KNOWN in tests/test_architecture.py:\n" + "\n".join(
        f"  {f} imports {m}" for f, m in sorted(gone))


def test_the_rule_catches_a_wrong_arrow(tmp_path, monkeypatch):
    # The checker itself must be able to fail: a pure core importing Django is caught.
    core = tmp_path / "ledger" / "core"
    core.mkdir(parents=True)
    (core / "bad.py").write_text("def f():\n    from django.conf import settings\n    from audits import models\n")
    engine = tmp_path / "audits" / "engine"
    engine.mkdir(parents=True)
    (engine / "bad.py").write_text("import numpy\nfrom celery import shared_task\nfrom ledger import recall\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _violations() == {("ledger/core/bad.py", "django.conf"), ("ledger/core/bad.py", "audits"),
                             ("audits/engine/bad.py", "celery"), ("audits/engine/bad.py", "ledger")}
