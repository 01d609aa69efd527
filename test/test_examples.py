"""Every script in examples/ runs to its end, with short durations, and prints what it promises."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
# Arguments that keep each run short, and a line its output must contain.
RUNS = {
    "kinematics.py": ([], "real assembly modes: 8"),
    "dynamics.py": ([], "static forces at home [N]"),
    "closed_loop.py": (["--duration", "0.2"], "safety supervisor: armed"),
    "evaluate_bag.py": (["--duration", "0.5", "--no-plots"], "report.md"),
    "identify_drives.py": (["--duration", "4"], "slider 6 coulomb_friction"),
}


def test_every_example_is_run_here():
    assert {path.name for path in EXAMPLES.glob("*.py")} == set(RUNS)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_runs(name, tmp_path):
    arguments, expected = RUNS[name]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               MPLBACKEND="Agg", TMPDIR=str(tmp_path))
    result = subprocess.run([sys.executable, str(EXAMPLES / name), *arguments], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert expected in result.stdout
