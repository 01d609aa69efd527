"""What an adversarial run got through the safety supervisor, each case where it bites (without ROS).

The ROS-level cases (a huge message, a bad state followed at once by a good one, request floods)
are in test_robot_stack.py. Expected bounds are computed here from the shipped limits by the
formulas the rule table states, and forces are checked against the limits themselves.
"""

import dataclasses
import math

import numpy as np
import pytest

from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.safety import RATE_KNOWN_SPACINGS, Action, Intake, SafetySupervisor, SupervisorState
from hexapod_control.control.trajectories import Reference, home_pose
from hexapod_control.conventions import joint_state_arrays
from hexapod_control.errors import InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import load_parameters
from hexapod_control.ros.wait_set_loop import ExecutorPoll

PARAMETERS = load_parameters()
LIMITS, SAFETY = PARAMETERS.limits, PARAMETERS.safety
NAMES = list(PARAMETERS.ros.joint_names)
PERIOD = 1.0 / PARAMETERS.controllers.rate
HOME_Q = np.full(6, PARAMETERS.home_actuator_position)
HOLD_LIMIT = min(SAFETY.hold_force_max, LIMITS.actuator_force_max)
# The largest step between two states 1 ms apart that the motion check takes, by the rule table's
# formula: plausible_speed_factor x actuator_speed_max x dt + plausible_step_margin.
ALWAYS_DUE_PERIOD_S = 1e-9  # a timer due again as soon as it ran
STEP_BOUND = SAFETY.plausible_speed_factor * LIMITS.actuator_speed_max * PERIOD + SAFETY.plausible_step_margin


@pytest.fixture(scope="module")
def model():
    return HexapodModel(PARAMETERS)


def hold_at_home(model, t):
    return Reference(t, home_pose(model), np.zeros(6), np.zeros(6))


def armed_loop(model, controller="computed_torque", gain_set="robot", reference=None):
    """A ControlLoop armed at home at rest, with the rate known; returns (loop, the next stamp)."""
    loop = ControlLoop(model, controller, gain_set)
    t = 0.0
    for _ in range(RATE_KNOWN_SPACINGS + 1):
        loop.validated_reference(t, (reference or hold_at_home)(model, t))
        assert loop.joint_state(t, t, NAMES, HOME_Q, np.zeros(6)) is not None
        t += PERIOD
    accepted, message = loop.arm(t - PERIOD)
    assert accepted, message
    return loop, t


def step(loop, model, t, q, qd=None, reference=None):
    loop.validated_reference(t, (reference or hold_at_home)(model, t))
    return loop.joint_state(t, t, NAMES, q, np.zeros(6) if qd is None else qd)


# ------------------------------------------------------------------------------------------ 1. motion
@pytest.mark.parametrize("glitch", [0.01, 0.02], ids=["1_cm", "2_cm"])
def test_a_one_sample_position_glitch_is_invalid_and_never_answered_with_force(model, glitch):
    loop, t = armed_loop(model)
    for _ in range(20):
        assert step(loop, model, t, HOME_Q).decision.action == Action.CONTROL
        t += PERIOD
    glitched = HOME_Q.copy()
    glitched[2] += glitch  # velocity reported 0, stamp now, the next state home again
    record = step(loop, model, t, glitched)
    assert record.decision.action == Action.ZERO and np.all(record.forces == 0.0)
    assert "slider_2 moved" in record.error and loop.supervisor.invalid_joint_states == 1
    forces = []
    for _ in range(300):  # 0.3 s of genuine states after it: latched, zero
        t += PERIOD
        forces.append(step(loop, model, t, HOME_Q).forces)
    assert loop.supervisor.state == SupervisorState.FAULT and loop.supervisor.fault_action == Action.ZERO
    assert np.all(np.array(forces) == 0.0)


def test_the_motion_bound_is_the_plausible_speed_over_the_stamp_spacing(model):
    supervisor = SafetySupervisor(model, SAFETY, NAMES, PARAMETERS.controllers.valid_rates("computed_torque", "robot"))
    assert supervisor.joint_state(0.0, 0.0, NAMES, list(HOME_Q), [0.0] * 6) == Intake.TAKEN
    inside = HOME_Q + np.array([0.999 * STEP_BOUND, 0, 0, 0, 0, 0])
    assert supervisor.joint_state(PERIOD, PERIOD, NAMES, list(inside), [0.0] * 6) == Intake.TAKEN
    beyond = inside + np.array([1.001 * STEP_BOUND, 0, 0, 0, 0, 0])
    assert supervisor.joint_state(2 * PERIOD, 2 * PERIOD, NAMES, list(beyond), [0.0] * 6) == Intake.REJECTED
    # After a gap of ten periods the same step is plausible: the bound grows with the spacing.
    assert supervisor.joint_state(12 * PERIOD, 12 * PERIOD, NAMES, list(beyond), [0.0] * 6) == Intake.TAKEN


