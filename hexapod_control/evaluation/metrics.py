"""Tracking, force, speed and kinematics metrics of one decoded run.

Definitions (the report repeats them):

* Pose error e = xi_d - xi at every joint-state stamp, xi from the project model's forward
  kinematics of the recorded q (the platform-pose topic may be absent on a real robot; when it is
  present it is only compared with the FK), angle part wrapped to (-pi, pi]. The reference at a
  stamp is matched by ``interpolate`` (linear between the neighbouring references; stamps outside
  the reference span are not evaluated) or ``latest`` (the latest reference at or before the
  stamp, what a controller node acts on).
* Position-error norm |e_xyz| [m], orientation-error norm |e_lambda,mu,nu| [rad] (as the
  controllers compute them); RMS and max over the samples of the whole run and of the steady-state
  window t >= ``steady_state_start`` (t = 0 at the first reference); per axis RMS and max |e_k|.
* Forces per actuator: peak |F|, RMS over the commands, and time in saturation: the commands with
  |F| >= (1 - tolerance) F_max, each held until the next command (zero-order hold, the last one
  for the median command period).
* Actuator speed peaks: max |q_dot| per actuator from the joint states, against the speed limit.
* FK failures: stamps where the forward kinematics of the recorded q raised (no assembly,
  no convergence, a jump to another assembly mode); those samples carry no pose error. The forward
  kinematics runs on whole arrays, in pieces that may run on several processes (``evaluation.batch``).
* Travel: joint states with an actuator outside [actuator_position_min, actuator_position_max]
  (the inverse kinematics refuses such poses; the forward kinematics solves them, so they are
  counted here).
* Gaps: with ``interpolate``, a joint state between two references further apart than
  ``timing.GAP_FACTOR`` reference periods (dropped references) is not evaluated: the straight line
  across the gap is not what the controller was given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from hexapod_control.errors import InvalidInputError
from hexapod_control.evaluation import batch, timing
from hexapod_control.evaluation.bag import RunData
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import EvaluationSettings, HexapodParameters
from hexapod_control.model.rotations import wrap_angle


@dataclass
class ErrorStats:
    samples: int
    rms_norm: float
    max_norm: float
    rms_axis: np.ndarray  # (3,)
    max_axis: np.ndarray  # (3,) max |e_k|


@dataclass
class ForceStats:
    peak: np.ndarray  # (6,) [N]
    rms: np.ndarray  # (6,) [N]
    saturation_time: np.ndarray  # (6,) [s]
    saturation_time_any: float  # [s] with at least one actuator saturated
    duration: float  # [s] covered by the commands
    limit: float  # [N]


@dataclass
class TrackingSeries:
    t: np.ndarray  # joint-state stamps with a matched reference and a pose [s]
    pose: np.ndarray  # (N, 6) FK
    reference: np.ndarray  # (N, 6)
    error: np.ndarray  # (N, 6) e = xi_d - xi, angles wrapped
    position_norm: np.ndarray  # [m]
    orientation_norm: np.ndarray  # [rad]


@dataclass
class FkResult:
    pose: np.ndarray  # (N, 6), NaN where FK failed
    phi: np.ndarray  # (N, 3), NaN where FK failed
    failures: list = field(default_factory=list)  # [(t, message)]


@dataclass
class TravelViolations:
    samples: int  # joint states with at least one actuator outside its travel
    first: tuple[float, int, float]  # (t [s], actuator 1..6, q [m]) of the first one
    limits: tuple[float, float]  # [m]


@dataclass
class RunMetrics:
    label: str
    duration: float  # [s] span of the joint states
    joint_samples: int
    reference_samples: int
    force_samples: int
    matching: str
    steady_state_start: float
    model_check_stride: int = 1
    tracking: Optional[TrackingSeries] = None
    position_whole: Optional[ErrorStats] = None
    position_steady: Optional[ErrorStats] = None
    orientation_whole: Optional[ErrorStats] = None
    orientation_steady: Optional[ErrorStats] = None
    forces: Optional[ForceStats] = None
    speed_peak: Optional[np.ndarray] = None  # (6,) [m/s]
    speed_limit: float = math.nan
    fk_failures: list = field(default_factory=list)  # [(t, message)]
    outside_travel: Optional[TravelViolations] = None
    pose_topic_difference: Optional[tuple[float, float, int]] = None  # (max position [m], max angle [rad], samples)
    model_check: Optional[object] = None  # model_check.ModelCheck
    notes: list[str] = field(default_factory=list)  # what could not be evaluated, and why

    @property
    def evaluated(self) -> bool:
        return self.tracking is not None or self.forces is not None or self.speed_peak is not None


# ------------------------------------------------------------------------------------------ pieces
def forward_kinematics_series(model: HexapodModel, t: np.ndarray, q: np.ndarray, workers: int = 1) -> FkResult:
    """FK of every row of q, tracking the physical mode along the motion; failures recorded, not raised."""
    solved = batch.forward_kinematics_pieces(model.kinematics, q, workers)
    return FkResult(solved.pose, solved.phi, [(float(t[k]), message) for k, message in solved.failures])


def travel_violations(t: np.ndarray, q: np.ndarray, limits) -> Optional[TravelViolations]:
    """Joint states with an actuator outside its travel (None when there are none)."""
    low, high = limits.actuator_position_min, limits.actuator_position_max
    outside = (q < low) | (q > high)
    rows = np.flatnonzero(outside.any(axis=1))
    if not rows.size:
        return None
    first = int(rows[0])
    actuator = int(np.flatnonzero(outside[first])[0])
    return TravelViolations(int(rows.size), (float(t[first]), actuator + 1, float(q[first, actuator])), (low, high))


def match_reference(method: str, ref_t: np.ndarray, ref_values: list[np.ndarray], t: np.ndarray):
    """(matched arrays, valid mask): each of ``ref_values`` (M, 6) at the stamps ``t``.

    ``interpolate``: linear in time between neighbouring references, the Euler angles unwrapped
    first so a +-pi crossing does not interpolate through 0; valid inside [ref_t[0], ref_t[-1]].
    ``latest``: the latest reference at or before t; valid from the first reference on.
    """
    if ref_t.size == 0:
        return [np.full((t.size, 6), np.nan) for _ in ref_values], np.zeros(t.size, dtype=bool)
    if method == "latest":
        index = np.searchsorted(ref_t, t, side="right") - 1
        valid = index >= 0
        index = np.maximum(index, 0)
        return [values[index] for values in ref_values], valid
    if method != "interpolate":
        raise InvalidInputError(f"unknown reference matching {method!r}; expected interpolate or latest")
    valid = (t >= ref_t[0]) & (t <= ref_t[-1])
    valid &= ~_across_gaps(ref_t, t)
    matched = []
    for m, values in enumerate(ref_values):
        values = values.copy()
        # The pose: unwrap the angles along time (where a step reaches pi; elsewhere unwrap is the identity).
        if m == 0 and np.any(np.abs(np.diff(values[:, 3:], axis=0)) >= np.pi):
            values[:, 3:] = np.unwrap(values[:, 3:], axis=0)
        if ref_t.size == t.size and np.array_equal(ref_t, t):  # stamped alike: interpolation gives the values
            out = values
        else:
            out = np.column_stack([np.interp(t, ref_t, values[:, k]) if ref_t.size > 1 else np.full(t.size, values[0, k])
                                   for k in range(6)])
        if m == 0:
            out[:, 3:] = wrap_angle(out[:, 3:])
        matched.append(out)
    return matched, valid


def _across_gaps(ref_t: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Stamps strictly inside a gap of the references (timing.GAP_FACTOR median periods)."""
    if ref_t.size < 2:
        return np.zeros(t.size, dtype=bool)
    gap_after = timing.gap_mask(ref_t, float(np.median(np.diff(ref_t))))
    if not gap_after.any():
        return np.zeros(t.size, dtype=bool)
    index = np.clip(np.searchsorted(ref_t, t, side="right"), 0, ref_t.size - 1)
    return gap_after[index] & (t > ref_t[index - 1]) & (t < ref_t[index])


