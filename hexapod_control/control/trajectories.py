"""Reference trajectories with analytic first and second derivatives.

Every trajectory answers ``sample(t) -> Reference`` with the desired operational-space pose
xi_d = (x, y, z, lambda, mu, nu) [m, rad] (ZYX Euler angles, erratum 2 in doc/model.md), its
velocity xi_d_dot and acceleration xi_d_ddot. All constants come from the ``trajectories:`` section
of the parameters file; nothing numeric about the thesis trajectories lives in this module.

* :class:`OperationalSpaceTrajectory` - the experiments trajectory of thesis section 6.5.
* :class:`JointSpaceTrajectory` - the validation trajectory (6.82) in actuator space, and
  :class:`JointTrajectoryImage`, its operational-space image through the model, so that the
  operational-space controllers can track it.
* :class:`ExcitationTrajectory` - the identification run (``hexapod_identify``): every slider
  moves by a sum of harmonics, also through :class:`JointTrajectoryImage`; checked against the
  limits when built.
* :class:`HoldTrajectory` - stay at one pose.
* :class:`SmoothMove` - a quintic move to a commanded pose whose duration keeps the peak
  actuator speed within a configurable fraction of the speed limit.

:func:`make_trajectory` checks a periodic trajectory when it is built, along the ramp and one
period after it, against the reference row of the safety rule table (control/safety.py: travel,
slider separation, a non-singular J_A, feed-forward speed and acceleration), and returns it as a
:class:`CheckedTrajectory`: its samples need no such check at 1 kHz, and a trajectory that leaves the
limits is refused before anything moves, with the key to change.

The thesis trajectories start with the ramp s(t) = 1 - exp(-kappa t^3), so that pose, velocity and
acceleration start at home, zero and zero. Before t = 0 they hold their t = 0 value (the ramp
would otherwise grow without bound for negative t).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np

from hexapod_control.errors import (
    HexapodError,
    InvalidInputError,
    ParameterError,
    SingularityError,
    UnreachablePoseError,
)
from hexapod_control.model.hexapod import POSE_NAMES, HexapodModel
from hexapod_control.model.parameters import (
    ExcitationSettings,
    JointSpaceSettings,
    MoveSettings,
    OperationalSpaceSettings,
    TrajectorySettings,
)
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.model.validation import as_vector


@dataclass(frozen=True)
class Reference:
    """Desired operational-space state at time t: xi_d, xi_d_dot, xi_d_ddot (each (6,))."""

    t: float  # [s]
    pose: np.ndarray  # (x, y, z, lambda, mu, nu) [m, rad]
    velocity: np.ndarray  # [m/s, rad/s] (Euler-angle rates, not the angular velocity)
    acceleration: np.ndarray  # [m/s^2, rad/s^2]


@dataclass(frozen=True)
class JointReference:
    """Desired actuator state at time t (each (6,))."""

    t: float  # [s]
    position: np.ndarray  # q_d [m]
    velocity: np.ndarray  # q_d_dot [m/s]
    acceleration: np.ndarray  # q_d_ddot [m/s^2]


class Trajectory(Protocol):
    def sample(self, t: float) -> Reference: ...


# The thesis ramp s(t) = 1 - exp(-kappa t^3) counts as done where 1 - s < 1e-4: kappa t^3 = ln(1e4).
RAMP_SETTLED = math.log(1e4)
# Samples per period of a trajectory's fastest motion when it is checked against the limits: a
# harmonic's peak falls between two samples by at most 1 - cos(pi / 200), about 1e-4 of it.
CHECK_SAMPLES_PER_PERIOD = 200
# Joint angular frequencies must be in ratios of integers up to this for the path to repeat, so
# that a check over one common period covers all of it.
FREQUENCY_RATIO_DENOMINATOR_MAX = 64


def ramp_settled_time(ramp_rate: float) -> float:
    """[s] when the ramp s(t) = 1 - exp(-kappa t^3) is within 1e-4 of 1 (kappa = ``ramp_rate``)."""
    return (RAMP_SETTLED / ramp_rate) ** (1.0 / 3.0)


def ramped_check_times(ramp_rate: float, period: float, fastest: float) -> np.ndarray:
    """Instants [s] at which a ramped periodic trajectory is checked: the ramp and one ``period``
    after it, ``CHECK_SAMPLES_PER_PERIOD`` samples per period of the ``fastest`` of its angular
    frequencies and of the ramp's own rate kappa^(1/3)."""
    fastest = max(abs(fastest), ramp_rate ** (1.0 / 3.0))
    step = 2.0 * math.pi / (fastest * CHECK_SAMPLES_PER_PERIOD)
    return np.arange(0.0, ramp_settled_time(ramp_rate) + period + step, step)


