"""The compiled step against the Python loop: equal decisions and forces on the same sequences.

Two ControlLoops, one running the compiled step (control/compiled_step.py) and one the Python
objects alone, are fed the same joint states, references and calls, step by step, from a MuJoCo
plant closed behind a transport delay through the Python loop's forces. Each answer must agree:
the action, the supervisor's state, the reason, the error, and the forces, the saturation flags and
the pose to 1e-12. The sequences pass through every row of the supervisor's rule table that a
tracking loop can meet (safety.py), with the repeated, out-of-order, superseded and late states of a
loop that falls behind, and the drives' effort; each scenario checks that its row was met and that
the compiled code finished the tracking steps (else the comparison would say nothing).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hexapod_control.control.loop import ControlLoop, Level
from hexapod_control.control.safety import Action, SupervisorState
from hexapod_control.control.trajectories import Reference, make_trajectory
from hexapod_control.errors import SimulationDivergedError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.simulation.delay import DelayedPlant
from hexapod_control.simulation.lockstep import message_time
from hexapod_control.simulation.mujoco_plant import MujocoPlant

TOLERANCE = 1e-12
STEPS = 1200
EVENT = 600  # the step at which a scenario's event starts

MODEL = HexapodModel.from_yaml(None)
SAFETY = MODEL.parameters.safety
LIMITS = MODEL.parameters.limits


class TwinLoops:
    """A compiled and a Python control loop fed alike; every answer compared."""

    def __init__(self, controller: str, arm_on_start: bool = True):
        self.loops = [ControlLoop(MODEL, controller, gain_set="simulated_plant", arm_on_start=arm_on_start)
                      for _ in range(2)]
        if self.loops[0].select_step("c") != "c":
            pytest.skip("the compiled step is unavailable (no C library)")
        assert self.loops[1].select_step("python") == "python"
        self.compiled = self.loops[0].compiled_step
        self.actions: list[tuple[Action, str]] = []

    def state(self, now, stamp, q, qd, efforts=None):
        answers = [loop.joint_state(now, stamp, loop.joint_names, q, qd, efforts=efforts) for loop in self.loops]
        compiled, python = answers
        assert (compiled is None) == (python is None), stamp
        if python is None:
            return None
        for a, b in ((compiled.decision.action, python.decision.action), (compiled.decision.state, python.decision.state),
                     (compiled.decision.reason, python.decision.reason), (compiled.error, python.error)):
            assert a == b, f"at {stamp}: {a!r} != {b!r}"
        np.testing.assert_allclose(compiled.forces, python.forces, rtol=0, atol=TOLERANCE)
        np.testing.assert_array_equal(compiled.decision.saturated, python.decision.saturated)
        assert (compiled.pose is None) == (python.pose is None)
        if python.pose is not None:
            np.testing.assert_allclose(compiled.pose, python.pose, rtol=0, atol=TOLERANCE)
        assert (compiled.diagnostic is None) == (python.diagnostic is None)
        if python.diagnostic is not None:
            assert compiled.diagnostic.message == python.diagnostic.message
            assert_same_status(compiled.diagnostic.values, python.diagnostic.values, stamp)
        self.actions.append((python.decision.action, python.decision.reason))
        return python

    def judge(self, now, stamp, q, qd):
        for loop in self.loops:
            loop.judge(now, stamp, loop.joint_names, q, qd)

    def reference(self, now, reference):
        assert len({loop.validated_reference(now, reference) for loop in self.loops}) == 1

    def published(self, stamp, when):
        for loop in self.loops:
            loop.published(stamp, when)

    def arm(self, now):
        answers = [loop.arm(now) for loop in self.loops]
        assert answers[0] == answers[1]
        return answers[1]

    def compare_state(self):
        """After synchronize, the objects of both loops hold the same state."""
        compiled, python = self.loops
        compiled.synchronize()
        for loop_a, loop_b in ((compiled, python),):
            a, b = loop_a.controller, loop_b.controller
            assert a.delay_periods == b.delay_periods
            np.testing.assert_allclose(a.estimator.misfits, b.estimator.misfits, rtol=1e-12, atol=0)
            assert [(s, l) for s, _, l in a.flight.sent] == [(s, l) for s, _, l in b.flight.sent]
            for (_, fa, _), (_, fb, _) in zip(a.flight.sent, b.flight.sent):
                np.testing.assert_allclose(fa, fb, rtol=0, atol=TOLERANCE)
            assert a.flight.stamps.snapshot() == b.flight.stamps.snapshot()
            sa, sb = loop_a.supervisor, loop_b.supervisor
            assert sa.joint_state_period.snapshot() == sb.joint_state_period.snapshot()
            assert (sa.saturated_since, sa.frozen_since, sa.frozen_commands) == (
                sb.saturated_since, sb.frozen_since, sb.frozen_commands)
            assert sa.repeated_joint_states == sb.repeated_joint_states
            assert sa.invalid_joint_states == sb.invalid_joint_states
            law_a, law_b = a.controller, b.controller
            for name in ("last_q", "last_phi", "previous_q", "previous_phi"):
                np.testing.assert_allclose(getattr(law_a.kinematic_state, name), getattr(law_b.kinematic_state, name),
                                           rtol=0, atol=TOLERANCE)
            assert law_a.updated_at == law_b.updated_at
            if law_a.name == "double_loop":
                np.testing.assert_allclose(law_a.integral, law_b.integral, rtol=0, atol=TOLERANCE)


def assert_same_status(compiled: dict, python: dict, stamp: float) -> None:
    """The values of two diagnostics statuses alike, the compiled step's count of its answers aside."""
    assert compiled.keys() == python.keys(), stamp
    for key in compiled.keys() - {"compiled_answers"}:
        a, b = compiled[key], python[key]
        if isinstance(b, (float, np.ndarray)) or (isinstance(b, list) and b and isinstance(b[0], float)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=TOLERANCE, err_msg=f"{key} at {stamp}")
        else:
            assert a == b, f"{key} at {stamp}: {a!r} != {b!r}"