def error_stats(error: np.ndarray, norm: Optional[np.ndarray] = None) -> Optional[ErrorStats]:
    """Stats of (N, 3) error rows (``norm``: their norms, if known); None without samples."""
    if error.shape[0] == 0:
        return None
    norm = np.linalg.norm(error, axis=1) if norm is None else norm
    return ErrorStats(
        samples=int(error.shape[0]),
        rms_norm=float(np.sqrt(np.mean(norm**2))),
        max_norm=float(np.max(norm)),
        rms_axis=np.sqrt(np.mean(error**2, axis=0)),
        max_axis=np.max(np.abs(error), axis=0),
    )


def hold_durations(t: np.ndarray) -> np.ndarray:
    """How long each sample is held (zero-order hold): to the next sample, the last one for the median period."""
    if t.size == 0:
        return np.zeros(0)
    if t.size == 1:
        return np.zeros(1)
    steps = np.diff(t)
    return np.append(steps, np.median(steps))


def force_stats(t: np.ndarray, forces: np.ndarray, limit: float, tolerance: float) -> ForceStats:
    hold = hold_durations(t)
    saturated = np.abs(forces) >= (1.0 - tolerance) * limit
    return ForceStats(
        peak=np.max(np.abs(forces), axis=0),
        rms=np.sqrt(np.mean(forces**2, axis=0)),
        saturation_time=(saturated * hold[:, None]).sum(axis=0),
        saturation_time_any=float((saturated.any(axis=1) * hold).sum()),
        duration=float(hold.sum()),
        limit=limit,
    )


