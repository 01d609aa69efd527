"""Every script in examples/ runs to its end, with short durations, and prints what it promises."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hexapod_control.control.loop import ControlLoop
from hexapod_control.scale.case import cached_model, controller_parameters, plant_parameters
from hexapod_control.scale.spec import SPEC_KEY, expand, load_spec

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
SWEEPS = EXAMPLES / "sweeps"
SWEEP_CASES = {"delay_payload.yaml": 48, "robustness_200.yaml": 200}  # as doc/sweeps_and_tuning.md says


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


def test_every_sweep_example_is_checked_here():
    specs = {path.name for path in SWEEPS.glob("*.yaml") if SPEC_KEY in (yaml.safe_load(path.read_text()) or {})}
    assert specs == set(SWEEP_CASES)


@pytest.mark.parametrize("name", sorted(SWEEP_CASES))
def test_a_sweep_example_has_its_cases_and_each_builds_its_plant_and_controller(name):
    """What a sweep does before it steps: a refused parameter (a HOLD damper unstable at a case's
    delay, say) fails here, not as one error row per case."""
    cases = expand(*load_spec(SWEEPS / name))
    assert len(cases) == SWEEP_CASES[name]
    built = set()
    for case in cases:
        plant_parameters(case)
        controller = controller_parameters(case)
        key = (controller.model_dump_json(), case.controller, case.gain_set)
        if key not in built:
            ControlLoop(cached_model(controller), case.controller, gain_set=case.gain_set, arm_on_start=True)
            built.add(key)
