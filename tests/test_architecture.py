"""Import rules: which package may import which (docs/architecture.md, "Layers").

Every import in the product's source is read from the AST, including imports inside functions,
so a rule cannot be dodged by importing late. A known violation that a later change is meant to
remove is listed in ``KNOWN`` with where it is; the test fails when a new one appears *and* when
a listed one is gone (so the list only ever shrinks and never rots).
"""

from __future__ import annotations

import ast
import re
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
    "audits.engine": {"interchange", "egress", "ledger.classifier"},
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
KNOWN: set[tuple[str, str]] = set()


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


# ---- function-local imports and import cycles (issue 12) -------------------------------------

LOCAL_REASON = "# local:"
_REASON = re.compile(r"#.*\blocal:")  # also after another directive: "# noqa: F401  local: why"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(tree: ast.Module):
    """Imports that run when the module is imported: top level, and inside top-level try/if blocks
    (an optional dependency), but not under ``if TYPE_CHECKING:``."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]


def _local_imports(tree: ast.Module):
    top = set(map(id, _module_level_imports(tree)))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
            yield node


def _has_reason(lines: list[str], node: ast.stmt) -> bool:
    # The reason stands on the import's own line(s) or on the line just above it.
    first, last = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
    around = lines[max(first - 2, 0):last]
    return any(_REASON.search(line) for line in around)


def _unexplained_local_imports() -> list[str]:
    found = []
    for rel, _module, path in _product_files():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        lines = text.splitlines()
        for node in _local_imports(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            if not _has_reason(lines, node):
                found.append(f"{rel}:{node.lineno}")
    return found


def test_no_function_local_import_without_a_reason():
    found = _unexplained_local_imports()
    assert not found, (
        f"function-local imports need a '{LOCAL_REASON} <why>' comment (or belong at the top):\n  "
        + "\n  ".join(found))


def _resolve(module: str, known: set[str]) -> str | None:
    while module and module not in known:
        module = module.rpartition(".")[0]
    return module or None


def _module_graph() -> dict[str, set[str]]:
    files = {module: path for _rel, module, path in _product_files()}
    known = set(files)
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _module_level_imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                # `from pkg import mod` imports the submodule when there is one, else the package.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names]
            for target in targets:
                dst = _resolve(target, known)
                if dst and dst != module:
                    graph[module].add(dst)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycles():
    cycles = _cycles(_module_graph())
    assert not cycles, "modules that import each other (at import time):\n  " + "\n  ".join(
        " <-> ".join(c) for c in cycles)


def test_the_local_import_and_cycle_rules_can_fail(tmp_path, monkeypatch):
    pkg = tmp_path / "ledger"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from ledger import b\n\ndef f():\n    import json\n")
    (pkg / "b.py").write_text("from ledger.a import f\n\ndef g():\n    import numpy  # local: heavy\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _unexplained_local_imports() == ["ledger/a.py:4"]
    assert _cycles(_module_graph()) == [["ledger.a", "ledger.b"]]
