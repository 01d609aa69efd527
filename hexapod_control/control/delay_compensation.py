"""Delay compensation: a controller acts on the state predicted for the moment its force applies.

A force computed from the joint state stamped t_k acts from t_k + d h on, d control periods h
later (the transport delay: the answer crosses DDS and the effort controller writes the last
command it holds at its next update; see simulation/delay.py). Until then the forces already in
flight act: the commands answering the states t_{k-d} .. t_{k-1}. A controller that feeds back the
measured state reacts d periods late: at the shipped gains computed torque is unstable from
d = 2 on, the double loop (simulated_plant gains) from d = 3 (``hexapod_margins``); both then bang
between the force limits.

:class:`DelayCompensatedController` wraps either controller (same ``reset``/``update`` interface):

1. forward kinematics of the measured q gives phi (and the measured pose it reports);
2. d semi-implicit Euler steps of the control period integrate the model's forward dynamics,
   q_dd = M_bar^-1 (tau - C_bar q_d - g_bar) (with the drives' inertia and friction when the
   parameters have them, the friction taken implicitly over the step: it is stiff near rest),
   from the measured (q, q_d) under the forces in flight
   (each clamped to the force limit, as the drives clamp it), to the state at t_k + d h;
3. the reference is carried to the same instant by its own derivatives (second order: the pose
   error this leaves is |jerk| (d h)^3 / 6, ~6e-11 rad for the 6.5 trajectory at d = 3);
4. the wrapped controller computes the force for that state and reference.

With an exact model the prediction is exact and the loop behaves as the delay-free one; a model
error enters only through d periods of prediction. The period h is the median spacing of the
recent joint-state stamps (the nominal period until two have arrived), so a rate that differs
from ``controllers.rate`` does not skew the horizon. The forces in flight are the commands the
wrapper returned, unless the caller reports what was really sent with :meth:`commanded` (the
control loop does: a safety supervisor may hold or zero instead). A command is taken to act from
its state's stamp + (d + l) h, where l is how many whole periods after that stamp it was
published (:meth:`published`: a loop that falls behind publishes late, and the drives take the
command one or more periods later; l = 0 when the caller does not say). Of the commands that
have begun to act, the one published last acts, as the effort controller keeps the last it got;
before any command the drives hold zero. The command being computed is late too when its state
was: a caller that says when it answers (:meth:`answering`, the stamps' clock) has the prediction
carried a further a = floor((answered - t_k) / h) periods, to t_k + (d + a) h, where that command
can act at the earliest (the forces in flight keep their own delays; d + a at most the longest
delay the controller keeps forces for). Without it a stack answering two periods late left the
double loop uncompensated for those periods, and it rang into an overspeed.

Delay estimation (``estimate``, :class:`DelayEstimator`). The delay need not be known: the
motion says it. Over each period the measured velocity change, pushed through the model's inverse
dynamics at the previous state, is the force that acted; the command that matches it best, among
those sent 0..``max_delay_periods`` periods earlier, names the delay. A loop starting from rest
identifies it within delay + 1 periods (the first command's step away from the zero the drives
held); later a wrong estimate would make the loop ring, and ringing commands are told apart at
once. With jitter and lost commands the estimate moves between the delays that occur, and the
loop tracks either way (test_delay_compensation.py). When the joint states carry the force the
drives applied (the ``effort`` of ros2_control's joint_state_broadcaster, :meth:`measured_effort`),
that measurement is the force that acted, in place of the model's inverse dynamics: the delay is
then measured rather than inferred, whatever the model's error.

The output is the wrapped controller's (forces, status, conditioning), except that ``pose`` and the
pose errors are those of the measured state against the reference at its stamp: what diagnostics
and the pose topic report is the robot's tracking, not the prediction. If the prediction itself
fails (its forward kinematics does not converge), the controller acts on the measured state for
that step and says so in ``message``; invalid input goes to the wrapped controller unchanged, which
answers it with its safe output.

The numeric core (the measured forward kinematics, the estimator's applied force and the
prediction's steps) runs as pure C functions generated with the control cycle when the library is
available (:mod:`hexapod_control.control.compiled_prediction`, :meth:`select_core`); the NumPy code
below stays the reference and runs any call the C code does not finish.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque

import numpy as np

from hexapod_control.control import compiled_prediction
from hexapod_control.control.stamp_period import StampPeriod
from hexapod_control.control.trajectories import Reference
from hexapod_control.errors import HexapodError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import DelayCompensationSettings
from hexapod_control.model.rotations import wrap_angle

# A command acts from its stamp + d h; stamps within half a period count as the same instant.
STAMP_TOLERANCE = 0.5  # [periods]


class DelayEstimator:
    """Which delay the measured motion says the forces act with (module doc, "Delay estimation").

    Each new joint state k gives the force that acted over the last period,
    f_k = M_bar a + C_bar q_d + g_bar at the previous state with a = (q_d,k - q_d,k-1) / h
    (exact for a plant that steps as the model does), and each hypothesis delta in 0..``max_periods``
    names the command that should have acted then. The squared misfits are averaged with the time
    constant ``time_constant``; the estimate moves to the best hypothesis only when its misfit is
    below ``SWITCH_RATIO`` times the current one's, so that equal misfits (a steady loop, where
    consecutive commands hardly differ) never make it wander.
    """

    SWITCH_RATIO = 0.5

    def __init__(self, initial_periods: int, max_periods: int, time_constant: float):
        self.periods = initial_periods
        self.max_periods = max_periods
        self.time_constant = time_constant
        self.misfits = np.zeros(max_periods + 1)
        self.changes = 0  # how often the estimate moved

    def update(self, applied: np.ndarray, candidates: list[np.ndarray], period: float) -> int:
        """Take the force that acted over the last period and each hypothesis' command; the estimate."""
        forgetting = math.exp(-period / self.time_constant)
        misfits = np.array([float(np.sum((applied - command) ** 2)) for command in candidates])
        self.misfits = forgetting * self.misfits + (1.0 - forgetting) * misfits
        best = int(np.argmin(self.misfits))
        if self.misfits[best] < self.SWITCH_RATIO * self.misfits[self.periods]:
            self.periods = best
            self.changes += 1
        return self.periods