def common_period(angular_frequencies: Sequence[float], where: str) -> float:
    """[s] after which sines of all these angular frequencies [rad/s] repeat together (0 when none
    moves); ParameterError naming ``where`` when their ratios are not ratios of small integers."""
    moving = sorted({abs(float(w)) for w in angular_frequencies if w != 0.0})
    if not moving:
        return 0.0
    slowest, multiple = moving[0], 1
    for omega in moving:
        ratio = omega / slowest
        fraction = Fraction(ratio).limit_denominator(FREQUENCY_RATIO_DENOMINATOR_MAX)
        if not math.isclose(float(fraction), ratio, rel_tol=1e-9):
            raise ParameterError(
                f"{where}: {omega:g} and {slowest:g} rad/s are not in a ratio of integers up to "
                f"{FREQUENCY_RATIO_DENOMINATOR_MAX}: the path never repeats, so it cannot be checked against the limits"
            )
        multiple = math.lcm(multiple, fraction.denominator)
    return 2.0 * math.pi * multiple / slowest


def check_reference_limits(model: HexapodModel, pose, velocity, acceleration, max_acceleration: float,
                           joint_names: Sequence[str]) -> None:
    """Raise (InvalidInputError or the model's error) for a reference outside the robot's limits: the
    reference row of the safety rule table (control/safety.py) but the step from the last reference.

    The pose must have an inverse kinematics within the travel and the slider separation, J_A must
    be invertible there, and the feed-forward J_A^-1 (xi_d_dot, xi_d_ddot) must stay within
    ``limits.actuator_speed_max`` and ``max_acceleration`` [m/s^2].
    """
    ik = model.inverse_kinematics(pose[:3], pose[3:])  # travel and slider separation
    if not (velocity.any() or acceleration.any()):
        return
    try:
        jacobian = model.analytic_jacobian(ik.q, phi=ik.phi).analytic
        joint = np.linalg.solve(jacobian, np.column_stack((velocity, acceleration)))
    except np.linalg.LinAlgError as error:
        raise InvalidInputError(f"reference pose is singular: {error}") from error
    speeds, accelerations = np.abs(joint[:, 0]), np.abs(joint[:, 1])
    speed_max = model.parameters.limits.actuator_speed_max
    if not speeds.max() <= speed_max:
        k = int(np.argmax(speeds))
        raise InvalidInputError(f"feed-forward speed {speeds[k]:.4g} m/s of {joint_names[k]} exceeds "
                                f"the speed limit {speed_max} m/s")
    if not accelerations.max() <= max_acceleration:
        k = int(np.argmax(accelerations))
        raise InvalidInputError(f"feed-forward acceleration {accelerations[k]:.4g} m/s^2 of {joint_names[k]} "
                                f"exceeds max_reference_acceleration {max_acceleration} m/s^2")


# ---------------------------------------------------------------------------------------- ramp
def cubic_exponential_ramp(t: float, kappa: float) -> tuple[float, float, float]:
    """s = 1 - exp(-kappa t^3) and its first two time derivatives (held at 0 for t < 0).

    s starts with s = s' = s'' = 0, which is what makes the thesis trajectories start at rest.
    """
    if t <= 0.0:
        return 0.0, 0.0, 0.0
    decay = math.exp(-kappa * t**3)
    return 1.0 - decay, 3.0 * kappa * t**2 * decay, (6.0 * kappa * t - 9.0 * kappa**2 * t**4) * decay


def _wave(kind: str, omega: float, t: float) -> tuple[float, float, float]:
    """w(omega t) for w = sin or cos, and its first two time derivatives."""
    c, s = math.cos(omega * t), math.sin(omega * t)
    if kind == "sin":
        return s, omega * c, -omega * omega * s
    return c, -omega * s, -omega * omega * c


