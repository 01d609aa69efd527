"""The controller node's logic without ROS: supervisor, controller, FK pose and diagnostics.

:class:`ControlLoop` is what the controller node, the one-process stacks, the main job and replay
run: it takes joint states and references as plain numbers (a node converts messages to them) and
answers each new joint state with a :class:`StepRecord` (the forces to publish, the supervisor's
decision, the measured pose and, when one is due, a diagnostics status). Nothing here imports ROS.

The diagnostics are graded by one pure function, :func:`grade`, and throttled by
:class:`DiagnosticThrottle`: a status goes out at once when its level or message changes, else once
per ``safety.diagnostics_period``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hexapod_control.control import compiled_step
from hexapod_control.control.controllers import ControlStatus, make_controller
from hexapod_control.control.safety import Action, Decision, Feedback, Intake, SafetySupervisor, SupervisorState
from hexapod_control.control.trajectories import Reference
from hexapod_control.conventions import (
    ReferencePoint,
    effort_in_order,
    euler_from_reference_point,
    finite_effort,
    joint_state_arrays,
    reference_point_from_euler,
)
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.hexapod import HexapodModel

ReferenceSource = Callable[[float], None]


class Serialized(enum.Enum):
    """What :meth:`ControlLoop.serialized_joint_state` did with a joint state's bytes."""

    UNREAD = "unread"  # nothing: read the message and pass it to joint_state (or judge)
    ANSWERED = "answered"  # the compiled step answered it: publish ControlLoop.command_bytes
    DONE = "done"  # taken (a superseded state judged) or a repeat: nothing to publish


class Level(enum.IntEnum):
    """diagnostic_msgs/DiagnosticStatus levels (the same numbers)."""

    OK = 0
    WARN = 1
    ERROR = 2


@dataclass(frozen=True)
class DiagnosticStatus:
    level: Level
    message: str
    values: dict[str, Any]


@dataclass(frozen=True)
class StepRecord:
    """One answered joint state: what the node publishes and what the loop's users record."""

    t: float  # the joint state's stamp [s]
    q: np.ndarray  # measured (6,) [m]
    qd: np.ndarray  # measured (6,) [m/s]
    pose: np.ndarray | None  # FK of q, xi (6,); None where FK failed (the FK node publishes nothing)
    decision: Decision  # forces (6,) [N] and why
    diagnostic: DiagnosticStatus | None  # None when no status is due at this step
    error: str = ""  # why the joint state was invalid ("" when it was valid)
    phi: np.ndarray | None = None  # passive angles of q (3,) [rad] where the step solved them, else None

    @property
    def forces(self) -> np.ndarray:
        return self.decision.forces


def grade(decision: Decision | None, supervisor: SafetySupervisor) -> tuple[Level, str]:
    """Level and message of the supervisor's state and the last decision.

    ERROR while a fault is latched; OK while disarmed (a deliberate state); WARN while armed but
    not controlling (HOLD or ZERO) or while the controller reports anything but ``ok``; else OK. A
    decision made in another state than the supervisor's (the last one before an arming) says
    nothing of what it does now: armed, OK "armed" until the next one.
    """
    if supervisor.state == SupervisorState.FAULT:
        return Level.ERROR, f"fault ({supervisor.fault_action.value}): {supervisor.reason}"
    if supervisor.state == SupervisorState.DISARMED:
        return Level.OK, f"disarmed: {supervisor.reason}"
    if decision is None or decision.state != supervisor.state:
        return Level.OK, "armed"
    if decision.action != Action.CONTROL:
        return Level.WARN, f"{decision.action.value}: {decision.reason}"
    control = decision.control
    if control is not None and control.status != ControlStatus.OK:
        return Level.WARN, f"controller {control.status.value}"
    return Level.OK, "tracking"


