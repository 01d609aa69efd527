"""Real-time factor of the embedded simulator (target: >= 20x), alone, in closed loop, and in the main job.

Run: ./scripts/bootstrap.sh && source scripts/env.sh && python benchmarks/bench_simulation.py
The plant alone follows trajectory (6.82) open loop, driven by forces precomputed with the inverse
dynamics (so only the plant is timed); the closed loops track the thesis 6.5 trajectory with each
controller (simulated_plant gains), the control step included. The main job's runs
(main_job.run_direct: the lockstep loop behind the shipped loop delay, recorded to an MCAP bag) are
timed whole, ``--repeats`` times per controller: median and range of the real-time factor.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import print_header, print_row

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.control.controllers import make_controller
from hexapod_control.control.trajectories import JointSpaceTrajectory, make_trajectory
from hexapod_control.main_job import JobSettings, run_direct
from hexapod_control.model.parameters import default_parameters_path
from hexapod_control.simulation import make_plant

OPEN_LOOP_SECONDS = 1.0


def run(seconds: float, controller_name: str | None) -> tuple[float, np.ndarray]:
    parameters = load_parameters()
    plant = make_plant("embedded", parameters)
    model = HexapodModel(parameters)
    steps = int(round(seconds / plant.dt))
    step_times = np.empty(steps)
    if controller_name is None:
        # Open loop the robot is unstable and drifts off (6.82) after ~2 s: time the first second.
        seconds = min(seconds, OPEN_LOOP_SECONDS)
        steps = int(round(seconds / plant.dt))
        step_times = np.empty(steps)
        joints = JointSpaceTrajectory.from_model(model)
        state = model.create_state()
        forces = []
        for k in range(steps):
            sample = joints.sample_joints((k + 0.5) * plant.dt)
            forces.append(model.inverse_dynamics(sample.position, sample.velocity, sample.acceleration, state=state))
    else:
        controller = make_controller(controller_name, model, gain_set="simulated_plant")
        trajectory = make_trajectory("operational_space", model)
        controller.reset(0.0, plant.joint_positions(), plant.joint_velocities())
    start = time.perf_counter()
    for k in range(steps):
        begin = time.perf_counter_ns()
        if controller_name is None:
            plant.apply_forces(forces[k])
        else:
            t = plant.time
            output = controller.update(t, plant.joint_positions(), plant.joint_velocities(), trajectory.sample(t))
            plant.apply_forces(output.forces)
        plant.step()
        step_times[k] = (time.perf_counter_ns() - begin) / 1e3
    return seconds / (time.perf_counter() - start), step_times


def main_job_factors(seconds: float, controller: str, repeats: int) -> list[float]:
    """Real-time factors of ``repeats`` main-job runs (run_direct) of ``controller``."""
    path = str(default_parameters_path())
    job = JobSettings(path, path, "operational_space", "embedded", "mcap",
                      tuple(load_parameters(path).recording.topics))
    factors = []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(repeats):
            summary = run_direct(job, controller, seconds, Path(folder) / f"{controller}_{repeat}")
            factors.append(summary["sim_time"] / summary["wall_time"])
    return factors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated seconds per run")
    parser.add_argument("--main-job-seconds", type=float, default=30.0,
                        help="simulated seconds per main-job run (its default duration)")
    parser.add_argument("--repeats", type=int, default=3, help="main-job runs per controller")
    arguments = parser.parse_args()
    print_header("embedded simulator, 1 kHz plant step")
    for label, controller in (("plant alone (open loop along 6.82)", None), ("double_loop + plant", "double_loop"),
                              ("computed_torque + plant", "computed_torque")):
        factor, step_times = run(arguments.seconds, controller)
        print_row(f"{label}: one 1 ms step", step_times)
        print(f"{'':<4}real-time factor {factor:.1f}x")
    for controller in ("double_loop", "computed_torque"):
        factors = main_job_factors(arguments.main_job_seconds, controller, arguments.repeats)
        print(f"main job, {controller}, {arguments.main_job_seconds:g} s simulated and recorded: real-time factor "
              f"median {statistics.median(factors):.1f}x, range {min(factors):.1f}-{max(factors):.1f}x "
              f"over {len(factors)} runs")


if __name__ == "__main__":
    main()