def run(controller: str, scenario, steps: int = STEPS, jitter: float = 0.0, loops=TwinLoops,
        references: bool = True):
    """Close the loop on MuJoCo through the Python loop's answers; ``scenario(k, twin, plant, stamp,
    q, qd)`` feeds step k's state (and whatever else) and returns the answer to apply, or None.
    ``loops(controller)``: the loops compared; ``references``: fed each step (else the loops sample
    their own at each state's stamp)."""
    twin = loops(controller)
    trajectory = make_trajectory("operational_space", MODEL)
    robot = MujocoPlant(MODEL.parameters)
    robot.reset(MODEL.home_q)
    plant = DelayedPlant(robot, 2, jitter_periods=jitter, seed=3)
    for k in range(steps):
        t = plant.time
        stamp = message_time(t)
        if references and k > 0 and not getattr(scenario, "silent_reference", lambda k: False)(k):
            sample = trajectory.sample(t - plant.dt)
            twin.reference(stamp, Reference(stamp, sample.pose, sample.velocity, sample.acceleration))
        answer = scenario(k, twin, plant, stamp, plant.joint_positions().copy(), plant.joint_velocities().copy())
        if answer is not None:
            plant.apply_forces(answer.forces)
        try:
            plant.step()
        except SimulationDivergedError:
            break  # a scenario that lets the robot run away: what was decided until then stands
    twin.compare_state()
    return twin


