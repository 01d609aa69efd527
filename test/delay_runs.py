"""Closed-loop runs behind a transport delay, shared by the delay tests (run as a script: the figures).

Both controllers track the thesis 6.5 trajectory with its ramp sped up (kappa = 1 s^-3 instead of
0.01, so the platform moves at full amplitude, 0.02 m and 3 deg at 0.1 Hz, within 2 s rather than
10) on a plant behind :class:`DelayedPlant`. The errors are the platform's, measured without the
project's kinematics where the plant allows it (MuJoCo's and DART's own platform pose; the
embedded simulator's true state through FK otherwise).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.control.controllers import make_controller
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.errors import HexapodError
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant

FAST_RAMP = load_parameters().replace(trajectories={"operational_space": {"ramp_rate": 1.0}})
DURATION = 4.0  # [s]: the ramp (s > 0.99 from 1.7 s on), then over 2 s at full amplitude
GAIN_SET = "simulated_plant"  # the simulators' gains (no rotor inertia in the rigid-body plants)
SEED = 11
SETTLED = 0.1  # [s] from here on the start's sag (the delay's periods of zero force) has died out


@dataclass(frozen=True)
class Run:
    position_rms: float  # [m] platform position error, whole run
    position_max: float  # [m]
    settled_position_rms: float  # [m] after the start (SETTLED), where the drives held zero for the delay
    orientation_rms: float  # [rad]
    saturated: float  # fraction of steps with a clamped force
    failure: str  # why the plant stopped ("" when it ran to the end)
    delays: np.ndarray  # the compensation's delay at each step (empty without it)

    @property
    def ok(self) -> bool:
        return not self.failure and self.saturated == 0.0


def compensation(periods: int | None = None):
    """The shipped delay compensation (estimated from its start value), or a fixed delay."""
    shipped = FAST_RAMP.controllers.delay_compensation
    if periods is None:
        return shipped
    return shipped.model_copy(update={"delay_periods": periods, "estimate": False})


def track(backend: str, controller_name: str, delay: int, compensated=True, jitter=0.0, drop=0.0,
          duration=DURATION, parameters=FAST_RAMP) -> Run:
    """``compensated``: True = the shipped compensation, False = the bare law, or settings."""
    model = HexapodModel(parameters)
    plant = DelayedPlant(make_plant(backend, parameters), delay, jitter, drop, SEED)
    settings = compensation() if compensated is True else (compensated or None)
    controller = make_controller(controller_name, model, gain_set=GAIN_SET, delay_compensation=settings)
    trajectory = make_trajectory("operational_space", model)
    truth = model.create_state()
    controller.reset(0.0, plant.joint_positions(), plant.joint_velocities())
    errors, saturated, delays, failure = [], 0, [], ""
    steps = round(duration / plant.dt)
    for _ in range(steps):
        t = plant.time
        reference = trajectory.sample(t)
        if backend == "mujoco":
            pose = plant.platform_pose().pose
        elif backend == "dart":
            pose = plant.platform_pose()
        else:
            pose = model.forward_kinematics(plant.true_state[0], truth).pose
        error = reference.pose - pose
        errors.append((np.linalg.norm(error[:3]), np.linalg.norm(wrap_angle(error[3:]))))
        output = controller.update(t, plant.joint_positions(), plant.joint_velocities(), reference)
        saturated += bool(output.saturated.any())
        if settings is not None:
            delays.append(controller.delay_periods)
        try:
            plant.apply_forces(output.forces)
            plant.step()
        except HexapodError as error:
            failure = f"t = {t:.3f} s: {error}"
            break
    errors = np.array(errors)
    settled = errors[round(SETTLED / plant.dt):, 0]
    return Run(float(np.sqrt(np.mean(errors[:, 0] ** 2))), float(errors[:, 0].max()),
               float(np.sqrt(np.mean(settled ** 2))) if settled.size else float("nan"),
               float(np.sqrt(np.mean(errors[:, 1] ** 2))), saturated / steps, failure, np.array(delays))


def main() -> None:
    backends = sys.argv[1:] or ["embedded", "mujoco"]
    for backend in backends:
        for name in ("computed_torque", "double_loop"):
            for delay, jitter, drop in ((0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0), (2, 1.0, 0.05)):
                for compensated in (False, True):
                    run = track(backend, name, delay, compensated, jitter, drop)
                    print(f"{backend:8s} {name:15s} delay {delay} jitter {jitter} drop {drop} "
                          f"{'compensated  ' if compensated else 'uncompensated'}: position rms {run.position_rms:.2e} "
                          f"max {run.position_max:.2e} m (rms {run.settled_position_rms:.2e} m after {SETTLED} s), orientation rms {run.orientation_rms:.2e} rad, "
                          f"saturated {100 * run.saturated:.0f} %{', ' + run.failure if run.failure else ''}"
                          + (f", delay estimate at the end {run.delays[-1]}" if run.delays.size else ""), flush=True)


if __name__ == "__main__":
    main()
