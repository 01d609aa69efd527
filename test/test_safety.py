"""The safety supervisor without ROS: every row of the safe-behaviour rule, latching, arming and ramps.

Expected forces come from the potential energy (virtual work), not from the model's gravity term;
reference limits from finite differences of inverse kinematics, not from the Jacobian the
supervisor uses. The hypothesis tests at the end throw random API calls at the supervisor with
the real controllers behind it (through ControlLoop, as the node runs them).
"""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from hexapod_control.control.controllers import CONTROLLER_NAMES, make_controller
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.safety import (
    RATE_KNOWN_SPACINGS,
    Action,
    Intake,
    SafetySupervisor,
    SupervisorState,
)
from hexapod_control.control.trajectories import Reference, home_pose
from hexapod_control.conventions import joint_state_arrays, reference_point_from_euler
from hexapod_control.errors import InvalidInputError, UnreachablePoseError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import load_parameters

NAMES = [f"slider_{k}" for k in range(6)]
# Numbers of the shipped file the tests state by hand, so that the expected forces below are.
HOLD_DAMPING = 300.0  # [N s/m]
HOLD_FORCE_MAX = 100.0  # [N]
STATIC_FORCE_STEP = 1e-4  # [m] difference step of static_forces (1e-3: truncation 9e-9 N, 3e-5: round-off 1e-10 N)
# static_forces against the model's gravity term: 3.4e-11 N worst measured (home and the limit states).
STATIC_FORCE_TOLERANCE = 1e-10  # [N]
IK_STEP = 1e-6  # [m, rad] central differences of inverse kinematics (truncation ~1e-12 relative)
RAMP_SAMPLES = 400  # instants along a ramp where the actuator speed is checked by differences


@pytest.fixture(scope="module")
def parameters():
    return load_parameters()


@pytest.fixture(scope="module")
def model(parameters):
    return HexapodModel(parameters)


@pytest.fixture(scope="module")
def home(model):
    return home_pose(model)


@pytest.fixture(scope="module")
def home_q(parameters):
    return np.full(6, parameters.home_actuator_position)


def make_supervisor(parameters, **safety):
    settings = parameters.replace(safety={"hold_damping": HOLD_DAMPING, "hold_force_max": HOLD_FORCE_MAX, **safety}).safety
    return SafetySupervisor(HexapodModel(parameters), settings, NAMES,
                            parameters.controllers.valid_rates("computed_torque", "robot"))


@pytest.fixture
def supervisor(parameters):
    return make_supervisor(parameters)


@pytest.fixture
def teleporting(parameters):
    """A supervisor whose motion check cannot bite: for rows reached by jumping to a state at once."""
    return make_supervisor(parameters, plausible_step_margin=1.0)


@pytest.fixture
def controller(parameters):
    return make_controller("computed_torque", HexapodModel(parameters))


def feed(supervisor, now, q, qd=None, names=NAMES, stamp=None, steady=None):
    qd = np.zeros(6) if qd is None else qd
    return supervisor.joint_state(now, now if stamp is None else stamp, names, list(q), list(qd), steady)


def give_reference(supervisor, now, pose, velocity=None, acceleration=None):
    point = reference_point_from_euler(pose, np.zeros(6) if velocity is None else velocity,
                                       np.zeros(6) if acceleration is None else acceleration)
    return supervisor.reference_point(now, now, point)


def settle(supervisor, now, q, qd=None):
    """Feed the states of the last RATE_KNOWN_SPACINGS periods up to ``now``: the rate is known then."""
    period = 1.0 / supervisor.model.parameters.controllers.rate
    for k in range(RATE_KNOWN_SPACINGS, -1, -1):
        assert feed(supervisor, now - k * period, q, qd) == Intake.TAKEN
    assert supervisor.rate_known


def armed(supervisor, controller, parameters, home, now=0.0):
    q = np.full(6, parameters.home_actuator_position)
    settle(supervisor, now, q)
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


def hold_forces(parameters, q, qd):
    """HOLD by hand: static force minus the damping, clamped to the hold bound."""
    return np.clip(static_forces(parameters, q) - HOLD_DAMPING * np.asarray(qd), -HOLD_FORCE_MAX, HOLD_FORCE_MAX)


def joint_rates(model, pose, direction):
    """dq/ds along pose + s direction, by central differences of inverse kinematics."""
    ahead, behind = pose + IK_STEP * direction, pose - IK_STEP * direction
    return (model.inverse_kinematics(ahead[:3], ahead[3:]).q - model.inverse_kinematics(behind[:3], behind[3:]).q) / (2 * IK_STEP)


# ------------------------------------------------------------------------------------------ arming
def test_disarmed_gives_zero_and_never_runs_the_controller(supervisor, home_q):
    feed(supervisor, 0.0, home_q)
    decision = supervisor.command(0.0, lambda *args: pytest.fail("controller ran while disarmed"))
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert supervisor.state == SupervisorState.DISARMED


