"""Services send messages through ``audits.dispatch`` only: no service module imports a task
module (so ``audits.tasks`` -> ``audits.services`` is the one direction), and every task name
``dispatch`` sends is a registered task."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from audits import dispatch

ROOT = Path(__file__).resolve().parents[2]
SERVICES = sorted((ROOT / "audits" / "services").glob("*.py"))


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_no_service_imports_a_task_module(path):
    tasks = {m for m in _imported(path) if m.endswith(".tasks") or ".tasks." in m or "recall_tasks" in m}
    assert not tasks, f"{path.name} imports {sorted(tasks)}: enqueue through audits.dispatch"


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_no_service_imports_inside_a_function(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    local = [n.lineno for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not local, f"{path.name}: function-local imports at lines {local}"


def test_the_task_module_imports_the_services():
    assert any(m.startswith("audits.services") for m in _imported(ROOT / "audits" / "tasks.py"))


@pytest.mark.parametrize("name", [v for k, v in vars(dispatch).items() if k.isupper() and isinstance(v, str)])
def test_every_name_dispatch_sends_is_a_registered_task(name):
    assert dispatch.task(name).name == name


def test_an_unknown_task_name_is_a_key_error():
    with pytest.raises(KeyError):
        dispatch.task("audits.tasks.no_such_task")
