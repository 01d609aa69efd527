"""Figures of evaluated runs, as a controls paper prints them: PNG and SVG side by side.

Every figure compares the runs given (one per controller, typically) on shared axes:

* per pose axis: the reference and each run's measured pose (left), each run's error (right);
* the error norms |e_p| and |e_o| of the runs (logarithmic when their sizes differ by decades);
* the actuator forces and speeds of the runs, one panel per actuator, with the limits drawn when
  the curves come near them;
* the model check of one run: recorded and predicted forces per actuator, with the residual below;
* a replay: recorded and replayed forces per actuator, with their difference below.

Numbering from 1 as the thesis does: actuators 1..6 (q1..q6, F1..F6), pose axes x, y, z, lambda,
mu, nu. Legends sit below the panels, never over the data. Long runs are drawn decimated: each of
``PLOT_BUCKETS`` time buckets keeps its minimum and maximum, so peaks survive and an hour at 1 kHz
plots as fast as a minute; gaps in the data are left as gaps. Matplotlib's Agg backend: no display.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from hexapod_control.evaluation.timing import GAP_FACTOR  # noqa: E402

M_TO_MM = 1e3
RAD_TO_DEG = 180.0 / math.pi
ACTUATORS = 6
# Print size: a full text width of a paper (7.2 in) at 10 pt, rendered at 200 dpi (1440 px wide).
FIGURE_WIDTH = 7.2  # [in]
FIGURE_DPI = 200
FORMATS = ("png", "svg")  # raster for screens and the HTML report, vector for print
PLOT_BUCKETS = 2000  # time buckets of a decimated curve (more than the figure's pixel columns)
# Runs whose peak errors differ by more than this factor share a logarithmic axis; on a linear one
# the smaller run would be a flat line at zero.
LOG_SCALE_RATIO = 100.0
# Line styles of the runs, told apart in black-and-white print too; the reference is black dotted.
RUN_STYLES = (("tab:blue", "-"), ("tab:red", "--"), ("tab:green", "-."), ("tab:purple", ":"), ("tab:orange", "-"))
REFERENCE_STYLE = {"color": "k", "linestyle": ":", "linewidth": 1.2}
LIMIT_STYLE = {"color": "0.3", "linestyle": "--", "linewidth": 0.9}
LEGEND_COLUMNS = 4
POSITION_AXES = ("x", "y", "z")
ORIENTATION_AXES = ("lambda", "mu", "nu")
AXIS_SYMBOLS = {"x": "x", "y": "y", "z": "z", "lambda": r"\lambda", "mu": r"\mu", "nu": r"\nu"}

plt.rcParams.update({
    "font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "figure.titlesize": 10, "lines.linewidth": 0.9,
    "svg.fonttype": "none",  # text stays text in the SVG
})


def run_style(index: int) -> dict:
    colour, style = RUN_STYLES[index % len(RUN_STYLES)]
    return {"color": colour, "linestyle": style}


def png_of(stem: Path) -> Path:
    """The PNG file of the figure :func:`save` writes at ``stem``."""
    return stem.with_suffix(".png")


def save(figure, stem: Path) -> Path:
    """Write ``stem``.png and ``stem``.svg; returns the PNG's path."""
    for extension in FORMATS:
        figure.savefig(stem.with_suffix("." + extension), dpi=FIGURE_DPI)
        # The first format's draw placed the panels: the others keep that layout instead of
        # solving it again (constrained layout is most of a figure's drawing time).
        figure.set_layout_engine("none")
    plt.close(figure)
    return png_of(stem)


