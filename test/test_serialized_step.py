"""Joint states taken as bytes by the compiled step against the Python loop: equal answers.

The robot stack hands each joint state's bytes to ControlLoop.serialized_joint_state, which reads
them, takes the reference off the player's grid at the stamp and answers with the command's bytes
in one C call (codegen/control_step.py, hexapod_step_message). Here three ControlLoops are fed the
same closed-loop sequences of test_compiled_step.py, with the reference of each state sampled at its
stamp from a ReferenceGrid of the same trajectory: one loop reads rclpy-serialized JointStates
through the C call, one runs the compiled step on the numbers, one the Python objects alone. Every
answer must agree with the Python loop's: the action, the state, the reason, the error, and the
forces (as deserialized from the command's bytes), the saturation flags and the pose to 1e-12,
through the rows of the rule table, superseded and repeated states, late publications and the drives'
effort (whose field changes the message's layout, which the C call then leaves to Python).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from test_compiled_step import (
    EVENT,
    MODEL,
    ROWS,
    STEPS,
    TOLERANCE,
    assert_row_met,
    assert_same_status,
    disarmed_then_armed,
    glitch,
    reference_stale,
)
from test_compiled_step import run as compiled_run

from hexapod_control.control.loop import ControlLoop, Serialized
from hexapod_control.control.reference_grid import ReferenceGrid
from hexapod_control.control.safety import Action
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.ros.common import set_time
from hexapod_control.ros.wire import JointStateWire, float64_array_message
from hexapod_control.simulation.lockstep import message_time

TRAJECTORY = make_trajectory("operational_space", MODEL)
GRID_KNOTS = 8


def serialized(stamp, names, q, qd, efforts) -> bytes:
    message = JointState(name=list(names), position=[float(v) for v in q], velocity=[float(v) for v in qd],
                         effort=[] if efforts is None else [float(v) for v in efforts])
    set_time(message.header.stamp, stamp)
    message.header.frame_id = "base"
    return serialize_message(message)


class TripleLoops:
    """The serialized, the compiled and the Python loop, each with its own grid of the same trajectory."""

    def __init__(self, controller: str, arm_on_start: bool = True):
        self.loops = [ControlLoop(MODEL, controller, gain_set="simulated_plant", arm_on_start=arm_on_start)
                      for _ in range(3)]
        if self.loops[0].select_step("c") != "c" or self.loops[1].select_step("c") != "c":
            pytest.skip("the compiled step is unavailable (no C library)")
        assert self.loops[2].select_step("python") == "python"
        self.grids = [ReferenceGrid(MODEL.parameters.trajectories.sample_period, GRID_KNOTS) for _ in self.loops]
        for grid in self.grids:
            grid.reset(TRAJECTORY, 0.0)
        self.wire = JointStateWire(MODEL.parameters.ros.joint_names)
        self.answered_in_c = 0
        self.actions: list[tuple[Action, str]] = []

    def _source(self, index, now):
        loop, grid = self.loops[index], self.grids[index]
        return lambda stamp: loop.validated_reference(now, grid.sample(stamp))

    def _serialized(self, now, data, answer):
        """As the robot stack: the layout of the message read last is the one served."""
        loop, grid = self.loops[0], self.grids[0]
        extend = lambda stamp: grid.extend(stamp)  # noqa: E731
        result = loop.serialized_joint_state(now, data, None, answer, extend, self._source(0, now))
        served = self.wire.last_read
        self.wire.read(data)
        if self.wire.last_read is not served:
            command, offset = float64_array_message(6)
            assert loop.serve_serialized(*self.wire.native_layout(offset), grid.array, command)
        return result

    def state(self, now, stamp, q, qd, efforts=None):
        names = self.loops[0].joint_names
        data = serialized(stamp, names, q, qd, efforts)
        result = self._serialized(now, data, answer=True)
        if result is Serialized.UNREAD:
            result = self.loops[0].joint_state(now, stamp, names, q, qd, reference_source=self._source(0, now),
                                               efforts=efforts)
        elif result is Serialized.DONE:
            result = None
        answers = [self.loops[i].joint_state(now, stamp, names, q, qd, reference_source=self._source(i, now),
                                             efforts=efforts) for i in (1, 2)]
        python = answers[1]
        for compared in (result, answers[0]):
            if compared is Serialized.ANSWERED:
                self.answered_in_c += 1
                loop = self.loops[0]
                forces = np.array(deserialize_message(loop.command_bytes, Float64MultiArray).data)
                record, _ = loop.answered_in_step()
                decision, pose = record.decision, record.pose
                error = ""
            else:
                assert (compared is None) == (python is None), stamp
                if python is None:
                    continue
                forces, decision, pose, error = compared.forces, compared.decision, compared.pose, compared.error
            for a, b in ((decision.action, python.decision.action), (decision.state, python.decision.state),
                         (decision.reason, python.decision.reason), (error, python.error)):
                assert a == b, f"at {stamp}: {a!r} != {b!r}"
            np.testing.assert_allclose(forces, python.forces, rtol=0, atol=TOLERANCE)
            np.testing.assert_array_equal(decision.saturated, python.decision.saturated)
            assert (pose is None) == (python.pose is None)
            if python.pose is not None:
                np.testing.assert_allclose(pose, python.pose, rtol=0, atol=TOLERANCE)
        if python is not None:
            self.actions.append((python.decision.action, python.decision.reason))
        return python

    def judge(self, now, stamp, q, qd):
        names = self.loops[0].joint_names
        if self._serialized(now, serialized(stamp, names, q, qd, None), answer=False) is Serialized.UNREAD:
            self.loops[0].judge(now, stamp, names, q, qd)
        for loop in self.loops[1:]:
            loop.judge(now, stamp, names, q, qd)

    def published(self, stamp, when):
        for loop in self.loops:
            loop.published(stamp, when)

    def arm(self, now):
        answers = [loop.arm(now) for loop in self.loops]
        assert answers[0] == answers[2] and answers[1] == answers[2]
        # The status an arming publishes (the controller node's ~/arm), of the last decision made before.
        statuses = [loop.diagnostic(now, force=True) for loop in self.loops]
        for status in statuses[:2]:
            assert (status.level, status.message) == (statuses[2].level, statuses[2].message)
            assert_same_status(status.values, statuses[2].values, now)
        return answers[2]

    def compare_state(self):
        """After synchronize, the supervisors and the delay compensations hold the same state."""
        for loop in self.loops[:2]:
            loop.synchronize()
        python = self.loops[2]
        for loop in self.loops[:2]:
            a, b = loop.supervisor, python.supervisor
            assert a.joint_state_period.snapshot() == b.joint_state_period.snapshot()
            assert (a.repeated_joint_states, a.invalid_joint_states) == (b.repeated_joint_states, b.invalid_joint_states)
            reference_a, reference_b = a.reference.reference, b.reference.reference
            assert reference_a.t == reference_b.t
            for name in ("pose", "velocity", "acceleration"):
                np.testing.assert_allclose(getattr(reference_a, name), getattr(reference_b, name), rtol=0, atol=TOLERANCE)
            assert [(s, l) for s, _, l in loop.controller.flight.sent] == [
                (s, l) for s, _, l in python.controller.flight.sent]
            assert loop.controller.delay_periods == python.controller.delay_periods


def run(controller: str, scenario, jitter: float = 0.0, arm_on_start: bool = True) -> TripleLoops:
    """test_compiled_step.run with the reference sampled at each state's stamp, off a grid."""
    return compiled_run(controller, scenario, jitter=jitter, references=False,
                        loops=lambda name: TripleLoops(name, arm_on_start))


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_bytes_answered_alike_with_late_publications_effort_and_superseded_states(controller):
    def scenario(k, triple, plant, stamp, q, qd):
        if k > EVENT and k % 5 == 0:
            triple.judge(stamp, stamp, q, qd)  # superseded: a newer state waits
            return None
        received = stamp + plant.dt * (1.3 if k % 7 == 0 else 0.3)
        # The effort field now and then: another layout, which the C call leaves to the Python code.
        answer = triple.state(received, stamp, q, qd, efforts=plant.applied_forces if k % 50 == 0 else None)
        if k > EVENT and k % 11 == 0:
            assert triple.state(received, stamp, q, qd) is None  # a copy
        triple.published(stamp, stamp + plant.dt * (1.2 if k % 40 == 0 else 0.2))
        return answer

    triple = run(controller, scenario, jitter=0.5)
    assert triple.actions[-1] == (Action.CONTROL, "")
    assert triple.answered_in_c > STEPS / 3  # the C call answered most states after the arming ramp


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_the_arming_ramp_is_answered_from_the_bytes_alike(controller):
    """A fault, then re-arming off the reference: the C call adds the ramp's offset to the grid's
    reference (step_ramp) as the supervisor does, answer by answer."""
    seen = {}

    def scenario(k, triple, plant, stamp, q, qd):
        answer = glitch(k, triple, plant, stamp, q, qd)
        ramp = triple.loops[2].supervisor.ramp
        if ramp is not None and k > EVENT and "ramp" not in seen:
            seen["ramp"], seen["answered"] = ramp, triple.answered_in_c
        if ramp is None and "ramp" in seen and "ended" not in seen:
            seen["ended"] = triple.answered_in_c
        return answer

    triple = run(controller, scenario)
    assert triple.loops[2].supervisor.faults == 1 and triple.actions[-1] == (Action.CONTROL, "")
    ramp = seen["ramp"]
    assert np.max(np.abs(ramp.displacement[:3])) > 1e-4  # a ramp of a real offset, not a hold
    assert seen["ended"] - seen["answered"] > 0.8 * ramp.duration / MODEL.parameters.simulation.dt


