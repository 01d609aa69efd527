"""Issue 13's table re-measured: both controllers on the thesis 6.5 trajectory behind a loop delay.

Run: source scripts/env.sh && python benchmarks/delay_table.py [--plants dart mujoco embedded]
     [--duration 30] [--delays 0 1 2]

Each run: the plant (``make_plant``) behind :class:`DelayedPlant` with ``delay`` periods, the
6.5 trajectory from home for ``--duration`` s at the control rate, the controller with the
simulated_plant gains, bare or with the shipped delay compensation (the delay estimated online
from its start value of 1 period). Errors are the platform's (MuJoCo's and DART's own pose, the
embedded plant's true state through FK), RMS over the whole run; "clamped" is the share of
control steps with a force at +-actuator_force_max.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.control.controllers import CONTROLLER_NAMES, make_controller
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.errors import HexapodError
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant

GAIN_SET = "simulated_plant"


def platform_pose(backend, plant, model, state):
    if backend == "mujoco":
        return plant.platform_pose().pose
    if backend == "dart":
        return plant.platform_pose()
    return model.forward_kinematics(plant.true_state[0], state).pose


def run(backend: str, controller_name: str, delay: int, compensated: bool, duration: float) -> dict:
    parameters = load_parameters()
    model = HexapodModel(parameters)
    plant = DelayedPlant(make_plant(backend, parameters), delay)
    controller = make_controller(controller_name, model, gain_set=GAIN_SET,
                                 delay_compensation=parameters.controllers.delay_compensation if compensated else None)
    trajectory = make_trajectory("operational_space", model)
    state = model.create_state()
    controller.reset(0.0, plant.joint_positions(), plant.joint_velocities())
    limit = parameters.limits.actuator_force_max
    errors, clamped, peak, failure = [], 0, 0.0, ""
    started = time.monotonic()
    steps = round(duration / plant.dt)
    for _ in range(steps):
        t = plant.time
        reference = trajectory.sample(t)
        error = reference.pose - platform_pose(backend, plant, model, state)
        errors.append((np.linalg.norm(error[:3]), np.linalg.norm(wrap_angle(error[3:]))))
        forces = controller.update(t, plant.joint_positions(), plant.joint_velocities(), reference).forces
        clamped += bool(np.any(np.abs(forces) >= limit))
        peak = max(peak, float(np.abs(forces).max()))
        try:
            plant.apply_forces(forces)
            plant.step()
        except HexapodError as error:
            failure = f"stopped at {t:.2f} s"
            break
    errors = np.array(errors)
    return {
        "position": float(np.sqrt(np.mean(errors[:, 0] ** 2))),
        "orientation": float(np.sqrt(np.mean(errors[:, 1] ** 2))),
        "clamped": clamped / len(errors),
        "peak": peak,
        "failure": failure,
        "delay_estimate": getattr(controller, "delay_periods", None),
        "wall": time.monotonic() - started,
    }


def cell(result: dict) -> str:
    text = (f"{result['position']:.2g} m / {result['orientation']:.2g} rad RMS, peak {result['peak']:.3g} N"
            + (f", **+-333 N in {100 * result['clamped']:.0f} % of steps**" if result["clamped"] else ""))
    return text + (f", {result['failure']}" if result["failure"] else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plants", nargs="+", default=["dart", "mujoco", "embedded"])
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--delays", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    print(f"6.5 trajectory, {args.duration:g} s, simulated_plant gains, 1 kHz\n")
    print("| plant | controller | delay [periods] | bare law | compensated (delay estimated) |")
    print("|---|---|---:|---|---|")
    for backend in args.plants:
        for name in CONTROLLER_NAMES[::-1]:
            for delay in args.delays:
                bare, compensated = run(backend, name, delay, False, args.duration), run(backend, name, delay, True, args.duration)
                print(f"| {backend} | {name} | {delay} | {cell(bare)} | {cell(compensated)} "
                      f"(estimate {compensated['delay_estimate']}) |", flush=True)


if __name__ == "__main__":
    main()