def envelope(t: np.ndarray, values: np.ndarray, buckets: int = PLOT_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """(t, values) to draw: at most 2 points per bucket (its minimum and maximum, in time order) per
    column, and a NaN row across each gap longer than GAP_FACTOR median steps."""
    values = values.reshape(len(t), -1)
    if t.size < 2:
        return t, values
    period = float(np.median(np.diff(t)))
    breaks = np.flatnonzero(np.diff(t) > GAP_FACTOR * period) + 1 if period > 0 else np.zeros(0, int)
    pieces_t, pieces_v = [], []
    for segment in np.split(np.arange(t.size), breaks):
        share = max(1, int(round(buckets * segment.size / t.size)))
        st, sv = _segment_envelope(t[segment], values[segment], share)
        pieces_t += [st, [np.nan]]
        pieces_v += [sv, np.full((1, values.shape[1]), np.nan)]
    return np.concatenate(pieces_t[:-1]), np.concatenate(pieces_v[:-1])


def _segment_envelope(t: np.ndarray, values: np.ndarray, buckets: int):
    if t.size <= 2 * buckets:
        return t, values
    size = int(math.ceil(t.size / buckets))
    count = t.size // size  # whole buckets; the tail is kept as it is
    body = values[: count * size].reshape(count, size, -1)
    low, high = body.argmin(axis=1), body.argmax(axis=1)  # (count, columns)
    first, second = np.minimum(low, high), np.maximum(low, high)
    start = (np.arange(count) * size)[:, None]
    columns = np.arange(values.shape[1])
    index = np.stack((start + first, start + second), axis=1).reshape(2 * count, -1)  # (2 count, columns)
    out_v = values[index, columns]
    # One time axis for all columns: each bucket's two points at its first and last time (a shift
    # of at most one bucket, 1/PLOT_BUCKETS of the run: invisible).
    out_t = np.stack((t[start[:, 0]], t[start[:, 0] + size - 1]), axis=1).ravel()
    tail = slice(count * size, None)
    return np.concatenate((out_t, t[tail])), np.concatenate((out_v, values[tail]))


def _finish(figure, title: str, axes) -> None:
    """Title above the panels, one legend of every labelled curve below them (never over the data)."""
    handles, labels = [], []
    for axis in np.ravel(axes):
        for handle, label in zip(*axis.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle), labels.append(label)
    figure.suptitle(title)
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), LEGEND_COLUMNS), frameon=False)


def _figure(rows: int, columns: int, height: float, **options):
    """A figure of panels laid out by matplotlib's constrained layout (room for title and legend)."""
    return plt.subplots(rows, columns, figsize=(FIGURE_WIDTH, height), layout="constrained", **options)


# ------------------------------------------------------------------------------------------ tracking
def plot_axes(runs: Sequence, angular: bool, stem: Path, steady_state_start: Optional[float] = None) -> Path:
    """Per axis (x, y, z or lambda, mu, nu): reference and measured pose, and the error, of every run.

    ``runs`` are (label, TrackingSeries) pairs; the reference is drawn from the first run.
    """
    names = ORIENTATION_AXES if angular else POSITION_AXES
    offset, scale, unit = (3, RAD_TO_DEG, "deg") if angular else (0, M_TO_MM, "mm")
    figure, axes = _figure(3, 2, 7.0, sharex=True, sharey="col" if angular else False)
    first = runs[0][1]
    for row, name in enumerate(names):
        symbol = AXIS_SYMBOLS[name]
        pose_axis, error_axis = axes[row]
        t, reference = envelope(first.t, first.reference[:, offset + row] * scale)
        pose_axis.plot(t, reference[:, 0], label="reference", **REFERENCE_STYLE)
        for index, (label, tracking) in enumerate(runs):
            t, measured = envelope(tracking.t, tracking.pose[:, offset + row] * scale)
            pose_axis.plot(t, measured[:, 0], label=label, **run_style(index))
            t, error = envelope(tracking.t, tracking.error[:, offset + row] * scale)
            error_axis.plot(t, error[:, 0], label=label, **run_style(index))
        pose_axis.set_ylabel(f"${symbol}$ [{unit}]")
        error_axis.set_ylabel(f"$e_{{{symbol}}}$ [{unit}]")
        for axis in (pose_axis, error_axis):
            axis.grid(True, alpha=0.3)
            if steady_state_start is not None and steady_state_start <= first.t[-1]:
                axis.axvline(steady_state_start, color="0.5", linewidth=0.8, linestyle=(0, (1, 3)))
    for axis in axes[-1]:
        axis.set_xlabel("time t [s]")
    axes[0, 0].set_title("reference and measured (forward kinematics)")
    axes[0, 1].set_title("tracking error e = reference - measured")
    quantity = "orientation (ZYX Euler angles)" if angular else "position"
    _finish(figure, f"Platform {quantity} per axis", axes)
    return save(figure, stem)