def home_pose(model: HexapodModel) -> np.ndarray:
    """xi at q = home from the model's own forward kinematics.

    The thesis prints z_home = 0.424 m; the model's FK gives 0.42426 m for L = 0.378. Taking it
    from FK makes every trajectory start exactly where the robot is, with zero initial error.
    """
    return model.forward_kinematics(model.home_q).pose


# ---------------------------------------------------------------------------------------- 6.5
class OperationalSpaceTrajectory:
    """The experiments trajectory of thesis 6.5 about ``centre`` (default: the FK home pose)."""

    def __init__(self, settings: OperationalSpaceSettings, centre):
        self.settings = settings
        self.centre = np.array(as_vector(centre, 6, "centre", POSE_NAMES))

    @classmethod
    def from_model(cls, model: HexapodModel, settings: TrajectorySettings | None = None):
        settings = settings or model.parameters.trajectories
        # z_home is the FK height at home (0.42426 m), not the printed 0.424 m: see home_pose().
        return cls(settings.operational_space, home_pose(model))

    def sample(self, t: float) -> Reference:
        t = _finite_time(t)
        cfg = self.settings
        s, ds, dds = cubic_exponential_ramp(t, cfg.ramp_rate)
        pose, velocity, acceleration = self.centre.copy(), np.zeros(6), np.zeros(6)
        for k in range(6):
            w, dw, ddw = _wave(cfg.waveforms[k], cfg.angular_frequency, max(t, 0.0))
            g, dg, ddg = cfg.amplitudes[k] * w - cfg.offsets[k], cfg.amplitudes[k] * dw, cfg.amplitudes[k] * ddw
            pose[k] += s * g
            velocity[k] = ds * g + s * dg
            acceleration[k] = dds * g + 2.0 * ds * dg + s * ddg
        return Reference(t, pose, velocity, acceleration)

    def sample_rows(self, times: np.ndarray) -> np.ndarray:
        """(n, 18) pose, velocity and acceleration at each of ``times``: :meth:`sample`'s formulas on
        arrays (numpy's exp, sin and cos: equal to the last bit or two)."""
        t = np.asarray(times, dtype=float)
        if not np.all(np.isfinite(t)):
            raise InvalidInputError("t: must be finite")
        cfg = self.settings
        kappa, after = cfg.ramp_rate, np.maximum(t, 0.0)
        decay = np.exp(-kappa * after**3)
        started = t > 0.0
        s = np.where(started, 1.0 - decay, 0.0)
        ds = np.where(started, 3.0 * kappa * after**2 * decay, 0.0)
        dds = np.where(started, (6.0 * kappa * after - 9.0 * kappa**2 * after**4) * decay, 0.0)
        omega = cfg.angular_frequency
        cosine, sine = np.cos(omega * after), np.sin(omega * after)
        rows = np.empty((len(t), 18))
        for k in range(6):
            if cfg.waveforms[k] == "sin":
                w, dw, ddw = sine, omega * cosine, -omega * omega * sine
            else:
                w, dw, ddw = cosine, -omega * sine, -omega * omega * cosine
            amplitude = cfg.amplitudes[k]
            g, dg, ddg = amplitude * w - cfg.offsets[k], amplitude * dw, amplitude * ddw
            rows[:, k] = self.centre[k] + s * g
            rows[:, 6 + k] = ds * g + s * dg
            rows[:, 12 + k] = dds * g + 2.0 * ds * dg + s * ddg
        return rows

    def check_times(self) -> np.ndarray:
        """The instants at which it is checked against the limits (:func:`ramped_check_times`):
        every axis repeats with the one period 2 pi / omega."""
        omega = abs(self.settings.angular_frequency)
        return ramped_check_times(self.settings.ramp_rate, 2.0 * math.pi / omega if omega else 0.0, omega)


