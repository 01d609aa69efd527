"""Safety supervisor of the controller node: which force goes out, decided on every joint state.

Pure Python (no ROS): the controller node converts messages and calls this; the tests drive it
without any middleware. Numbers come from the ``safety:`` section of the parameters file, from
``limits:`` and from the controller's ``valid_rates`` (the control rates its gain set is valid at).

States::

    DISARMED --arm--> ARMED --fault--> FAULT (latched) --arm (re-arm)--> ARMED
        ^             |   ^                 |
        |             +---+ arm while armed: "already armed", nothing changes
        +----disarm---+-------disarm--------+

Safe-behaviour rule (one action per situation, the first row that applies):

========================================================================  ========  ===========
situation                                                                 action    latches
========================================================================  ========  ===========
disarmed                                                                  ZERO      -
joint state invalid: not decodable as a JointState, more than
``max_joint_state_names`` names, wrong
length, missing or duplicate joint name, NaN/inf, stamp not finite or
more than ``max_future_stamp`` ahead of the clock; or impossible: a
position beyond the travel, or a slider pair closer than
``limits.min_slider_separation``, by more than
``plausible_position_margin``, a speed above ``plausible_speed_factor``
x ``limits.actuator_speed_max``, or a step from the previous valid state
longer than that speed allows over their stamp spacing plus
``plausible_step_margin`` (motion consistency)                            ZERO      yes
joint states stale: the latest stamped more than ``max_feedback_age``
ago, none valid for ``joint_state_timeout`` (watchdog, node clock), or
none for ``joint_state_timeout`` of steady time (under use_sim_time
``sim_time_stall_timeout``): a stopped or rewound clock cannot hide it    ZERO      yes
hold force not computable (forward kinematics fails at q)                 ZERO      yes
actuator outside its travel, adjacent sliders closer than
``limits.min_slider_separation`` (anti-collision), actuator faster than
``limits.actuator_speed_max``                                             HOLD      yes
joint-state rate outside the controller's ``valid_rates`` by more than
1 %: the median of the last 100 stamp spacings (judged once 5 are in),
or the last spacings all longer than the slowest valid period, 5 or
more covering 50 ms (a drop to 100 Hz is caught within 5 periods)         HOLD      yes
feedback that does not answer the force: some force at the limit for
longer than ``max_saturation_time``; or every position and velocity
unchanged for ``frozen_feedback_time`` while the mean command less the
model's gravity load exceeds ``frozen_feedback_force`` somewhere           HOLD      yes
reference invalid: NaN, Euler singularity, unreachable by inverse
kinematics within the travel and the slider separation, feed-forward
actuator speed J_A^-1 xi_d_dot above ``limits.actuator_speed_max`` or
acceleration J_A^-1 xi_d_ddot above ``max_reference_acceleration``, or
(while armed) farther from the last reference than
``max_reference_position_step`` / ``max_reference_angle_step``; or
stale (none for ``reference_timeout``)                                    HOLD      yes
no smooth ramp from the measured pose to the reference (see arming)       HOLD      yes
controller safe output (singular, kinematics failure, bad input)          HOLD      yes
armed at start (``arm_on_start``) before the rate is known                HOLD      no
armed, no reference received yet                                          HOLD      no
everything valid                                                          CONTROL   -
========================================================================  ========  ===========

* ZERO: all six forces 0 N. Used whenever the measured state cannot be trusted: any force
  computed from stale, invalid or impossible feedback could push the robot anywhere.
* HOLD: tau = g_bar(q) - ``hold_damping`` * q_dot at the measured (valid) q, clamped to
  +-``hold_force_max`` (or the force limit, if lower): gravity compensation stops the platform falling
  and the damping brakes any motion, without a position target that could itself be the problem.
  The damping acts a loop delay late, d = ``controllers.delay_compensation.delay_periods``: per
  mode of mass m it is stable while ``hold_damping`` T / m < 2 sin(pi / (2 (2d + 1))) (2 without
  delay, 1 with one period). The supervisor refuses to start (ParameterError) unless that holds for
  the lightest actuator mode at home at the longest period ``valid_rates`` admits.
  A measured slider pair closer than the minimum separation holds rather than letting go: the
  state is real, a released platform would drop onto its stops, and the hold neither pushes the
  carriages together nor lets them keep moving.
* CONTROL: the controller's forces, clamped again to +-``limits.actuator_force_max`` (the
  controllers clamp already; the supervisor does not rely on it).
* A fault latches until the next successful ``arm`` (re-arm). While latched, the action never
  relaxes; a HOLD fault escalates to ZERO when the feedback goes stale or invalid.
* A valid joint state not stamped later than the last one taken (a copy, or out of order) is
  not answered and not a fault. Only valid states enter that bookkeeping: an invalid one (e.g.
  stamped in the future) can never make the genuine states that follow look old. The schema keeps
  ``max_future_stamp`` below ``joint_state_timeout``, so a state taken from slightly ahead cannot
  make the watchdog trip either.
* Every joint state that arrives is judged, also one a late loop will not answer because a newer
  one waits (:meth:`SafetySupervisor.joint_state` without :meth:`SafetySupervisor.command`): a bad
  one counts and latches as above, a good one is the baseline of the next motion check and a
  spacing of the rate. The rate is therefore the driver's, not the loop's.
* Motion consistency: a real slider moves at most ``plausible_speed_factor`` x
  ``limits.actuator_speed_max`` (the bound on a plausible speed), so between two states stamped
  dt apart it moves at most that times dt; ``plausible_step_margin`` covers encoder noise and a
  stamp that is off by some jitter. A glitch of one sample (a position off by a centimetre, say)
  fails it, and is answered with ZERO rather than with the force limit.
* Feedback that does not answer: a robot whose force stays pinned at the limit is not being
  controlled (an unstable loop, a stuck or frozen measurement), and a robot that does not move
  while the model says its net force must move it is not being measured. The frozen check
  averages the commands since the measurement froze and compares them with g_bar at the frozen
  q; it runs once per ``frozen_feedback_time``, and the message states the displacement the model
  predicts, 1/2 M_bar^-1 (mean command - g_bar) T^2.
* References are checked once, on arrival (a copy of the last one is not checked again); a
  rejected one is never tracked, and a later valid one does not clear the fault. A sample of a
  source validated when it changed (:meth:`SafetySupervisor.validated_reference`: the one-process
  stack's trajectory player and the lockstep simulation, whose moves are checked along their path
  by inverse kinematics and whose trajectories are checked against this row along their ramp and
  one period when built, ``make_trajectory``) is checked for finiteness and, while armed, the step
  from the last reference only: the inverse kinematics and feed-forward limits of the reference
  row cost a third of the 1 kHz cycle and were already checked along the whole path.
* ``arm`` is accepted only with fresh, valid feedback inside every limit, at a joint-state rate
  known (at least 5 spacings) and inside ``valid_rates`` (the rate row above), and after the
  controller's ``reset`` at that state succeeded. A simulation that arms at its first state
  (``arm_on_start``) is the one exception to "known": it holds the measured state (gravity
  compensation, no position target) until 5 spacings are in, rather than dropping the platform
  for want of a force; then the rate row applies. Arming while armed changes nothing (the
  controller keeps its state, e.g. the double loop's integral) and answers "already armed".
* The rate is measured from the stamps (time of measurement) of the valid joint states taken,
  armed or not, so a driver's rate is known by the time an operator arms. A rate drifting outside
  while armed is a HOLD fault: the gains may be unstable there, the hold damper is stable at any
  rate above its own bound (below ``valid_rates.min``, checked at start) and bounded by
  ``hold_force_max`` below it.
* Arming always starts from the measured pose, however close the reference is: the controller
  tracks the reference plus an offset that starts at (measured pose - reference) and decays to
  zero along a :class:`SmoothMove` of that displacement (quintic, at least
  ``trajectories.move.minimum_duration``, actuator speeds within
  ``trajectories.move.speed_fraction`` of the limit, its path checked by inverse kinematics; if it
  cannot be built, arming is refused, or a HOLD fault when the reference came later). The
  reference keeps moving meanwhile; it is reached, never jumped to: even a millimetre's offset
  taken at once is a step that the position gains answer at the force limit.
* While armed and tracking, and while disarmed or faulted, the control loop runs these rows as
  compiled C calls (control/compiled_step.py); every change of state (a fault latched, arming), and
  every rejected state, is this class's, and both give the same decisions and forces
  (test_compiled_step.py).
* Below the node: if the node's process dies, nothing it decides reaches the drives. The drive
  side must zero the force when commands stop (see the controller node and doc/robot.md).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hexapod_control.control.controllers import ControlOutput
from hexapod_control.control.stamp_period import StampPeriod
from hexapod_control.control.trajectories import Reference, SmoothMove, check_reference_limits
from hexapod_control.conventions import (
    ReferencePoint,
    euler_from_reference_point,
    joint_state_arrays,
)
from hexapod_control.errors import HexapodError, InvalidInputError, ParameterError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import RateRange, SafetySettings
from hexapod_control.model.rotations import wrap_angle_float

# A measured joint-state rate within this fraction of a bound of valid_rates counts as inside:
# stamps of the system clock in float seconds are quantised to 0.24 us (2.4e-3 of a 10 kHz period).
RATE_TOLERANCE = 0.01
# Stamp spacings the joint-state rate is the median of: 0.1 s at 1 kHz. A burst of late or skipped
# states moves it not at all (a short window latched a HOLD on a 1 kHz loop); a driver that really
# runs slower is caught by the drop row below (RATE_DROP_SPAN_S).
RATE_WINDOW = 100
# Spacings before the rate counts as known (arming needs it), and the fewest consecutive slow
# spacings that are a drop.
RATE_KNOWN_SPACINGS = 5
# A drop: the newest spacings all slower than the slowest valid period, at least
# RATE_KNOWN_SPACINGS of them, covering this long [s]. At 100 Hz in place of 1 kHz that is five
# periods, 50 ms of a rate at which the gains may be unstable, where the 100-spacing median would
# take half a second. A driver's stall (a loaded or virtual machine) delays a few states by a few
# milliseconds and its catch-up is over well within it, where five spacings of 2 ms (10 ms) held a
# loop that was back at 1 kHz; a gap in the states is the watchdog's (the stale rows).
RATE_DROP_SPAN_S = 0.05


def hold_damping_bound(delay_periods: int) -> float:
    """The largest ``hold_damping`` T / m at which the HOLD damper is stable, d periods of loop delay.

    Per mode of mass m the force -b q_dot measured d periods earlier acts over each period T:
    v_k+1 = v_k - a v_k-d with a = b T / m, whose characteristic polynomial z^(d+1) - z^d + a first
    has a root on the unit circle, z = exp(i pi / (2d + 1)), at a = |z - 1| = 2 sin(pi / (2 (2d + 1))).
    """
    return 2.0 * math.sin(math.pi / (2.0 * (2 * delay_periods + 1)))


class Action(str, enum.Enum):
    CONTROL = "control"
    HOLD = "hold"
    ZERO = "zero"


class SupervisorState(str, enum.Enum):
    DISARMED = "disarmed"
    ARMED = "armed"
    FAULT = "fault"


class Intake(str, enum.Enum):
    """What became of a joint state."""

    TAKEN = "taken"  # valid and new: the feedback to act on
    REPEATED = "repeated"  # valid, but not stamped later than the last one taken: not answered
    REJECTED = "rejected"  # invalid or stale: ZERO (a fault when armed)


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

    forces: np.ndarray  # (6,) [N], finite, within +-force_max (+-hold_force_max when holding)
    action: Action
    state: SupervisorState
    reason: str  # why the action is not CONTROL ("" when it is)
    control: ControlOutput | None = None  # the controller's output when it ran
    saturated: np.ndarray = field(default_factory=lambda: np.zeros(6, dtype=bool))


ControlLaw = Callable[[float, np.ndarray, np.ndarray, Reference], ControlOutput]
ResetLaw = Callable[[float, np.ndarray, np.ndarray], None]


# ------------------------------------------------------------------------------------------ supervisor
class SafetySupervisor:
    """Applies the module's safe-behaviour rule; see the module docstring.

    ``model`` should be an instance of its own (the forward kinematics behind the gravity term is
    warm-started). Times are seconds on one clock chosen by the caller (the node's ROS clock),
    except the ``steady`` times, which come from a monotonic clock (``time.monotonic``).
    ``valid_rates`` is the controller's (key path, range), as ControllerSettings.valid_rates gives
    it. ParameterError when the HOLD damper is unstable at the range's lowest rate (module doc).

    The public fields set below are its state of record: the control loop keeps the simple ones
    current for a step it finishes in compiled code, and the compiled step takes in the windows
    (rate, saturation, frozen feedback) and writes them back (loop.py, compiled_step.py).
    """

    def __init__(self, model: HexapodModel, settings: SafetySettings, joint_names: Sequence[str],
                 valid_rates: tuple[str, RateRange]):
        self.model = model
        self.kinematic_state = model.create_state()  # FK warm start of the hold force and the ramp
        self.settings = settings
        self.limits = model.parameters.limits
        self.joint_names = tuple(joint_names)
        self.valid_rates_key, self.valid_rates = valid_rates
        self._check_hold_damping()
        self.joint_state_period = StampPeriod(RATE_WINDOW)  # of the valid joint states taken
        self.state = SupervisorState.DISARMED
        self.fault_action: Action | None = None
        self.reason = "not armed yet"
        self.feedback: Feedback | None = None  # last valid joint state, None after a rejected one
        self.last_valid: Feedback | None = None  # the last valid state taken, kept after a rejected one
        self.last_feedback_time: float | None = None  # when any joint state last arrived
        self.reference: ReceivedReference | None = None  # the last valid reference
        self.ramp: SmoothMove | None = None  # the displacement still to cover since arming
        self.start_pending = False  # armed, and the ramp to the reference not yet decided
        self.invalid_joint_states = 0
        self.repeated_joint_states = 0
        self.last_stamp = -math.inf  # header stamp of the last joint state taken
        self.last_steady: float | None = None  # steady time at which that state arrived
        self.invalid_references = 0
        self.faults = 0
        self.last_error = ""
        self.saturated_since: float | None = None  # stamp from which some force has stayed at the limit
        self.frozen_since: float | None = None  # stamp from which the measurement has not changed
        self.frozen_force_sum = np.zeros(6)  # the CONTROL forces sent since then
        self.frozen_commands = 0

    # -------------------------------------------------------------- operator
    def arm(self, now: float, reset: ResetLaw, hold_until_rate_known: bool = False) -> tuple[bool, str]:
        """Arm (or re-arm after a fault); returns (accepted, message). A no-op while armed.

        ``hold_until_rate_known``: a simulation arming at its first state (``arm_on_start``) is
        not refused for a rate not known yet; it holds until it is (module doc).
        """
        if self.state == SupervisorState.ARMED:
            return True, "already armed"  # a reset now would drop what the controller has learnt
        feedback = self.feedback
        if feedback is None:
            return False, "cannot arm: no fresh valid joint state"
        stale = self._staleness(now)
        if stale:
            return False, f"cannot arm: {stale}"
        problem = (self._state_problem(feedback) or ("" if hold_until_rate_known else self._rate_unknown())
                   or self._rate_problem())
        if problem:
            return False, f"cannot arm: {problem}"
        try:
            reset(feedback.stamp, feedback.q, feedback.qd)
        except HexapodError as error:
            return False, f"cannot arm: the controller cannot start from the measured state: {error}"
        self.start_pending, self.ramp = True, None
        self.saturated_since = None
        self._restart_frozen_window(None)
        if self.reference is not None:
            problem = self._start_tracking(feedback)
            if problem:
                return False, f"cannot arm: {problem}"
        self.state, self.fault_action, self.reason = SupervisorState.ARMED, None, ""
        return True, "armed" if self.ramp is None else f"armed: ramp to the reference over {self.ramp.duration:.3g} s"

    @property
    def rate_known(self) -> bool:
        """Enough stamp spacings are in to judge the joint-state rate (arming needs it)."""
        return self.joint_state_period.spacings >= RATE_KNOWN_SPACINGS

    def _rate_unknown(self) -> str:
        """Why the joint-state rate is not known yet ('' once RATE_KNOWN_SPACINGS spacings are in)."""
        if self.rate_known:
            return ""
        count = self.joint_state_period.spacings
        return (f"the joint-state rate is not known yet ({count} stamp spacings, {RATE_KNOWN_SPACINGS} needed to "
                f"check it against hexapod.{self.valid_rates_key})")

    def disarm(self, reason: str = "disarmed by request") -> None:
        self.state, self.fault_action, self.reason = SupervisorState.DISARMED, None, reason

    # -------------------------------------------------------------- inputs
    def joint_state(self, now: float, stamp: float, names, positions, velocities,
                    steady: float | None = None) -> Intake:
        """Validate a joint state and take it if it is new; a rejected one is a ZERO fault when armed.

        ``steady``: the monotonic time of arrival, for :meth:`steady_watchdog`. A repeated or
        out-of-order state must not run the control law again: the integrator would count the
        instant twice, and each answer to a copy is one more command in flight, which delays every
        later command by a step (a lockstep simulator steps once per command).
        """
        self.last_feedback_time = now
        try:
            stamp = float(stamp)
            if not math.isfinite(stamp):
                raise InvalidInputError(f"joint state stamp is {stamp}")
            if stamp - now > self.settings.max_future_stamp:
                raise InvalidInputError(
                    f"joint state stamped {stamp - now:.6g} s ahead of the clock (max_future_stamp "
                    f"{self.settings.max_future_stamp} s)"
                )
            q, qd = joint_state_arrays(names, positions, velocities, self.joint_names,
                                       self.settings.max_joint_state_names)
            self._check_plausible(q, qd)
            if stamp > self.last_stamp:
                self._check_motion(stamp, q)
        except (InvalidInputError, TypeError, ValueError) as error:
            return self._reject(f"invalid joint state: {error}")
        if stamp <= self.last_stamp:
            self.repeated_joint_states += 1
            return Intake.REPEATED
        if now - stamp > self.settings.max_feedback_age:
            return self._reject(
                f"joint state stale: measured {now - stamp:.6g} s ago (max_feedback_age "
                f"{self.settings.max_feedback_age} s)"
            )
        previous = self.last_valid
        if previous is None or not (np.array_equal(q, previous.q) and np.array_equal(qd, previous.qd)):
            self._restart_frozen_window(None)
        elif self.frozen_since is None:
            self._restart_frozen_window(previous.stamp)
        self.last_stamp = stamp
        self.last_steady = steady
        self.joint_state_period.add(stamp)
        self.feedback = self.last_valid = Feedback(stamp=stamp, received=now, q=q, qd=qd)
        return Intake.TAKEN

    def malformed_joint_state(self, now: float, error: str) -> Intake:
        """A joint state that arrived but cannot be decoded (its bytes are no JointState): invalid,
        like one of the wrong length; it has no stamp, so it is never answered."""
        self.last_feedback_time = now
        return self._reject(f"invalid joint state: not decodable: {error}")

    def reference_point(self, now: float, stamp: float, point: ReferencePoint | None, error: str = "") -> bool:
        """Take a reference (or the conversion error of a malformed message); returns validity.

        Checked on arrival against the rule table's reference row. A copy of the last valid
        reference only refreshes its age. An invalid reference is a HOLD fault when armed.
        """
        try:
            if point is None:
                raise InvalidInputError(error or "empty reference")
            pose, velocity, acceleration = euler_from_reference_point(point)
            last = self.reference.reference if self.reference is not None else None
            unchanged = (last is not None and np.array_equal(pose, last.pose)
                         and np.array_equal(velocity, last.velocity) and np.array_equal(acceleration, last.acceleration))
            if not unchanged:
                self._check_reference(pose, velocity, acceleration, last)
        except (InvalidInputError, HexapodError) as failure:
            return self._reject_reference(failure)
        self.reference = ReceivedReference(Reference(stamp, pose, velocity, acceleration), received=now)
        return True

    def validated_reference(self, now: float, reference: Reference) -> bool:
        """Take a sample of a source validated when it changed; returns validity (module doc).

        Only finiteness and, while armed, the step from the last reference are checked here.
        """
        try:
            pose, velocity, acceleration = (np.asarray(v, dtype=float) for v in
                                            (reference.pose, reference.velocity, reference.acceleration))
            if not (np.isfinite(pose).all() and np.isfinite(velocity).all() and np.isfinite(acceleration).all()
                    and math.isfinite(reference.t)):
                raise InvalidInputError(f"reference sample at t = {reference.t} is not finite")
            last = self.reference.reference if self.reference is not None else None
            if self.state == SupervisorState.ARMED and last is not None:
                problem = self._step_problem(pose - last.pose)
                if problem:
                    raise InvalidInputError(f"step from the last reference: {problem}")
        except InvalidInputError as failure:
            return self._reject_reference(failure)
        self.reference = ReceivedReference(Reference(reference.t, pose, velocity, acceleration), received=now)
        return True

    def _reject_reference(self, failure: Exception) -> bool:
        self.invalid_references += 1
        self.last_error = f"invalid reference: {failure}"
        self._fault(Action.HOLD, self.last_error)
        return False

    # -------------------------------------------------------------- decisions
    def watchdog(self, now: float) -> Decision | None:
        """A ZERO decision when the feedback is stale on the caller's clock (to publish now), else None."""
        stale = self._staleness(now)
        if not stale:
            return None
        self._fault(Action.ZERO, stale)
        return self._decision(Action.ZERO, self.reason if self.state != SupervisorState.DISARMED else "disarmed")

    def steady_watchdog(self, steady_now: float, timeout: float) -> Decision | None:
        """A ZERO decision when no valid joint state arrived for ``timeout`` of steady time, else None.

        The caller's clock may be simulated: absent or rewound, it never makes the feedback look
        stale to :meth:`watchdog`. This check only reads the monotonic arrival times. Before the
        first state is taken it stays silent: no force was sent yet, and a lockstep simulator
        would step on every zero command it received.
        """
        last = self.last_steady
        if last is None or steady_now - last <= timeout:
            return None
        self._fault(Action.ZERO, f"joint states stale on the steady clock (none for {steady_now - last:.3f} s, "
                                 f"timeout {timeout} s)")
        return self._decision(Action.ZERO, self.reason if self.state != SupervisorState.DISARMED else "disarmed")

    def command(self, now: float, control_law: ControlLaw) -> Decision:
        """The decision for the latest valid feedback (call right after ``joint_state``)."""
        feedback = self.feedback
        if self.state == SupervisorState.DISARMED:
            return self._decision(Action.ZERO, self.reason)
        stale = self._staleness(now)
        if feedback is None or stale:
            self._fault(Action.ZERO, stale or "no valid joint state")
            return self._decision(Action.ZERO, self.reason)
        if self.state == SupervisorState.FAULT:
            return self._act(self.fault_action, self.reason, feedback)

        problem = self._state_problem(feedback) or self._rate_problem()
        if problem:
            self._fault(Action.HOLD, problem)
            return self._act(Action.HOLD, problem, feedback)
        if not self.rate_known:
            return self._act(Action.HOLD, "waiting for the joint-state rate", feedback)  # not a fault
        if self.reference is None:
            return self._act(Action.HOLD, "waiting for a reference", feedback)  # not a fault
        age = now - self.reference.received
        if age > self.settings.reference_timeout:
            self._fault(Action.HOLD, f"reference stale ({age:.3f} s old, timeout {self.settings.reference_timeout} s)")
            return self._act(Action.HOLD, self.reason, feedback)
        if self.start_pending:
            problem = self._start_tracking(feedback)
            if problem:
                self._fault(Action.HOLD, problem)
                return self._act(Action.HOLD, problem, feedback)

        output = control_law(feedback.stamp, feedback.q, feedback.qd, self.tracked_reference(feedback.stamp))
        if output.safe_output:
            self._fault(Action.HOLD, f"controller {output.status.value}: {output.message}")
            return self._act(Action.HOLD, self.reason, feedback, output)
        forces = np.asarray(output.forces, dtype=float)
        if forces.shape != (6,) or not np.all(np.isfinite(forces)):
            self._fault(Action.HOLD, f"controller returned invalid forces {forces.tolist()}")
            return self._act(Action.HOLD, self.reason, feedback, output)
        limit = self.limits.actuator_force_max
        saturated = np.asarray(output.saturated, dtype=bool) | (np.abs(forces) > limit)
        forces = np.clip(forces, -limit, limit)
        problem = self._unanswered_force(feedback, forces, saturated)
        if problem:
            self._fault(Action.HOLD, problem)
            return self._act(Action.HOLD, problem, feedback, output)
        return Decision(forces, Action.CONTROL, self.state, "", output, saturated)

    def tracked_reference(self, t: float) -> Reference:
        """What the controller tracks at ``t``: the latest reference, plus the ramp's offset while it runs."""
        stream = self.reference.reference
        ramp = self.ramp
        if ramp is None:
            return stream
        if t >= ramp.start_time + ramp.duration:
            self.ramp = None  # reached: from now on exactly the reference
            return stream
        move = ramp.sample(t)
        return Reference(stream.t, stream.pose + (move.pose - ramp.target_pose),
                         stream.velocity + move.velocity, stream.acceleration + move.acceleration)

    # -------------------------------------------------------------- helpers
    def _reject(self, reason: str) -> Intake:
        self.invalid_joint_states += 1
        self.feedback = None
        self.last_error = reason
        self._fault(Action.ZERO, reason)
        return Intake.REJECTED

    def _staleness(self, now: float) -> str:
        """Why the feedback is stale on the caller's clock ('' when it is fresh)."""
        feedback = self.feedback
        if feedback is None:
            if self.last_feedback_time is None:
                return f"joint states stale (never received, timeout {self.settings.joint_state_timeout} s)"
            return "no valid joint state"
        if now - feedback.received > self.settings.joint_state_timeout:
            return (f"joint states stale ({now - feedback.received:.3f} s old, "
                    f"timeout {self.settings.joint_state_timeout} s)")
        if now - feedback.stamp > self.settings.max_feedback_age:
            return (f"joint state stale: measured {now - feedback.stamp:.6g} s ago "
                    f"(max_feedback_age {self.settings.max_feedback_age} s)")
        return ""

    def _check_plausible(self, q: np.ndarray, qd: np.ndarray) -> None:
        """InvalidInputError for a measurement no real robot can produce (see the rule table)."""
        limits, margin = self.limits, self.settings.plausible_position_margin
        low, high = limits.actuator_position_min - margin, limits.actuator_position_max + margin
        outside = np.flatnonzero((q < low) | (q > high))
        if outside.size:
            k = outside[0]
            raise InvalidInputError(f"{self.joint_names[k]} = {q[k]:.6g} m is impossible: beyond the travel "
                                    f"by more than {margin} m")
        separations = q[0::2] + q[1::2]
        overlapping = np.flatnonzero(separations < limits.min_slider_separation - margin)
        if overlapping.size:
            side = overlapping[0]
            raise InvalidInputError(f"side {side + 1}: slider separation {separations[side]:.6g} m is impossible: "
                                    f"below {limits.min_slider_separation} m by more than {margin} m")
        bound = self.settings.plausible_speed_factor * limits.actuator_speed_max
        fastest = int(np.argmax(np.abs(qd)))
        if abs(qd[fastest]) > bound:
            raise InvalidInputError(f"{self.joint_names[fastest]} speed {qd[fastest]:.6g} m/s is impossible: "
                                    f"above {bound:.6g} m/s")

    def _check_motion(self, stamp: float, q: np.ndarray) -> None:
        """InvalidInputError for a step from the last valid state that no real slider can make (module doc)."""
        previous = self.last_valid
        if previous is None:
            return
        settings = self.settings
        bound = (settings.plausible_speed_factor * self.limits.actuator_speed_max * (stamp - previous.stamp)
                 + settings.plausible_step_margin)
        steps = np.abs(q - previous.q)
        largest = int(np.argmax(steps))
        if steps[largest] > bound:
            raise InvalidInputError(
                f"{self.joint_names[largest]} moved {steps[largest]:.6g} m in {stamp - previous.stamp:.6g} s since the "
                f"last valid joint state, which is impossible: above {bound:.6g} m (plausible_speed_factor x "
                f"actuator_speed_max x the stamp spacing + plausible_step_margin)")

    def _restart_frozen_window(self, since: float | None) -> None:
        self.frozen_since = since
        self.frozen_force_sum[:] = 0.0
        self.frozen_commands = 0

    def _unanswered_force(self, feedback: Feedback, forces: np.ndarray, saturated: np.ndarray) -> str:
        """Why the feedback does not answer the force ('' when it may): the saturation and frozen rows."""
        settings = self.settings
        if saturated.any():
            if self.saturated_since is None:
                self.saturated_since = feedback.stamp
            elif feedback.stamp - self.saturated_since > settings.max_saturation_time:
                pinned = [name for name, s in zip(self.joint_names, saturated) if s]
                return (f"force of {', '.join(pinned)} at the limit {self.limits.actuator_force_max} N for "
                        f"{feedback.stamp - self.saturated_since:.3g} s (max_saturation_time "
                        f"{settings.max_saturation_time} s): the loop is not controlling the robot")
        else:
            self.saturated_since = None
        if self.frozen_since is None:
            return ""
        self.frozen_force_sum += forces
        self.frozen_commands += 1
        frozen_for = feedback.stamp - self.frozen_since
        if frozen_for < settings.frozen_feedback_time:
            return ""
        mean = self.frozen_force_sum / self.frozen_commands
        self._restart_frozen_window(feedback.stamp)  # judged once per window
        try:
            net = mean - self.model.gravity_term(feedback.q, state=self.kinematic_state)
            acceleration = np.linalg.solve(self.model.mass_matrix(feedback.q, state=self.kinematic_state), net)
        except (HexapodError, np.linalg.LinAlgError):
            return ""  # the hold row's own computation reports a model that fails here
        k = int(np.argmax(np.abs(net)))
        if abs(net[k]) <= settings.frozen_feedback_force:
            return ""
        predicted = 0.5 * np.abs(acceleration) * frozen_for**2
        return (f"feedback frozen: every position and velocity unchanged for {frozen_for:.3g} s while "
                f"{self.joint_names[k]} had a net force of {net[k]:.4g} N (mean command less gravity; "
                f"frozen_feedback_force {settings.frozen_feedback_force} N): the model predicts a motion of "
                f"{1e3 * predicted.max():.3g} mm")

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

    @property
    def joint_state_rate(self) -> float:
        """The measured joint-state rate [Hz]: 1 / the median stamp spacing; NaN before two states."""
        return 1.0 / self.joint_state_period.median(math.nan)

    def _rate_problem(self) -> str:
        """Why the measured joint-state rate is outside ``valid_rates`` ('' inside, or not yet known)."""
        period = self.joint_state_period
        if period.spacings < RATE_KNOWN_SPACINGS:
            return ""
        rates, rate = self.valid_rates, self.joint_state_rate
        if not rates.min * (1.0 - RATE_TOLERANCE) <= rate <= rates.max * (1.0 + RATE_TOLERANCE):
            return (f"joint states come at {rate:.4g} Hz (median stamp spacing {1e3 / rate:.4g} ms over the last "
                    f"{period.spacings}), outside hexapod.{self.valid_rates_key} = {rates}")
        slowest = 1.0 / (rates.min * (1.0 - RATE_TOLERANCE))
        run = period.slow_run(slowest)
        span = sum(run)  # newest first, as the compiled step adds them
        if len(run) >= RATE_KNOWN_SPACINGS and span >= RATE_DROP_SPAN_S * (1.0 - RATE_TOLERANCE):
            return (f"joint-state rate dropped: the last {len(run)} stamp spacings, {1e3 * span:.4g} ms "
                    f"({1e3 * min(run):.4g} to {1e3 * max(run):.4g} ms each), are all longer than the slowest valid "
                    f"period {1e3 / rates.min:.4g} ms of hexapod.{self.valid_rates_key} = {rates}")
        return ""

    def _check_hold_damping(self) -> None:
        """ParameterError unless the HOLD damper is stable at the lowest valid rate (module doc)."""
        parameters = self.model.parameters
        delay = parameters.controllers.delay_compensation.delay_periods
        lightest = float(np.linalg.eigvalsh(self.model.mass_matrix(self.model.home_q))[0])
        ratio = self.settings.hold_damping * self.valid_rates.longest_period / lightest
        bound = hold_damping_bound(delay)
        if ratio >= bound:
            raise ParameterError(
                f"{parameters.source}: hexapod.safety.hold_damping: {self.settings.hold_damping:g} N*s/m makes the "
                f"HOLD damper unstable at {self.valid_rates.min:g} Hz, the lowest rate of hexapod.{self.valid_rates_key}: "
                f"hold_damping / (rate m) = {ratio:.3g} for the lightest actuator mode m = {lightest:.3g} kg at home "
                f"must stay below {bound:.3g} with controllers.delay_compensation.delay_periods = {delay}"
            )

    def _check_reference(self, pose, velocity, acceleration, last: Reference | None) -> None:
        """Raise (InvalidInputError or the model's error) for a reference outside the robot's limits."""
        check_reference_limits(self.model, pose, velocity, acceleration, self.settings.max_reference_acceleration,
                               self.joint_names)
        if self.state == SupervisorState.ARMED and last is not None:
            problem = self._step_problem(pose - last.pose)
            if problem:
                raise InvalidInputError(f"step from the last reference: {problem}")

    def _step_problem(self, step: np.ndarray) -> str:
        """Why a pose change is too large to take at once ('' when it is not); angles are wrapped."""
        # Run at every reference of a 1 kHz loop: the norms on plain floats, without NumPy's per-call
        # overhead on three-element arrays.
        x, y, z, *angles = step.tolist()
        wrapped = [wrap_angle_float(a) for a in angles]
        position, angle = math.sqrt(x * x + y * y + z * z), math.sqrt(sum(a * a for a in wrapped))
        settings = self.settings
        if position > settings.max_reference_position_step:
            return f"{position:.4g} m exceeds max_reference_position_step {settings.max_reference_position_step} m"
        if angle > settings.max_reference_angle_step:
            return f"{angle:.4g} rad exceeds max_reference_angle_step {settings.max_reference_angle_step} rad"
        return ""

    def _start_tracking(self, feedback: Feedback) -> str:
        """Decide how control starts from the measured state (the ramp, or none); why not ('' when it can)."""
        self.start_pending, self.ramp = False, None
        target = self.reference.reference.pose
        try:
            measured = self.model.forward_kinematics(feedback.q, self.kinematic_state).pose
            self.ramp = SmoothMove(self.model, measured, target, start_time=feedback.stamp)
        except HexapodError as error:
            return f"no smooth ramp from the measured pose to the reference: {error}"
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
        limit = min(self.settings.hold_force_max, self.limits.actuator_force_max)
        return Decision(np.clip(forces, -limit, limit), Action.HOLD, self.state, reason, output, np.abs(forces) > limit)

    def _decision(self, action: Action, reason: str, output=None) -> Decision:
        return Decision(np.zeros(6), action, self.state, reason, output)