def test_arm_needs_fresh_valid_feedback_inside_the_limits(supervisor, controller, parameters, home_q):
    assert supervisor.arm(0.0, controller.reset) == (False, "cannot arm: no fresh valid joint state")
    feed(supervisor, 0.0, home_q)
    late = supervisor.settings.joint_state_timeout * 2
    accepted, message = supervisor.arm(late, controller.reset)
    assert not accepted and "stale" in message
    feed(supervisor, late, home_q, np.full(6, 2 * parameters.limits.actuator_speed_max))
    accepted, message = supervisor.arm(late, controller.reset)
    assert not accepted and "speed limit" in message
    feed(supervisor, late + 0.001, home_q)
    accepted, message = supervisor.arm(late + 0.001, controller.reset)
    assert not accepted and "rate is not known yet (2 stamp spacings" in message
    settle(supervisor, late + 0.01, home_q)
    accepted, message = supervisor.arm(late + 0.01, controller.reset)
    assert accepted and message.startswith("armed")


def test_arm_while_armed_changes_nothing_and_keeps_the_integral(parameters, home, home_q):
    """The double loop learns the gravity load in its integral; a second arm must not drop it."""
    supervisor = make_supervisor(parameters)
    controller = make_controller("double_loop", HexapodModel(parameters))
    armed(supervisor, controller, parameters, home)
    period = parameters.controllers.period
    sinking = np.full(6, 0.01)  # [m/s]: a velocity error the integral accumulates
    for k in range(1, 6):
        feed(supervisor, k * period, home_q, sinking)
        assert supervisor.command(k * period, controller.update).action == Action.CONTROL
    learnt = controller.integral
    assert np.all(np.abs(learnt) > 0.0)
    assert supervisor.arm(5 * period, lambda *args: pytest.fail("reset while armed")) == (True, "already armed")
    np.testing.assert_array_equal(controller.integral, learnt)
    assert supervisor.state == SupervisorState.ARMED


def test_armed_without_reference_holds_with_gravity_compensation_unlatched(supervisor, controller, parameters, home_q):
    qd = np.full(6, 0.01)
    settle(supervisor, 0.0, home_q)
    assert supervisor.arm(0.0, controller.reset)[0]
    feed(supervisor, 0.001, home_q, qd)
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.HOLD and decision.reason == "waiting for a reference"
    braking = 3.0  # [N] = 300 N s/m x 0.01 m/s on every actuator
    np.testing.assert_allclose(decision.forces, static_forces(parameters, home_q) - braking, rtol=0, atol=STATIC_FORCE_TOLERANCE)
    assert supervisor.state == SupervisorState.ARMED  # not a fault


