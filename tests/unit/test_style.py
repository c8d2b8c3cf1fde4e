"""The code stays ruff clean (the rules are in pyproject.toml)."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)


def test_ruff_finds_nothing():
    beside_python = os.path.join(os.path.dirname(sys.executable), "ruff")
    ruff = beside_python if os.path.exists(beside_python) else shutil.which("ruff")
    assert ruff is not None, "ruff is part of the test extra"
    result = subprocess.run([ruff, "check", "placement", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
