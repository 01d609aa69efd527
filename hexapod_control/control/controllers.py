"""Operational-space tracking controllers of the Hexapod (thesis 6.5.1 and 6.5.2, errata 9 and 11).

Both controllers share one interface::

    controller = make_controller("computed_torque", HexapodModel.from_yaml())
    controller.reset(t, q, qd)
    output = controller.update(t, q, qd, reference)   # reference: trajectories.Reference
    output.forces                                       # (6,) actuator forces [N], always finite

and read their gains from the ``controllers:`` section of the parameters file. The pose is
xi = (x, y, z, lambda, mu, nu) with ZYX Euler angles; xi_dot = J_A q_dot.

* ``double_loop`` - resolved-rate kinematic loop (6.85) with the feed-forward xi_d_dot (erratum 9),
  nu_d = J_A^-1 (xi_d_dot + K xi_err), and a PI velocity loop per actuator,
  tau = K_p (nu_d - q_dot) + K_i integral(nu_d - q_dot) dt, with anti-windup; ``reset`` starts the
  integral at g_bar(q) / K_i, so control takes over bumplessly from the hold force.
* ``computed_torque`` - operational-space inverse dynamics (6.89) with the damping term of
  erratum 9: tau = M_bar J_A^-1 (xi_d_ddot + K_V (xi_d_dot - J_A q_dot) + K_P xi_err - J_A_dot q_dot)
  + C_bar q_dot + g_bar, evaluated as one inverse-dynamics call at q_ddot = J_A^-1 (...).

Rules common to both (the ROS node maps ``status`` onto its safety supervisor):

* Pose error: xi_err = xi_d - xi with the Euler-angle part wrapped to (-pi, pi], so that a
  reference near +-pi does not command a full turn.
* Saturation: forces are clamped to +-``limits.actuator_force_max`` of the controller's parameters;
  ``saturated`` flags the clamped actuators and the status is ``saturated``.
* Anti-windup (double loop): ``conditional_integration`` (default) stops integrating an actuator
  while its force is clamped and its velocity error would push it further into the limit, so the
  integrator keeps what it had learnt (the gravity load) instead of winding up; ``none`` is the
  plain PI, kept for comparison. Back-calculation was tried and dropped: here the clamping is
  caused by the large proportional term K_p nu_err, so back-calculation drives the integral the
  opposite way (to make P + I sit on the limit), erasing the gravity compensation and slowing the
  recovery (see test_controllers.py).
* Integration step (double loop): each update integrates over the time since the previous update
  that integrated, t - t_previous, not the nominal 1/rate, so a driver whose joint states come at
  another rate, or jitter, does not skew the integral; the first update after ``reset`` takes the
  nominal period. One step integrates at most the longest period its gain set is valid for
  (1 / ``valid_rates.min``): after a dropped burst of states the velocity error of one instant does
  not stand for the whole gap.
* Feedback over the hold: the drives hold a force until the next command, and a loop that falls
  behind answers only some joint states, so a force meant for one period may act for several. The
  feedback gains (K_V and K_P; the double loop's K_p) are scaled by ``feedback_scale`` = the nominal
  period / the time since the previous update when that is longer (1 otherwise, and after
  ``reset``): the correction a held force makes over the hold stays the one the gains make in a
  period, where at the full gains it grows with the hold (both controllers went unstable answering
  every third or fourth joint state at 1 kHz). The feed-forward, the model terms and the double
  loop's integral force are not scaled: they do not grow with the hold.
* Valid rates: every gain set has ``valid_rates`` in the parameters (the rates at which its loop is
  stable with a margin); a controller whose ``controllers.rate`` lies outside them is refused at
  construction with ParameterError (the safety supervisor checks the measured rate at arming).
* Singularity rule, on ``jacobian_conditioning`` = sigma_min/sigma_max of J_A: below
  ``singularity.damping_threshold`` the controller replaces J_A^-1 by damped least squares
  (J^T J + lambda^2 I)^-1 J^T, with lambda growing from 0 at the threshold to
  ``max_damping * sigma_max`` at conditioning 0, and reports ``near_singular``; below
  ``stop_threshold``, or when the forward-kinematics constraint conditioning is below
  ``constraint_stop_threshold``, it gives the safe output with status ``singular``.
* Safe-output rule (one rule for every failure, so that the 1 kHz loop never has to catch an
  exception): NaN/inf/wrong-shape q, qd, t or reference -> status ``invalid_input``; a forward
  kinematics failure (ConvergenceError, AssemblyModeJumpError, AssemblyError) or a non-finite
  intermediate -> ``kinematics_failure``; a singular configuration -> ``singular``. The safe output
  is zero actuator forces (the drives let go; holding the last force could push a broken state
  further), ``safe_output`` is True, diagnostics that could not be computed are NaN, and the
  controller's internal state (integrator) is left untouched: call ``reset`` before resuming.
  ``update`` raises nothing for bad data; ``reset`` raises InvalidInputError or the kinematics
  error, because control cannot start from a state it cannot evaluate.

A controller may share its (immutable) HexapodModel with the rest of the process; it owns its
forward-kinematics warm start (a KinematicState), so FK starts from the previous control step,
which is what makes it cheap at 1 kHz.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hexapod_control.control import compiled_cycle
from hexapod_control.control.delay_compensation import compensated
from hexapod_control.control.trajectories import Reference
from hexapod_control.errors import (
    AssemblyError,
    AssemblyModeJumpError,
    ConvergenceError,
    InvalidInputError,
    ParameterError,
    SingularityError,
)
from hexapod_control.model.hexapod import JOINT_NAMES, HexapodModel
from hexapod_control.model.parameters import GAIN_SETS, ControllerSettings, DelayCompensationSettings
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.model.validation import as_vector

CONTROLLER_NAMES = ("double_loop", "computed_torque")
_KINEMATICS_ERRORS = (ConvergenceError, AssemblyModeJumpError, AssemblyError)


class ControlStatus(str, enum.Enum):
    OK = "ok"
    SATURATED = "saturated"  # at least one force clamped (see ControlOutput.saturated)
    NEAR_SINGULAR = "near_singular"  # damped least squares in use; forces still applied
    SINGULAR = "singular"  # safe output
    INVALID_INPUT = "invalid_input"  # safe output
    KINEMATICS_FAILURE = "kinematics_failure"  # safe output


SAFE_OUTPUT_STATUSES = frozenset({ControlStatus.SINGULAR, ControlStatus.INVALID_INPUT, ControlStatus.KINEMATICS_FAILURE})


@dataclass(frozen=True)
class ControlOutput:
    t: float  # [s]
    forces: np.ndarray  # (6,) [N], finite, within +-actuator_force_max
    status: ControlStatus
    message: str  # why, when the status is not "ok"
    pose: np.ndarray  # measured xi from FK (6,), NaN when unknown
    pose_error: np.ndarray  # xi_d - xi, angles wrapped (6,), NaN when unknown
    position_error_norm: float  # |(x, y, z) error| [m]
    orientation_error_norm: float  # |(lambda, mu, nu) error| [rad]
    saturated: np.ndarray  # (6,) bool
    jacobian_conditioning: float  # sigma_min / sigma_max of J_A
    constraint_conditioning: float  # of dgamma/dphi (FK)
    fk_iterations: int  # Newton iterations of this step's FK (-1 when not run)
    fk_residual: float  # [m]

    @property
    def safe_output(self) -> bool:
        return self.status in SAFE_OUTPUT_STATUSES


# ------------------------------------------------------------------------------------------ helpers
def _finite_array(value, name: str) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.shape != (6,):
        raise InvalidInputError(f"{name}: expected shape (6,), got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InvalidInputError(f"{name}: {array.tolist()} holds NaN or inf")
    return array


class _SafeOutput(Exception):
    """Internal: abandon this step with the safe output."""

    def __init__(self, status: ControlStatus, message: str):
        super().__init__(message)
        self.status = status


_NAN6 = np.full(6, np.nan)


# ------------------------------------------------------------------------------------------ protocol
class Controller(Protocol):
    """What the control loop and the supervisor ask of a controller: a bare law below, or one behind
    the delay compensation (:class:`~hexapod_control.control.delay_compensation.DelayCompensatedController`).

    ``answering``, ``commanded``, ``published`` and ``measured_effort`` tell the controller what the
    loop knows of the forces in flight (delay_compensation.py); a bare law acts on the state as
    measured and takes no account of them.
    """

    name: str
    model: HexapodModel
    period: float  # nominal [s]

    def reset(self, t: float, q, qd) -> None: ...

    def update(self, t: float, q, qd, reference: Reference) -> ControlOutput: ...

    def answering(self, when: float) -> None: ...

    def commanded(self, t: float, forces) -> None: ...

    def published(self, t: float, when: float) -> None: ...

    def measured_effort(self, t: float, effort) -> None: ...


# ------------------------------------------------------------------------------------------ base
class OperationalSpaceController:
    """Shared machinery: validation, FK, J_A and its (damped) inverse, pose error, clamping."""

    name = "operational_space"

    def __init__(self, model: HexapodModel, settings: ControllerSettings | None = None, gain_set: str = "robot"):
        """``settings`` default to ``model.parameters.controllers``; ``gain_set`` picks the double
        loop's velocity gains ("robot" or "simulated_plant", see DoubleLoopSettings.velocity_gains).
        ParameterError when ``settings.rate`` lies outside the gain set's ``valid_rates``."""
        if gain_set not in GAIN_SETS:
            raise InvalidInputError(f"unknown gain set {gain_set!r}; expected one of {list(GAIN_SETS)}")
        self.model = model
        self.kinematic_state = model.create_state()
        self.settings = settings or model.parameters.controllers
        self.force_limit = model.parameters.limits.actuator_force_max
        self.period = self.settings.period  # nominal [s]
        self.updated_at: float | None = None  # t of the last update that gave forces; None after reset
        self.valid_rates_key, self.valid_rates = self.settings.valid_rates(self.name, gain_set)
        if self.settings.rate not in self.valid_rates:
            raise ParameterError(
                f"{model.parameters.source}: hexapod.controllers.rate: {self.settings.rate:g} Hz lies outside "
                f"hexapod.{self.valid_rates_key} = {self.valid_rates}, the rates at which the {self.name} gains "
                f"({gain_set!r}) are valid"
            )
        self.select_cycle()

    def select_cycle(self, choice: str | None = None) -> str:
        """Run each update as one compiled C call ("c") or as the Python code below ("python").

        ``choice`` "auto" (None: $HEXAPOD_CONTROL_CYCLE, default auto) takes C when the library is
        available. The C cycle defers every safe output and FK continuation to the Python code, so
        both give the same outputs (see compiled_cycle.py). Returns the choice in effect.
        """
        self.cycle = compiled_cycle.attach(self, choice, ControlOutput, ControlStatus)
        return self.cycle_backend

    @property
    def cycle_backend(self) -> str:
        """"c" when updates run the compiled cycle, else "python"."""
        return "python" if self.cycle is None else "c"

    # -------------------------------------------------------------- interface
    def reset(self, t: float, q, qd) -> None:
        """Start control from the measured state; raises if that state cannot be evaluated."""
        as_vector([t], 1, "t")
        q = as_vector(q, 6, "q", JOINT_NAMES)
        as_vector(qd, 6, "qd", JOINT_NAMES)
        self.kinematic_state.reset()
        fk = self.model.forward_kinematics(q, self.kinematic_state)  # raises ConvergenceError / AssemblyModeJumpError
        self.updated_at = None
        self._reset_state(q, fk)

    # A bare law acts on the state as measured: what is in flight is not its business (Controller).
    def answering(self, when: float) -> None:
        pass

    def commanded(self, t: float, forces) -> None:
        pass

    def published(self, t: float, when: float) -> None:
        pass

    def measured_effort(self, t: float, effort) -> None:
        pass

    def feedback_scale(self, t: float) -> float:
        """The factor on the feedback gains of the update at ``t`` (module doc, "Feedback over the hold")."""
        if self.updated_at is None or not t - self.updated_at > self.period:
            return 1.0
        return self.period / (t - self.updated_at)

    def _updated(self, t: float) -> None:
        """The update at ``t`` gave forces (here or in the compiled cycle): later holds count from it."""
        self.updated_at = t if self.updated_at is None else max(self.updated_at, t)

    def update(self, t: float, q, qd, reference: Reference) -> ControlOutput:
        """Actuator forces for the measured (q, qd) and the reference; see the module rules."""
        if self.cycle is not None:
            output = self.cycle.update(t, q, qd, reference)
            if output is not None:
                return output  # else the compiled cycle left this one to the Python code below
        fk = jac = None
        try:
            t, q, qd, ref = self._validated(t, q, qd, reference)
            try:
                fk = self.model.forward_kinematics(q, self.kinematic_state)
                jac = self.model.analytic_jacobian(q, qd, phi=fk.phi)
            except _KINEMATICS_ERRORS as error:
                raise _SafeOutput(ControlStatus.KINEMATICS_FAILURE, str(error)) from error
            except SingularityError as error:
                raise _SafeOutput(ControlStatus.SINGULAR, str(error)) from error
            solve, near_singular = self._jacobian_solver(jac)
            pose_error = ref.pose - fk.pose
            pose_error[3:] = wrap_angle(pose_error[3:])
            try:
                unclamped = self._control_law(q, qd, ref, fk, jac, pose_error, solve, self.feedback_scale(t))
            except SingularityError as error:
                raise _SafeOutput(ControlStatus.SINGULAR, str(error)) from error
            except _KINEMATICS_ERRORS as error:
                raise _SafeOutput(ControlStatus.KINEMATICS_FAILURE, str(error)) from error
            if not np.all(np.isfinite(unclamped)):
                raise _SafeOutput(ControlStatus.KINEMATICS_FAILURE, f"non-finite control law output {unclamped}")
        except _SafeOutput as failure:
            return self._safe_output(t, failure.status, str(failure), fk, jac)

        forces = np.clip(unclamped, -self.force_limit, self.force_limit)
        saturated = np.abs(unclamped) > self.force_limit
        self._after_output(t, qd, unclamped, forces, saturated)
        self._updated(t)
        if near_singular:
            status, message = ControlStatus.NEAR_SINGULAR, (
                f"J_A conditioning {jac.jacobian_conditioning:.3g} below "
                f"{self.settings.singularity.damping_threshold}: damped least squares"
            )
        elif saturated.any():
            status, message = ControlStatus.SATURATED, f"forces clamped at +-{self.force_limit} N"
        else:
            status, message = ControlStatus.OK, ""
        return ControlOutput(
            t=t,
            forces=forces,
            status=status,
            message=message,
            pose=fk.pose,
            pose_error=pose_error,
            position_error_norm=float(np.linalg.norm(pose_error[:3])),
            orientation_error_norm=float(np.linalg.norm(pose_error[3:])),
            saturated=saturated,
            jacobian_conditioning=jac.jacobian_conditioning,
            constraint_conditioning=jac.constraint_conditioning,
            fk_iterations=fk.iterations,
            fk_residual=fk.residual,
        )

    # -------------------------------------------------------------- steps
    @staticmethod
    def _validated(t, q, qd, reference):
        try:
            t = float(t)
            if not math.isfinite(t):
                raise InvalidInputError(f"t: must be finite, got {t}")
            q = _finite_array(q, "q")
            qd = _finite_array(qd, "qd")
            ref = Reference(
                t=float(reference.t),
                pose=_finite_array(reference.pose, "reference.pose"),
                velocity=_finite_array(reference.velocity, "reference.velocity"),
                acceleration=_finite_array(reference.acceleration, "reference.acceleration"),
            )
        except (InvalidInputError, TypeError, ValueError, AttributeError) as error:
            raise _SafeOutput(ControlStatus.INVALID_INPUT, str(error)) from error
        return t, q, qd, ref

    def _jacobian_solver(self, jac):
        """A function v -> J_A^-1 v (damped near a singularity) and whether damping is active."""
        rule = self.settings.singularity
        conditioning = jac.jacobian_conditioning
        if jac.constraint_conditioning < rule.constraint_stop_threshold:
            raise _SafeOutput(
                ControlStatus.SINGULAR,
                f"forward-kinematics constraint conditioning {jac.constraint_conditioning:.3g} below "
                f"{rule.constraint_stop_threshold}",
            )
        if not conditioning >= rule.stop_threshold:  # also catches NaN
            raise _SafeOutput(
                ControlStatus.SINGULAR, f"J_A conditioning {conditioning:.3g} below {rule.stop_threshold}"
            )
        analytic = jac.analytic
        if conditioning >= rule.damping_threshold:
            return (lambda v: np.linalg.solve(analytic, v)), False
        u, sigma, vt = np.linalg.svd(analytic)
        # lambda^2 rises from 0 at the threshold to (max_damping sigma_max)^2 at conditioning 0, so
        # the command is continuous across the threshold and bounded at the singularity.
        damping2 = (rule.max_damping * sigma[0]) ** 2 * (1.0 - (conditioning / rule.damping_threshold) ** 2)
        gains = sigma / (sigma * sigma + damping2)
        return (lambda v: vt.T @ (gains * (u.T @ v))), True

    def _safe_output(self, t, status, message, fk, jac) -> ControlOutput:
        t = t if isinstance(t, float) and math.isfinite(t) else math.nan
        return ControlOutput(
            t=t,
            forces=np.zeros(6),
            status=status,
            message=message,
            pose=fk.pose if fk is not None else _NAN6.copy(),
            pose_error=_NAN6.copy(),
            position_error_norm=math.nan,
            orientation_error_norm=math.nan,
            saturated=np.zeros(6, dtype=bool),
            jacobian_conditioning=jac.jacobian_conditioning if jac is not None else math.nan,
            constraint_conditioning=(
                jac.constraint_conditioning if jac is not None else fk.constraint_conditioning if fk is not None else math.nan
            ),
            fk_iterations=fk.iterations if fk is not None else -1,
            fk_residual=fk.residual if fk is not None else math.nan,
        )

    # -------------------------------------------------------------- to override
    def _reset_state(self, q, fk) -> None:
        pass

    def _control_law(self, q, qd, ref, fk, jac, pose_error, solve, scale) -> np.ndarray:
        raise NotImplementedError

    def _after_output(self, t, qd, unclamped, forces, saturated) -> None:
        pass


