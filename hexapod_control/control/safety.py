"""Safety supervisor of the controller node: which force goes out, decided on every joint state.

Pure Python (no ROS): the controller node converts messages and calls this; the tests drive it
without any middleware. Numbers come from the ``safety:`` section of the parameters file and from
``limits:``.

States::

    DISARMED --arm--> ARMED --fault--> FAULT (latched) --arm (re-arm)--> ARMED
        ^                 |                 |
        +-----disarm------+-----disarm------+

Safe-behaviour rule (one action per situation):

=================================================================  ========  ===========
situation                                                          action    latches
=================================================================  ========  ===========
disarmed                                                           ZERO      -
joint states stale (none for ``joint_state_timeout``, watchdog)     ZERO      yes
joint state invalid (wrong length, missing joint, NaN/inf)         ZERO      yes
hold force not computable (forward kinematics fails at q)          ZERO      yes
actuator outside its travel, adjacent sliders closer than
``limits.min_slider_separation``, actuator faster than
``limits.actuator_speed_max``                                      HOLD      yes
reference invalid (NaN, Euler singularity, unreachable pose) or
stale (none for ``reference_timeout``)                             HOLD      yes
controller safe output (singular, kinematics failure, bad input)   HOLD      yes
armed, no reference received yet                                  HOLD      no
everything valid                                                   CONTROL   -
=================================================================  ========  ===========

* ZERO: all six forces 0 N. Used whenever the measured state cannot be trusted: any force
  computed from stale or invalid feedback could push the robot anywhere.
* HOLD: tau = g_bar(q) - ``hold_damping`` * q_dot at the measured (valid) q, clamped to the
  force limit: gravity compensation stops the platform falling and the damping brakes any
  motion, without a position target that could itself be the problem.
* CONTROL: the controller's forces, clamped again to +-``limits.actuator_force_max`` (the
  controllers clamp already; the supervisor does not rely on it).
* A fault latches until the next successful ``arm`` (re-arm). While latched, the action never
  relaxes; a HOLD fault escalates to ZERO when the feedback goes stale or invalid.
* ``arm`` is accepted only with fresh, valid feedback inside every limit, and after the
  controller's ``reset`` at that state succeeded. The controller then tracks the latest
  reference at once: send a goal or stop the trajectory before re-arming far from it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hexapod_control.control.trajectories import Reference
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import SafetySettings
from hexapod_control.ros.conventions import (
    ReferencePoint,
    euler_from_reference_point,
    joint_state_arrays,
)


class Action(str, enum.Enum):
    CONTROL = "control"
    HOLD = "hold"
    ZERO = "zero"


class SupervisorState(str, enum.Enum):
    DISARMED = "disarmed"
    ARMED = "armed"
    FAULT = "fault"


# ------------------------------------------------------------------------------------------ records
@dataclass(frozen=True)
class Feedback:
    """One valid joint state: q, q_dot in the controller's joint order."""

    stamp: float  # [s] the message's header stamp (the time the state was measured)
    received: float  # [s] supervisor clock when it arrived
    q: np.ndarray
    qd: np.ndarray


@dataclass(frozen=True)
class ReceivedReference:
    reference: Reference
    received: float  # [s] supervisor clock


@dataclass(frozen=True)
class Decision:
    """The forces to send and why."""

    forces: np.ndarray  # (6,) [N], finite, within +-force_max
    action: Action
    state: SupervisorState
    reason: str  # why the action is not CONTROL ("" when it is)
    control: object | None = None  # the controller's ControlOutput when it ran
    saturated: np.ndarray = field(default_factory=lambda: np.zeros(6, dtype=bool))


ControlLaw = Callable[[float, np.ndarray, np.ndarray, Reference], object]  # -> ControlOutput
ResetLaw = Callable[[float, np.ndarray, np.ndarray], None]