# ---------------------------------------------------------------------------------------- 6.82
class JointSpaceTrajectory:
    """The validation trajectory (6.82): q_d = q_home + c_k s(t) sin(omega_k t)."""

    def __init__(self, settings: JointSpaceSettings, start_q):
        self.settings = settings
        self.start_q = np.array(as_vector(start_q, 6, "start_q"))
        self._amplitudes = np.array(settings.amplitudes)
        self._omegas = np.array(settings.angular_frequencies)

    @classmethod
    def from_model(cls, model: HexapodModel, settings: TrajectorySettings | None = None):
        settings = settings or model.parameters.trajectories
        return cls(settings.joint_space, model.home_q)

    def sample_joints(self, t: float) -> JointReference:
        t = _finite_time(t)
        s, ds, dds = cubic_exponential_ramp(t, self.settings.ramp_rate)
        phase = self._omegas * max(t, 0.0)
        w, dw, ddw = np.sin(phase), self._omegas * np.cos(phase), -self._omegas**2 * np.sin(phase)
        c = self._amplitudes
        return JointReference(
            t,
            self.start_q + c * s * w,
            c * (ds * w + s * dw),
            c * (dds * w + 2.0 * ds * dw + s * ddw),
        )

    def check_times(self, where: str) -> np.ndarray:
        """The instants at which it is checked against the limits (:func:`ramped_check_times`): the
        ramp and the common period of the moving sliders; ParameterError naming ``where`` (the
        frequencies' key) when they have none."""
        moving = [omega for omega, amplitude in zip(self._omegas, self._amplitudes) if amplitude != 0.0]
        fastest = max((abs(omega) for omega in moving), default=0.0)
        return ramped_check_times(self.settings.ramp_rate, common_period(moving, where), fastest)


class ExcitationTrajectory:
    """The identification run: q_k = q_home + s(t) a_k u(t + k T / 6) / max|u|, s = 1 - exp(-kappa t^3).

    u(t) = sum_j sin(h_j omega_f t - pi j (j - 1) / n) / h_j: the harmonics h_j of omega_f
    (period T = 2 pi / omega_f) with amplitudes 1/h_j, so that each adds the same speed, and
    Schroeder's phases, which keep the peak of the sum low for its power. Slider k runs the same
    sum k/6 of a period later, so no two sliders move alike. ``check_limits`` samples the ramp and
    one period against the travel, the singularity rule, the speed limit and (through the model's
    inverse dynamics, drives included) the force limit.
    """

    # Samples per second of the limit check: 20 per period of the fastest harmonic of the shipped set.
    CHECK_RATE = 200.0
    _PEAK_SAMPLES = 4096  # samples of one period for max|u|

    def __init__(self, settings: ExcitationSettings, start_q):
        self.settings = settings
        self.start_q = np.array(as_vector(start_q, 6, "start_q"))
        harmonics = np.array(settings.harmonics, dtype=float)
        count = harmonics.size
        self.period = 2.0 * math.pi / settings.fundamental_frequency
        self._omegas = harmonics * settings.fundamental_frequency  # (n,)
        self._weights = 1.0 / harmonics
        schroeder = -math.pi * np.arange(count) * np.arange(1, count + 1) / count
        shift = np.arange(6)[:, None] * self.period / 6.0  # (6, 1) [s]
        self._phases = schroeder[None, :] + self._omegas[None, :] * shift  # (6, n)
        grid = np.linspace(0.0, self.period, self._PEAK_SAMPLES, endpoint=False)
        unit = np.sin(self._omegas[None, :] * grid[:, None] + schroeder[None, :]) @ self._weights
        self._scale = np.array(settings.amplitudes) / float(np.max(np.abs(unit)))  # (6,) [m]

    @classmethod
    def from_model(cls, model: HexapodModel, settings: TrajectorySettings | None = None) -> ExcitationTrajectory:
        settings = settings or model.parameters.trajectories
        trajectory = cls(settings.excitation, model.home_q)
        trajectory.check_limits(model)
        return trajectory

    def sample_joints(self, t: float) -> JointReference:
        t = _finite_time(t)
        s, ds, dds = cubic_exponential_ramp(t, self.settings.ramp_rate)
        angle = self._omegas * max(t, 0.0) + self._phases  # (6, n)
        sine, cosine = np.sin(angle), np.cos(angle)
        w = sine @ self._weights
        dw = cosine @ (self._weights * self._omegas)
        ddw = -(sine @ (self._weights * self._omegas**2))
        c = self._scale
        return JointReference(
            t,
            self.start_q + c * s * w,
            c * (ds * w + s * dw),
            c * (dds * w + 2.0 * ds * dw + s * ddw),
        )

    def check_times(self) -> np.ndarray:
        """The instants at which it is checked: the ramp and one period, at ``CHECK_RATE``."""
        return np.arange(0.0, ramp_settled_time(self.settings.ramp_rate) + self.period, 1.0 / self.CHECK_RATE)

    def check_limits(self, model: HexapodModel) -> None:
        """ParameterError naming ``trajectories.excitation`` unless the ramp and one period stay within
        the travel, away from where the controllers damp J_A^-1, within ``limits.actuator_speed_max``
        and, with the model's feed-forward, ``actuator_force_max``."""
        parameters = model.parameters
        limits = parameters.limits
        where = f"{parameters.source}: hexapod.trajectories.excitation"
        state = model.create_state()
        damping_threshold = parameters.controllers.singularity.damping_threshold
        peak_speed = peak_force = 0.0
        for t in self.check_times():
            joints = self.sample_joints(t)
            try:
                model.check_joint_limits(joints.position, ParameterError)
                phi = model.forward_kinematics(joints.position, state).phi
                conditioning = model.analytic_jacobian(joints.position, phi=phi).jacobian_conditioning
                forces = model.inverse_dynamics(joints.position, joints.velocity, joints.acceleration, phi=phi)
            except HexapodError as error:
                raise ParameterError(f"{where}: leaves the workspace at t = {t:.3f} s: {error}") from error
            if conditioning < damping_threshold:
                raise ParameterError(
                    f"{where}: J_A conditioning {conditioning:.3g} at t = {t:.3f} s is below "
                    f"controllers.singularity.damping_threshold {damping_threshold}: lower the amplitudes"
                )
            peak_speed = max(peak_speed, float(np.max(np.abs(joints.velocity))))
            peak_force = max(peak_force, float(np.max(np.abs(forces))))
        if peak_speed > limits.actuator_speed_max:
            raise ParameterError(
                f"{where}: peak slider speed {peak_speed:.4g} m/s exceeds limits.actuator_speed_max "
                f"{limits.actuator_speed_max} m/s: lower the amplitudes or the frequencies"
            )
        if peak_force > limits.actuator_force_max:
            raise ParameterError(
                f"{where}: peak feed-forward force {peak_force:.4g} N exceeds limits.actuator_force_max "
                f"{limits.actuator_force_max} N: lower the amplitudes or the frequencies"
            )
        self.peak_speed, self.peak_force = peak_speed, peak_force


