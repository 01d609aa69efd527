"""Delay compensation when the loop runs late: publication times and the drives' measured effort.

A loop that falls behind publishes some answers one or two periods late, and the drives take them
that much later. A test-side plant here applies each command from the first period boundary after
its publication (as the fake driver's tick and ros2_control's update do), independently of
simulation/delay.py. Told when each answer went out (ControlLoop.published), the prediction is
again the plant's own state when the force applies, to round-off; not told, it is not.
"""

import math

import numpy as np
import pytest
from delay_runs import FAST_RAMP, compensation

from hexapod_control import HexapodModel
from hexapod_control.control.controllers import make_controller
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.simulation import make_plant

LATENESS = (0, 1, 2)  # whole periods an answer may go out after its state's stamp
SEED = 5
STEPS = 600
SETTLE_STEPS = 10  # the estimate leaves its start value within a few periods of the first command


class LatePlant:
    """The embedded plant; each command acts from the first period boundary after its publication.

    Publications keep their order (a later answer cannot go out before an earlier one)."""

    def __init__(self, parameters):
        self.plant = make_plant("embedded", parameters)
        self.dt = self.plant.dt
        self.queue = []  # (publication time, forces), in order
        self.last_publication = -math.inf

    def send(self, stamp, forces, lateness) -> float:
        """Publish an answer to the state at ``stamp``, ``lateness`` periods late (or later, to keep the order)."""
        published = max(stamp + (lateness + 0.5) * self.dt, self.last_publication)
        self.last_publication = published
        self.queue.append((published, np.array(forces)))
        return published

    def step(self):
        t = self.plant.time
        acting = None
        while self.queue and self.queue[0][0] <= t + 1e-12:
            acting = self.queue.pop(0)[1]  # of those that arrived, the newest
        if acting is not None:
            self.plant.apply_forces(acting)
        self.plant.step()


def run(told: bool, effort: bool = False, parameters=FAST_RAMP, plant_parameters=FAST_RAMP, start_estimate=None):
    """The 6.5 trajectory with random lateness; returns (prediction errors [m], the delay estimates)."""
    model = HexapodModel(parameters)
    late = LatePlant(plant_parameters)
    settings = compensation(1)
    if start_estimate is not None:
        settings = compensation().model_copy(update={"estimate": True, "delay_periods": start_estimate})
    controller = make_controller("computed_torque", model, gain_set="simulated_plant", delay_compensation=settings)
    trajectory = make_trajectory("operational_space", model)
    rng = np.random.default_rng(SEED)
    plant = late.plant
    controller.reset(0.0, plant.joint_positions(), plant.joint_velocities())
    predictions, truth, estimates = [], [], []
    for _ in range(STEPS):
        t = plant.time
        if effort:
            controller.measured_effort(t, plant.applied_forces)
        output = controller.update(t, plant.joint_positions(), plant.joint_velocities(), trajectory.sample(t))
        predictions.append(controller.prediction[0].copy())
        truth.append(np.array(plant.true_state[0]))
        estimates.append(controller.delay_periods)
        published = late.send(t, output.forces, int(rng.choice(LATENESS)))
        if told:
            controller.published(t, published)
        late.step()
    errors = np.abs(np.array(predictions[:-1]) - np.array(truth[1:])).max(axis=1)
    return errors, np.array(estimates)


@pytest.mark.slow
def test_told_when_each_answer_went_out_the_prediction_is_exact():
    errors, _ = run(told=True)
    assert errors.max() < 1e-14  # [m] as on time (test_delay_compensation.py)
    untold, _ = run(told=False)
    assert untold.max() > 1e-9  # the same run without the publication times mispredicts


@pytest.mark.slow
def test_the_measured_effort_names_the_delay_despite_a_wrong_model():
    """The plant's drives have rotor inertia and friction the controller's model lacks: through the
    model the force that acted is wrong, the drives' own measurement of it is not."""
    with_drives = FAST_RAMP.replace(actuators={"reflected_inertia": [1.0] * 6, "viscous_friction": [200.0] * 6,
                                               "coulomb_friction": [30.0] * 6, "static_friction": [30.0] * 6})
    # Started at 3 periods; the plant's base delay is 1 (each answer acts from the first period
    # boundary after it went out; the lateness is what the controller was told).
    _, estimates = run(told=True, effort=True, plant_parameters=with_drives, start_estimate=3)
    assert np.flatnonzero(estimates != 1).max() < SETTLE_STEPS and np.all(estimates[SETTLE_STEPS:] == 1)
    _, inferred = run(told=True, effort=False, plant_parameters=with_drives, start_estimate=3)
    assert np.any(inferred[SETTLE_STEPS:] != 1)  # through the wrong model the estimate wanders


@pytest.mark.parametrize("effort", [[math.nan] * 6, [1.0] * 5, "text"], ids=["nan", "short", "text"])
def test_a_malformed_effort_is_not_used(effort):
    model = HexapodModel(FAST_RAMP)
    controller = make_controller("computed_torque", model, gain_set="simulated_plant",
                                 delay_compensation=compensation())
    controller.measured_effort(0.0, effort)
    assert controller.flight.effort is None