# ------------------------------------------------------------------------------------------ supervisor
class SafetySupervisor:
    """Applies the module's safe-behaviour rule; see the module docstring.

    ``model`` should be an instance of its own (the forward kinematics behind the gravity term is
    warm-started). Times are seconds on one clock chosen by the caller (the node's ROS clock).
    """

    def __init__(self, model: HexapodModel, settings: SafetySettings, joint_names: Sequence[str]):
        self.model = model
        self.kinematic_state = model.create_state()  # FK warm start of the hold force's gravity term
        self.settings = settings
        self.limits = model.parameters.limits
        self.joint_names = tuple(joint_names)
        self.state = SupervisorState.DISARMED
        self.fault_action: Action | None = None
        self.reason = "not armed yet"
        self.feedback: Feedback | None = None  # last valid joint state, None after an invalid one
        self.last_feedback_time: float | None = None  # when any joint state last arrived
        self.reference: ReceivedReference | None = None
        self.invalid_joint_states = 0
        self.repeated_joint_states = 0
        self._last_stamp = -math.inf  # header stamp of the last joint state taken
        self.invalid_references = 0
        self.faults = 0
        self.last_error = ""

    # -------------------------------------------------------------- operator
    def arm(self, now: float, reset: ResetLaw) -> tuple[bool, str]:
        """Arm (or re-arm after a fault); returns (accepted, message)."""
        feedback = self.feedback
        if feedback is None or self._feedback_stale(now):
            return False, "cannot arm: no fresh valid joint state"
        problem = self._state_problem(feedback)
        if problem:
            return False, f"cannot arm: {problem}"
        try:
            reset(feedback.stamp, feedback.q, feedback.qd)
        except HexapodError as error:
            return False, f"cannot arm: the controller cannot start from the measured state: {error}"
        self.state, self.fault_action, self.reason = SupervisorState.ARMED, None, ""
        return True, "armed"

    def disarm(self, reason: str = "disarmed by request") -> None:
        self.state, self.fault_action, self.reason = SupervisorState.DISARMED, None, reason

    # -------------------------------------------------------------- inputs
    def is_new(self, stamp: float) -> bool:
        """Whether a joint state's stamp is later than the last one taken (then it is taken).

        A repeated or out-of-order state must not run the control law again: the integrator would
        count the instant twice, and each answer to a copy is one more command in flight, which
        delays every later command by a step (a lockstep simulator steps once per command).
        """
        if stamp > self._last_stamp:
            self._last_stamp = stamp
            return True
        self.repeated_joint_states += 1
        return False

    def joint_state(self, now: float, stamp: float, names, positions, velocities) -> Feedback | None:
        """Validate a joint state; an invalid one is a ZERO fault when armed. Returns the feedback."""
        self.last_feedback_time = now
        try:
            q, qd = joint_state_arrays(names, positions, velocities, self.joint_names)
            if not math.isfinite(stamp):
                raise InvalidInputError(f"joint state stamp is {stamp}")
        except InvalidInputError as error:
            self.invalid_joint_states += 1
            self.feedback = None
            self.last_error = f"invalid joint state: {error}"
            self._fault(Action.ZERO, self.last_error)
            return None
        self.feedback = Feedback(stamp=stamp, received=now, q=q, qd=qd)
        return self.feedback

    def reference_point(self, now: float, stamp: float, point: ReferencePoint | None, error: str = "") -> bool:
        """Take a reference (or the conversion error of a malformed message); returns validity.

        Valid means finite, away from the ZYX Euler singularity and reachable by inverse
        kinematics within the actuator travel. An invalid reference is a HOLD fault when armed.
        """
        try:
            if point is None:
                raise InvalidInputError(error or "empty reference")
            pose, velocity, acceleration = euler_from_reference_point(point)
            self.model.inverse_kinematics(pose[:3], pose[3:])  # raises UnreachablePoseError
        except (InvalidInputError, HexapodError) as failure:
            self.invalid_references += 1
            self.last_error = f"invalid reference: {failure}"
            self._fault(Action.HOLD, self.last_error)
            return False
        self.reference = ReceivedReference(Reference(stamp, pose, velocity, acceleration), received=now)
        return True

    # -------------------------------------------------------------- decisions
    def watchdog(self, now: float) -> Decision | None:
        """A ZERO decision when the feedback is stale (to publish now), else None."""
        if not self._feedback_stale(now):
            return None
        age = "never received" if self.last_feedback_time is None else f"{now - self.last_feedback_time:.3f} s old"
        self._fault(Action.ZERO, f"joint states stale ({age}, timeout {self.settings.joint_state_timeout} s)")
        return self._decision(Action.ZERO, self.reason if self.state != SupervisorState.DISARMED else "disarmed")

    def command(self, now: float, control_law: ControlLaw) -> Decision:
        """The decision for the latest valid feedback (call right after ``joint_state``)."""
        feedback = self.feedback
        if self.state == SupervisorState.DISARMED:
            return self._decision(Action.ZERO, self.reason)
        if feedback is None or self._feedback_stale(now):
            self._fault(Action.ZERO, "no valid joint state")
            return self._decision(Action.ZERO, self.reason)
        if self.state == SupervisorState.FAULT:
            return self._act(self.fault_action, self.reason, feedback)

        problem = self._state_problem(feedback)
        if problem:
            self._fault(Action.HOLD, problem)
            return self._act(Action.HOLD, problem, feedback)
        if self.reference is None:
            return self._act(Action.HOLD, "waiting for a reference", feedback)  # not a fault
        age = now - self.reference.received
        if age > self.settings.reference_timeout:
            self._fault(Action.HOLD, f"reference stale ({age:.3f} s old, timeout {self.settings.reference_timeout} s)")
            return self._act(Action.HOLD, self.reason, feedback)

        output = control_law(feedback.stamp, feedback.q, feedback.qd, self.reference.reference)
        if output.safe_output:
            self._fault(Action.HOLD, f"controller {output.status.value}: {output.message}")
            return self._act(Action.HOLD, self.reason, feedback, output)
        forces = np.asarray(output.forces, dtype=float)
        if forces.shape != (6,) or not np.all(np.isfinite(forces)):
            self._fault(Action.HOLD, f"controller returned invalid forces {forces.tolist()}")
            return self._act(Action.HOLD, self.reason, feedback, output)
        limit = self.limits.actuator_force_max
        saturated = np.asarray(output.saturated, dtype=bool) | (np.abs(forces) > limit)
        return Decision(np.clip(forces, -limit, limit), Action.CONTROL, self.state, "", output, saturated)

    # -------------------------------------------------------------- helpers
    def _feedback_stale(self, now: float) -> bool:
        feedback = self.feedback
        return feedback is None or now - feedback.received > self.settings.joint_state_timeout

    def _state_problem(self, feedback: Feedback) -> str:
        """Why the measured state violates a limit ('' when it does not)."""
        try:
            self.model.check_joint_limits(feedback.q)  # travel and slider separation
        except InvalidInputError as error:
            return str(error)
        speeds = np.abs(feedback.qd)
        fastest = int(np.argmax(speeds))
        if speeds[fastest] > self.limits.actuator_speed_max:
            return (
                f"{self.joint_names[fastest]} moves at {speeds[fastest]:.4g} m/s, above the speed limit "
                f"{self.limits.actuator_speed_max} m/s"
            )
        return ""

    def _fault(self, action: Action, reason: str) -> None:
        """Latch a fault (only while armed or already faulted); never relax a latched ZERO."""
        if self.state == SupervisorState.DISARMED:
            return
        if self.state == SupervisorState.FAULT and (self.fault_action == Action.ZERO or action == Action.HOLD):
            return  # keep the first (or the stronger) reason
        if self.state != SupervisorState.FAULT:
            self.faults += 1
        self.state, self.fault_action, self.reason = SupervisorState.FAULT, action, reason

    def _act(self, action: Action, reason: str, feedback: Feedback, output=None) -> Decision:
        if action == Action.ZERO:
            return self._decision(Action.ZERO, reason, output)
        try:
            gravity = self.model.gravity_term(feedback.q, state=self.kinematic_state)
            forces = np.asarray(gravity, dtype=float) - self.settings.hold_damping * feedback.qd
            if not np.all(np.isfinite(forces)):
                raise InvalidInputError(f"hold force {forces.tolist()} is not finite")
        except HexapodError as error:
            self.last_error = f"hold force not computable: {error}"
            self._fault(Action.ZERO, f"{reason}; {self.last_error}")
            return self._decision(Action.ZERO, self.reason, output)
        limit = self.limits.actuator_force_max
        return Decision(np.clip(forces, -limit, limit), Action.HOLD, self.state, reason, output, np.abs(forces) > limit)

    def _decision(self, action: Action, reason: str, output=None) -> Decision:
        return Decision(np.zeros(6), action, self.state, reason, output)