class DiagnosticThrottle:
    """A status is due when its (level, message) changed, or ``period`` after the last one.

    Keeps a 1 kHz loop from flooding /diagnostics while never delaying a change (a fault, a
    recovery). A clock that jumps back makes the next status due.
    """

    def __init__(self, period: float):
        self.period = period
        self._last_key: tuple[Level, str] | None = None
        self._last_time = -math.inf

    def next_due(self, level: Level, message: str) -> float:
        """When a status of (level, message) is next due (-inf: at once, it is a change)."""
        return self._last_time + self.period if (level, message) == self._last_key else -math.inf

    def due(self, now: float, level: Level, message: str) -> bool:
        key = (level, message)
        if key == self._last_key and 0.0 <= now - self._last_time < self.period:
            return False
        self._last_key, self._last_time = key, now
        return True


def _safe_decision(action: Action, forces: np.ndarray, saturated: np.ndarray, state: SupervisorState,
                   reason: str) -> Decision:
    """The supervisor's decision of a state the compiled step answered with ``action`` (ZERO or HOLD),
    disarmed or faulted (``state``) for ``reason`` (SafetySupervisor.command)."""
    return Decision(forces, action, state, reason, None, saturated)


class ControlLoop:
    """Supervisor and controller of one process, fed with plain numbers (see the module doc).

    ``model`` is shared (immutable); the controller, the supervisor and the pose output each keep
    their own forward-kinematics warm start. While armed and tracking, and while disarmed or
    faulted, each joint state runs as compiled C calls when the library is available
    (compiled_step.py: the same decisions and forces as the Python objects, which then hold their
    state only after :meth:`synchronize`).
    ``arm_on_start`` arms at the first valid joint state and holds until the rate is known
    (simulation); on the robot the operator arms with :meth:`arm`. A ``controllers.rate`` outside
    the gain set's ``valid_rates``, or a HOLD damper unstable at their lowest rate, is a
    ParameterError here; the supervisor checks the measured joint-state rate against them.
    """

    def __init__(self, model: HexapodModel, controller_name: str, gain_set: str = "robot",
                 arm_on_start: bool = False):
        parameters = model.parameters
        self.model = model
        self.controller_name = controller_name
        self.joint_names = parameters.ros.joint_names
        # The loop's delay from controllers.delay_compensation: the controller acts on the state
        # predicted for when its force applies (control/delay_compensation.py).
        self.controller = make_controller(controller_name, model, gain_set=gain_set,
                                          delay_compensation=parameters.controllers.delay_compensation)
        self.supervisor = SafetySupervisor(model, parameters.safety, self.joint_names,
                                           parameters.controllers.valid_rates(controller_name, gain_set))
        self.arm_on_start = arm_on_start
        self.throttle = DiagnosticThrottle(parameters.safety.diagnostics_period)
        # One warm start for the FK of the measured state, the hold force's and the pose's, as the
        # compiled step keeps one: two drift apart in the last bits while a HOLD starts.
        self.pose_state = self.supervisor.kinematic_state
        self._last_decision: Decision | None = None
        self._decision_in_step = False  # the last decision is the compiled step's last answer (built when read)
        self._answered_stamp = math.nan  # the stamp of that answer
        self._answered_action = Action.CONTROL  # and its action
        self._answered_supervisor = (SupervisorState.ARMED, "")  # and the supervisor's state and reason then
        self.last_reference_stamp: float | None = None
        self.last_arm: tuple[bool, str] | None = None  # the answer to the last arm request
        self._names = (list(self.joint_names), tuple(self.joint_names))  # a message's names as they usually come
        self.select_step()

    def select_step(self, choice: str | None = None) -> str:
        """Run the steps of armed tracking as compiled calls ("c") or the Python objects ("python").

        ``choice`` as the control cycle's (None: $HEXAPOD_CONTROL_CYCLE, default auto: C when the
        control law and the delay compensation's core are compiled). Returns the choice in effect.
        """
        step = getattr(self, "_step", None)
        if step is not None:
            step.release()
        self._step = None if choice == "python" else compiled_step.attach(self, choice)
        return "python" if self._step is None else "c"

    @property
    def last_decision(self) -> Decision | None:
        """The decision last made (of a joint state or a watchdog)."""
        if self._decision_in_step:
            self._decision_in_step = False
            if self._answered_action == Action.CONTROL:
                output = self._step.output(self._answered_stamp)
                self._last_decision = Decision(output.forces, Action.CONTROL, SupervisorState.ARMED, "", output,
                                               output.saturated)
            else:
                forces, saturated, _, _ = self._step.safe_answer()
                self._last_decision = _safe_decision(self._answered_action, forces, saturated,
                                                     *self._answered_supervisor)
        return self._last_decision

    @last_decision.setter
    def last_decision(self, decision: Decision | None) -> None:
        self._decision_in_step = False
        self._last_decision = decision

    @property
    def compiled_step(self) -> compiled_step.CompiledStep | None:
        """The compiled step in use (its counts of finished and deferred calls), None for Python."""
        return self._step

    def synchronize(self) -> None:
        """Bring the Python objects (supervisor, controller) up to date with the compiled step."""
        if self._step is not None:
            self._step.release()

    # -------------------------------------------------------------- inputs
    def reference(self, now: float, stamp: float, point: ReferencePoint | None, error: str = "") -> bool:
        """Take a reference in message form (or the reason a message was malformed); returns validity."""
        self._release_reference()
        valid = self.supervisor.reference_point(now, stamp, point, error)
        if valid:
            self.last_reference_stamp = stamp
            self._take_reference()
        return valid

    def reference_sample(self, now: float, reference: Reference) -> bool:
        """Take a trajectory sample, through the message form the reference topic carries."""
        point = self._message_form(now, reference)
        return point is not None and self.reference(now, reference.t, point)

    def checked_sample(self, now: float, reference: Reference) -> bool:
        """Take a sample of a trajectory checked when built (trajectories.CheckedTrajectory): through
        the message form, as :meth:`reference_sample`, so that its numbers are those a node receives,
        but with only the checks of a validated source (control/safety.py)."""
        point = self._message_form(now, reference)
        if point is None:
            return False
        pose, velocity, acceleration = euler_from_reference_point(point)
        return self.validated_reference(now, Reference(reference.t, pose, velocity, acceleration))

    def _message_form(self, now: float, reference: Reference) -> ReferencePoint | None:
        """The sample as the reference message carries it; None, taken as a malformed reference, when
        it has no such form (a non-finite angle has no quaternion)."""
        try:
            return reference_point_from_euler(reference.pose, reference.velocity, reference.acceleration)
        except (ValueError, TypeError) as error:
            self.reference(now, reference.t, None, f"reference sample not convertible: {error}")
            return None

    def validated_reference(self, now: float, reference: Reference) -> bool:
        """Take a sample of a source validated when it changed (see SafetySupervisor.validated_reference)."""
        self._release_reference()
        valid = self.supervisor.validated_reference(now, reference)
        if valid:
            self.last_reference_stamp = reference.t
            self._take_reference()
        return valid

    def current_reference(self) -> Reference | None:
        """The reference taken last (a Reference; None before any), by the compiled step or not."""
        self._release_reference()
        received = self.supervisor.reference
        return received.reference if received is not None else None

    def _release_reference(self) -> None:
        if self._step is not None:
            self._step.release_reference()

    def _take_reference(self) -> None:
        if self._step is not None:
            self._step.take_reference()

    def joint_state(self, now: float, stamp: float, names, positions, velocities,
                    steady: float | None = None, reference_source: ReferenceSource | None = None,
                    efforts=None) -> StepRecord | None:
        """Answer a joint state; None for a repeated or out-of-order stamp (answered already).

        ``steady``: the monotonic arrival time, which a node passes for :meth:`steady_watchdog`.
        ``efforts``: the message's effort field, the forces the drives applied (ros2_control's
        joint_state_broadcaster), in the order of ``names``; the delay compensation measures the
        delay with them (an absent or malformed field is not used).
        ``reference_source(stamp)``: called for a state that will be answered, and only then, to
        hand the supervisor the reference for its stamp (the one-process stack's trajectory player):
        a copy or an older state never moves the reference.
        """
        intake = self._compiled_intake(now, stamp, names, positions, velocities, steady)
        if intake == Intake.TAKEN:
            return self._answer(now, stamp, names, reference_source, efforts, compiled=True)
        if intake == Intake.REPEATED:
            return None
        intake = self.supervisor.joint_state(now, stamp, names, positions, velocities, steady)
        if intake == Intake.REPEATED:
            return None
        if intake == Intake.TAKEN:
            return self._answer(now, stamp, names, reference_source, efforts, compiled=False)
        decision = self._command(now, stamp)
        self.last_decision = decision
        nan = np.full(6, np.nan)
        return StepRecord(stamp, nan, nan, None, decision, self.diagnostic(now), self.supervisor.last_error)

    def _command(self, now: float, stamp: float):
        """The supervisor's decision at ``now`` for the state stamped ``stamp``. The controller is told
        that the state is answered then, so that a delay-compensated one's prediction covers the
        periods the state is already old, and that the forces decided are its command in flight,
        whoever decided them."""
        self.controller.answering(now)
        decision = self.supervisor.command(now, self.controller.update)
        self.controller.commanded(stamp, decision.forces)
        return decision

    def _answer(self, now: float, stamp: float, names, reference_source: ReferenceSource | None, efforts,
                compiled: bool) -> StepRecord:
        """The decision for the state just taken (``compiled``: by the compiled intake)."""
        supervisor = self.supervisor
        feedback = supervisor.feedback
        if reference_source is not None:
            reference_source(stamp)
        effort = None
        if efforts is not None and len(efforts):
            if len(efforts) == 6 and (names == self._names[0] or names == self._names[1]):
                effort = finite_effort(efforts, len(self.joint_names))  # in joint order, as drivers send them
            else:
                effort = effort_in_order(names, efforts, self.joint_names)
        decision = pose = phi = None
        action = self._compiled_action() if compiled else None  # the reference source may have faulted
        if action == Action.CONTROL:
            output = self._step.command(stamp, effort, supervisor.tracked_reference(stamp), supervisor.reference.received)
            if output is not None:
                decision = Decision(output.forces, Action.CONTROL, supervisor.state, "", output, output.saturated)
                pose, phi = output.pose, self._step.last_phi  # of the measured state, finite when the step finishes
        elif action is not None:
            self._step.set_action(action)
            if self._step.safe(effort):
                forces, saturated, pose, phi = self._step.safe_answer()
                decision = _safe_decision(action, forces, saturated, supervisor.state, supervisor.reason)
        if decision is None:
            if self._step is not None:
                self._step.release()
            if effort is not None:
                self.controller.measured_effort(stamp, effort)
            if self.arm_on_start:
                self.arm_on_start = False  # once: a later fault must be re-armed by the operator
                self.last_arm = supervisor.arm(now, self.controller.reset, hold_until_rate_known=True)
            decision = self._command(now, stamp)
        self.last_decision = decision
        if pose is None and decision.control is not None and np.all(np.isfinite(decision.control.pose)):
            pose = decision.control.pose  # the controller's FK of this very state: no second solve
        elif pose is None:  # else the compiled step's, of the measured state
            try:
                pose = self.model.forward_kinematics(feedback.q, self.pose_state).pose
            except HexapodError:
                pass  # the FK node publishes nothing on a failure (an ERROR diagnostic only)
        return StepRecord(stamp, feedback.q, feedback.qd, pose, decision, self.diagnostic(now), phi=phi)

    def _compiled_intake(self, now: float, stamp, names, positions, velocities, steady: float | None) -> Intake | None:
        """The compiled intake of a joint state the compiled step may answer (:meth:`_compiled_action`):
        TAKEN or REPEATED, with the supervisor's simple fields kept current; None when the
        supervisor's own intake is to judge it."""
        step = self._step
        if step is None:
            return None
        if self._compiled_action() is not None and isinstance(stamp, float):
            arrays = self._arrays(names, positions, velocities)
            if arrays is not None:
                status = step.intake(now, stamp, *arrays)
                if status == "taken":
                    self._mirror(now, Feedback(stamp=stamp, received=now, q=arrays[0], qd=arrays[1]), steady)
                    return Intake.TAKEN
                if status == "repeated":
                    self._mirror(now, None)
                    return Intake.REPEATED
        step.release()
        return None

    def tracking(self) -> bool:
        """Armed, past the start and with a reference: the steps the compiled code may command."""
        return self._compiled_action() == Action.CONTROL

    def _compiled_action(self) -> Action | None:
        """The action the compiled step may answer a state taken now with: CONTROL while tracking, ZERO
        while disarmed, the latched action while faulted; None where the Python objects decide (armed
        before tracking: the start, no reference yet; or arming at the first state)."""
        supervisor = self.supervisor
        if self.arm_on_start:
            return None
        if supervisor.state == SupervisorState.DISARMED:
            return Action.ZERO
        if supervisor.state == SupervisorState.FAULT:
            return supervisor.fault_action
        return Action.CONTROL if not supervisor.start_pending and supervisor.reference is not None else None

    def _arrays(self, names, positions, velocities) -> tuple[np.ndarray, np.ndarray] | None:
        """(q, qd) in joint order, or None to leave the joint state to the supervisor's intake."""
        try:
            if (names == self._names[0] or names == self._names[1]) and len(positions) == len(velocities) == 6:
                q, qd = np.array(positions, dtype=float), np.array(velocities, dtype=float)
                return (q, qd) if q.shape == qd.shape == (6,) else None
            return joint_state_arrays(names, positions, velocities, self.joint_names,
                                      self.supervisor.settings.max_joint_state_names)
        except (InvalidInputError, TypeError, ValueError):
            return None

    def _mirror(self, now: float, feedback: Feedback | None, steady: float | None = None) -> None:
        """The supervisor's fields for a state the compiled intake took (``feedback``) or found repeated."""
        supervisor = self.supervisor
        supervisor.last_feedback_time = now
        if feedback is None:
            supervisor.repeated_joint_states += 1
            return
        supervisor.last_stamp = feedback.stamp
        supervisor.last_steady = steady
        supervisor.feedback = supervisor.last_valid = feedback

    def published(self, stamp: float, when: float) -> None:
        """The answer to the state stamped ``stamp`` was published at ``when`` (the stamps' clock): a
        late answer acts later, which the delay compensation takes into account."""
        if self._step is not None and self._step.owned:
            self._step.published(stamp, when)
        else:
            self.controller.published(stamp, when)

    # -------------------------------------------------------------- serialized joint states
    def serve_serialized(self, wire: np.ndarray, learned: bytes, grid: np.ndarray, command: bytes) -> bool:
        """Let the compiled step take joint states as bytes (:meth:`serialized_joint_state`); False when
        the steps run in Python. The arguments are CompiledStep.serve_messages's: the layout learned
        from ``learned`` (a node's wire reader), the player's reference grid, a serialized command."""
        if self._step is None:
            return False
        self._step.serve_messages(wire, learned, grid, command)
        return True

    @property
    def command_bytes(self) -> bytes:
        """The serialized command of the last ANSWERED joint state."""
        return self._step.command_bytes

    def serialized_joint_state(self, now: float, data: bytes, steady: float | None = None, answer: bool = True,
                               extend_reference: Callable[[float], None] | None = None,
                               reference_source: ReferenceSource | None = None) -> Serialized | StepRecord:
        """Take a joint state as its bytes, in one C call while tracking, disarmed or faulted:
        ``answer`` it (ANSWERED: its command is :attr:`command_bytes`; DONE: a repeat), or only judge
        it (DONE) as :meth:`judge`.

        UNREAD: nothing was done; read the message and pass it to :meth:`joint_state` (or judge):
        armed before tracking, another layout, or a state the supervisor's own intake is to judge.
        A state the compiled intake took but whose command it left to Python is answered here by the
        Python objects, as :meth:`joint_state` would (the StepRecord). ``extend_reference(stamp)``: have the
        reference grid hold the knots around the stamp (the player samples its source);
        ``reference_source``: as for :meth:`joint_state`.
        """
        step = self._step
        if not self._serves_bytes():
            return Serialized.UNREAD
        status = step.message(now, data, answer)
        if status == "grid" and extend_reference is not None:
            extend_reference(step.message_state()[0])
            status = step.message(now, data, answer)
        return self.after_message(status, now, steady, reference_source)

    def after_message(self, status: str, now: float, steady: float | None = None,
                      reference_source: ReferenceSource | None = None) -> Serialized | StepRecord:
        """What :meth:`serialized_joint_state` returns for the compiled step's ``status`` of the message
        it read last (also of one an rcl loop in C left to Python, ros/native_loop.py)."""
        step = self._step
        if status in ("layout", "grid"):
            return Serialized.UNREAD
        if status == "repeated":
            self._mirror(now, None)
            return Serialized.DONE
        if status != "answered" and step.message_intake() != "taken":
            return Serialized.UNREAD  # the supervisor's intake judges it (nothing was changed)
        stamp, q, qd, efforts = step.message_state()
        self._mirror(now, Feedback(stamp=stamp, received=now, q=q, qd=qd), steady)
        if status == "taken":
            return Serialized.DONE
        if status == "answered":
            self._answered_in_c(stamp)
            return Serialized.ANSWERED
        step.release()  # taken in C, decided by the Python objects from here
        return self._answer(now, stamp, self._names[0], reference_source, efforts, compiled=False)

    def ready_for_c(self) -> bool:
        """Whether an rcl loop in C may run the compiled step on the bytes now (serving bytes, and
        tracking, disarmed or faulted); the step's memory is then the state of record."""
        if not self._serves_bytes():
            return False
        if not self._step.owned:
            self._step.take()
        return True

    def ready_for_compiled_steps(self) -> bool:
        """Whether C code may run the compiled step against a reference grid now (tracking; the
        arming ramp's offset is added in C); the step's memory is then the state of record."""
        step = self._step
        if step is None or not self.tracking():
            return False
        step.set_action(Action.CONTROL)
        if not step.owned:
            step.take()
        return True

    def _serves_bytes(self) -> bool:
        """Serving bytes (serve_serialized) and an action the message step may answer with, which it
        is given."""
        step = self._step
        if step is None or not step.serving:
            return False
        action = self._compiled_action()
        if action is None:
            return False
        step.set_action(action)
        return True

    def compiled_status_due(self) -> float:
        """When the next diagnostics status of an answer of the compiled step with its action is due
        (-inf: at the next answer): a tracking one's, or the disarmed or faulted supervisor's."""
        if self._compiled_action() == Action.CONTROL:
            return self.throttle.next_due(Level.OK, "tracking")
        return self.throttle.next_due(*grade(None, self.supervisor))

    def served_in_c(self, answers: int, taken: int, repeated: int, message_now: float, taken_now: float,
                    taken_steady: float, last_answered: float) -> None:
        """Account for the messages an rcl loop in C took through the compiled step (ros/native_loop.py):
        ``answers`` answered (the last stamped ``last_answered``), ``taken`` judged valid, ``repeated``
        repeats; the supervisor's fields then read as if this loop had taken them (NaN: none taken)."""
        step, supervisor = self._step, self.supervisor
        step.served(answers, taken, repeated)
        supervisor.repeated_joint_states += repeated
        if not math.isnan(message_now):
            supervisor.last_feedback_time = message_now
        if not math.isnan(taken_now):
            stamp, q, qd = step.last_valid()
            self._mirror(taken_now, Feedback(stamp=stamp, received=taken_now, q=q, qd=qd), taken_steady)
        if answers:
            self._answered_in_c(last_answered)

    @property
    def answered_action(self) -> Action:
        """The action of the compiled step's last answer (:meth:`serialized_joint_state`, :meth:`served_in_c`)."""
        return self._answered_action

    def _answered_in_c(self, stamp: float) -> None:
        """The compiled step answered the state stamped ``stamp`` with its action (the last decision,
        built when read), and took the grid's reference at that stamp."""
        self.last_reference_stamp = self._answered_stamp = stamp
        self._answered_action = self._step.action
        self._answered_supervisor = (self.supervisor.state, self.supervisor.reason)  # for the decision built later
        self._decision_in_step = True

    def answered_in_step(self) -> tuple[StepRecord, Reference]:
        """The record of the joint state just ANSWERED by :meth:`serialized_joint_state`, and the
        reference it was answered against (for the outputs a node sends now and then)."""
        decision, feedback = self.last_decision, self.supervisor.feedback
        if decision.action == Action.CONTROL:
            pose, phi = decision.control.pose, self._step.last_phi
        else:
            _, _, pose, phi = self._step.safe_answer()
        return StepRecord(feedback.stamp, feedback.q, feedback.qd, pose, decision, None, phi=phi), \
            self._step.message_reference()

    def judge(self, now: float, stamp: float, names, positions, velocities, steady: float | None = None) -> None:
        """Validate a joint state that will not be answered (a newer one waits): it counts and latches
        as any other (safety.py), and a valid one is a spacing of the rate and the next motion check's
        baseline."""
        if self._compiled_intake(now, stamp, names, positions, velocities, steady) is None:
            self.supervisor.joint_state(now, stamp, names, positions, velocities, steady)

    def malformed_joint_state(self, now: float, error: str) -> None:
        """A joint state whose bytes could not be decoded: judged invalid (safety.py), never answered."""
        self.synchronize()
        self.supervisor.malformed_joint_state(now, error)

    # -------------------------------------------------------------- operator
    def arm(self, now: float) -> tuple[bool, str]:
        self.synchronize()
        self.last_arm = self.supervisor.arm(now, self.controller.reset)
        return self.last_arm

    def disarm(self) -> None:
        self.supervisor.disarm()

    def watchdog(self, now: float) -> Decision | None:
        """ZERO while the feedback is stale (to publish now), else None."""
        decision = self.supervisor.watchdog(now)
        if decision is not None:
            self.last_decision = decision
        return decision

    def steady_watchdog(self, steady_now: float, timeout: float) -> Decision | None:
        """ZERO when no valid joint state arrived for ``timeout`` of monotonic time, else None."""
        decision = self.supervisor.steady_watchdog(steady_now, timeout)
        if decision is not None:
            self.last_decision = decision
        return decision

    # -------------------------------------------------------------- diagnostics
    def diagnostic(self, now: float, force: bool = False) -> DiagnosticStatus | None:
        """The status of the last decision when due (or ``force``), else None."""
        # What grade() says of the compiled step's last answer, without building its decision: a ZERO or
        # HOLD adds nothing to the grade of the supervisor's state (the one it was made in, or another,
        # where grade() ignores it); a CONTROL answer is "tracking" while armed and its law ok.
        if self._decision_in_step and self._answered_action != Action.CONTROL:
            level, message = grade(None, self.supervisor)
        elif self._decision_in_step and self.supervisor.state == SupervisorState.ARMED and self._step.law_ok():
            level, message = Level.OK, "tracking"
        else:
            level, message = grade(self.last_decision, self.supervisor)
        if not self.throttle.due(now, level, message) and not force:
            return None
        return DiagnosticStatus(level, message, self.status_values())

    def status_values(self) -> dict[str, Any]:
        # While the compiled step owns the state, only the rate is not mirrored in the Python objects.
        supervisor, decision = self.supervisor, self.last_decision
        rate = supervisor.joint_state_rate if self._step is None else self._step.joint_state_rate()
        control = decision.control if decision is not None else None
        return {
            "state": supervisor.state.value,
            "action": decision.action.value if decision is not None else Action.ZERO.value,
            "reason": supervisor.reason,
            "controller": self.controller_name,
            "controller_status": control.status.value if control is not None else "not run",
            "controller_message": control.message if control is not None else "",
            "saturated": [] if decision is None else [n for n, s in zip(self.joint_names, decision.saturated) if s],
            "forces": decision.forces if decision is not None else [],
            "position_error_norm": control.position_error_norm if control is not None else math.nan,
            "orientation_error_norm": control.orientation_error_norm if control is not None else math.nan,
            "jacobian_conditioning": control.jacobian_conditioning if control is not None else math.nan,
            "joint_state_rate": rate,
            "invalid_joint_states": supervisor.invalid_joint_states,
            "repeated_joint_states": supervisor.repeated_joint_states,
            "invalid_references": supervisor.invalid_references,
            "faults": supervisor.faults,
            "last_error": supervisor.last_error,
            # The answers the compiled step finished (compiled_step.py); every other one ran the Python objects.
            "compiled_answers": self._step.finished["answered"] if self._step is not None else 0,
        }
