"""The transport delay of the simulated loop (simulation/delay.py): when a command acts, what is held.

The wrapped plant here is a recorder that logs the force acting over each step, so the expected
arrivals are counted directly from the definition in the module docstring, not from the wrapper.
"""

import numpy as np
import pytest

from hexapod_control import load_parameters
from hexapod_control.errors import InvalidInputError, ParameterError
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant, with_loop_delay
from hexapod_control.simulation.plant import Plant

PARAMETERS = load_parameters()
STEPS = 4000  # commands per statistical check: the fractions below are good to ~2 %


class RecordingPlant(Plant):
    """A plant that only logs which force acted over each step (zero-order hold, zero at reset)."""

    dt = 0.001

    def __init__(self):
        self.reset(np.zeros(6))

    @property
    def time(self):
        return len(self.log) * self.dt

    def reset(self, q, qd=None):
        self.log, self._forces = [], np.zeros(6)

    def apply_forces(self, forces):
        self._forces = np.array(forces, dtype=float)

    @property
    def applied_forces(self):
        return self._forces.copy()

    def step(self, steps=1):
        self.log.extend([self._forces.copy()] * steps)

    def joint_positions(self):
        return np.zeros(6)

    def joint_velocities(self):
        return np.zeros(6)


def command(k):
    """Command k carries its own index, so the log tells which command acted."""
    return np.full(6, float(k + 1))  # never 0, the force held before the first arrival


def acting_commands(plant: DelayedPlant, steps=STEPS) -> np.ndarray:
    """Send command k at step k; the index of the command acting over each step (-1: none yet)."""
    for k in range(steps):
        plant.apply_forces(command(k))
        plant.step()
    return np.array([int(forces[0]) - 1 for forces in plant.plant.log])


@pytest.mark.parametrize("periods", [0, 1, 2, 3])
def test_a_command_acts_exactly_periods_steps_after_the_state_it_answers(periods):
    acting = acting_commands(DelayedPlant(RecordingPlant(), periods), steps=50)
    steps = np.arange(50)
    np.testing.assert_array_equal(acting, np.where(steps >= periods, steps - periods, -1))


def test_between_arrivals_the_last_command_is_held_and_zero_before_the_first():
    plant = DelayedPlant(RecordingPlant(), 2)
    plant.apply_forces(command(0))
    plant.step(5)  # nothing more sent: command 0 arrives at step 2 and stays
    assert [int(f[0]) for f in plant.plant.log] == [0, 0, 1, 1, 1]
    assert plant.in_flight == 0 and np.all(plant.applied_forces == command(0))


@pytest.mark.parametrize("jitter", [0.5, 1.0, 2.0])
def test_jitter_delays_commands_by_whole_updates_in_order_newest_wins(jitter):
    periods = 1
    acting = acting_commands(DelayedPlant(RecordingPlant(), periods, jitter_periods=jitter, seed=3))
    # In order: the acting command never goes back; each acts periods .. periods + ceil(jitter) late.
    assert np.all(np.diff(acting) >= 0)
    lateness = (np.arange(STEPS) - acting)[periods:]
    assert lateness.min() >= periods and lateness.max() == periods + np.ceil(jitter)
    # The step's own command (sent `periods` earlier) acts when its extra floor(u) is 0, u uniform
    # in [0, jitter + 1), and its predecessor was not late by 2 or more (which holds it back).
    on_time = 1.0 / (jitter + 1.0)
    if jitter >= 2.0:
        on_time *= 2.0 / 3.0  # the predecessor's extra must be 0 or 1 of 0, 1, 2
    assert np.mean(lateness == periods) == pytest.approx(on_time, abs=0.025)


def test_lost_commands_leave_the_last_one_acting_and_are_counted():
    plant = DelayedPlant(RecordingPlant(), 1, drop_probability=0.2, seed=5)
    acting = acting_commands(plant)
    assert plant.sent == STEPS and plant.lost / STEPS == pytest.approx(0.2, abs=0.02)
    delivered = set(acting[acting >= 0].tolist())
    assert len(delivered) == pytest.approx(0.8 * STEPS, rel=0.03)
    # A lost command never acts: the step it should have acted on keeps the one before.
    for step in range(1, STEPS):
        assert acting[step] in (step - 1, acting[step - 1])


def test_a_seed_reproduces_a_run_and_reset_restarts_it():
    def run(seed):
        return acting_commands(DelayedPlant(RecordingPlant(), 1, jitter_periods=1.0, drop_probability=0.1, seed=seed), 300)

    np.testing.assert_array_equal(run(7), run(7))
    assert not np.array_equal(run(7), run(8))
    plant = DelayedPlant(RecordingPlant(), 1, jitter_periods=1.0, drop_probability=0.1, seed=7)
    acting_commands(plant, 300)
    plant.reset(np.zeros(6))
    assert plant.in_flight == 0 and plant.sent == 0
    np.testing.assert_array_equal(acting_commands(plant, 300), run(7))


def test_zero_delay_is_the_plant_itself_to_the_last_bit():
    forces = np.random.default_rng(0).normal(0.0, 30.0, (200, 6)) + make_plant("embedded", PARAMETERS).model.gravity_term(
        np.full(6, PARAMETERS.home_actuator_position))
    bare, wrapped = make_plant("embedded", PARAMETERS), DelayedPlant(make_plant("embedded", PARAMETERS), 0)
    for f in forces:
        for plant in (bare, wrapped):
            plant.apply_forces(f)
            plant.step()
    np.testing.assert_array_equal(wrapped.joint_positions(), bare.joint_positions())
    np.testing.assert_array_equal(wrapped.true_state[1], bare.true_state[1])  # extras read through
    assert wrapped.time == bare.time


def test_the_parameters_section_sets_the_delay_and_zero_leaves_the_plant_bare():
    delayed = with_loop_delay(RecordingPlant(), PARAMETERS.simulation)
    shipped = PARAMETERS.simulation.loop_delay
    assert isinstance(delayed, DelayedPlant) and delayed.delay_periods == shipped.periods
    assert (delayed.jitter_periods, delayed.drop_probability, delayed.seed) == (
        shipped.jitter_periods, shipped.drop_probability, PARAMETERS.simulation.seed)
    lockstep = PARAMETERS.replace(simulation={"loop_delay": {"periods": 0}})
    bare = RecordingPlant()
    assert with_loop_delay(bare, lockstep.simulation) is bare


@pytest.mark.parametrize("key, value, words", [
    ("periods", -1, "must not be negative"),
    ("periods", 1.5, "expected an integer"),
    ("jitter_periods", -0.5, "must not be negative"),
    ("drop_probability", 1.0, "must be below 1"),
])
def test_bad_delay_settings_are_rejected_naming_the_key(key, value, words):
    with pytest.raises(ParameterError, match=rf"hexapod\.simulation\.loop_delay\.{key}: {words}"):
        PARAMETERS.replace(simulation={"loop_delay": {key: value}})


def test_a_bad_command_raises_before_it_is_sent():
    plant = DelayedPlant(RecordingPlant(), 1)
    with pytest.raises(InvalidInputError):
        plant.apply_forces([0.0] * 5)
    with pytest.raises(InvalidInputError):
        plant.apply_forces([np.nan] * 6)
    assert plant.sent == 0 and plant.in_flight == 0