# Every row but the stale reference: a grid's reference is sampled at each stamp, never stale.
GRID_ROWS = [row for row in ROWS if row[0] is not reference_stale]


@pytest.mark.slow
@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
@pytest.mark.parametrize("scenario, action, words", [row[:3] for row in GRID_ROWS], ids=[row[3] for row in GRID_ROWS])
def test_every_row_decides_alike_from_the_bytes(controller, scenario, action, words):
    triple = run(controller, scenario)
    assert_row_met(triple.actions, action, words)
    assert triple.answered_in_c > 0


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_disarmed_states_are_answered_from_the_bytes_alike(controller):
    """Disarmed, the C call answers ZERO and takes the grid's reference at each stamp, as the Python
    loop takes its source's sample; the arming that follows starts from the same reference."""
    triple = run(controller, disarmed_then_armed, arm_on_start=False)
    assert {action for action, _ in triple.actions[:EVENT - 1]} == {Action.ZERO}
    assert triple.actions[-1] == (Action.CONTROL, "")
    assert triple.answered_in_c > 0.9 * STEPS


def test_an_arming_publishes_the_status_of_the_decision_made_before_it():
    """The robot stack builds the decision of an answer from the bytes only when it reads it: the
    status that ~/arm publishes reads the last one, made while disarmed, as the Python loop's."""
    triple = TripleLoops("computed_torque", arm_on_start=False)
    names, q, qd = triple.loops[0].joint_names, MODEL.home_q, np.zeros(6)
    for k in range(10):  # at rest, disarmed: the rate known, no decision read
        stamp = message_time(k * MODEL.parameters.simulation.dt)
        if triple._serialized(stamp, serialized(stamp, names, q, qd, None), answer=True) is Serialized.UNREAD:
            triple.loops[0].joint_state(stamp, stamp, names, q, qd, reference_source=triple._source(0, stamp))
        for index in (1, 2):
            triple.loops[index].joint_state(stamp, stamp, names, q, qd, reference_source=triple._source(index, stamp))
    assert triple.loops[0].compiled_step.finished["answered"] > 0
    assert triple.arm(stamp)[0]  # which compares the statuses
