"""Real-time factor of the MuJoCo plant: simulated seconds per wall-clock second.

    python benchmarks/bench_mujoco.py [--parameters config/hexapod.yaml] [--seconds 5] [--repeats 3]

Runs the plant at the settings of the parameters file (hexapod.simulation) the way a control loop
does: one apply_forces() and one step() per plant period, with the divergence guard on. The
forces are the plant's own holding forces plus a joint-space PD towards (6.82) of the thesis, so
the robot moves as in a validation run without needing the project's dynamics. The best of
``--repeats`` runs is reported, because other processes share the CPU.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hexapod_control.model.parameters import load_parameters
from hexapod_control.simulation.mujoco_plant import MujocoPlant

# Trajectory (6.82) and a PD that follows it to ~0.4 mm: the benchmark's workload, not settings.
AMPLITUDES = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05])  # [m]
FREQUENCIES = np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])  # [rad/s]
RAMP_RATE = 1.0  # [1/s^3]
STIFFNESS, DAMPING = 5000.0, 150.0  # [N/m], [N s/m]


def reference(t: float, home: float) -> tuple[np.ndarray, np.ndarray]:
    decay = math.exp(-RAMP_RATE * t**3)
    s, ds = 1.0 - decay, 3.0 * RAMP_RATE * t**2 * decay
    sine, cosine = np.sin(FREQUENCIES * t), np.cos(FREQUENCIES * t)
    return home + AMPLITUDES * s * sine, AMPLITUDES * (ds * sine + s * FREQUENCIES * cosine)


def run(plant: MujocoPlant, seconds: float) -> tuple[float, float]:
    """(wall seconds, largest closure error) for ``seconds`` of simulated motion."""
    home = plant.parameters.home_actuator_position
    plant.reset(np.full(6, home))
    hold = plant.holding_forces()
    steps = round(seconds / plant.dt)
    start = time.perf_counter()
    for n in range(steps):
        q_d, qd_d = reference(n * plant.dt, home)
        plant.apply_forces(hold + STIFFNESS * (q_d - plant.joint_positions()) + DAMPING * (qd_d - plant.joint_velocities()))
        plant.step()
    return time.perf_counter() - start, plant.max_closure_error


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parameters", default=None, help="parameters file (default: config/hexapod.yaml)")
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs; the fastest is reported")
    args = parser.parse_args(argv)
    parameters = load_parameters(args.parameters)
    plant = MujocoPlant(parameters)
    settings = plant.settings
    print(
        f"{parameters.source}: plant step {plant.dt * 1e3:.3g} ms, {settings.substeps} MuJoCo substeps of "
        f"{parameters.simulation.mujoco_timestep * 1e3:.3g} ms, {settings.integrator}, {settings.solver}"
    )
    best = math.inf
    for repeat in range(args.repeats):
        wall, closure = run(plant, args.seconds)
        best = min(best, wall)
        print(
            f"  run {repeat + 1}: {args.seconds:g} s simulated in {wall:.3f} s wall, real-time factor "
            f"{args.seconds / wall:.2f}, largest closure error {closure:.2e} m"
        )
    print(f"real-time factor (best of {args.repeats}): {args.seconds / best:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
