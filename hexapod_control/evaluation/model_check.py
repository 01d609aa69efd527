"""Model check: the inverse-dynamics model's forces for the recorded motion vs the recorded forces.

tau_model = M_bar(q) q_dd + C_bar(q, q_d) q_d + g_bar(q) with q and q_d from the joint states and
q_dd from a Savitzky-Golay derivative of the recorded q_d (a local polynomial fit of order
``derivative_order`` over ``derivative_window`` seconds; q_d is measured, so one derivative of it
is less noisy than two of q). The joint states are first put on a uniform grid at their median
period (the filter assumes one); grid points whose window spans a gap (a step longer than twice
the median period: a dropped message, not jitter) or runs past either end are left out. The
recorded forces (held between commands, as the drive holds them) go through the same filter and
are aligned with the derivative by half a period (see ``check_model``), so a force switching
faster than the window (a chattering loop) is compared in the same band as the motion it caused.
The filter is the least-squares fit's coefficient row (``savgol_coefficients``) correlated with
the samples, at the evaluated points only; only points with a full window on both sides (and one
more before it, for the half-period alignment) are evaluated, so no edge rule is needed.

On the embedded simulator, whose plant is this model, the residual measures the differentiation
only; against MuJoCo or the real robot it measures the model error (friction, inertias, ...).
The forward kinematics and the inverse dynamics run on whole arrays of grid points, in pieces
that may run on several processes (``evaluation.batch``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from hexapod_control.evaluation import batch, parallel
from hexapod_control.evaluation.bag import RunData
from hexapod_control.evaluation.timing import GAP_FACTOR
from hexapod_control.model.parameters import EvaluationSettings, HexapodParameters


@dataclass
class ModelCheck:
    reason: str = ""  # why it could not be done ("" when done)
    t: Optional[np.ndarray] = None  # evaluated grid times [s]
    recorded: Optional[np.ndarray] = None  # (N, 6) [N]
    predicted: Optional[np.ndarray] = None  # (N, 6) [N]
    rms_residual: Optional[np.ndarray] = None  # (6,) RMS(recorded - predicted) [N]
    rms_recorded: Optional[np.ndarray] = None  # (6,) RMS of the recorded forces, for scale [N]
    window_samples: int = 0
    period: float = float("nan")  # grid period [s]
    failures: int = 0  # grid points where the forward kinematics or the inverse dynamics failed
    gap_points: int = 0  # grid points left out because their window reaches into a gap

    @property
    def residual(self) -> np.ndarray:
        """(N, 6) recorded - predicted [N]."""
        return self.recorded - self.predicted


def window_length(window: float, period: float, order: int) -> int:
    """Odd number of samples nearest ``window`` seconds, at least order + 2 (savgol's minimum)."""
    samples = int(round(window / period))
    samples = max(samples, order + 2)
    return samples if samples % 2 else samples + 1


def savgol_coefficients(window: int, order: int, derivative: int, delta: float) -> np.ndarray:
    """Weights w with sum_j w_j y_{i - window//2 + j} = the ``derivative``-th derivative at sample i of the
    polynomial of ``order`` fitted by least squares to the ``window`` samples centred on i (spacing delta)."""
    half = window // 2
    design = np.vander(np.arange(-half, half + 1, dtype=float), order + 1, increasing=True)
    return np.linalg.pinv(design)[derivative] * math.factorial(derivative) / delta**derivative


def _filtered_at(values: np.ndarray, weights: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """(len(centres), columns): sum_j w_j values[c - len(w) // 2 + j] at each centre c (each window
    inside ``values``)."""
    half = weights.size // 2
    out = np.zeros((centres.size, values.shape[1]))
    for j, weight in enumerate(weights):
        out += weight * values[centres - half + j]
    return out


def check_model(run: RunData, parameters: HexapodParameters, settings: EvaluationSettings, workers: int = 1) -> ModelCheck:
    """The model check of a run, its points in pieces (``batch.pieces``) on up to ``workers`` processes."""
    if not run.has_joint_states:
        return ModelCheck(reason="fewer than 2 joint states")
    if not run.has_forces:
        return ModelCheck(reason="no recorded forces to compare with")
    steps = np.diff(run.joint_t)
    period = float(np.median(steps))
    if not period > 0.0:
        return ModelCheck(reason="joint-state stamps do not advance")
    window = window_length(settings.derivative_window, period, settings.derivative_order)
    grid = run.joint_t[0] + period * np.arange(int(np.floor((run.joint_t[-1] - run.joint_t[0]) / period)) + 1)
    half = window // 2
    if grid.size < window + 1:
        return ModelCheck(
            reason=f"run shorter than the {window}-sample derivative window ({settings.derivative_window:g} s)",
            window_samples=window, period=period,
        )
    qd = np.column_stack([np.interp(grid, run.joint_t, run.qd[:, k]) for k in range(6)])
    order = settings.derivative_order
    # Recorded force on the grid: the latest command at or before each point (what the drive holds).
    # Half a period of slack: t_0 + k period can fall a hair before the stamp it stands for
    # (round-off over a long run), which would pair the point with the previous command.
    index = np.searchsorted(run.effort_t, grid + 0.5 * period, side="right") - 1
    valid = np.zeros(grid.size, dtype=bool)
    valid[half + 1 : grid.size - half] = True  # a full window, and the point before it has one too
    valid[1:] &= index[:-1] >= 0  # a command held at the point before
    # Leave out every grid point whose window reaches into a gap.
    gap_starts = run.joint_t[:-1][steps > GAP_FACTOR * period]
    gap_ends = run.joint_t[1:][steps > GAP_FACTOR * period]
    usable = int(valid.sum())
    if gap_starts.size:
        # A window [g - half, g + half] periods overlaps (start, end) when g lies in (start - half, end + half).
        lower = np.searchsorted(grid, gap_starts - half * period, side="right")
        upper = np.searchsorted(grid, gap_ends + half * period, side="left")
        cover = np.zeros(grid.size + 1, dtype=np.int64)
        np.add.at(cover, lower, 1)
        np.add.at(cover, upper, -1)
        valid &= np.cumsum(cover[:-1]) == 0
    gap_points = usable - int(valid.sum())
    selected = np.flatnonzero(valid)[:: settings.model_check_stride]
    if selected.size == 0:
        return ModelCheck(reason="no grid point with a full derivative window and a recorded force", window_samples=window, period=period)

    derivative = savgol_coefficients(window, order, 1, period)
    # The motion is seen through the Savitzky-Golay window, so the forces are too: the same filter
    # (deriv 0) keeps the two sides comparable when the forces switch faster than the window (a
    # chattering loop). The held force F_k acts over [t_k, t_k+1), and the derivative at t_k sits
    # between F_k-1's and F_k's intervals: average the two neighbours (one filter, a sample longer).
    smoothing = savgol_coefficients(window, order, 0, period)
    smoothing = 0.5 * (np.append(smoothing, 0.0) + np.append(0.0, smoothing))
    held = run.forces[np.maximum(index, 0)]

    def compare(rows: slice) -> tuple[np.ndarray, np.ndarray]:
        """(recorded, predicted) forces at the selected points ``rows``."""
        points = selected[rows]
        q = np.column_stack([np.interp(grid[points], run.joint_t, run.q[:, k]) for k in range(6)])
        predicted = batch.model_forces(parameters, q, qd[points], _filtered_at(qd, derivative, points))
        return _filtered_at(held, smoothing, points), predicted

    pieces = parallel.map_forked(compare, batch.pieces(selected.size), workers)
    recorded, predicted = (np.concatenate([piece[m] for piece in pieces]) for m in range(2))
    ok = np.all(np.isfinite(predicted), axis=1)
    failures = int(np.count_nonzero(~ok))
    if not ok.any():
        return ModelCheck(reason="the inverse dynamics failed at every grid point", failures=failures, window_samples=window, period=period)
    residual = recorded[ok] - predicted[ok]
    return ModelCheck(
        t=grid[selected][ok],
        recorded=recorded[ok],
        predicted=predicted[ok],
        rms_residual=np.sqrt(np.mean(residual**2, axis=0)),
        rms_recorded=np.sqrt(np.mean(recorded[ok] ** 2, axis=0)),
        window_samples=window,
        period=period,
        failures=failures,
        gap_points=gap_points,
    )
