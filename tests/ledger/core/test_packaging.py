"""The installable verifier: build the ``memaudit-verify`` wheel from packaging/memaudit-verify,
install it into a fresh venv outside the repository, and verify a bundle there with no
repository on the path (.ci/run runs the same as its "Installable verifier" stage)."""

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.ledger.core.factories import small_ledger

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def test_the_wheel_installs_in_a_fresh_venv_and_verifies_without_the_repository(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    str(ROOT / "packaging" / "memaudit-verify"), "-w", str(dist)], check=True, timeout=300,
                   cwd=tmp_path)
    [wheel] = dist.glob("memaudit_verify-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py, exe = env_dir / "bin" / "python", env_dir / "bin" / "memaudit-verify"
    install = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                             timeout=600, cwd=tmp_path)
    if install.returncode != 0 and "PyNaCl" in install.stderr and "No matching distribution" in install.stderr:
        pytest.skip("no package index reachable for PyNaCl (the .ci/run stage runs this with one)")
    assert install.returncode == 0, install.stderr
    hk = small_ledger(tmp_path / "keys")
    (tmp_path / "bundle.json").write_text(json.dumps(hk.bundle()))
    (tmp_path / "checkpoint.txt").write_text(hk.checkpoints[-1])
    clean_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no PYTHONPATH, cwd outside the repo
    where = subprocess.run([str(py), "-c", "import ledger.core, django"], capture_output=True, text=True,
                           env=clean_env, cwd=tmp_path)
    assert "No module named 'django'" in where.stderr  # the core alone, nothing of the product
    run = subprocess.run([str(exe), "bundle", "bundle.json", "--anchor", hk.anchor.hex(), "--checkpoint",
                          "checkpoint.txt"], capture_output=True, text=True, env=clean_env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("OK: 3 memories")
    run = subprocess.run([str(exe), "bundle.json"], capture_output=True, text=True, env=clean_env, cwd=tmp_path)
    assert run.returncode == 3 and run.stdout.startswith("UNANCHORED")
