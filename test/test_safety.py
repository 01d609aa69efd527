"""The safety supervisor without ROS: every row of the safe-behaviour rule, latching and re-arming."""

import dataclasses
import math

import numpy as np
import pytest

from hexapod_control.control.controllers import make_controller
from hexapod_control.control.safety import (
    Action,
    SafetySupervisor,
    SupervisorState,
)
from hexapod_control.control.trajectories import home_pose
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import load_parameters
from hexapod_control.ros.conventions import reference_point_from_euler

NAMES = [f"slider_{k}" for k in range(6)]
# HOLD damping the tests set (the shipped value), so the braking forces below are stated by hand.
HOLD_DAMPING = 300.0  # [N s/m]
STATIC_FORCE_STEP = 1e-4  # [m] difference step of static_forces (1e-3: truncation 9e-9 N, 3e-5: round-off 1e-10 N)
# static_forces against the model's gravity term: 3.4e-11 N worst measured (home and the limit states).
STATIC_FORCE_TOLERANCE = 1e-10  # [N]


@pytest.fixture(scope="module")
def parameters():
    return load_parameters()


@pytest.fixture(scope="module")
def home(parameters):
    return home_pose(HexapodModel(parameters))


@pytest.fixture
def supervisor(parameters):
    settings = parameters.replace(safety={"hold_damping": HOLD_DAMPING}).safety
    return SafetySupervisor(HexapodModel(parameters), settings, NAMES)


@pytest.fixture
def controller(parameters):
    return make_controller("computed_torque", HexapodModel(parameters))


def feed(supervisor, now, q, qd=None, names=NAMES):
    qd = np.zeros(6) if qd is None else qd
    return supervisor.joint_state(now, now, names, list(q), list(qd))


def give_reference(supervisor, now, pose):
    point = reference_point_from_euler(pose, np.zeros(6), np.zeros(6))
    return supervisor.reference_point(now, now, point)


def armed(supervisor, controller, parameters, home, now=0.0):
    q = np.full(6, parameters.home_actuator_position)
    feed(supervisor, now, q)
    assert give_reference(supervisor, now, home)
    accepted, message = supervisor.arm(now, controller.reset)
    assert accepted, message
    return q


def static_forces(parameters, q, step=STATIC_FORCE_STEP):
    """The forces that hold the robot at rest at q, by virtual work: tau = dU/dq.

    Fourth-order central differences of the potential energy U(q) (the model's energy, not its
    gravity term, which is what the supervisor uses).
    """
    model = HexapodModel(parameters)

    def potential(x):
        return model.energy(x, np.zeros(6))[1]

    unit = np.eye(6)
    return np.array([
        (-potential(q + 2 * step * u) + 8 * potential(q + step * u) - 8 * potential(q - step * u)
         + potential(q - 2 * step * u)) / (12 * step)
        for u in unit
    ])


# ------------------------------------------------------------------------------------------ arming
def test_disarmed_gives_zero_and_never_runs_the_controller(supervisor, parameters):
    feed(supervisor, 0.0, np.full(6, parameters.home_actuator_position))
    decision = supervisor.command(0.0, lambda *args: pytest.fail("controller ran while disarmed"))
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert supervisor.state == SupervisorState.DISARMED


def test_arm_needs_fresh_valid_feedback_inside_the_limits(supervisor, controller, parameters):
    assert supervisor.arm(0.0, controller.reset) == (False, "cannot arm: no fresh valid joint state")
    q = np.full(6, parameters.home_actuator_position)
    feed(supervisor, 0.0, q)
    late = supervisor.settings.joint_state_timeout * 2
    assert not supervisor.arm(late, controller.reset)[0]
    feed(supervisor, late, q, np.full(6, 2 * parameters.limits.actuator_speed_max))
    accepted, message = supervisor.arm(late, controller.reset)
    assert not accepted and "speed limit" in message
    feed(supervisor, late, q)
    assert supervisor.arm(late, controller.reset) == (True, "armed")


def test_armed_without_reference_holds_with_gravity_compensation_unlatched(supervisor, controller, parameters):
    q, qd = np.full(6, parameters.home_actuator_position), np.full(6, 0.01)
    feed(supervisor, 0.0, q)
    assert supervisor.arm(0.0, controller.reset)[0]
    feed(supervisor, 0.001, q, qd)
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.HOLD and decision.reason == "waiting for a reference"
    braking = 3.0  # [N] = 300 N s/m x 0.01 m/s on every actuator
    np.testing.assert_allclose(decision.forces, static_forces(parameters, q) - braking, rtol=0, atol=STATIC_FORCE_TOLERANCE)
    assert supervisor.state == SupervisorState.ARMED  # not a fault