# ------------------------------------------------------------------------------------------ run
def evaluate_run(
    run: RunData,
    parameters: HexapodParameters,
    settings: EvaluationSettings,
    model_check: bool = True,
    workers: int = 1,
) -> RunMetrics:
    """Every metric the run's data allow; what it does not allow is listed in ``notes``. The forward
    kinematics and the model check run on up to ``workers`` processes; the result is the same."""
    from hexapod_control.evaluation.model_check import check_model

    limits = parameters.limits
    metrics = RunMetrics(
        label=run.label,
        duration=float(run.joint_t[-1] - run.joint_t[0]) if run.joint_t.size else 0.0,
        joint_samples=int(run.joint_t.size),
        reference_samples=int(run.ref_t.size),
        force_samples=int(run.effort_t.size),
        matching=settings.reference_matching,
        steady_state_start=settings.steady_state_start,
        model_check_stride=settings.model_check_stride,
        speed_limit=limits.actuator_speed_max,
    )
    notes = metrics.notes
    if run.has_forces:
        metrics.forces = force_stats(run.effort_t, run.forces, limits.actuator_force_max, settings.saturation_tolerance)
    else:
        notes.append("forces: no force commands decoded")
    if not run.has_joint_states:
        notes.append("tracking, speeds, FK and model check: fewer than 2 joint states decoded")
        return metrics
    metrics.speed_peak = np.max(np.abs(run.qd), axis=0)

    metrics.outside_travel = travel_violations(run.joint_t, run.q, limits)
    fk = forward_kinematics_series(HexapodModel(parameters), run.joint_t, run.q, workers)
    metrics.fk_failures = fk.failures
    if run.pose_t.size:
        metrics.pose_topic_difference = _pose_topic_difference(run, fk)

    if not run.has_references:
        notes.append("tracking: no references decoded")
    else:
        (ref_pose,), matched = match_reference(settings.reference_matching, run.ref_t, [run.ref_pose], run.joint_t)
        ok = matched & np.all(np.isfinite(fk.pose), axis=1)
        select = slice(None) if ok.all() else ok  # views, not copies, in the usual case (an hour: 0.6 GB)
        outside = int(np.count_nonzero(~matched))
        if outside:
            notes.append(
                f"tracking: {outside} joint state(s) outside the reference span or in its gaps "
                f"({settings.reference_matching}) not evaluated"
            )
        if not ok.any():
            notes.append("tracking: no joint state has both a matched reference and a forward-kinematics pose")
        else:
            error = ref_pose[select] - fk.pose[select]
            error[:, 3:] = wrap_angle(error[:, 3:])
            t = run.joint_t[select]
            metrics.tracking = TrackingSeries(
                t=t, pose=fk.pose[select], reference=ref_pose[select], error=error,
                position_norm=np.linalg.norm(error[:, :3], axis=1),
                orientation_norm=np.linalg.norm(error[:, 3:], axis=1),
            )
            steady = slice(int(np.searchsorted(t, settings.steady_state_start)), None)  # t rises: a view
            tracking = metrics.tracking
            metrics.position_whole = error_stats(error[:, :3], tracking.position_norm)
            metrics.orientation_whole = error_stats(error[:, 3:], tracking.orientation_norm)
            metrics.position_steady = error_stats(error[steady, :3], tracking.position_norm[steady])
            metrics.orientation_steady = error_stats(error[steady, 3:], tracking.orientation_norm[steady])
            if not t[steady].size:
                notes.append(
                    f"steady state: the window starts at t = {settings.steady_state_start:g} s, "
                    f"after the last evaluated sample (t = {t[-1]:.3g} s)"
                )
    if model_check:
        metrics.model_check = check_model(run, parameters, settings, workers)
        if metrics.model_check.reason:
            notes.append(f"model check: {metrics.model_check.reason}")
    return metrics


def _pose_topic_difference(run: RunData, fk: FkResult):
    """Max |FK - recorded pose| at the joint-state stamps the pose topic also has."""
    if run.pose_t.size == run.joint_t.size and np.array_equal(run.pose_t, run.joint_t):
        a, b = fk.pose, run.pose  # stamped alike (the usual recording): no search, no copies
    else:
        # Both series are sorted (evaluation.bag orders them): a binary search finds the common stamps.
        position = np.searchsorted(run.joint_t, run.pose_t)
        hit = position < run.joint_t.size
        hit[hit] &= run.joint_t[position[hit]] == run.pose_t[hit]
        joint_index, pose_index = position[hit], np.flatnonzero(hit)
        if joint_index.size == 0:
            return None
        a, b = fk.pose[joint_index], run.pose[pose_index]
    ok = np.all(np.isfinite(a), axis=1)
    if not ok.any():
        return None
    if not ok.all():
        a, b = a[ok], b[ok]
    position = np.max(np.linalg.norm(a[:, :3] - b[:, :3], axis=1))
    angle = np.max(np.linalg.norm(wrap_angle(a[:, 3:] - b[:, 3:]), axis=1))
    return float(position), float(angle), int(ok.sum())
