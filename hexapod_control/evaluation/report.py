"""The Markdown report of one or more evaluated runs, with its plots."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from hexapod_control.evaluation import plots
from hexapod_control.evaluation.bag import DIAGNOSTIC_LEVELS, RunData
from hexapod_control.evaluation.metrics import ErrorStats, RunMetrics
from hexapod_control.model.parameters import EvaluationSettings

MM, DEG = plots.M_TO_MM, plots.RAD_TO_DEG
AXES_POSITION, AXES_ORIENTATION = ("x", "y", "z"), ("lambda", "mu", "nu")
# How many distinct diagnostic messages the report lists per run (the rest are counted).
DIAGNOSTICS_LISTED = 10


def _f(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}"


def _stats_cells(stats: Optional[ErrorStats], scale: float) -> list[str]:
    if stats is None:
        return ["-", "-"]
    return [_f(stats.rms_norm * scale), _f(stats.max_norm * scale)]


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)


def write_plots(run: RunData, metrics: RunMetrics, folder: Path) -> dict[str, Path]:
    """The run's figures in ``folder``; only those its data allow."""
    slug = _slug(run.label)
    written = {}
    if metrics.tracking is not None:
        written["tracking"] = plots.plot_tracking(metrics, folder / f"{slug}_tracking.png")
    if run.has_joint_states:
        written["speeds"] = plots.plot_speeds(run, metrics, folder / f"{slug}_speeds.png")
    if metrics.forces is not None:
        written["forces"] = plots.plot_forces(run, metrics, folder / f"{slug}_forces.png")
    check = metrics.model_check
    if check is not None and not check.reason:
        written["model_check"] = plots.plot_force_pairs(
            check.t, check.recorded, check.predicted, ("recorded (filtered)", "inverse-dynamics model"), check.rms_residual,
            f"{run.label}: model check, recorded forces vs the model's for the recorded motion",
            folder / f"{slug}_model_check.png",
        )
    return written


def _comparison_table(pairs) -> list[str]:
    lines = [
        "| run | e_p RMS [mm] | e_p max [mm] | e_p RMS steady [mm] | e_p max steady [mm] | e_o RMS [deg] | e_o max [deg] "
        "| e_o RMS steady [deg] | e_o max steady [deg] | peak force [N] | saturated [s] | peak speed [m/s] | FK failures |",
        "|---|" + "---:|" * 12,
    ]
    for run, m in pairs:
        force_peak = _f(float(np.max(m.forces.peak))) if m.forces else "-"
        saturated = _f(m.forces.saturation_time_any, 3) if m.forces else "-"
        speed = _f(float(np.max(m.speed_peak))) if m.speed_peak is not None else "-"
        cells = (
            _stats_cells(m.position_whole, MM) + _stats_cells(m.position_steady, MM)
            + _stats_cells(m.orientation_whole, DEG) + _stats_cells(m.orientation_steady, DEG)
        )
        fk = str(len(m.fk_failures)) if m.speed_peak is not None else "-"
        lines.append(f"| {run.label} | " + " | ".join(cells + [force_peak, saturated, speed, fk]) + " |")
    return lines


