"""Static errors (undefined names, unused imports, syntax) anywhere in the package, tests and tools."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_ruff_finds_no_errors():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with requirements-dev.txt)")
    paths = ["hexapod_control", "test", "launch", "benchmarks", "examples", "scripts", "doc"]
    result = subprocess.run(
        [ruff, "check", "--select", "F,E9", *paths], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