def test_real_fast_motion_passes_the_motion_check_and_holds_on_the_speed_limit(model):
    """3 m/s is plausible (below 5 x 0.65 m/s) and consistent with its own positions: the speed row, HOLD."""
    loop, t = armed_loop(model)
    speed = 3.0
    q = HOME_Q.copy()
    record = None
    for k in range(3):
        t += PERIOD
        q[0] += speed * PERIOD
        record = step(loop, model, t, q, np.array([speed, 0, 0, 0, 0, 0]))
        assert not record.error
    assert record.decision.action == Action.HOLD and "speed limit" in record.decision.reason
    assert loop.supervisor.invalid_joint_states == 0


# ------------------------------------------------------------------------------------------ 2. stuck feedback
def moving_reference(model, t):
    """The home pose rising 5 mm/s: a measurement that stays at home falls behind it."""
    pose = home_pose(model) + np.array([0, 0, 0.005 * t, 0, 0, 0])
    return Reference(t, pose, np.array([0, 0, 0.005, 0, 0, 0]), np.zeros(6))


@pytest.mark.parametrize("controller", ["double_loop", "computed_torque"])
def test_a_frozen_measurement_under_a_moving_reference_holds(model, controller):
    """A stuck encoder or a driver republishing its last reading, fresh stamps: the default gains push
    harder and harder. The saturation or the frozen row holds within their times."""
    loop, t = armed_loop(model, controller, reference=moving_reference)
    actions, forces = [], []
    for _ in range(round(1.0 / PERIOD)):
        t += PERIOD
        record = step(loop, model, t, HOME_Q, reference=moving_reference)
        actions.append(record.decision.action)
        forces.append(record.forces)
    assert loop.supervisor.state == SupervisorState.FAULT and loop.supervisor.fault_action == Action.HOLD
    assert "at the limit" in loop.supervisor.reason or "frozen" in loop.supervisor.reason
    first_hold = actions.index(Action.HOLD)
    assert np.all(np.abs(np.array(forces[first_hold:])) <= HOLD_LIMIT)
    # At the force limit for at most max_saturation_time (the adversarial run: 4,794 of 4,797 commands in 5 s).
    at_limit = np.any(np.abs(np.array(forces)) >= LIMITS.actuator_force_max, axis=1)
    assert at_limit.sum() * PERIOD <= SAFETY.max_saturation_time + 2 * PERIOD


def constant_law(forces):
    """A control law answering every state with ``forces`` (the supervisor's command takes any law)."""
    def law(t, q, qd, reference):
        return dataclasses.replace(template, t=t, forces=np.array(forces, dtype=float), saturated=np.zeros(6, dtype=bool))
    model = HexapodModel(PARAMETERS)
    loop = ControlLoop(model, "computed_torque")
    template = loop.controller.update(0.0, HOME_Q, np.zeros(6), hold_at_home(model, 0.0))
    return law


def armed_supervisor(model):
    supervisor = SafetySupervisor(model, SAFETY, NAMES, PARAMETERS.controllers.valid_rates("computed_torque", "robot"))
    t = 0.0
    for _ in range(RATE_KNOWN_SPACINGS + 1):
        supervisor.validated_reference(t, hold_at_home(model, t))
        supervisor.joint_state(t, t, NAMES, list(HOME_Q), [0.0] * 6)
        t += PERIOD
    assert supervisor.arm(t - PERIOD, lambda *args: None)[0]
    return supervisor, t