@dataclasses.dataclass
class ForcesInFlight:
    """What a :class:`DelayCompensatedController` knows of the forces acting: its state of record,
    which the compiled step (compiled_step.py) takes in and writes back while it runs the step."""

    # The commands of the longest delay in flight, the one acting before them and the new one:
    # (stamp answered, forces, whole periods between that stamp and the publication).
    sent: deque[tuple[float, np.ndarray, int]]
    longest: int  # the longest delay kept [periods]: the compiled core makes room for as many
    stamps: StampPeriod = dataclasses.field(default_factory=StampPeriod)  # of the joint states: the period h
    effort: tuple[float, np.ndarray] | None = None  # (stamp, the force the drives applied until it)
    last_measurement: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None  # t, q, q_d, phi

    @classmethod
    def keeping(cls, longest: int) -> ForcesInFlight:
        """Nothing in flight yet, room for the forces of delays up to ``longest`` periods."""
        return cls(sent=deque(maxlen=longest + 2), longest=longest)


class DelayCompensatedController:
    """``controller`` acting on the state predicted ``delay_periods`` periods ahead (module doc).

    With ``estimator`` the delay starts at ``delay_periods`` and follows the estimator's.
    """

    def __init__(self, controller, model: HexapodModel, delay_periods: int, period: float | None = None,
                 estimator: DelayEstimator | None = None):
        if delay_periods < 0 or delay_periods != int(delay_periods):
            raise ValueError(f"delay_periods must be a whole number >= 0, got {delay_periods!r}")
        self.controller = controller
        self.name = controller.name
        self.model = model
        self.delay_periods = int(delay_periods)
        self.estimator = estimator
        self.nominal_period = period if period is not None else controller.period
        self.force_limit = model.parameters.limits.actuator_force_max
        self._drives = model.dynamics.actuators  # their friction is stiff near rest: taken implicitly
        self.measured_state = model.create_state()  # FK warm start of the measured q
        self.predicted_state = model.create_state()  # and of the predicted ones
        self.flight = ForcesInFlight.keeping(max(self.delay_periods, estimator.max_periods if estimator else 0))
        self.prediction: tuple[np.ndarray, np.ndarray] | None = None  # (q, q_d) of the last update
        self._answering: float | None = None  # when the next update's state is answered (answering())
        self.select_core()

    # -------------------------------------------------------------- interface
    def select_core(self, choice: str | None = None) -> str:
        """Run the numeric core (measured FK, applied force, prediction) in C ("c") or NumPy ("python").

        ``choice`` as the control cycle's (None: $HEXAPOD_CONTROL_CYCLE, default auto: C when the
        library is available). A call the C code does not finish runs the NumPy code, so both give
        the same outputs (see compiled_prediction.py). Returns the choice in effect.
        """
        self.core = compiled_prediction.attach(self.model, self.flight.longest, choice)
        return "python" if self.core is None else "c"

    def reset(self, t: float, q, qd) -> None:
        """Reset the wrapped controller; the forces in flight stay (the drives still apply them)."""
        self.controller.reset(t, q, qd)
        self.measured_state.reset()
        self.predicted_state.reset()

    def update(self, t: float, q, qd, reference: Reference):
        answered, self._answering = self._answering, None  # for this update only
        try:
            t, q, qd = float(t), np.array(q, dtype=float), np.array(qd, dtype=float)
            valid = math.isfinite(t) and q.shape == qd.shape == (6,) and np.all(np.isfinite(q)) and np.all(np.isfinite(qd))
        except (TypeError, ValueError):
            valid = False
        if not valid:
            return self.controller.update(t, q, qd, reference)  # its safe output names the problem
        period = self._period(t)
        fk = self.core.measure(q, self.measured_state) if self.core is not None else None
        if fk is None:
            try:
                fk = self.model.forward_kinematics(q, self.measured_state)
            except HexapodError:
                return self._record(t, self.controller.update(t, q, qd, reference))  # fails the same way
        if self.estimator is not None:
            self._estimate(t, q, qd, fk.phi, period)
        steps_ahead = self.delay_periods + self._age_periods(t, period, answered)
        horizon = steps_ahead * period
        note = ""
        try:
            q_ahead, qd_ahead = self._predict(t, q, qd, fk.phi, period, steps_ahead)
            self.prediction = (q_ahead, qd_ahead)
            ahead = extrapolated_reference(reference, horizon)
        except (HexapodError, AttributeError, TypeError, ValueError) as error:
            q_ahead, qd_ahead, ahead = q, qd, reference
            self.prediction, note = None, f"delay compensation off for this step: {error}"
        output = self.controller.update(t, q_ahead, qd_ahead, ahead)
        if output.safe_output:
            return self._record(t, output)
        pose_error = np.asarray(reference.pose, dtype=float) - fk.pose
        pose_error[3:] = wrap_angle(pose_error[3:])
        return self._record(t, dataclasses.replace(
            output,
            pose=fk.pose,
            pose_error=pose_error,
            position_error_norm=float(np.linalg.norm(pose_error[:3])),
            orientation_error_norm=float(np.linalg.norm(pose_error[3:])),
            message="; ".join(m for m in (output.message, note) if m),
        ))

    def commanded(self, t: float, forces) -> None:
        """The forces really sent in answer to the state stamped ``t`` (replaces this wrapper's own)."""
        forces = np.clip(np.asarray(forces, dtype=float), -self.force_limit, self.force_limit)
        if self.flight.sent and self.flight.sent[-1][0] == t:
            self.flight.sent.pop()
        self.flight.sent.append((t, forces, 0))

    def answering(self, when: float) -> None:
        """The next update's state is answered at ``when`` (same clock as the stamps): module doc."""
        self._answering = when

    def published(self, t: float, when: float) -> None:
        """The command answering the state stamped ``t`` went out at ``when`` (same clock as the stamps)."""
        if not (self.flight.sent and self.flight.sent[-1][0] == t and math.isfinite(when)):
            return
        lateness = max(0, math.floor((when - t) / self.flight.stamps.median(self.nominal_period)))
        stamp, forces, _ = self.flight.sent[-1]
        self.flight.sent[-1] = (stamp, forces, lateness)

    def measured_effort(self, t: float, effort) -> None:
        """The force the drives applied until the state stamped ``t`` (the joint state's effort field).

        Used by the delay estimate at ``t`` in place of the model's inverse dynamics; ignored unless
        it is six finite numbers (a driver may publish no effort, or garbage).
        """
        try:
            effort = np.asarray(effort, dtype=float)
        except (TypeError, ValueError):
            return
        if effort.shape == (6,) and np.all(np.isfinite(effort)):
            self.flight.effort = (t, effort)

    @property
    def period(self) -> float:
        return self.controller.period

    # -------------------------------------------------------------- prediction
    def _period(self, t: float) -> float:
        """The median spacing of the recent joint-state stamps (the nominal period before two)."""
        self.flight.stamps.add(t)
        return self.flight.stamps.median(self.nominal_period)

    def _age_periods(self, t: float, period: float, when: float | None) -> int:
        """Whole periods between the stamp ``t`` and the answer at ``when`` (:meth:`answering`), at
        most what keeps d + a within the forces kept in flight; 0 when the caller did not say."""
        if when is None or not math.isfinite(when):
            return 0
        return min(max(math.floor((when - t) / period), 0), self.flight.longest - self.delay_periods)

    def _in_flight(self, t: float, period: float, delay_periods: int) -> np.ndarray:
        """The command acting at time t: the last one published of those that act from (stamp + (d + l) h)
        at or before t (zero before any)."""
        for stamp, forces, lateness in reversed(self.flight.sent):
            if stamp + (delay_periods + lateness - STAMP_TOLERANCE) * period <= t:
                return forces
        return np.zeros(6)

    def _estimate(self, t: float, q, qd, phi, period: float) -> None:
        """Feed the estimator the force that acted since the last joint state; adopt its delay."""
        last, self.flight.last_measurement = self.flight.last_measurement, (t, q, qd, phi)
        if last is None or not 0.0 < t - last[0] < (1.0 + STAMP_TOLERANCE) * period:
            return  # no previous state, or one was lost: the interval holds more than one command
        t0, q0, qd0, phi0 = last
        effort = self.flight.effort
        if effort is not None and effort[0] == t:
            applied = effort[1]  # measured by the drives: no model in between
        else:
            applied = self.core.applied_force(q0, qd0, phi0, qd, t - t0) if self.core is not None else None
            if applied is None:
                acceleration = (qd - qd0) / (t - t0)
                applied = (self.model.inverse_dynamics(q0, qd0, acceleration, phi=phi0)
                           + self._friction_damping(qd0, t - t0) @ acceleration)
        candidates = [self._in_flight(t0, period, delay) for delay in range(self.estimator.max_periods + 1)]
        self.delay_periods = self.estimator.update(applied, candidates, period)

    def _predict(self, t: float, q, qd, phi, period: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
        """(q, q_d) at t + ``steps`` h: semi-implicit Euler steps under the forces in flight."""
        if self.core is not None:
            in_flight = [self._in_flight(t + step * period, period, self.delay_periods) for step in range(steps)]
            predicted = self.core.predict(q, qd, phi, in_flight, period)
            if predicted is not None:
                return predicted
        model = self.model
        for step in range(steps):
            forces = self._in_flight(t + step * period, period, self.delay_periods)
            if self._drives.rigid:
                acceleration = model.forward_dynamics(q, qd, forces, phi=phi)
            else:  # (M_bar + h D) q_dd = tau - C_bar q_d - g_bar - f(q_d): the friction taken implicitly
                bias = model.inverse_dynamics(q, qd, np.zeros(6), phi=phi)
                matrix = model.mass_matrix(q, phi=phi) + self._friction_damping(qd, period)
                acceleration = np.linalg.solve(matrix, forces - bias)
            qd = qd + period * acceleration
            q = q + period * qd
            phi = model.kinematics.solve_passive(q, self.predicted_state, phi_guess=phi).phi
        return q, qd

    def _friction_damping(self, qd, period: float) -> np.ndarray:
        """h diag(df/dq_d): the drives' friction over a period, taken implicitly (zero without drives).

        Near rest the Coulomb slope F_c / v_s is stiff (thousands of N*s/m): explicitly it would
        overshoot within a step, where the sliders' real motion over a period settles.
        """
        if self._drives.rigid:
            return np.zeros((6, 6))
        return np.diag(period * (self._drives.viscous + self._drives.coulomb_slope(qd)))

    def _record(self, t: float, output):
        self.commanded(t, output.forces)
        return output


def extrapolated_reference(reference: Reference, horizon: float) -> Reference:
    """The reference ``horizon`` seconds later, from its velocity and acceleration (second order)."""
    pose, velocity, acceleration = (np.asarray(v, dtype=float) for v in
                                    (reference.pose, reference.velocity, reference.acceleration))
    return Reference(
        t=reference.t + horizon,
        pose=pose + horizon * velocity + 0.5 * horizon * horizon * acceleration,
        velocity=velocity + horizon * acceleration,
        acceleration=acceleration,
    )


def compensated(controller, model: HexapodModel, settings: DelayCompensationSettings) -> DelayCompensatedController:
    """``controller`` wrapped as ``settings`` (``controllers.delay_compensation``) say."""
    estimator = None
    if settings.estimate:
        estimator = DelayEstimator(settings.delay_periods, settings.max_delay_periods, settings.estimator_time_constant)
    return DelayCompensatedController(controller, model, settings.delay_periods, estimator=estimator)