def nominal(k, twin, plant, stamp, q, qd):
    return twin.state(stamp, stamp, q, qd)


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_tracking_with_late_publications_and_effort(controller):
    def scenario(k, twin, plant, stamp, q, qd):
        received = stamp + plant.dt * (1.3 if k % 7 == 0 else 0.3)  # now and then a period after its stamp
        answer = twin.state(received, stamp, q, qd, efforts=plant.applied_forces if k % 3 else None)
        twin.published(stamp, stamp + plant.dt * (1.2 if k % 50 == 0 else 0.2))  # now and then a period late
        return answer

    twin = run(controller, scenario, jitter=0.5)
    assert twin.actions[-1] == (Action.CONTROL, "")
    assert twin.compiled.finished["answered"] > 0.9 * STEPS
    assert twin.loops[1].controller.estimator.changes > 0  # the estimator moved, in both alike


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_superseded_repeated_and_out_of_order_states(controller):
    previous = {}

    def scenario(k, twin, plant, stamp, q, qd):
        if k > EVENT and k % 5 == 0:
            twin.judge(stamp, stamp, q, qd)  # superseded: a newer state waits
            return None
        answer = twin.state(stamp, stamp, q, qd)
        if k > EVENT and k % 7 == 0:
            assert twin.state(stamp, stamp, q, qd) is None  # a copy
            assert twin.state(stamp, *previous["state"]) is None  # out of order
        previous["state"] = (stamp, q, qd)
        return answer

    twin = run(controller, scenario)
    assert twin.actions[-1] == (Action.CONTROL, "")
    assert twin.loops[1].supervisor.repeated_joint_states > 100
    assert twin.compiled.finished["answered"] > 0.7 * STEPS


def glitch(k, twin, plant, stamp, q, qd):
    if k == EVENT:
        q[2] += 0.01  # one sample off by a centimetre: impossible motion
    if k == EVENT + 50:
        assert twin.arm(stamp)[0]
    return twin.state(stamp, stamp, q, qd)


def frozen(k, twin, plant, stamp, q, qd):
    if EVENT <= k < EVENT + 300:
        # The measurement stops changing, 4 mm and 0.3 m/s off on one slider: the law answers with a large force.
        q, qd = frozen.q + np.array([0.004, 0, 0, 0, 0, 0]), frozen.qd + np.array([0.3, 0, 0, 0, 0, 0])
    else:
        frozen.q, frozen.qd = q, qd
    if k == EVENT + 400:
        twin.arm(stamp)
    return twin.state(stamp, stamp, q, qd)


def rate_drop(k, twin, plant, stamp, q, qd):
    # The stamps as a message carries them (whole nanoseconds), as each of the plant's steps.
    if EVENT <= k < EVENT + 10:  # the driver's stamps come 10 periods apart: 100 Hz
        stamp = message_time(stamp + 9 * plant.dt * (k - EVENT + 1))
    elif k >= EVENT + 10:
        stamp = message_time(stamp + 90 * plant.dt)
    return twin.state(stamp, stamp, q, qd)


def stale(k, twin, plant, stamp, q, qd):
    now = stamp + 2 * SAFETY.max_feedback_age if k == EVENT else stamp
    return twin.state(now, stamp, q, qd)


def reference_stale(k, twin, plant, stamp, q, qd):
    return twin.state(stamp, stamp, q, qd)


reference_stale.silent_reference = lambda k: k >= EVENT  # no reference from here on


def too_fast(k, twin, plant, stamp, q, qd):
    if k == EVENT:
        qd[0] = 1.05 * LIMITS.actuator_speed_max  # plausible, but above the speed limit
    return twin.state(stamp, stamp, q, qd)


def opposed(k, twin, plant, stamp, q, qd):
    answer = twin.state(stamp, stamp, q, qd)
    if k >= EVENT and answer is not None:
        # A load on one slider, rising over 0.3 s to 2 N more than the force limit can hold: the force
        # stays there.
        gravity = MODEL.gravity_term(q)[0]
        load = min(1.0, (k - EVENT) / 300) * math.copysign(LIMITS.actuator_force_max - abs(gravity) + 2.0, gravity)
        plant.apply_forces(answer.forces - np.array([load, 0, 0, 0, 0, 0]))
        return None
    return answer


def assert_row_met(actions, action, words):
    """Some answer of ``actions`` (action, reason) was the row's ``action`` with ``words`` in its reason."""
    faults = [(a, r) for a, r in actions if a == action and words in r]
    assert faults, f"the scenario never met its row ({action.value}: {words}); last {actions[-1]}"