def _run_section(run: RunData, m: RunMetrics, figures: dict[str, Path], folder: Path) -> list[str]:
    out = [f"## {run.label}", ""]
    out.append(f"- bag: `{run.path}` ({run.storage})")
    out.append(f"- t = 0: {run.origin or 'unknown'}; joint states span {_f(m.duration)} s")
    out.append(f"- samples: {m.joint_samples} joint states, {m.reference_samples} references, {m.force_samples} force commands")
    if run.effort_timing:
        out.append(f"- force timing: {run.effort_timing}")
    out.append("")
    out.append("| topic | type | messages |")
    out.append("|---|---|---:|")
    for topic, (msgtype, count) in sorted(run.available.items()):
        out.append(f"| `{topic}` | {msgtype or 'several'} | {count} |")
    out.append("")
    problems = run.notes + m.notes
    out.append("### Missing or skipped")
    out.append("")
    out.extend([f"- {line}" for line in problems] or ["- nothing: every message of the evaluated topics was used"])
    out.append("")

    out.append("### Tracking")
    out.append("")
    if m.tracking is None:
        out.append("Not evaluated (see above).")
    else:
        out.append(
            f"Pose error e = xi_d - xi, xi from the forward kinematics of the recorded joint states, "
            f"reference matched by `{m.matching}`; steady state: t >= {m.steady_state_start:g} s."
        )
        out.append("")
        out.append("| norm | RMS whole | max whole | RMS steady | max steady |")
        out.append("|---|---:|---:|---:|---:|")
        out.append("| position-error norm [mm] | " + " | ".join(_stats_cells(m.position_whole, MM) + _stats_cells(m.position_steady, MM)) + " |")
        out.append("| orientation-error norm [deg] | " + " | ".join(_stats_cells(m.orientation_whole, DEG) + _stats_cells(m.orientation_steady, DEG)) + " |")
        out.append("")
        out.append("| axis | RMS whole | max whole | RMS steady | max steady |")
        out.append("|---|---:|---:|---:|---:|")
        for group, names, scale, unit in (
            ((m.position_whole, m.position_steady), AXES_POSITION, MM, "mm"),
            ((m.orientation_whole, m.orientation_steady), AXES_ORIENTATION, DEG, "deg"),
        ):
            for k, name in enumerate(names):
                cells = []
                for stats in group:
                    cells += ["-", "-"] if stats is None else [_f(stats.rms_axis[k] * scale), _f(stats.max_axis[k] * scale)]
                out.append(f"| {name} [{unit}] | " + " | ".join(cells) + " |")
        out.append("")
    if m.pose_topic_difference is not None:
        position, angle, count = m.pose_topic_difference
        out.append(
            f"Recorded platform pose vs FK of the joint states ({count} common stamps): "
            f"max {_f(position * MM)} mm, {_f(angle * DEG)} deg."
        )
        out.append("")
    if m.speed_peak is not None:
        out.append(f"FK failures: {len(m.fk_failures)}" + (
            f" (first at t = {_f(m.fk_failures[0][0])} s: {m.fk_failures[0][1]})" if m.fk_failures else ""
        ))
        out.append("")

    out.append("### Actuators")
    out.append("")
    out.append("| actuator | peak abs(F) [N] | RMS F [N] | saturated [s] | peak abs(dq/dt) [m/s] | of speed limit [%] |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for k in range(6):
        f = m.forces
        cells = [_f(f.peak[k]), _f(f.rms[k]), _f(f.saturation_time[k], 3)] if f else ["-", "-", "-"]
        speed = m.speed_peak
        cells += [_f(speed[k]), _f(100 * speed[k] / m.speed_limit, 3)] if speed is not None else ["-", "-"]
        out.append(f"| q{k} | " + " | ".join(cells) + " |")
    out.append("")
    if m.forces:
        out.append(
            f"Force limit {_f(m.forces.limit)} N; time with any actuator saturated: "
            f"{_f(m.forces.saturation_time_any, 3)} s of {_f(m.forces.duration)} s. Speed limit {_f(m.speed_limit)} m/s."
        )
        out.append("")

    out.append("### Model check")
    out.append("")
    check = m.model_check
    if check is None:
        out.append("Not run (disabled).")
    elif check.reason:
        out.append(f"Not done: {check.reason}.")
    else:
        out.append(
            f"Forces of the inverse-dynamics model for the recorded motion (q_dd: Savitzky-Golay derivative of "
            f"q_dot over {check.window_samples} samples at {_f(check.period * 1e3)} ms) vs the recorded forces "
            f"through the same filter (held commands, aligned half a period with the derivative), "
            f"at {check.t.size} points" + (f"; the model failed at {check.failures} point(s)" if check.failures else "") + "."
        )
        out.append("")
        out.append("| actuator | RMS residual [N] | RMS recorded, filtered [N] |")
        out.append("|---|---:|---:|")
        for k in range(6):
            out.append(f"| q{k} | {_f(check.rms_residual[k])} | {_f(check.rms_recorded[k])} |")
    out.append("")

    if run.diagnostics:
        out.append("### Diagnostics")
        out.append("")
        levels = Counter(DIAGNOSTIC_LEVELS.get(d.level, str(d.level)) for d in run.diagnostics)
        out.append("Statuses by level: " + ", ".join(f"{level} {count}" for level, count in sorted(levels.items())) + ".")
        problems = Counter((DIAGNOSTIC_LEVELS.get(d.level, str(d.level)), d.name, d.message) for d in run.diagnostics if d.level != 0)
        for (level, name, message), count in problems.most_common(DIAGNOSTICS_LISTED):
            out.append(f"- {level} `{name}`: {message} ({count}x)")
        if len(problems) > DIAGNOSTICS_LISTED:
            out.append(f"- ... and {len(problems) - DIAGNOSTICS_LISTED} more distinct non-OK statuses")
        out.append("")

    if figures:
        out.append("### Plots")
        out.append("")
        for name, figure in figures.items():
            out.append(f"![{run.label} {name}]({figure.relative_to(folder).as_posix()})")
            out.append("")
    return out


def write_report(pairs: Sequence[tuple[RunData, RunMetrics]], folder: Path, settings: EvaluationSettings,
                 failed: Sequence[tuple[str, str]] = (), title: str = "Hexapod run evaluation",
                 make_plots: bool = True, preamble: Sequence[str] = ()) -> Path:
    """report.md (and the PNGs) in ``folder``; ``failed`` lists (bag, reason) of unreadable bags."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title}", ""]
    if preamble:
        lines.extend(preamble)
        lines.append("")
    lines.append(
        f"Settings: steady state from t = {settings.steady_state_start:g} s after the first reference; "
        f"reference matched by `{settings.reference_matching}`; saturation at |F| >= (1 - {settings.saturation_tolerance:g}) F_max."
    )
    lines.append("")
    if len(pairs) > 1 or failed:
        lines.append("## Comparison")
        lines.append("")
        lines.extend(_comparison_table(pairs))
        lines.append("")
        if make_plots and sum(m.tracking is not None for _, m in pairs) > 1:
            comparison = plots.plot_comparison([m for _, m in pairs], folder / "comparison_tracking.png")
            lines.append(f"![comparison]({comparison.name})")
            lines.append("")
        for bag, reason in failed:
            lines.append(f"- not evaluated: `{bag}`: {reason}")
        if failed:
            lines.append("")
    for run, metrics in pairs:
        figures = write_plots(run, metrics, folder) if make_plots else {}
        lines.extend(_run_section(run, metrics, figures, folder))
    path = folder / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
