"""PNG figures of a run, in the manner of the thesis's figures 6.10-6.17.

Position-error norm [mm] and orientation-error norm [deg] vs time, actuator speeds [m/s] and
forces [N] vs time with the limits drawn, the model check (recorded vs model forces) and the
replay (recorded vs replayed forces); an overlay of the error norms when several runs are
compared. Matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

M_TO_MM = 1e3
RAD_TO_DEG = 180.0 / math.pi
FIGURE_DPI = 120
WIDE = (10.0, 6.0)  # [in] at FIGURE_DPI: 1200 x 720 px
ACTUATOR_COLOURS = plt.get_cmap("tab10").colors[:6]
# Runs whose peak errors differ by more than this factor share a logarithmic axis; on a linear one
# the smaller run would be a flat line at zero.
LOG_SCALE_RATIO = 100.0

plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9})


def _save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)
    return path


def _steady_marker(axis, start: float, t_end: float) -> None:
    if start <= t_end:
        axis.axvline(start, color="0.4", linestyle=":", linewidth=1.2, label=f"steady state from {start:g} s")


def plot_tracking(metrics, path: Path) -> Path:
    """Position- and orientation-error norms vs time (thesis 6.10/6.11, 6.14/6.15)."""
    tracking = metrics.tracking
    figure, (top, bottom) = plt.subplots(2, 1, figsize=WIDE, sharex=True)
    top.plot(tracking.t, tracking.position_norm * M_TO_MM, color="tab:blue", linewidth=1.0)
    top.set_ylabel("position error |e_p| [mm]")
    top.set_title(f"{metrics.label}: tracking error (FK of the recorded joint states vs reference)")
    bottom.plot(tracking.t, tracking.orientation_norm * RAD_TO_DEG, color="tab:red", linewidth=1.0)
    bottom.set_ylabel("orientation error |e_o| [deg]")
    bottom.set_xlabel("time t [s]")
    for axis in (top, bottom):
        _steady_marker(axis, metrics.steady_state_start, tracking.t[-1])
        axis.grid(True, alpha=0.3)
        axis.set_ylim(bottom=0.0)
    if metrics.steady_state_start <= tracking.t[-1]:
        top.legend(loc="upper right")
    return _save(figure, path)


def plot_speeds(run, metrics, path: Path) -> Path:
    """Actuator speeds vs time with the speed limit (thesis 6.12/6.16)."""
    return _plot_per_actuator(
        run.joint_t, run.qd, "q", "speed", metrics.speed_limit, "m/s", "actuator speed dq/dt [m/s]",
        f"{run.label}: actuator speeds", path,
    )


def plot_forces(run, metrics, path: Path) -> Path:
    """Actuator forces vs time with the force limit (thesis 6.13/6.17)."""
    return _plot_per_actuator(
        run.effort_t, run.forces, "F", "force", metrics.forces.limit, "N", "actuator force F [N]",
        f"{run.label}: actuator forces", path,
    )


def _plot_per_actuator(t, values, symbol, quantity, limit, unit, ylabel, title, path: Path) -> Path:
    """Six actuator curves against time, with +-limit drawn when the curves come near it."""
    figure, axis = plt.subplots(figsize=WIDE)
    for k in range(6):
        axis.plot(t, values[:, k], color=ACTUATOR_COLOURS[k], linewidth=0.9, label=f"{symbol}{k}")
    if math.isfinite(limit) and np.max(np.abs(values)) > 0.5 * limit:
        # Draw the limit only when it is in range; otherwise it would squash the curves flat.
        for sign in (1, -1):
            axis.axhline(sign * limit, color="k", linestyle="--", linewidth=1.0,
                         label=f"{quantity} limit" if sign > 0 else None)
    axis.set_xlabel("time t [s]")
    axis.set_ylabel(ylabel)
    axis.set_title(f"{title} (limit {limit:g} {unit})")
    axis.grid(True, alpha=0.3)
    axis.legend(loc="upper right", ncol=7)
    return _save(figure, path)


def _six_panels(title: str):
    figure, axes = plt.subplots(3, 2, figsize=(11.0, 8.0), sharex=True)
    figure.suptitle(title)
    return figure, axes.ravel(order="F")  # left column q0..q2, right column q3..q5


def plot_force_pairs(t, first, second, labels, rms, title: str, path: Path) -> Path:
    """Six panels: two force series per actuator (recorded vs model, recorded vs replay)."""
    figure, axes = _six_panels(title)
    for k, axis in enumerate(axes):
        axis.plot(t, first[:, k], color="k", linewidth=1.0, label=labels[0])
        axis.plot(t, second[:, k], color="tab:orange", linewidth=1.0, linestyle="--", label=labels[1])
        axis.set_title(f"actuator {k}: RMS difference {rms[k]:.3g} N", fontsize=10)
        axis.set_ylabel("force F [N]")
        axis.grid(True, alpha=0.3)
    for axis in (axes[2], axes[5]):
        axis.set_xlabel("time t [s]")
    axes[0].legend(loc="best")
    return _save(figure, path)


def plot_comparison(all_metrics, path: Path) -> Path:
    """Error norms of several runs on common axes (logarithmic when their sizes differ by decades)."""
    figure, (top, bottom) = plt.subplots(2, 1, figsize=WIDE, sharex=True)
    tracked = [m for m in all_metrics if m.tracking is not None]
    for axis, attribute, scale, label in (
        (top, "position_norm", M_TO_MM, "position error |e_p| [mm]"),
        (bottom, "orientation_norm", RAD_TO_DEG, "orientation error |e_o| [deg]"),
    ):
        peaks = [float(np.max(getattr(m.tracking, attribute))) * scale for m in tracked]
        positive = [p for p in peaks if p > 0.0]
        logarithmic = len(positive) > 1 and max(positive) > LOG_SCALE_RATIO * min(positive)
        for metrics in tracked:
            values = getattr(metrics.tracking, attribute) * scale
            if logarithmic:
                values = np.where(values > 0.0, values, np.nan)  # log axes cannot show exact zeros
            axis.plot(metrics.tracking.t, values, linewidth=1.0, label=metrics.label)
        axis.set_ylabel(label)
        if logarithmic:
            axis.set_yscale("log")
        else:
            axis.set_ylim(bottom=0.0)
        axis.grid(True, alpha=0.3, which="both" if logarithmic else "major")
        axis.legend(loc="lower right" if logarithmic else "upper right")
    bottom.set_xlabel("time t [s]")
    top.set_title("tracking error of the compared runs")
    return _save(figure, path)