# (scenario, the row it must meet: action and words of the reason, its id)
ROWS = [
    (glitch, Action.ZERO, "moved", "glitch_then_rearm"),
    (frozen, Action.HOLD, "frozen", "frozen_then_rearm"),
    (rate_drop, Action.HOLD, "rate", "rate_drop"),
    (stale, Action.ZERO, "stale", "stale"),
    (reference_stale, Action.HOLD, "reference stale", "reference_stale"),
    (too_fast, Action.HOLD, "above the speed limit", "too_fast"),
    (opposed, Action.HOLD, "at the limit", "saturation"),
]


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
@pytest.mark.parametrize("scenario, action, words", [row[:3] for row in ROWS], ids=[row[3] for row in ROWS])
def test_every_row_decides_alike(controller, scenario, action, words):
    twin = run(controller, scenario)
    assert_row_met(twin.actions, action, words)
    assert twin.compiled.finished["answered"] > EVENT / 2
    assert sum(twin.compiled.deferred.values()) > 0 or scenario in (glitch, stale)


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_a_stall_and_its_catch_up_decide_alike(controller):
    """No state for 13 periods, then every other one for 10 periods (a driver catching up), then all:
    slow spacings for less than the drop row's span, so both steps go on controlling."""

    def scenario(k, twin, plant, stamp, q, qd):
        if EVENT <= k < EVENT + 13 or (EVENT + 13 <= k < EVENT + 23 and k % 2):
            return None  # never sent
        return twin.state(stamp, stamp, q, qd)

    twin = run(controller, scenario)
    assert {action for action, reason in twin.actions if "waiting for the joint-state rate" not in reason} == {Action.CONTROL}
    assert all(loop.supervisor.faults == 0 for loop in twin.loops)
    assert twin.compiled.finished["answered"] > 0.9 * (STEPS - 18)


def test_the_compiled_step_defers_a_fault_and_tracks_after_rearming():
    twin = run("computed_torque", glitch)
    supervisor = twin.loops[0].supervisor
    assert supervisor.state == SupervisorState.ARMED and supervisor.faults == 1
    assert twin.actions[-1] == (Action.CONTROL, "")
    assert math.isfinite(twin.loops[0].supervisor.joint_state_rate)


def disarmed_then_armed(k, twin, plant, stamp, q, qd):
    """Disarmed until EVENT (ZERO, the platform held by forces of the test's own), then armed by the
    operator."""
    if k == EVENT:
        assert twin.arm(stamp)[0]
    answer = twin.state(stamp, stamp, q, qd, efforts=plant.applied_forces)
    if k < EVENT:
        plant.apply_forces(MODEL.gravity_term(q) - SAFETY.hold_damping * qd)  # a brake, not the loop
        return None
    return answer


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_disarmed_states_and_arming_decide_alike(controller):
    """The compiled step answers the disarmed states too, with the same decisions, poses and commands
    in flight, and the arming that follows starts from the same state."""
    twin = run(controller, disarmed_then_armed, loops=lambda name: TwinLoops(name, arm_on_start=False))
    assert {action for action, _ in twin.actions[:EVENT - 1]} == {Action.ZERO}
    assert twin.actions[-1] == (Action.CONTROL, "")
    assert twin.compiled.finished["answered"] > 0.9 * STEPS  # the disarmed answers too


def test_the_status_an_arming_publishes_says_armed():
    """Not the last decision made while disarmed (a ZERO), which the arming has made moot; then the
    first answer armed grades as usual."""
    twin = TwinLoops("computed_torque", arm_on_start=False)
    q, qd = MODEL.home_q, np.zeros(6)
    for k in range(10):
        stamp = message_time(k * MODEL.parameters.simulation.dt)
        assert twin.state(stamp, stamp, q, qd).decision.action == Action.ZERO
    assert twin.arm(stamp)[0]
    for loop in twin.loops:
        status = loop.diagnostic(stamp, force=True)
        assert (status.level, status.message, status.values["state"]) == (Level.OK, "armed", "armed")
    stamp = message_time(10 * MODEL.parameters.simulation.dt)
    assert twin.state(stamp, stamp, q, qd).decision.reason == "waiting for a reference"
    for loop in twin.loops:
        status = loop.diagnostic(stamp, force=True)
        assert (status.level, status.message) == (Level.WARN, "hold: waiting for a reference")