class JointTrajectoryImage:
    """Operational-space image of a joint trajectory: xi_d = FK(q_d), xi_d_dot = J_A q_d_dot,
    xi_d_ddot = J_A q_d_ddot + J_A_dot q_d_dot.

    Owns a private model instance: the FK warm start follows the trajectory, not the robot.
    Samples should come in time order (any order works, only slower: FK re-tracks from home).
    """

    def __init__(self, joint_trajectory: JointSpaceTrajectory | ExcitationTrajectory, model: HexapodModel):
        self.joint_trajectory = joint_trajectory
        self._model = model
        self._kinematic_state = model.create_state()  # FK follows the sampled joint path

    @classmethod
    def from_model(cls, model: HexapodModel, settings: TrajectorySettings | None = None):
        return cls(JointSpaceTrajectory.from_model(model, settings), model)

    def sample(self, t: float) -> Reference:
        joints = self.joint_trajectory.sample_joints(t)
        fk = self._model.forward_kinematics(joints.position, self._kinematic_state)
        jac = self._model.analytic_jacobian(joints.position, joints.velocity, phi=fk.phi)
        return Reference(
            joints.t,
            fk.pose,
            jac.analytic @ joints.velocity,
            jac.analytic @ joints.acceleration + jac.convective,
        )


# ---------------------------------------------------------------------------------------- hold, move
class HoldTrajectory:
    """Stay at one pose with zero velocity and acceleration."""

    def __init__(self, pose):
        self.pose = np.array(as_vector(pose, 6, "pose", POSE_NAMES))

    def sample(self, t: float) -> Reference:
        return Reference(_finite_time(t), self.pose.copy(), np.zeros(6), np.zeros(6))

    def sample_rows(self, times: np.ndarray) -> np.ndarray:
        """(n, 18) rows of :meth:`sample` at ``times``, at once (the reference grid's refill)."""
        times = _finite_times(times)
        rows = np.zeros((len(times), 18))
        rows[:, :6] = self.pose
        return rows