def test_a_frozen_measurement_under_a_net_force_holds_after_the_frozen_time(model):
    gravity = model.gravity_term(HOME_Q)
    pushing = gravity + np.array([0, 0, 0, 1.2 * SAFETY.frozen_feedback_force, 0, 0])  # below the force limit
    law = constant_law(pushing)
    supervisor, t = armed_supervisor(model)
    controlled = 0
    while supervisor.state == SupervisorState.ARMED:
        supervisor.validated_reference(t, hold_at_home(model, t))
        supervisor.joint_state(t, t, NAMES, list(HOME_Q), [0.0] * 6)
        if supervisor.command(t, law).action == Action.CONTROL:
            controlled += 1
        t += PERIOD
        assert controlled * PERIOD < 2 * SAFETY.frozen_feedback_time, "the frozen row never held"
    assert "frozen" in supervisor.reason and "slider_3" in supervisor.reason
    # Its displacement by the model, 1/2 a T^2 with a = M_bar^-1 (mean force - g_bar), is in the message.
    acceleration = np.linalg.solve(model.mass_matrix(HOME_Q), pushing - gravity)
    frozen_for = float(supervisor.reason.split("unchanged for ")[1].split(" s")[0])
    predicted = 0.5 * np.abs(acceleration).max() * frozen_for**2
    assert f"{1e3 * predicted:.3g} mm" in supervisor.reason
    assert controlled * PERIOD >= SAFETY.frozen_feedback_time - 2 * PERIOD


def test_a_robot_at_rest_under_its_static_force_is_not_frozen(model):
    """A quiet robot's quantised encoders read the same value every period: still, and rightly so."""
    law = constant_law(model.gravity_term(HOME_Q) + 0.5 * SAFETY.frozen_feedback_force)
    supervisor, t = armed_supervisor(model)
    for _ in range(round(10 * SAFETY.frozen_feedback_time / PERIOD)):
        supervisor.validated_reference(t, hold_at_home(model, t))
        supervisor.joint_state(t, t, NAMES, list(HOME_Q), [0.0] * 6)
        assert supervisor.command(t, law).action == Action.CONTROL, supervisor.reason
        t += PERIOD


def test_saturation_held_beyond_its_time_holds(model):
    law = constant_law(np.full(6, 2 * LIMITS.actuator_force_max))  # clamped: saturated on every actuator
    supervisor, t = armed_supervisor(model)
    q = HOME_Q.copy()
    controlled = 0
    while supervisor.state == SupervisorState.ARMED:
        q += 1e-7  # moving a little: not frozen, only saturated
        supervisor.validated_reference(t, hold_at_home(model, t))
        supervisor.joint_state(t, t, NAMES, list(q), [1e-4] * 6)
        if supervisor.command(t, law).action == Action.CONTROL:
            controlled += 1
        t += PERIOD
        assert controlled * PERIOD < 2 * SAFETY.max_saturation_time, "the saturation row never held"
    assert "at the limit" in supervisor.reason
    assert abs(controlled * PERIOD - SAFETY.max_saturation_time) <= 2 * PERIOD


# ------------------------------------------------------------------------------------------ 3. huge messages
class Unreadable:
    """A field that fails when read: shows that a message is rejected before its fields are read."""

    def __iter__(self):
        raise AssertionError("the field was read")

    def __len__(self):
        raise AssertionError("the field was read")


def test_a_message_naming_far_more_joints_is_rejected_before_it_is_read():
    names = [f"joint_{k}" for k in range(10_007)] + ["joint_0"]
    with pytest.raises(InvalidInputError, match="more than max_joint_state_names 64"):
        joint_state_arrays(names, Unreadable(), Unreadable(), NAMES, SAFETY.max_joint_state_names)


def test_a_repeated_name_among_many_is_named():
    names = [f"joint_{k}" for k in range(20_000)] + ["joint_7"]
    with pytest.raises(InvalidInputError, match=r"\['joint_7'\] more than once"):
        joint_state_arrays(names, [0.0] * len(names), [0.0] * len(names), NAMES)


# ------------------------------------------------------------------------------------------ 5. rate
def test_arming_needs_the_rate_and_refuses_100_hz(model):
    loop = ControlLoop(model, "computed_torque")
    slow = 0.01  # 100 Hz: the shipped computed-torque gains are unstable below ~400 Hz
    answers = []
    for k in range(RATE_KNOWN_SPACINGS + 1):
        loop.validated_reference(k * slow, hold_at_home(model, k * slow))
        loop.joint_state(k * slow, k * slow, NAMES, HOME_Q, np.zeros(6))
        answers.append(loop.arm(k * slow))
    assert all(not accepted and "not known yet" in message for accepted, message in answers[:-1])
    accepted, message = answers[-1]
    assert not accepted and "come at 100 Hz" in message and "controllers.computed_torque.valid_rates" in message


def test_a_drop_in_rate_holds_within_the_stated_slow_periods(model):
    loop, t = armed_loop(model)
    for _ in range(200):  # long enough that the 100-spacing median says 1 kHz throughout
        assert step(loop, model, t, HOME_Q).decision.action == Action.CONTROL
        t += PERIOD
    slow = 0.01
    controlled_after_drop = 0
    for _ in range(20):
        t += slow
        record = step(loop, model, t, HOME_Q)
        if record.decision.action == Action.CONTROL:
            controlled_after_drop += 1
    assert loop.supervisor.fault_action == Action.HOLD and "rate dropped" in loop.supervisor.reason
    assert controlled_after_drop == RATE_KNOWN_SPACINGS - 1  # the 5th slow spacing holds