# ------------------------------------------------------------------------------------------ double loop
class DoubleLoopController(OperationalSpaceController):
    """RMRC outer loop (6.85) and PI velocity inner loop with anti-windup (thesis 6.5.1)."""

    name = "double_loop"

    def __init__(self, model: HexapodModel, settings: ControllerSettings | None = None, gain_set: str = "robot"):
        super().__init__(model, settings, gain_set)
        loop = self.settings.double_loop
        velocity_gains = loop.velocity_gains(gain_set)
        self.kinematic_gain = np.array(loop.kinematic_gain)
        self.kp = np.array(velocity_gains.velocity_proportional_gain)
        self.ki = np.array(velocity_gains.velocity_integral_gain)
        self.anti_windup = loop.anti_windup
        # The law's state: integral(nu_d - q_dot) dt [m] (K_i times it is the integral force), the last
        # velocity error and desired joint velocity. The compiled cycle and step write them back as
        # the Python code would (compiled_cycle.py, compiled_step.py); each update replaces the arrays.
        self.integral = np.zeros(6)
        self.velocity_error = np.zeros(6)
        self.desired_joint_velocity = np.zeros(6)

    def _reset_state(self, q, fk) -> None:
        # Bumpless start: the integrator starts holding the gravity load, K_i I = g_bar(q), so the
        # first command at rest is the force that holds the platform where it is (the hold force)
        # instead of zero, which would let it drop until the integrator had learnt the load.
        self.integral = self.model.gravity_term(q, phi=fk.phi) / self.ki
        self.velocity_error = np.zeros(6)
        self.desired_joint_velocity = np.zeros(6)

    def integration_step(self, t: float) -> float:
        """The time the update at ``t`` integrates over [s] (module doc, "Integration step").

        Bounded by the longest period the gain set is valid for: beyond it the loop is not stable
        anyway, and a gap of many periods (states dropped in a burst) would otherwise integrate
        one instant's velocity error over the whole gap, a step in the integral force. A stamp
        not after the last one integrates nothing.
        """
        if self.updated_at is None:
            return self.period
        return min(max(t - self.updated_at, 0.0), self.valid_rates.longest_period)

    def _control_law(self, q, qd, ref, fk, jac, pose_error, solve, scale):
        # (6.85) with erratum 9: the feed-forward is xi_d_dot.
        self.desired_joint_velocity = solve(ref.velocity + self.kinematic_gain * pose_error)
        self.velocity_error = self.desired_joint_velocity - qd
        return self.kp * scale * self.velocity_error + self.ki * self.integral

    def _after_output(self, t, qd, unclamped, forces, saturated) -> None:
        error = self.velocity_error
        if self.anti_windup == "conditional_integration":
            # K_i > 0, so the error pushes the output further into the limit when signs agree.
            winding = saturated & (np.sign(error) == np.sign(unclamped))
            rate = np.where(winding, 0.0, error)
        else:
            rate = error
        self.integral = self.integral + self.integration_step(t) * rate