def _quintic(u: float) -> tuple[float, float, float]:
    """sigma(u) = 10u^3 - 15u^4 + 6u^5 on [0, 1] and its derivatives: rest at both ends."""
    if u <= 0.0:
        return 0.0, 0.0, 0.0
    if u >= 1.0:
        return 1.0, 0.0, 0.0
    return (
        u**3 * (10.0 - 15.0 * u + 6.0 * u * u),
        30.0 * u * u * (1.0 - u) ** 2,
        60.0 * u * (1.0 - u) * (1.0 - 2.0 * u),
    )


class SmoothMove:
    """Straight line in xi from ``start_pose`` to ``target_pose`` with a quintic time law.

    The Euler-angle change is taken the short way round (wrapped to (-pi, pi]). The duration is the
    shortest for which the actuator speed q_dot = J_A^-1 (target - start) sigma'(u) / T stays within
    ``speed_fraction * actuator_speed_max`` at ``path_samples`` instants u = (t - t0)/T evenly
    spaced over the move, and at least ``minimum_duration``. Every sampled pose must be reachable by inverse kinematics
    within the actuator travel: otherwise UnreachablePoseError (the package error for poses),
    before any motion is commanded. After the move the trajectory holds the target.
    """

    def __init__(self, model: HexapodModel, start_pose, target_pose, start_time: float = 0.0,
                 settings: MoveSettings | None = None):
        settings = settings or model.parameters.trajectories.move
        self.settings = settings
        self.start_time = _finite_time(start_time)
        self.start_pose = np.array(as_vector(start_pose, 6, "start_pose", POSE_NAMES))
        target = np.array(as_vector(target_pose, 6, "target_pose", POSE_NAMES))
        self.displacement = target - self.start_pose
        self.displacement[3:] = wrap_angle(self.displacement[3:])
        self.target_pose = self.start_pose + self.displacement
        # max over the move of |q_dot|_inf * T [m]: the actuator speed is this divided by T.
        self.peak_joint_travel_rate = self._peak_joint_travel_rate(model)
        speed_limit = settings.speed_fraction * model.parameters.limits.actuator_speed_max
        self.duration = max(settings.minimum_duration, self.peak_joint_travel_rate / speed_limit)

    def _peak_joint_travel_rate(self, model: HexapodModel) -> float:
        """max over u of |J_A^-1 (target - start)|_inf sigma'(u), with J_A from IK of each pose."""
        largest = 0.0
        for u in np.linspace(0.0, 1.0, self.settings.path_samples):
            sigma, slope, _ = _quintic(u)
            pose = self.start_pose + sigma * self.displacement
            ik = model.inverse_kinematics(pose[:3], pose[3:])  # raises UnreachablePoseError
            try:
                jac = model.analytic_jacobian(ik.q, phi=ik.phi)
                joint_rate = np.linalg.solve(jac.analytic, self.displacement)
            except (SingularityError, np.linalg.LinAlgError) as error:
                raise UnreachablePoseError(
                    f"the move from {self.start_pose.tolist()} to {self.target_pose.tolist()} passes a "
                    f"singular configuration at {pose.tolist()}: {error}"
                ) from error
            largest = max(largest, slope * float(np.max(np.abs(joint_rate))))
        return largest

    def sample(self, t: float) -> Reference:
        t = _finite_time(t)
        sigma, dsigma, ddsigma = _quintic((t - self.start_time) / self.duration)
        return Reference(
            t,
            self.start_pose + sigma * self.displacement,
            (dsigma / self.duration) * self.displacement,
            (ddsigma / self.duration**2) * self.displacement,
        )

    def sample_rows(self, times: np.ndarray) -> np.ndarray:
        """(n, 18) rows of :meth:`sample` at ``times``, at once (the reference grid's refill):
        :func:`_quintic` on arrays."""
        times = _finite_times(times)
        u = np.clip((times - self.start_time) / self.duration, 0.0, 1.0)
        sigma = u**3 * (10.0 - 15.0 * u + 6.0 * u * u)
        dsigma = 30.0 * u * u * (1.0 - u) ** 2
        ddsigma = 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u)
        rows = np.empty((len(times), 18))
        rows[:, :6] = self.start_pose + sigma[:, None] * self.displacement
        rows[:, 6:12] = (dsigma / self.duration)[:, None] * self.displacement
        rows[:, 12:] = (ddsigma / self.duration**2)[:, None] * self.displacement
        return rows