# ------------------------------------------------------------------------------------------ 6. future stamps
def test_a_state_from_slightly_ahead_does_not_trip_the_watchdog(model):
    loop, t = armed_loop(model)
    ahead = 0.9 * SAFETY.max_future_stamp
    assert step(loop, model, t, HOME_Q) is not None
    loop.validated_reference(t, hold_at_home(model, t))
    assert loop.joint_state(t, t + ahead, NAMES, HOME_Q, np.zeros(6)) is not None  # taken, within the bound
    for _ in range(round(3 * SAFETY.joint_state_timeout / PERIOD)):
        t += PERIOD
        step(loop, model, t, HOME_Q)  # older than that state until t passes it: not answered
        assert loop.watchdog(t) is None
    assert loop.supervisor.state == SupervisorState.ARMED
    assert step(loop, model, t + PERIOD, HOME_Q).decision.action == Action.CONTROL


# ------------------------------------------------------------------------------------------ 7, 8. sampling, judging
def test_the_reference_is_sampled_only_for_states_that_are_answered(model):
    loop, t = armed_loop(model)
    sampled = []

    def source(stamp):
        sampled.append(stamp)
        loop.validated_reference(stamp, hold_at_home(model, stamp))

    stamps = [t, t + PERIOD, t + 2 * PERIOD, t + PERIOD, t + 2 * PERIOD, t + 3 * PERIOD]  # a late copy and an old one
    answered = [loop.joint_state(s, s, NAMES, HOME_Q, np.zeros(6), reference_source=source) is not None for s in stamps]
    assert answered == [True, True, True, False, False, True]
    assert sampled == [stamps[k] for k in (0, 1, 2, 5)]
    assert loop.supervisor.state == SupervisorState.ARMED and loop.supervisor.faults == 0


@pytest.mark.parametrize("bad", [
    dict(positions=[math.nan] * 6),
    dict(names=NAMES[:5]),
    dict(names=NAMES[:5] + NAMES[:1]),
    dict(positions=list(HOME_Q + np.array([0.1, 0, 0, 0, 0, 0]))),
], ids=["nan", "short", "duplicate_name", "jump"])
def test_a_bad_state_superseded_at_once_by_a_good_one_counts_and_latches(model, bad):
    loop, t = armed_loop(model)
    message = dict(names=NAMES, positions=list(HOME_Q), velocities=[0.0] * 6)
    message.update(bad)
    loop.judge(t, t, message["names"], message["positions"], message["velocities"][:len(message["names"])])
    record = step(loop, model, t + PERIOD, HOME_Q)
    assert loop.supervisor.invalid_joint_states == 1 and loop.supervisor.faults == 1
    assert record.decision.action == Action.ZERO and loop.supervisor.fault_action == Action.ZERO


# ------------------------------------------------------------------------------------------ 9. request floods
class FloodedExecutor:
    """An executor with ``ready`` callbacks waiting, each taking ``cost`` of a fake clock."""

    def __init__(self, ready: int, cost: float, clock):
        self.ready, self.cost, self.clock, self.ran, self.calls = ready, cost, clock, 0, 0

    def wait_for_ready_callbacks(self, timeout_sec):
        from rclpy.executors import TimeoutException
        self.calls += 1
        if not self.ready:
            raise TimeoutException()
        self.ready -= 1
        return Handler(self), None, None


class Handler:
    def __init__(self, executor):
        self.executor = executor

    def __call__(self):
        self.executor.clock.now += self.executor.cost
        self.executor.ran += 1

    def exception(self):
        return None


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_poll_starts_no_callback_after_its_budget():
    pytest.importorskip("rclpy")
    clock = FakeClock()
    budget, cost = 1e-4, 3e-5
    flood = FloodedExecutor(ready=1000, cost=cost, clock=clock)
    ran = ExecutorPoll(flood, clock)(clock() + budget)
    assert ran == math.ceil(budget / cost) and flood.ready == 1000 - ran
    # The loop's delay: the budget plus the one callback that was running when it ran out.
    assert clock() <= budget + cost
    # A quiet queue empties.
    assert ExecutorPoll(FloodedExecutor(ready=3, cost=cost, clock=clock), clock)(clock() + budget) == 3
    # A poll that starts late (a loaded machine) still serves one callback.
    assert ExecutorPoll(FloodedExecutor(ready=5, cost=cost, clock=clock), clock)(clock() - budget) == 1
    # Nothing ready: one wait, not two.
    quiet = FloodedExecutor(ready=0, cost=cost, clock=clock)
    assert ExecutorPoll(quiet, clock)(clock() + budget) == 0 and quiet.calls == 1


