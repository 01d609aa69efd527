"""The report of one or more evaluated runs: report.md, report.html, the tables as CSV, the figures.

Layout (tables and figures numbered from 1):

1. Summary. Table 1: the thesis tracking metrics per run and axis (x, y, z [mm], lambda, mu, nu
   [deg] and the norms |e_p|, |e_o|), RMS and max over the whole run and the steady state.
   Table 2: per run and actuator 1..6 the peak and RMS force, time saturated, peak speed. Both are
   also written as ``table_<n>_<name>.csv`` (every digit) and ``.md``.
2. Figures comparing the runs on shared axes: position and orientation per axis (reference and
   measured, error), the error norms, the actuator forces and speeds.
3. One section per run: what the bag says about the run (controller, gain set, parameters,
   plant, loop delay), its clocks, sampling, gaps and how it was resampled, what was missing or
   skipped, the model check (table and figure: recorded, predicted, residual), diagnostics.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from hexapod_control.evaluation import parallel, plots, timing
from hexapod_control.evaluation.bag import DIAGNOSTIC_LEVELS, RunData
from hexapod_control.evaluation.document import Document, Figure, Table, shown, write_table_files
from hexapod_control.evaluation.metrics import ErrorStats, RunMetrics
from hexapod_control.model.parameters import EvaluationSettings

MM, DEG = plots.M_TO_MM, plots.RAD_TO_DEG
# How many distinct diagnostic messages the report lists per run (the rest are counted).
DIAGNOSTICS_LISTED = 10
AXES = (("x", 0, MM, "mm"), ("y", 1, MM, "mm"), ("z", 2, MM, "mm"),
        ("lambda", 3, DEG, "deg"), ("mu", 4, DEG, "deg"), ("nu", 5, DEG, "deg"))
ACTUATORS = range(1, 7)


def _f(value, digits: int = 4) -> str:
    return shown(None if value is None else float(value), digits)


def slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)


def _cells(stats: Optional[ErrorStats], k: Optional[int], scale: float) -> list:
    """RMS and max of one axis k (None: the norm), scaled; None where there are no samples."""
    if stats is None:
        return [None, None]
    if k is None:
        return [stats.rms_norm * scale, stats.max_norm * scale]
    return [float(stats.rms_axis[k]) * scale, float(stats.max_axis[k]) * scale]


def tracking_table(pairs) -> Table:
    rows = []
    for run, m in pairs:
        if m.tracking is None:
            rows.append([run.label, "-", "", None, None, None, None])
            continue
        for name, k, scale, unit in AXES:
            whole, steady = (m.position_whole, m.position_steady) if k < 3 else (m.orientation_whole, m.orientation_steady)
            rows.append([run.label, name, unit, *_cells(whole, k % 3, scale), *_cells(steady, k % 3, scale)])
        rows.append([run.label, "|e_p|", "mm", *_cells(m.position_whole, None, MM), *_cells(m.position_steady, None, MM)])
        rows.append([run.label, "|e_o|", "deg", *_cells(m.orientation_whole, None, DEG), *_cells(m.orientation_steady, None, DEG)])
    steady = {m.steady_state_start for _, m in pairs}
    return Table(
        "Tracking error e = reference - measured pose (forward kinematics of the joint states) per run and axis: "
        f"RMS and maximum of |e| over the whole run and over the steady state (t >= {', '.join(f'{s:g}' for s in sorted(steady))} s).",
        ["run", "axis", "unit", "RMS whole", "max whole", "RMS steady", "max steady"], rows,
    )


def actuator_table(pairs) -> Table:
    rows = []
    for run, m in pairs:
        for k in ACTUATORS:
            f = m.forces
            forces = [float(f.peak[k - 1]), float(f.rms[k - 1]), float(f.saturation_time[k - 1])] if f else [None] * 3
            speed = float(m.speed_peak[k - 1]) if m.speed_peak is not None else None
            rows.append([run.label, k, run.joint_names[k - 1] if run.joint_names else "", *forces, speed])
    limits = {(m.forces.limit if m.forces else None, m.speed_limit) for _, m in pairs}
    limit_text = "; ".join(f"force limit {_f(force)} N, speed limit {_f(speed)} m/s" for force, speed in limits)
    return Table(
        f"Actuators 1..6 per run: peak and RMS force, time at the force limit, peak speed ({limit_text}).",
        ["run", "actuator", "joint", "peak abs(F) [N]", "RMS F [N]", "saturated [s]", "peak abs(dq/dt) [m/s]"], rows,
    )


class Drawings:
    """Figures added to a document now and drawn later, together (on several processes)."""

    def __init__(self, document: Document, folder: Path, make_plots: bool):
        self.document, self.folder, self.make_plots = document, folder, make_plots
        self.pending: list[Callable[[], Path]] = []

    def add(self, caption: str, name: str, plot: Callable[..., Path], *arguments, **options) -> None:
        """Figure number n as ``figure_<n>_<name>``: ``plot(*arguments, stem=..., **options)`` draws it."""
        if not self.make_plots:
            return
        stem = self.folder / f"figure_{self.document.figures + 1}_{name}"
        self.document.add(Figure(caption, plots.png_of(stem)))
        self.pending.append(functools.partial(plot, *arguments, stem=stem, **options))

    def draw(self, workers: int) -> None:
        parallel.map_forked(lambda plot: plot(), self.pending, workers)
        self.pending = []


def _figures(drawings: Drawings, pairs, settings: EvaluationSettings) -> None:
    tracked = [(run.label, m.tracking) for run, m in pairs if m.tracking is not None]
    steady = settings.steady_state_start
    if tracked:
        names = ", ".join(label for label, _ in tracked)
        drawings.add(
            f"Platform position x, y, z per axis: reference and measured (left), error (right) of {names}; "
            f"dotted vertical line: start of the steady state (t = {steady:g} s).",
            "position", plots.plot_axes, tracked, False, steady_state_start=steady)
        drawings.add(
            f"Platform orientation lambda, mu, nu (ZYX Euler angles) per axis: reference and measured (left), error (right) of {names}.",
            "orientation", plots.plot_axes, tracked, True, steady_state_start=steady)
        drawings.add(f"Norms of the position error |e_p| and of the orientation error |e_o| of {names}.",
                     "error_norms", plots.plot_error_norms, tracked, steady_state_start=steady)
    forced = [(run.label, run.effort_t, run.forces) for run, m in pairs if m.forces is not None]
    if forced:
        limit = next(m.forces.limit for _, m in pairs if m.forces is not None)
        drawings.add(
            f"Commanded actuator forces F1..F6 of {', '.join(label for label, _, _ in forced)} (each command held until the next).",
            "forces", plots.plot_actuators, forced, "force", limit, "N", "F")
    moving = [(run.label, run.joint_t, run.qd) for run, m in pairs if m.speed_peak is not None]
    if moving:
        limit = next(m.speed_limit for _, m in pairs if m.speed_peak is not None)
        drawings.add(f"Measured actuator speeds dq1/dt..dq6/dt of {', '.join(label for label, _, _ in moving)}.",
                     "speeds", plots.plot_actuators, moving, "speed", limit, "m/s", r"\dot q")


def _run_info(run: RunData) -> list[str]:
    lines = run.run_info.described()
    if not lines:
        return ["not recorded in the bag's metadata (custom_data `hexapod.*`)"]
    return lines


def _resampling(run: RunData, m: RunMetrics) -> list[str]:
    lines = []
    if m.tracking is not None:
        how = ("linear interpolation between the references on either side (Euler angles unwrapped); joint states "
               "outside the references' span or inside a gap of them are not evaluated"
               if m.matching == "interpolate" else "the latest reference at or before the stamp, as the controller node acts")
        lines.append(f"tracking: the reference is resampled at each joint-state stamp by {how} ({m.tracking.t.size} of "
                     f"{run.joint_t.size} joint states evaluated)")
    check = m.model_check
    if check is not None and not check.reason:
        lines.append(
            f"model check: joint states linearly interpolated onto a uniform grid at their median period "
            f"({_f(check.period * 1e3)} ms); grid points whose derivative window reaches into a gap left out "
            f"({check.gap_points}); the model evaluated at every {m.model_check_stride} remaining point(s) in turn"
        )
    return lines


def _run_section(drawings: Drawings, run: RunData, m: RunMetrics) -> None:
    document = drawings.document
    document.heading(2, f"Run {run.label}")
    document.bullets(
        [f"bag: `{run.path}` ({run.storage})"]
        + [f"run: {line}" for line in _run_info(run)]
        + [f"joint names of q1..q6: {', '.join(f'`{n}`' for n in run.joint_names)}",
           f"t = 0: {run.origin or 'unknown'}; joint states span {_f(m.duration)} s",
           f"samples: {m.joint_samples} joint states, {m.reference_samples} references, {m.force_samples} force commands"]
        + ([f"force timing: {run.effort_timing}"] if run.effort_timing else [])
    )
    document.heading(3, "Clocks, sampling and gaps")
    document.bullets(
        [f"{timing.describe(s)}; times: {s.clock}" for s in run.sampling.values()]
        + [f"resampling: {line}" for line in _resampling(run, m)]
    )
    document.add(Table(f"Topics of {run.label}'s bag.", ["topic", "type", "messages"],
                       [[f"`{topic}`", msgtype or "several", count] for topic, (msgtype, count) in sorted(run.available.items())]))
    document.heading(3, "Missing, skipped, repaired")
    problems = run.notes + m.notes
    document.bullets(problems or ["nothing: every message of the evaluated topics was used"])
    facts = []
    if m.speed_peak is not None:
        facts.append(f"forward-kinematics failures: {len(m.fk_failures)}" + (
            f" (first at t = {_f(m.fk_failures[0][0])} s: {m.fk_failures[0][1]})" if m.fk_failures else ""))
    if m.outside_travel is not None:
        t, actuator, value = m.outside_travel.first
        low, high = m.outside_travel.limits
        facts.append(f"joint states outside the actuator travel [{low:g}, {high:g}] m: {m.outside_travel.samples} "
                     f"(first at t = {_f(t)} s: q{actuator} = {value:.6g} m)")
    if m.pose_topic_difference is not None:
        position, angle, count = m.pose_topic_difference
        facts.append(f"recorded platform pose vs forward kinematics of the joint states ({count} common stamps): "
                     f"max {_f(position * MM)} mm, {_f(angle * DEG)} deg")
    document.bullets(facts)
    _model_check(drawings, run, m)
    _diagnostics(document, run)


def _model_check(drawings: Drawings, run: RunData, m: RunMetrics) -> None:
    document = drawings.document
    document.heading(3, "Model check")
    check = m.model_check
    if check is None:
        document.paragraph("Not run (disabled).")
        return
    if check.reason:
        document.paragraph(f"Not done: {check.reason}.")
        return
    document.paragraph(
        f"Forces of the inverse-dynamics model for the recorded motion (q_dd: Savitzky-Golay derivative of q_dot over "
        f"{check.window_samples} samples at {_f(check.period * 1e3)} ms) against the recorded forces through the same "
        f"filter (held commands, aligned half a period with the derivative), at {check.t.size} points"
        + (f"; the model failed at {check.failures} point(s)" if check.failures else "") + "."
    )
    document.add(Table(f"Model check of {run.label}: residual = recorded - predicted force per actuator.",
                       ["actuator", "RMS residual [N]", "RMS recorded, filtered [N]"],
                       [[k, float(check.rms_residual[k - 1]), float(check.rms_recorded[k - 1])] for k in ACTUATORS]))
    drawings.add(f"Model check of {run.label}: recorded (filtered) and predicted actuator forces, and their residual below.",
                 f"model_check_{slug(run.label)}", plots.plot_pairs_with_difference, check.t, check.recorded,
                 check.predicted, ("recorded (filtered)", "inverse-dynamics model"), check.rms_residual,
                 f"Model check: {run.label}", difference_label="recorded - predicted")


def _diagnostics(document: Document, run: RunData) -> None:
    if not run.diagnostics:
        return
    document.heading(3, "Diagnostics")
    levels = Counter(DIAGNOSTIC_LEVELS.get(d.level, str(d.level)) for d in run.diagnostics)
    document.paragraph("Statuses by level: " + ", ".join(f"{level} {count}" for level, count in sorted(levels.items())) + ".")
    problems = Counter((DIAGNOSTIC_LEVELS.get(d.level, str(d.level)), d.name, d.message) for d in run.diagnostics if d.level != 0)
    items = [f"{level} `{name}`: {message} ({count}x)" for (level, name, message), count in problems.most_common(DIAGNOSTICS_LISTED)]
    if len(problems) > DIAGNOSTICS_LISTED:
        items.append(f"... and {len(problems) - DIAGNOSTICS_LISTED} more distinct non-OK statuses")
    document.bullets(items)


def write_report(pairs: Sequence[tuple[RunData, RunMetrics]], folder: Path, settings: EvaluationSettings,
                 failed: Sequence[tuple[str, str]] = (), title: str = "Hexapod run evaluation",
                 make_plots: bool = True, preamble: Sequence = (), workers: int = 1) -> Path:
    """report.md, report.html, the table files and the figures in ``folder``; returns report.md.

    ``failed`` lists (bag, reason) of bags that could not be evaluated; ``preamble`` holds
    paragraphs (strings) and tables put before the summary. The figures are drawn on up to
    ``workers`` processes.
    """
    folder.mkdir(parents=True, exist_ok=True)
    document = Document(title)
    for item in preamble:
        document.add(item) if isinstance(item, Table) else document.paragraph(item)
    document.paragraph(
        f"Settings: steady state from t = {settings.steady_state_start:g} s after the first reference; "
        f"reference matched by `{settings.reference_matching}`; saturation at |F| >= (1 - {settings.saturation_tolerance:g}) F_max. "
        "Numbering from 1 as in the thesis: actuators 1..6 are q1..q6 (the joint names of each bag are listed in its section)."
    )
    document.bullets([f"not evaluated: `{bag}`: {reason}" for bag, reason in failed])
    document.heading(2, "Summary")
    for table, name in ((tracking_table(pairs), "tracking"), (actuator_table(pairs), "actuators")):
        document.add(table)
        write_table_files(table, folder / f"table_{table.number}_{name}")
    drawings = Drawings(document, folder, make_plots)
    _figures(drawings, pairs, settings)
    for run, metrics in pairs:
        _run_section(drawings, run, metrics)
    drawings.draw(workers)
    markdown, _ = document.write(folder)
    return markdown


def summary_line(run: RunData, m: RunMetrics) -> str:
    """One line per run for the terminal."""
    parts = [run.label]
    for name, stats, scale, unit in (
        ("e_p", m.position_whole, MM, "mm"), ("e_p steady", m.position_steady, MM, "mm"),
        ("e_o", m.orientation_whole, DEG, "deg"), ("e_o steady", m.orientation_steady, DEG, "deg"),
    ):
        if stats is not None:
            parts.append(f"{name} RMS {_f(stats.rms_norm * scale)} {unit} max {_f(stats.max_norm * scale)} {unit}")
    if m.forces is not None:
        parts.append(f"peak force {_f(float(np.max(m.forces.peak)))} N, saturated {_f(m.forces.saturation_time_any, 3)} s")
    return "; ".join(parts)