def _finite_times(times) -> np.ndarray:
    """``times`` as an array of floats; InvalidInputError (as :func:`_finite_time`'s) naming the first
    that is not finite."""
    times = np.asarray(times, dtype=float)
    not_finite = times[~np.isfinite(times)]
    if not_finite.size:
        _finite_time(float(not_finite[0]))  # raises, naming it
    return times


def _finite_time(t) -> float:
    try:
        value = float(t)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"t: expected a real number, got {t!r}") from error
    if not math.isfinite(value):
        raise InvalidInputError(f"t: must be finite, got {value}")
    return value


TRAJECTORY_NAMES = ("operational_space", "joint_space", "excitation")  # what make_trajectory builds


class CheckedTrajectory:
    """A trajectory that :func:`make_trajectory` checked along its whole path against the reference
    row of the safety rule table: a sample of it needs only the checks of
    :meth:`SafetySupervisor.validated_reference <hexapod_control.control.safety.SafetySupervisor.validated_reference>`."""

    def __init__(self, trajectory: Trajectory):
        self.trajectory = trajectory

    def sample(self, t: float) -> Reference:
        return self.trajectory.sample(t)

    def sample_rows(self, times: np.ndarray) -> np.ndarray:
        return sample_rows(self.trajectory, times)


def sample_rows(source, times: np.ndarray) -> np.ndarray:
    """(n, 18) pose, velocity and acceleration of ``source`` at ``times``: its own ``sample_rows``
    where it has one, else one sample at a time."""
    rows = getattr(source, "sample_rows", None)
    if rows is not None:
        return rows(times)
    samples = [source.sample(float(t)) for t in times]
    return np.array([np.concatenate((r.pose, r.velocity, r.acceleration)) for r in samples]).reshape(len(times), 18)


def check_trajectory_limits(trajectory: Trajectory, times, model: HexapodModel, where: str) -> None:
    """ParameterError naming ``where`` unless every sample at ``times`` passes
    :func:`check_reference_limits` with the parameters' safety settings."""
    parameters = model.parameters
    acceleration_max = parameters.safety.max_reference_acceleration
    for t in times:
        sample = trajectory.sample(float(t))
        try:
            check_reference_limits(model, sample.pose, sample.velocity, sample.acceleration, acceleration_max,
                                   parameters.ros.joint_names)
        except HexapodError as error:
            raise ParameterError(f"{where}: at t = {t:.3f} s the reference leaves the limits: {error}") from error


def make_trajectory(name: str, model: HexapodModel, settings: TrajectorySettings | None = None) -> CheckedTrajectory:
    """A trajectory by name, checked along its ramp and one period (module doc): "operational_space"
    (6.5), "joint_space" (6.82 image) or "excitation" (the identification run's image). ParameterError
    naming ``hexapod.trajectories.<name>`` and the file when it would leave the limits."""
    settings = settings or model.parameters.trajectories
    where = f"{model.parameters.source}: hexapod.trajectories.{name}"
    if name == "operational_space":
        trajectory = OperationalSpaceTrajectory.from_model(model, settings)
        check_trajectory_limits(trajectory, trajectory.check_times(), model, where)
        return CheckedTrajectory(trajectory)
    if name == "joint_space":
        joints = JointSpaceTrajectory.from_model(model, settings)
        times = joints.check_times(f"{where}.angular_frequencies")
    elif name == "excitation":
        joints = ExcitationTrajectory.from_model(model, settings)
        times = joints.check_times()
    else:
        raise InvalidInputError(f"unknown trajectory {name!r}; expected one of {sorted(TRAJECTORY_NAMES)}")
    # The check samples an image of its own: the one returned starts its FK warm start from home.
    check_trajectory_limits(JointTrajectoryImage(joints, model), times, model, where)
    return CheckedTrajectory(JointTrajectoryImage(joints, model))