def plot_error_norms(runs: Sequence, stem: Path, steady_state_start: Optional[float] = None) -> Path:
    """|e_p| and |e_o| of every run on common axes (logarithmic when their sizes differ by decades)."""
    figure, axes = _figure(2, 1, 4.6, sharex=True)
    for axis, attribute, scale, label in (
        (axes[0], "position_norm", M_TO_MM, r"$|e_p|$ [mm]"),
        (axes[1], "orientation_norm", RAD_TO_DEG, r"$|e_o|$ [deg]"),
    ):
        peaks = [float(np.max(getattr(tracking, attribute))) * scale for _, tracking in runs]
        positive = [p for p in peaks if p > 0.0]
        logarithmic = len(positive) > 1 and max(positive) > LOG_SCALE_RATIO * min(positive)
        for index, (name, tracking) in enumerate(runs):
            t, values = envelope(tracking.t, getattr(tracking, attribute) * scale)
            values = values[:, 0]
            if logarithmic:
                values = np.where(values > 0.0, values, np.nan)  # log axes cannot show exact zeros
            axis.plot(t, values, label=name, **run_style(index))
        axis.set_ylabel(label)
        if logarithmic:
            axis.set_yscale("log")
        else:
            axis.set_ylim(bottom=0.0)
        axis.grid(True, alpha=0.3, which="both" if logarithmic else "major")
        if steady_state_start is not None:
            axis.axvline(steady_state_start, color="0.5", linewidth=0.8, linestyle=(0, (1, 3)),
                         label=f"steady state from {steady_state_start:g} s")
    axes[1].set_xlabel("time t [s]")
    _finish(figure, "Tracking-error norms", axes)
    return save(figure, stem)


# ------------------------------------------------------------------------------------------ actuators
def _actuator_grid():
    figure, axes = _figure(3, 2, 7.0, sharex=True, sharey=True)
    return figure, axes.ravel(order="F")  # left column actuators 1..3, right column 4..6


def plot_actuators(runs: Sequence, quantity: str, limit: float, unit: str, symbol: str, stem: Path) -> Path:
    """One panel per actuator with every run's curve: ``runs`` are (label, t, values (N, 6))."""
    figure, axes = _actuator_grid()
    peak = max((float(np.max(np.abs(values))) for _, _, values in runs if values.size), default=0.0)
    for k, axis in enumerate(axes):
        for index, (label, t, values) in enumerate(runs):
            tt, vv = envelope(t, values[:, k])
            axis.plot(tt, vv[:, 0], label=label, **run_style(index))
        if math.isfinite(limit) and peak > 0.5 * limit:
            # Drawn only when in range; otherwise it would squash the curves flat.
            for sign in (1, -1):
                axis.axhline(sign * limit, label=f"{quantity} limit {limit:g} {unit}" if sign > 0 else None, **LIMIT_STYLE)
        axis.set_title(f"actuator {k + 1}")
        axis.set_ylabel(f"${symbol}_{k + 1}$ [{unit}]")
        axis.grid(True, alpha=0.3)
    for axis in (axes[2], axes[5]):
        axis.set_xlabel("time t [s]")
    _finish(figure, f"Actuator {quantity}s", axes)
    return save(figure, stem)


def plot_pairs_with_difference(t: np.ndarray, first: np.ndarray, second: np.ndarray, labels: tuple[str, str],
                               rms: np.ndarray, title: str, stem: Path, difference_label: str) -> Path:
    """Per actuator: two force series (recorded and predicted or replayed) and, below, their difference."""
    figure, grid = _figure(4, 3, 7.6, sharex=True, gridspec_kw={"height_ratios": (2, 1, 2, 1)})
    difference = first - second
    tt, pair_a = envelope(t, first)
    _, pair_b = envelope(t, second)
    _, diff = envelope(t, difference)
    difference_axes = []
    for k in range(ACTUATORS):
        top, bottom = grid[2 * (k // 3), k % 3], grid[2 * (k // 3) + 1, k % 3]
        top.plot(tt, pair_a[:, k], label=labels[0], color="k", linewidth=1.1)
        top.plot(tt, pair_b[:, k], label=labels[1], color="tab:orange", linestyle="--")
        bottom.plot(tt, diff[:, k], label=difference_label, color="tab:red")
        top.set_title(f"actuator {k + 1}")
        top.set_ylabel(f"$F_{k + 1}$ [N]")
        bottom.set_ylabel(r"$\Delta F_{%d}$ [N]" % (k + 1))
        bottom.set_title(f"RMS {rms[k]:.3g} N", fontsize=8)
        for axis in (top, bottom):
            axis.grid(True, alpha=0.3)
        difference_axes.append(bottom)
    low = min(axis.get_ylim()[0] for axis in difference_axes)
    high = max(axis.get_ylim()[1] for axis in difference_axes)
    for axis in difference_axes:  # one scale for the six differences
        axis.set_ylim(low, high)
    for axis in grid[-1]:
        axis.set_xlabel("time t [s]")
    _finish(figure, title, grid)
    return save(figure, stem)