def test_armed_with_a_reference_controls(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    decision = supervisor.command(0.0, controller.update)
    assert decision.action == Action.CONTROL and decision.control is not None
    # At home, at rest, with zero error, computed torque is the static force.
    np.testing.assert_allclose(decision.forces, static_forces(parameters, q), rtol=0, atol=STATIC_FORCE_TOLERANCE)


def test_controller_forces_are_clamped_again(supervisor, controller, parameters, home):
    armed(supervisor, controller, parameters, home)
    unclamped = controller.update(0.0, np.full(6, parameters.home_actuator_position), np.zeros(6), supervisor.reference.reference)
    huge = type(unclamped)(**{**unclamped.__dict__, "forces": np.full(6, 1e4)})
    decision = supervisor.command(0.0, lambda *args: huge)
    assert np.all(decision.forces == parameters.limits.actuator_force_max) and decision.saturated.all()


# ------------------------------------------------------------------------------------------ faults
def test_stale_feedback_gives_zero_latched_until_rearm(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    timeout = supervisor.settings.joint_state_timeout
    assert supervisor.watchdog(timeout / 2) is None
    decision = supervisor.watchdog(2 * timeout)
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert supervisor.state == SupervisorState.FAULT and "stale" in supervisor.reason
    # Fresh feedback and a fresh reference do not clear the fault ...
    feed(supervisor, 2 * timeout, q)
    give_reference(supervisor, 2 * timeout, home)
    assert supervisor.command(2 * timeout, controller.update).action == Action.ZERO
    # ... re-arming does.
    assert supervisor.arm(2 * timeout, controller.reset)[0]
    assert supervisor.command(2 * timeout, controller.update).action == Action.CONTROL


@pytest.mark.parametrize(
    "names, positions, velocities, what",
    [
        (NAMES, [0.1765] * 5, [0.0] * 6, "5 positions"),
        (NAMES[:5], [0.1765] * 5, [0.0] * 5, "lacks joint"),
        (NAMES, [0.1765] * 5 + [math.nan], [0.0] * 6, "nan"),
        (NAMES, [0.1765] * 6, [0.0] * 5 + [math.inf], "inf"),
    ],
)
def test_invalid_feedback_gives_zero_and_a_reason(supervisor, controller, parameters, home, names, positions, velocities, what):
    armed(supervisor, controller, parameters, home)
    assert supervisor.joint_state(0.001, 0.001, names, positions, velocities) is None
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert what in supervisor.reason and supervisor.invalid_joint_states == 1


@pytest.mark.parametrize(
    "change, velocity, braking, words",
    [
        (lambda q: q.__setitem__(0, 0.41), 0.0, 0.0, "outside the travel"),
        (lambda q: q.__setitem__(slice(0, 2), 0.03), 0.0, 0.0, "minimum slider separation"),
        (lambda q: None, 0.7, 210.0, "speed limit"),  # 300 N s/m x 0.7 m/s, below the 333 N limit
    ],
    ids=["travel", "separation", "speed"],
)
def test_limit_violation_holds_latched(supervisor, controller, parameters, home, change, velocity, braking, words):
    armed(supervisor, controller, parameters, home)
    q = np.full(6, parameters.home_actuator_position)
    change(q)
    qd = np.full(6, velocity)
    feed(supervisor, 0.001, q, qd)
    decision = supervisor.command(0.001, lambda *args: pytest.fail("controller ran beyond a limit"))
    assert decision.action == Action.HOLD and words in decision.reason
    assert supervisor.state == SupervisorState.FAULT
    expected = static_forces(parameters, q) - braking
    np.testing.assert_allclose(decision.forces, expected, rtol=0, atol=STATIC_FORCE_TOLERANCE)
    assert not decision.saturated.any()
    # A HOLD fault escalates to ZERO when the feedback goes bad.
    supervisor.joint_state(0.002, 0.002, NAMES, [math.nan] * 6, [0.0] * 6)
    assert supervisor.command(0.002, controller.update).action == Action.ZERO


def test_hold_force_is_clamped_to_the_force_limit(supervisor, controller, parameters, home):
    """1.5 m/s on every slider: 450 N of braking (plus ~4 N of gravity) exceed the force limit."""
    armed(supervisor, controller, parameters, home)
    feed(supervisor, 0.001, np.full(6, parameters.home_actuator_position), np.full(6, 1.5))
    decision = supervisor.command(0.001, lambda *args: pytest.fail("controller ran beyond a limit"))
    assert decision.action == Action.HOLD and "speed limit" in decision.reason
    np.testing.assert_array_equal(decision.forces, np.full(6, -parameters.limits.actuator_force_max))
    assert decision.saturated.all()


@pytest.mark.parametrize(
    "pose_change, words",
    [
        (lambda p: p.__setitem__(2, math.nan), "non-finite"),
        (lambda p: p.__setitem__(2, 1.0), "invalid reference"),  # beyond the legs' reach
    ],
)
def test_invalid_reference_holds_latched(supervisor, controller, parameters, home, pose_change, words):
    armed(supervisor, controller, parameters, home)
    pose = home.copy()
    pose_change(pose)
    point = reference_point_from_euler(pose, np.zeros(6), np.zeros(6))
    assert not supervisor.reference_point(0.001, 0.001, point)
    feed(supervisor, 0.001, np.full(6, parameters.home_actuator_position))
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.HOLD and words in decision.reason
    assert supervisor.invalid_references == 1


def test_stale_reference_holds(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    late = supervisor.settings.reference_timeout * 2
    feed(supervisor, late, q)
    decision = supervisor.command(late, controller.update)
    assert decision.action == Action.HOLD and "reference stale" in decision.reason


def test_controller_safe_output_holds(supervisor, controller, parameters, home):
    armed(supervisor, controller, parameters, home)
    bad = controller.update(0.0, np.full(6, math.nan), np.zeros(6), supervisor.reference.reference)
    assert bad.safe_output
    decision = supervisor.command(0.0, lambda *args: bad)
    assert decision.action == Action.HOLD and "invalid_input" in decision.reason


def test_disarm_from_a_fault_gives_zero(supervisor, controller, parameters, home):
    armed(supervisor, controller, parameters, home)
    supervisor.watchdog(1.0)
    supervisor.disarm()
    assert supervisor.state == SupervisorState.DISARMED and supervisor.fault_action is None
    assert supervisor.command(1.0, controller.update).action == Action.ZERO


def test_repeated_or_out_of_order_joint_states_are_not_taken(supervisor):
    assert supervisor.is_new(0.001) and supervisor.is_new(0.002)
    assert not supervisor.is_new(0.002)  # a resent copy
    assert not supervisor.is_new(0.0015)  # out of order
    assert supervisor.repeated_joint_states == 2


@pytest.mark.parametrize(
    "make_point, words",
    [
        (lambda point: None, "reference must hold exactly one point"),  # the node's conversion error
        (lambda point: dataclasses.replace(point, rotation=(0.0, 0.0, 0.0, 0.0)), "has norm 0.0, not 1"),
        (lambda point: reference_point_from_euler([0.0, 0.0, 0.42, 0.0, math.pi / 2, 0.0], np.zeros(6), np.zeros(6)),
         "Euler singularity"),
    ],
    ids=["malformed_message", "zero_quaternion", "euler_singularity"],
)
def test_malformed_or_singular_reference_holds_latched(supervisor, controller, parameters, home, make_point, words):
    q = armed(supervisor, controller, parameters, home)
    point = make_point(reference_point_from_euler(home, np.zeros(6), np.zeros(6)))
    assert not supervisor.reference_point(0.001, 0.001, point, "reference must hold exactly one point, got 2")
    feed(supervisor, 0.001, q)
    decision = supervisor.command(0.001, lambda *args: pytest.fail("controller ran on an invalid reference"))
    assert decision.action == Action.HOLD and words in decision.reason
    assert supervisor.state == SupervisorState.FAULT and supervisor.invalid_references == 1
    np.testing.assert_allclose(decision.forces, static_forces(parameters, q), rtol=0, atol=STATIC_FORCE_TOLERANCE)
    # The earlier valid reference is not used again: a fresh valid one does not clear the latch.
    assert give_reference(supervisor, 0.002, home)
    feed(supervisor, 0.002, q)
    assert supervisor.command(0.002, controller.update).action == Action.HOLD


def test_controller_returning_non_finite_forces_holds(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    good = controller.update(0.0, q, np.zeros(6), supervisor.reference.reference)
    poisoned = dataclasses.replace(good, forces=np.array([0.0, 0.0, math.nan, 0.0, 0.0, 0.0]))
    assert not poisoned.safe_output
    decision = supervisor.command(0.0, lambda *args: poisoned)
    assert decision.action == Action.HOLD and "invalid forces" in decision.reason
    assert np.all(np.isfinite(decision.forces))
    np.testing.assert_allclose(decision.forces, static_forces(parameters, q), rtol=0, atol=STATIC_FORCE_TOLERANCE)


def test_hold_force_not_computable_gives_zero(supervisor, controller, parameters, home):
    """Inside the travel but q0 + q1 > 2L: nothing assembles, so no gravity force exists -> ZERO."""
    armed(supervisor, controller, parameters, home)
    q = np.full(6, parameters.home_actuator_position)
    q[:2] = 0.39
    assert q[0] + q[1] > 2 * parameters.geometry.leg_length
    HexapodModel(parameters).check_joint_limits(q)  # not a limit violation: the HOLD path is taken
    feed(supervisor, 0.001, q)
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert supervisor.state == SupervisorState.FAULT and supervisor.fault_action == Action.ZERO
    assert "hold force not computable" in decision.reason


def test_command_on_stale_feedback_gives_zero_without_the_watchdog(supervisor, controller, parameters, home):
    armed(supervisor, controller, parameters, home)
    late = 2 * supervisor.settings.joint_state_timeout
    decision = supervisor.command(late, lambda *args: pytest.fail("controller ran on stale feedback"))
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert supervisor.state == SupervisorState.FAULT and supervisor.fault_action == Action.ZERO


def test_non_finite_joint_state_stamp_gives_zero(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    assert supervisor.joint_state(0.001, math.nan, NAMES, list(q), [0.0] * 6) is None
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.ZERO and "stamp" in supervisor.reason
    assert supervisor.invalid_joint_states == 1