def test_each_poll_runs_what_is_ready_after_one_stopped_by_its_budget(context, executor):
    """rclpy's executor keeps the generator of its last wait between calls; after a poll that stopped
    at its first callback, the next call only ends that generator. Every poll still runs one of the
    callbacks ready (two timers always due here), none comes back empty."""
    from rclpy.node import Node

    node = Node("hexapod_poll_test", context=context)
    executor.add_node(node)
    calls = []
    for name in ("a", "b"):
        node.create_timer(ALWAYS_DUE_PERIOD_S, lambda name=name: calls.append(name))
    poll = ExecutorPoll(executor)
    ran = [poll(-math.inf) for _ in range(6)]  # a budget spent before it starts: one callback each
    assert ran == [1] * 6 and len(calls) == 6


class ServedStates(Exception):
    """Ends a WaitSetLoop run once its owner served what the test asked for."""


def test_a_flood_of_requests_is_polled_once_per_poll_period_while_the_owner_watches(context):
    """The owner's wait watches the executor (the robot stack's rcl loop in C) and a flood of
    requests keeps it ready: the executor is still polled at most once per poll_period of the clock,
    as the blind polls did, and the flood is served at that pace."""
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_srvs.srv import Trigger

    from hexapod_control.ros.wait_set_loop import WaitSetLoop

    clock = FakeClock()
    poll_period, state_period, states, budget = 0.01, 0.001, 1000, 1e-4
    node = Node("hexapod_flood_test", context=context)
    node.create_service(Trigger, "~/flooded", lambda request, response: response)
    flood = FloodedExecutor(ready=10 * states, cost=budget, clock=clock)  # each callback spends a poll's budget
    served = []

    def serve(until, poll):
        watched = any(loop.executor_entities().by_kind())
        clock.now += state_period  # one joint state answered, or the wait ended at once
        if watched:
            loop.request_poll()  # the flood: a request is always waiting
        served.append(watched)
        if len(served) == states:
            raise ServedStates()
        return True

    loop = WaitSetLoop(node, JointState, "/hexapod_flood_test_states", 10, lambda messages, infos: None,
                       lambda: math.inf, lambda now: None, poll_period, poll_budget=budget, raw=True, serve=serve,
                       watched_poll_period=0.5, clock=clock)
    with pytest.raises(ServedStates):
        loop.spin(flood)
    simulated = clock()
    assert loop.polls_requested <= simulated / poll_period + 1
    # The flood is served meanwhile: a poll a period after the last, at the state that ends it.
    assert loop.polls_requested >= simulated / (poll_period + 2 * state_period) - 1
    assert flood.ran == loop.polls_requested + loop.polls_blind  # one callback per poll, within its budget


def test_an_unwatched_timer_is_left_to_the_executors_polls(context):
    """The robot stack's diagnostics timer is not watched by its loop in C, which sends a status when
    one is due at an answer: the owner's wait holds the node's other entities, never that timer."""
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_srvs.srv import Trigger

    from hexapod_control.ros.wait_set_loop import WaitSetLoop

    clock = FakeClock()
    node = Node("hexapod_unwatched_test", context=context)
    service = node.create_service(Trigger, "~/watched", lambda request, response: response)
    watched_timer, unwatched_timer = (node.create_timer(3600.0, lambda: None) for _ in range(2))
    seen = []

    def serve(until, poll):
        clock.now += 0.001
        entities = loop.executor_entities()
        if any(entities.by_kind()):
            seen.append(entities)
            raise ServedStates()
        return True

    loop = WaitSetLoop(node, JointState, "/hexapod_unwatched_states", 10, lambda messages, infos: None,
                       lambda: math.inf, lambda now: None, 0.01, poll_budget=1e-4, raw=True, serve=serve,
                       watched_poll_period=0.5, clock=clock, unwatched=(unwatched_timer,))
    with pytest.raises(ServedStates):
        loop.spin(FloodedExecutor(ready=0, cost=1e-4, clock=clock))
    entities = seen[0]
    assert any(entity is service for entity in entities.services)
    assert [entity is watched_timer for entity in entities.timers] == [True]
