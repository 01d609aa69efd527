"""Every committed benchmark script runs to its table, with the smallest arguments that reach all of
its code. What they measure is their output, quoted in doc/benchmarks.md with the machine and the
load; no figure is asserted here. A script broken by a change of the package (as bench_cycle.py
once was by a new argument) fails here instead of on the next person who measures."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "benchmarks"
RUN_TIMEOUT_S = 600  # generous: a loaded machine runs these many times slower than an idle one

# script, its smallest arguments ({tmp} a fresh folder), a line its table always prints
QUICK = (
    ("bench_controllers.py", ["--steps", "50"], "computed_torque  median"),
    ("bench_cycle.py", ["--steps", "50"], "computed_torque (compiled)"),
    ("bench_dynamics.py", ["--calls", "50", "--backend", "both"], "forward kinematics only"),
    ("bench_kinematics.py", ["--seconds", "0.05"], "assembly_modes"),
    ("bench_mujoco.py", ["--seconds", "0.1", "--repeats", "1"], "real-time factor (best of 1)"),
    ("bench_simulation.py", ["--seconds", "0.1"], "real-time factor"),
    ("bench_step.py", ["--steps", "50", "--settle", "50"], "mujoco.mj_step"),
    ("bench_machine_latency.py", ["--seconds", "0.2", "--runs", "1", "--realtime-priority", "0"], "steal"),
    ("delay_table.py", ["--duration", "0.5", "--delays", "1"], "| embedded | double_loop | 1 |"),
    ("bench_identify.py", ["--duration", "3", "--repeat", "1", "--bag", "{tmp}/bag"], "total"),
    ("bench_evaluate.py", ["--minutes", "0.05", "--no-plots", "--directory", "{tmp}"], "s per recorded min"),
    ("bench_sweep.py", ["--workers", "1", "--cases", "2", "--duration", "0.5"], "cases/s"),
)
OVER_DDS = (
    ("bench_rclpy_floor.py", ["--states", "300", "--realtime-priority", "0"], "rcl loop in C"),
    # With the starver: its options are the ones the plain run does not reach.
    ("bench_loop.py", ["--seconds", "1", "--controllers", "computed_torque", "--realtime-priority", "0",
                       "--starve-ms", "1", "--starve-every", "0.3"], "CPU per process"),
)


def run_benchmark(script: str, arguments: list[str], expected: str, folder: Path) -> None:
    command = [sys.executable, str(BENCHMARKS / script), *(a.format(tmp=folder) for a in arguments)]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(command)} exited with {result.returncode}:\n{output}"
    assert expected in result.stdout, f"{script} printed no {expected!r}:\n{output}"


def test_every_benchmark_script_is_run_here():
    """A new script in benchmarks/ is added to the lists above (timing.py is their shared helper)."""
    scripts = {path.name for path in BENCHMARKS.glob("*.py")} - {"timing.py"}
    assert scripts == {script for script, _, _ in QUICK + OVER_DDS}


@pytest.mark.parametrize("script, arguments, expected", QUICK, ids=[script for script, _, _ in QUICK])
def test_the_benchmark_runs_to_its_table(tmp_path, script, arguments, expected):
    run_benchmark(script, arguments, expected, tmp_path)


@pytest.mark.parametrize("script, arguments, expected", OVER_DDS, ids=[script for script, _, _ in OVER_DDS])
def test_the_benchmark_over_dds_runs_to_its_table(tmp_path, script, arguments, expected):
    run_benchmark(script, arguments, expected, tmp_path)