def test_armed_with_a_reference_controls(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    decision = supervisor.command(0.0, controller.update)
    assert decision.action == Action.CONTROL and decision.control is not None
    # At home, at rest, with zero error, computed torque is the static force.
    np.testing.assert_allclose(decision.forces, static_forces(parameters, q), rtol=0, atol=STATIC_FORCE_TOLERANCE)


def test_controller_forces_are_clamped_again(supervisor, controller, parameters, home, home_q):
    armed(supervisor, controller, parameters, home)
    unclamped = controller.update(0.0, home_q, np.zeros(6), supervisor.reference.reference)
    huge = type(unclamped)(**{**unclamped.__dict__, "forces": np.full(6, 1e4)})
    decision = supervisor.command(0.0, lambda *args: huge)
    assert np.all(decision.forces == parameters.limits.actuator_force_max) and decision.saturated.all()


# ------------------------------------------------------------------------------------------ ramps
OFFSET = np.array([0.03, 0.0, 0.0, 0.0, 0.0, 0.05])  # 3 cm and 0.05 rad: beyond both step bounds


def test_arming_far_from_the_reference_ramps_from_the_measured_pose(supervisor, controller, parameters, model, home, home_q):
    target = home + OFFSET
    assert give_reference(supervisor, 0.0, target)  # disarmed: not a step from anything
    settle(supervisor, 0.0, home_q)
    accepted, message = supervisor.arm(0.0, controller.reset)
    assert accepted and "ramp" in message
    ramp = supervisor.ramp
    move = parameters.trajectories.move
    assert ramp.duration >= move.minimum_duration

    # The first controlled step tracks the measured pose at rest: no error, no jump.
    start = supervisor.tracked_reference(0.0)
    np.testing.assert_allclose(model.inverse_kinematics(start.pose[:3], start.pose[3:]).q, home_q, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(start.velocity, np.zeros(6))
    decision = supervisor.command(0.0, controller.update)
    assert decision.action == Action.CONTROL and not decision.saturated.any()
    assert decision.control.position_error_norm < 1e-12 and decision.control.orientation_error_norm < 1e-12

    # Along the ramp the actuators move within the move's speed fraction (IK differences) ...
    times = np.linspace(0.0, ramp.duration, RAMP_SAMPLES)
    q = np.array([model.inverse_kinematics(p[:3], p[3:]).q for p in (supervisor.tracked_reference(t).pose for t in times)])
    speeds = np.abs(np.diff(q, axis=0)) / np.diff(times)[:, None]
    assert speeds.max() <= move.speed_fraction * parameters.limits.actuator_speed_max * 1.001
    # ... and after it the reference itself is tracked, exactly.
    end = supervisor.tracked_reference(ramp.duration)
    np.testing.assert_array_equal(end.pose, target)
    assert supervisor.ramp is None


@pytest.mark.parametrize("offset", [0.008, 0.003, 0.0], ids=["8_mm", "3_mm", "none"])
def test_arming_near_the_reference_ramps_too(supervisor, controller, parameters, model, home, home_q, offset):
    """A millimetre's offset taken at once is a step the position gains answer at the force limit
    (the adversarial run: 8 mm gave +-333 N, 3 mm +-199 N): arming ramps from the measured pose."""
    near = home + np.array([offset, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert give_reference(supervisor, 0.0, near)
    settle(supervisor, 0.0, home_q)
    accepted, message = supervisor.arm(0.0, controller.reset)
    assert accepted and "ramp" in message
    assert supervisor.ramp.duration >= parameters.trajectories.move.minimum_duration
    start = supervisor.tracked_reference(0.0)
    np.testing.assert_allclose(model.inverse_kinematics(start.pose[:3], start.pose[3:]).q, home_q, rtol=0, atol=1e-12)
    decision = supervisor.command(0.0, controller.update)
    assert decision.action == Action.CONTROL and not decision.saturated.any()
    # The force at arming is the static one: no error to answer (virtual work, not the model's term).
    np.testing.assert_allclose(decision.forces, static_forces(parameters, home_q), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(supervisor.tracked_reference(supervisor.ramp.duration).pose, near)


def test_first_reference_after_arming_far_away_is_reached_by_a_ramp(supervisor, controller, model, home, home_q):
    settle(supervisor, 0.0, home_q)
    assert supervisor.arm(0.0, controller.reset) == (True, "armed")
    assert give_reference(supervisor, 0.001, home + OFFSET)  # the first: no last reference to step from
    feed(supervisor, 0.001, home_q)
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.CONTROL and supervisor.ramp is not None
    assert decision.control.position_error_norm < 1e-12


def test_rearming_from_a_fault_ramps_to_a_reference_that_moved_on(supervisor, controller, parameters, home, home_q):
    armed(supervisor, controller, parameters, home)
    supervisor.watchdog(1.0)  # stale: ZERO fault
    assert supervisor.state == SupervisorState.FAULT
    assert give_reference(supervisor, 1.0, home + OFFSET)  # in a fault: taken, not tracked
    feed(supervisor, 1.0, home_q)
    accepted, message = supervisor.arm(1.0, controller.reset)
    assert accepted and "ramp" in message
    decision = supervisor.command(1.0, controller.update)
    assert decision.action == Action.CONTROL and decision.control.position_error_norm < 1e-12


# ------------------------------------------------------------------------------------------ feedback faults
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


def test_steady_watchdog_trips_when_the_node_clock_stands_still(supervisor, controller, parameters, home, home_q):
    """/clock absent or rewound: the node's clock never makes the feedback stale, the steady clock does."""
    timeout = supervisor.settings.joint_state_timeout
    assert supervisor.steady_watchdog(1e6, timeout) is None  # nothing taken yet: no force to withdraw
    settle(supervisor, -0.001, home_q)
    feed(supervisor, 0.0, home_q, steady=100.0)
    assert give_reference(supervisor, 0.0, home)
    assert supervisor.arm(0.0, controller.reset)[0]
    assert supervisor.steady_watchdog(100.0 + timeout / 2, timeout) is None
    frozen = 0.0  # the node clock does not move
    assert supervisor.watchdog(frozen) is None
    decision = supervisor.steady_watchdog(100.0 + 2 * timeout, timeout)
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert supervisor.state == SupervisorState.FAULT and "steady clock" in supervisor.reason
    assert supervisor.command(frozen, controller.update).action == Action.ZERO  # latched


def test_a_state_measured_too_long_ago_is_stale(parameters, controller, home, home_q):
    # A long receive timeout isolates the stamp-age rule.
    supervisor = make_supervisor(parameters, joint_state_timeout=1.0, watchdog_period=0.1)
    armed(supervisor, controller, parameters, home)
    age = supervisor.settings.max_feedback_age
    # On arrival: a state stamped longer ago than max_feedback_age is rejected.
    assert feed(supervisor, 0.5, home_q, stamp=0.5 - 1.01 * age) == Intake.REJECTED
    decision = supervisor.command(0.5, controller.update)
    assert decision.action == Action.ZERO and "max_feedback_age" in supervisor.reason
    # While acting: the last state ages past it with no newer one.
    supervisor = make_supervisor(parameters, joint_state_timeout=1.0, watchdog_period=0.1)
    armed(supervisor, controller, parameters, home)
    assert feed(supervisor, 0.5, home_q, stamp=0.5 - 0.99 * age) == Intake.TAKEN
    give_reference(supervisor, 0.5, home)
    assert supervisor.command(0.5, controller.update).action == Action.CONTROL
    decision = supervisor.command(0.5 + 0.02 * age, controller.update)
    assert decision.action == Action.ZERO and "measured" in decision.reason


def test_a_future_stamp_is_rejected_without_locking_out_the_genuine_states(supervisor, controller, parameters, home, home_q):
    armed(supervisor, controller, parameters, home)
    ahead = supervisor.settings.max_future_stamp
    assert feed(supervisor, 0.001, home_q, stamp=0.001 + 3600.0) == Intake.REJECTED
    assert supervisor.command(0.001, controller.update).action == Action.ZERO
    assert "ahead of the clock" in supervisor.reason
    # The genuine states that follow are taken (not "repeated"), and re-arming restores control.
    assert feed(supervisor, 0.002, home_q) == Intake.TAKEN
    assert supervisor.repeated_joint_states == 0
    give_reference(supervisor, 0.002, home)
    assert supervisor.arm(0.002, controller.reset)[0]
    assert supervisor.command(0.002, controller.update).action == Action.CONTROL
    # A small lead (clocks of driver and node a little apart) is tolerated.
    assert feed(supervisor, 0.003, home_q, stamp=0.003 + 0.9 * ahead) == Intake.TAKEN
    assert feed(supervisor, 0.004, home_q, stamp=0.004 + 1.1 * ahead) == Intake.REJECTED


@pytest.mark.parametrize(
    "names, positions, velocities, what",
    [
        (NAMES, [0.1765] * 5, [0.0] * 6, "5 positions"),
        (NAMES[:5], [0.1765] * 5, [0.0] * 5, "lacks joint"),
        (NAMES, [0.1765] * 5 + [math.nan], [0.0] * 6, "nan"),
        (NAMES, [0.1765] * 6, [0.0] * 5 + [math.inf], "inf"),
        # slider_0 twice: taking the last value would control to 0.25 m, a value nobody measured as slider_0's
        (NAMES + [NAMES[0]], [0.1765] * 6 + [0.25], [0.0] * 7, "more than once"),
        (NAMES, [0.1765] * 5 + ["x"], [0.0] * 6, "not a number"),
    ],
    ids=["short", "missing", "nan", "inf", "duplicate", "not_a_number"],
)
def test_invalid_feedback_gives_zero_and_a_reason(supervisor, controller, parameters, home, names, positions, velocities, what):
    armed(supervisor, controller, parameters, home)
    assert supervisor.joint_state(0.001, 0.001, names, positions, velocities) == Intake.REJECTED
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    assert what in supervisor.reason and supervisor.invalid_joint_states == 1


def test_joint_state_arrays_refuses_duplicate_names():
    with pytest.raises(InvalidInputError, match=r"\['b'\] more than once"):
        joint_state_arrays(["a", "b", "b"], [1.0, 2.0, 3.0], [0.0] * 3, ["a", "b"])
    q, qd = joint_state_arrays(["c", "b", "a"], [3.0, 2.0, 1.0], [0.3, 0.2, 0.1], ["a", "b"])  # permuted, extra
    assert q.tolist() == [1.0, 2.0] and qd.tolist() == [0.1, 0.2]


# Travel [0.02, 0.40] m, separation >= 0.08 m, speed <= 0.65 m/s; plausible up to 0.05 m and 5x beyond.
@pytest.mark.parametrize(
    "position, velocity, action, words",
    [
        ((0, 0.40 + 0.051), 0.0, Action.ZERO, "impossible"),
        ((0, 0.02 - 0.051), 0.0, Action.ZERO, "impossible"),
        ((slice(0, 2), 0.0145), 0.0, Action.ZERO, "separation 0.029"),  # 0.08 - 0.05 = 0.03 m
        (None, 1e6, Action.ZERO, "impossible"),  # the issue's 1e6 m/s
        (None, 5.01 * 0.65, Action.ZERO, "impossible"),
        ((0, 0.40 + 0.049), 0.0, Action.HOLD, "outside the travel"),
        ((slice(0, 2), 0.035), 0.0, Action.HOLD, "minimum slider separation"),
        (None, 4.99 * 0.65, Action.HOLD, "speed limit"),
    ],
    ids=["above_travel", "below_travel", "overlapping", "1e6_m_per_s", "5x_speed",
         "just_above_travel", "carriages_touch", "fast"],
)
def test_impossible_measurements_are_invalid_real_violations_hold(teleporting, controller, parameters, home, position,
                                                                   velocity, action, words):
    supervisor = teleporting
    armed(supervisor, controller, parameters, home)
    q = np.full(6, parameters.home_actuator_position)
    if position is not None:
        q[position[0]] = position[1]
    qd = np.full(6, velocity)
    feed(supervisor, 0.001, q, qd)
    decision = supervisor.command(0.001, lambda *args: pytest.fail("controller ran beyond a limit"))
    assert decision.action == action and words in supervisor.reason
    assert supervisor.state == SupervisorState.FAULT
    if action == Action.ZERO:
        assert np.all(decision.forces == 0.0) and supervisor.invalid_joint_states == 1
    else:
        assert np.all(np.abs(decision.forces) <= HOLD_FORCE_MAX)


@pytest.mark.parametrize(
    "change, velocity, words",
    [
        (lambda q: q.__setitem__(0, 0.41), 0.0, "outside the travel"),
        (lambda q: q.__setitem__(slice(0, 2), 0.03), 0.0, "minimum slider separation"),
        (lambda q: None, 0.7, "speed limit"),  # 300 N s/m x 0.7 m/s = 210 N: clamped to the hold bound
    ],
    ids=["travel", "separation", "speed"],
)
def test_limit_violation_holds_latched(teleporting, controller, parameters, home, change, velocity, words):
    supervisor = teleporting
    armed(supervisor, controller, parameters, home)
    q = np.full(6, parameters.home_actuator_position)
    change(q)
    qd = np.full(6, velocity)
    feed(supervisor, 0.001, q, qd)
    decision = supervisor.command(0.001, lambda *args: pytest.fail("controller ran beyond a limit"))
    assert decision.action == Action.HOLD and words in decision.reason
    assert supervisor.state == SupervisorState.FAULT
    np.testing.assert_allclose(decision.forces, hold_forces(parameters, q, qd), rtol=0, atol=STATIC_FORCE_TOLERANCE)
    assert decision.saturated.tolist() == [velocity > 0.0] * 6
    # A HOLD fault escalates to ZERO when the feedback goes bad.
    supervisor.joint_state(0.002, 0.002, NAMES, [math.nan] * 6, [0.0] * 6)
    assert supervisor.command(0.002, controller.update).action == Action.ZERO


def test_hold_force_never_exceeds_its_own_bound(supervisor, controller, parameters, home):
    """3 m/s on every slider (plausible, above the speed limit): 900 N of braking, held to 100 N, not 333 N."""
    armed(supervisor, controller, parameters, home)
    q = np.full(6, parameters.home_actuator_position)
    feed(supervisor, 0.001, q, np.full(6, 3.0))
    decision = supervisor.command(0.001, lambda *args: pytest.fail("controller ran beyond a limit"))
    assert decision.action == Action.HOLD and "speed limit" in decision.reason
    np.testing.assert_array_equal(decision.forces, np.full(6, -HOLD_FORCE_MAX))
    assert decision.saturated.all()


def test_hold_force_not_computable_gives_zero(teleporting, controller, parameters, home):
    """Inside the travel but q0 + q1 > 2L: nothing assembles, so no gravity force exists -> ZERO."""
    supervisor = teleporting
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
    assert supervisor.joint_state(0.001, math.nan, NAMES, list(q), [0.0] * 6) == Intake.REJECTED
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.ZERO and "stamp" in supervisor.reason
    assert supervisor.invalid_joint_states == 1


def test_repeated_or_out_of_order_joint_states_are_not_taken(supervisor, home_q):
    assert feed(supervisor, 0.001, home_q) == Intake.TAKEN
    assert feed(supervisor, 0.002, home_q) == Intake.TAKEN
    assert feed(supervisor, 0.002, home_q + 0.001) == Intake.REPEATED  # a resent copy
    assert feed(supervisor, 0.0025, home_q + 0.001, stamp=0.0015) == Intake.REPEATED  # out of order
    assert supervisor.repeated_joint_states == 2
    assert supervisor.feedback.stamp == 0.002 and supervisor.feedback.q.tolist() == home_q.tolist()


# ------------------------------------------------------------------------------------------ references
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


def slider_pair_touching_pose(model, home, separation):
    """Home raised until the sliders of each side are ``separation`` apart (IK without its checks)."""
    def gap(dz):
        pose = home + np.array([0.0, 0.0, dz, 0.0, 0.0, 0.0])
        q = model.inverse_kinematics(pose[:3], pose[3:], check_limits=False).q
        return q[0] + q[1] - separation

    highest = 0.0436  # [m] above home: q0 + q1 = 0.020 m; 0.0438 m is out of reach
    pose = home + np.array([0.0, 0.0, brentq(gap, 0.0, highest, xtol=1e-12), 0.0, 0.0, 0.0])
    q = model.inverse_kinematics(pose[:3], pose[3:], check_limits=False).q
    return pose, q


def test_a_reference_that_would_make_the_sliders_collide_is_rejected(supervisor, controller, parameters, model, home):
    """Anti-collision for references: inverse kinematics checks the separation, and the supervisor uses it."""
    limits = parameters.limits
    pose, q = slider_pair_touching_pose(model, home, 0.9 * limits.min_slider_separation)
    assert np.all((q >= limits.actuator_position_min) & (q <= limits.actuator_position_max))  # travel alone is fine
    with pytest.raises(UnreachablePoseError, match="minimum slider separation"):
        model.inverse_kinematics(pose[:3], pose[3:])
    assert not give_reference(supervisor, 0.0, pose)  # disarmed: rejected, not a fault
    assert "minimum slider separation" in supervisor.last_error and supervisor.reference is None
    armed(supervisor, controller, parameters, home)
    assert not give_reference(supervisor, 0.001, pose)
    assert supervisor.state == SupervisorState.FAULT and supervisor.fault_action == Action.HOLD


@pytest.mark.parametrize(
    "offset, accepted",
    [
        ([0.1, 0.0, 0.0, 0.0, 0.0, 0.0], False),  # the issue's 10 cm step
        ([0.011, 0.0, 0.0, 0.0, 0.0, 0.0], False),
        ([0.0, 0.0, 0.0, 0.0, 0.0, 0.051], False),
        ([0.0099, 0.0, 0.0, 0.0, 0.0, 0.0], True),
        ([0.0, 0.0, 0.0, 0.0, 0.0, 0.049], True),
    ],
    ids=["10cm", "1.1cm", "0.051rad", "0.99cm", "0.049rad"],
)
def test_reference_steps_while_armed_are_bounded(supervisor, controller, parameters, home, offset, accepted):
    q = armed(supervisor, controller, parameters, home)
    assert give_reference(supervisor, 0.001, home + np.array(offset)) == accepted
    feed(supervisor, 0.001, q)
    decision = supervisor.command(0.001, controller.update)
    if accepted:
        assert decision.action == Action.CONTROL
    else:
        assert decision.action == Action.HOLD and supervisor.state == SupervisorState.FAULT
        assert np.all(np.abs(decision.forces) <= HOLD_FORCE_MAX)
        assert supervisor.reference.reference.pose.tolist() == home.tolist()  # never tracked


@pytest.mark.parametrize(
    "offset, accepted",
    [([0.011, 0.0, 0.0, 0.0, 0.0, 0.0], False), ([0.0, 0.0, 0.0, 0.0, 0.0, 0.051], False),
     ([0.0099, 0.0, 0.0, 0.0, 0.0, 0.0], True), ([0.0, 0.0, 0.0, 0.0, 0.0, 0.049], True)],
    ids=["1.1cm", "0.051rad", "0.99cm", "0.049rad"],
)
def test_validated_samples_keep_the_step_bound_while_armed(supervisor, controller, parameters, home, offset, accepted):
    q = armed(supervisor, controller, parameters, home)
    sample = Reference(0.001, home + np.array(offset), np.zeros(6), np.zeros(6))
    assert supervisor.validated_reference(0.001, sample) == accepted
    feed(supervisor, 0.001, q)
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == (Action.CONTROL if accepted else Action.HOLD)
    assert (supervisor.state == SupervisorState.FAULT) != accepted


@pytest.mark.parametrize("where", ["t", "pose", "velocity", "acceleration"])
def test_a_non_finite_validated_sample_holds_latched(supervisor, controller, parameters, home, where):
    q = armed(supervisor, controller, parameters, home)
    parts = {"t": 0.001, "pose": home.copy(), "velocity": np.zeros(6), "acceleration": np.zeros(6)}
    if where == "t":
        parts["t"] = math.nan
    else:
        parts[where][1] = math.inf
    assert not supervisor.validated_reference(0.001, Reference(**parts))
    feed(supervisor, 0.001, q)
    assert supervisor.command(0.001, controller.update).action == Action.HOLD
    assert supervisor.state == SupervisorState.FAULT and "not finite" in supervisor.last_error
    assert supervisor.reference.reference.pose.tolist() == home.tolist()  # never tracked


@pytest.mark.parametrize("axis", [0, 2, 3, 5], ids=["x", "z", "lambda", "nu"])
def test_reference_feed_forward_speed_and_acceleration_are_bounded(supervisor, parameters, model, home, axis):
    """At the bounds computed by IK differences: 1 % inside is taken, 1 % outside is not."""
    direction = np.zeros(6)
    direction[axis] = 1.0
    peak = np.max(np.abs(joint_rates(model, home, direction)))  # [m per unit of xi]
    speed = parameters.limits.actuator_speed_max / peak
    acceleration = supervisor.settings.max_reference_acceleration / peak
    zero = np.zeros(6)
    assert give_reference(supervisor, 0.0, home, 0.99 * speed * direction, zero)
    assert not give_reference(supervisor, 0.0, home, 1.01 * speed * direction, zero)
    assert "feed-forward speed" in supervisor.last_error
    assert give_reference(supervisor, 0.0, home, zero, 0.99 * acceleration * direction)
    assert not give_reference(supervisor, 0.0, home, zero, 1.01 * acceleration * direction)
    assert "max_reference_acceleration" in supervisor.last_error


@pytest.mark.parametrize(
    "velocity, acceleration",
    [([0.0, 0.0, 10.0, 0.0, 0.0, 0.0], [0.0] * 6), ([0.0] * 6, [0.0, 0.0, 1e6, 0.0, 0.0, 0.0])],
    ids=["10_m_per_s", "1e6_m_per_s2"],
)
def test_the_issues_feed_forward_references_hold(supervisor, controller, parameters, home, velocity, acceleration):
    q = armed(supervisor, controller, parameters, home)
    assert not give_reference(supervisor, 0.001, home, np.array(velocity), np.array(acceleration))
    feed(supervisor, 0.001, q)
    decision = supervisor.command(0.001, controller.update)
    assert decision.action == Action.HOLD and np.all(np.abs(decision.forces) <= HOLD_FORCE_MAX)


def test_stale_reference_holds(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    late = supervisor.settings.reference_timeout * 2
    feed(supervisor, late, q)
    decision = supervisor.command(late, controller.update)
    assert decision.action == Action.HOLD and "reference stale" in decision.reason


def test_a_copy_of_the_reference_refreshes_its_age(supervisor, controller, parameters, home):
    q = armed(supervisor, controller, parameters, home)
    late = supervisor.settings.reference_timeout * 0.9
    assert give_reference(supervisor, late, home)
    feed(supervisor, 1.5 * late, q)
    assert supervisor.command(1.5 * late, controller.update).action == Action.CONTROL


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


# ------------------------------------------------------------------------------------------ random inputs
PARAMETERS = load_parameters()
MODEL = HexapodModel(PARAMETERS)
HOME_POSE = home_pose(MODEL)
LIMITS = PARAMETERS.limits
SAFETY = PARAMETERS.safety
JOINT_NAMES = list(PARAMETERS.ros.joint_names)
HOME = PARAMETERS.home_actuator_position
BAD_NUMBERS = [math.nan, math.inf, -math.inf, 1e300, -1e300, 1e6, -1e6]

number = st.one_of(st.floats(-0.05, 0.05), st.sampled_from(BAD_NUMBERS), st.floats(allow_nan=True, allow_infinity=True))
small = st.floats(-0.01, 0.01)
dirty_stamp = st.one_of(st.floats(-0.2, 0.2), st.sampled_from([3600.0, -3600.0, math.nan, math.inf]))
# Mostly clean states (so that control is reached and must then stay safe), some of any kind.
clean_state = st.tuples(st.just("state"), st.one_of(st.just(0.001), st.floats(0.0005, 0.003)), st.sampled_from([0.0, -0.001]),
                        st.sampled_from(["ordered", "permuted", "extra"]),
                        st.lists(small, min_size=6, max_size=6), st.lists(st.floats(-0.1, 0.1), min_size=6, max_size=6),
                        st.randoms(use_true_random=False))
dirty_state = st.tuples(st.just("state"), st.floats(0.0, 0.03), dirty_stamp,
                        st.sampled_from(["ordered", "permuted", "duplicate", "missing", "extra", "short"]),
                        st.lists(st.one_of(small, number), min_size=6, max_size=6),
                        st.lists(st.one_of(st.floats(-1.0, 1.0), number), min_size=6, max_size=6),
                        st.randoms(use_true_random=False))
clean_reference = st.tuples(st.just("reference"), st.floats(0.0, 0.001), st.lists(st.floats(-0.002, 0.002), min_size=6, max_size=6),
                            st.lists(st.floats(-0.05, 0.05), min_size=6, max_size=6),
                            st.lists(st.floats(-1.0, 1.0), min_size=6, max_size=6))
dirty_reference = st.tuples(st.just("reference"), st.floats(0.0, 0.03),
                            st.lists(st.one_of(st.floats(-0.05, 0.05), number), min_size=6, max_size=6),
                            st.lists(st.one_of(st.just(0.0), st.floats(-1.0, 1.0), number), min_size=6, max_size=6),
                            st.lists(st.one_of(st.just(0.0), st.floats(-20.0, 20.0), number), min_size=6, max_size=6))
operator_call = st.tuples(st.sampled_from(["arm", "arm", "disarm", "watchdog", "steady"]),
                          st.one_of(st.floats(0.0, 0.005), st.floats(0.0, 0.05)))
CALL_KINDS = {"clean_state": clean_state, "dirty_state": dirty_state, "clean_reference": clean_reference,
              "dirty_reference": dirty_reference, "operator": operator_call}
WEIGHTS = {"clean_state": 6, "dirty_state": 2, "clean_reference": 4, "dirty_reference": 1, "operator": 2}
call = st.sampled_from([kind for kind, weight in WEIGHTS.items() for _ in range(weight)]).flatmap(CALL_KINDS.__getitem__)
calls = st.lists(call, min_size=3, max_size=60)
START = [("state", 0.0, 0.0, "ordered", [0.0] * 6, [0.0] * 6, None), ("reference", 0.0, [0.0] * 6, [0.0] * 6, [0.0] * 6),
         ("arm", 0.0)]  # every sequence starts armed at home: the random calls then hit a controlling node


def joint_state_fields(layout, positions, velocities, rng):
    names, positions, velocities = list(JOINT_NAMES), list(positions), list(velocities)
    if layout == "permuted":
        order = list(range(6))
        rng.shuffle(order)
        names, positions, velocities = ([values[k] for k in order] for values in (names, positions, velocities))
    elif layout == "duplicate":
        k = rng.randrange(6)
        names, positions, velocities = names + [names[k]], positions + [HOME], velocities + [0.0]
    elif layout == "missing":
        names, positions, velocities = names[1:], positions[1:], velocities[1:]
    elif layout == "extra":
        names, positions, velocities = names + ["gripper"], positions + [math.nan], velocities + [math.nan]
    elif layout == "short":
        positions = positions[:5]
    return names, positions, velocities


def measured_is_valid(layout, q, qd) -> bool:
    """Independently of the supervisor: could these numbers be a real measurement of this robot?"""
    if layout in ("duplicate", "missing", "short") or not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
        return False
    margin = SAFETY.plausible_position_margin
    return bool(np.all(q >= LIMITS.actuator_position_min - margin) and np.all(q <= LIMITS.actuator_position_max + margin)
                and np.all(q[0::2] + q[1::2] >= LIMITS.min_slider_separation - margin)
                and np.all(np.abs(qd) <= SAFETY.plausible_speed_factor * LIMITS.actuator_speed_max))


def within_limits(q, qd) -> bool:
    return bool(np.all(q >= LIMITS.actuator_position_min) and np.all(q <= LIMITS.actuator_position_max)
                and np.all(q[0::2] + q[1::2] >= LIMITS.min_slider_separation)
                and np.all(np.abs(qd) <= LIMITS.actuator_speed_max))


def check_decision(decision, answered_valid: bool, invalid_reference_since_arm: bool) -> None:
    forces = decision.forces
    assert forces.shape == (6,) and np.all(np.isfinite(forces))
    assert np.all(np.abs(forces) <= LIMITS.actuator_force_max)
    if decision.action == Action.HOLD:
        assert np.all(np.abs(forces) <= SAFETY.hold_force_max)
    if decision.action == Action.ZERO:
        assert np.all(forces == 0.0)
    if decision.action == Action.CONTROL:
        assert answered_valid and not invalid_reference_since_arm
        assert decision.state == SupervisorState.ARMED


# Huge finite rates overflow to inf in the Euler-rate conversions (then rejected as non-finite).
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("controller_name", CONTROLLER_NAMES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=calls)
def test_random_api_calls_never_give_an_unsafe_force(controller_name, sequence):
    """Random joint states (permuted, duplicated, missing, NaN, huge, odd stamps), references and
    operator calls, in any order: never a non-finite force or one above the limit, HOLD within its
    own bound, and CONTROL only from a valid state within the limits and no invalid reference."""
    loop = ControlLoop(MODEL, controller_name)
    now, steady = 0.0, 0.0
    invalid_reference_since_arm = False
    actions = set()
    for call in START + sequence:
        kind, dt = call[0], call[1]
        now, steady = now + dt, steady + dt
        if kind == "state":
            _, _, offset, layout_name, dq, qd, rng = call
            q = HOME + np.array(dq)
            names, positions, velocities = joint_state_fields(layout_name, q, qd, rng)
            record = loop.joint_state(now, now + offset, names, positions, velocities, steady)
            if record is None:
                continue  # repeated stamp: not answered
            actions.add(record.decision.action.value)
            valid = measured_is_valid(layout_name, q, np.array(qd)) and math.isfinite(offset) and offset <= SAFETY.max_future_stamp
            check_decision(record.decision, valid and within_limits(q, np.array(qd)), invalid_reference_since_arm)
            if not measured_is_valid(layout_name, q, np.array(qd)):
                assert record.decision.action == Action.ZERO and record.error
        elif kind == "reference":
            _, _, dpose, velocity, acceleration = call
            pose = HOME_POSE + np.array(dpose)
            state_before = loop.supervisor.state
            taken = loop.reference_sample(now, Reference(now, pose, np.array(velocity), np.array(acceleration)))
            if not taken and state_before == SupervisorState.ARMED:
                invalid_reference_since_arm = True
        elif kind == "arm":
            state_before = loop.supervisor.state
            accepted, _ = loop.arm(now)
            if accepted and state_before != SupervisorState.ARMED:
                invalid_reference_since_arm = False
        elif kind == "disarm":
            loop.disarm()
        elif kind == "watchdog":
            decision = loop.watchdog(now)
            if decision is not None:
                assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
        else:
            decision = loop.steady_watchdog(steady, SAFETY.joint_state_timeout)
            if decision is not None:
                assert decision.action == Action.ZERO and np.all(decision.forces == 0.0)
    event(f"actions answered: {sorted(actions)}")


@pytest.mark.parametrize("controller_name", CONTROLLER_NAMES)
@settings(max_examples=300, deadline=None)
@given(dq=st.lists(st.one_of(small, number), min_size=6, max_size=6),
       qd=st.lists(st.one_of(st.floats(-1.0, 1.0), number), min_size=6, max_size=6),
       dpose=st.lists(st.one_of(st.floats(-0.05, 0.05), number), min_size=6, max_size=6),
       velocity=st.lists(st.one_of(st.floats(-1.0, 1.0), number), min_size=6, max_size=6),
       acceleration=st.lists(st.one_of(st.floats(-50.0, 50.0), number), min_size=6, max_size=6),
       t=st.one_of(st.floats(0.0, 10.0), st.sampled_from([math.nan, math.inf])))
def test_controllers_never_give_a_non_finite_or_excessive_force(controller_name, dq, qd, dpose, velocity, acceleration, t):
    """The controllers alone, on anything: finite forces within the limit; the safe output (zero) on invalid input."""
    controller = make_controller(controller_name, MODEL)
    controller.reset(0.0, np.full(6, HOME), np.zeros(6))
    q, qd = HOME + np.array(dq), np.array(qd)
    reference = Reference(0.0, HOME_POSE + np.array(dpose), np.array(velocity), np.array(acceleration))
    output = controller.update(t, q, qd, reference)
    assert output.forces.shape == (6,) and np.all(np.isfinite(output.forces))
    assert np.all(np.abs(output.forces) <= LIMITS.actuator_force_max)
    finite = all(np.all(np.isfinite(v)) for v in (q, qd, reference.pose, reference.velocity, reference.acceleration))
    if not (finite and math.isfinite(t)):
        assert output.safe_output and np.all(output.forces == 0.0)