# ------------------------------------------------------------------------------------------ computed torque
class ComputedTorqueController(OperationalSpaceController):
    """Operational-space inverse dynamics (6.89), corrected by erratum 9 (thesis 6.5.2)."""

    name = "computed_torque"

    def __init__(self, model: HexapodModel, settings: ControllerSettings | None = None, gain_set: str = "robot"):
        super().__init__(model, settings, gain_set)
        self.position_gain = np.array(self.settings.computed_torque.position_gain)
        self.velocity_gain = np.array(self.settings.computed_torque.velocity_gain)

    def _control_law(self, q, qd, ref, fk, jac, pose_error, solve, scale):
        pose_rate = jac.analytic @ qd  # xi_dot = J_A q_dot
        commanded = (
            ref.acceleration
            + self.velocity_gain * scale * (ref.velocity - pose_rate)
            + self.position_gain * scale * pose_error
            - jac.convective
        )
        joint_acceleration = solve(commanded)
        # M_bar a + C_bar q_dot + g_bar in one call, reusing this step's phi.
        return self.model.inverse_dynamics(q, qd, joint_acceleration, phi=fk.phi)


_CONTROLLERS = {"double_loop": DoubleLoopController, "computed_torque": ComputedTorqueController}


def make_controller(
    name: str, model: HexapodModel, settings: ControllerSettings | None = None, gain_set: str = "robot",
    delay_compensation: DelayCompensationSettings | None = None,
) -> Controller:
    """A controller by name ("double_loop" or "computed_torque"), configured from the model's YAML.

    Without ``settings``, they are the model's ``parameters.controllers``; ``gain_set`` is "robot"
    for the hardware, "simulated_plant" for the simulators (see DoubleLoopSettings.velocity_gains).
    ``delay_compensation`` (e.g. ``settings.delay_compensation``, which the control loop passes)
    wraps the law in the model-based delay compensation of
    :mod:`hexapod_control.control.delay_compensation`; None, or predictor ``none``, gives the bare
    law, whose force is meant to act from the stamp of the state it answers. ParameterError when
    ``controllers.rate`` lies outside the gain set's ``valid_rates``.
    """
    if name not in _CONTROLLERS:
        raise InvalidInputError(f"unknown controller {name!r}; expected one of {list(CONTROLLER_NAMES)}")
    controller = _CONTROLLERS[name](model, settings, gain_set)
    if delay_compensation is None or delay_compensation.predictor == "none":
        return controller
    return compensated(controller, model, delay_compensation)
