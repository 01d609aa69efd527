"""What ``hexapod_identify`` writes: the parameters overlay and the report with its figures.

The overlay extends the parameters file the fit was made on and sets the schema's ``actuators``
keys (and, with the payload, ``bodies.platform.mass``). An entry that is not identifiable keeps the
base file's value, and a comment above each key gives every slider's value with its interval or
the reason. The overlay is loaded back before the command returns, so it always validates.

The report (report.md) lists the bags, the delay chosen per bag, the rows used and left out, the
values with their intervals (or "not identifiable: why"), and the force residual before (base
file's drives) and after (identified), with two figures: measured against predicted forces over a
few seconds of the first run, and the residuals over the whole runs.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from hexapod_control.errors import ParameterError  # noqa: E402
from hexapod_control.identification import BagIdentification  # noqa: E402
from hexapod_control.identification.regression import DRIVE_PARAMETERS, PAYLOAD, UNITS, Identification  # noqa: E402
from hexapod_control.model.parameters import EXTENDS_KEY, IN_MEMORY, HexapodParameters, load_parameters  # noqa: E402

FIGURE_DPI = 120
FORCES_WINDOW = 4.0  # [s] of the first run in the force figure
SIGNIFICANT = 6  # digits of the values written


def _number(value: float) -> str:
    return f"{value:.{SIGNIFICANT}g}"


def _describe(estimate, name: str, confidence: float) -> str:
    if estimate.identified:
        return f"{name}: {_number(estimate.value)} +- {estimate.half_width:.2g} {estimate.unit} ({confidence:.0%})"
    return f"{name}: not identifiable ({estimate.reason})"


def overlay_values(result: Identification, parameters: HexapodParameters) -> dict[str, list[float]]:
    """{key: six values} of the drive keys with at least one identified slider (others: the base values)."""
    values = {}
    for name in DRIVE_PARAMETERS:
        estimates = [result.estimate(name, i) for i in range(6)]
        if any(e.identified for e in estimates):
            base = getattr(parameters.actuators, name)
            # A value whose interval reaches below zero is consistent with no such term: written as 0.
            values[name] = [max(e.value, 0.0) if e.identified else float(b) for e, b in zip(estimates, base)]
    return values


def write_overlay(path: Path, identified: BagIdentification, parameters: HexapodParameters) -> Path:
    """Write the overlay at ``path`` (see the module doc) and check that it loads."""
    if parameters.source == IN_MEMORY:
        raise ParameterError("the overlay extends the parameters file of the fit: load the parameters from a file")
    result = identified.result
    names = parameters.ros.joint_names
    values = overlay_values(result, parameters)
    base = Path(parameters.source)
    lines = [
        f"# Written by hexapod_identify on {datetime.now():%Y-%m-%d %H:%M} from {len(identified.runs)} bag(s):",
        *(f"#   {run.label}: force-to-motion delay {fit.delay} period(s)" for run, fit in zip(identified.runs, result.runs)),
        f"# on the rigid-body model of {base}. Entries not identifiable keep that file's value.",
        f"{EXTENDS_KEY}: {os.path.relpath(base.resolve(), path.resolve().parent)}",
        "hexapod:",
    ]
    drives = []
    for name, six in values.items():
        drives += [f"    # {_describe(result.estimate(name, i), names[i], result.confidence_level)}" for i in range(6)]
        drives.append(f"    {name}: [{', '.join(_number(v) for v in six)}]   # [{UNITS[name]}]")
    coulomb = values.get("coulomb_friction")
    if coulomb is not None:
        static = [max(s, c) for s, c in zip(parameters.actuators.static_friction, coulomb)]
        if static != list(parameters.actuators.static_friction):
            drives.append("    # not identified; raised where below the identified coulomb_friction (the schema's order)")
            drives.append(f"    static_friction: [{', '.join(_number(v) for v in static)}]   # [N]")
    lines += ["  actuators:", *drives] if drives else ["  actuators: {}   # no drive parameter identifiable: see the report"]
    payload = next((e for e in result.estimates if e.name == PAYLOAD), None)
    if payload is not None:
        lines.append(f"  # payload on the platform: {_describe(payload, 'payload', result.confidence_level)}")
        if payload.identified:
            lines += ["  bodies:", "    platform:",
                      f"      mass: {_number(parameters.bodies.platform.mass + payload.value)}   # [kg] with the payload"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    load_parameters(path)  # ParameterError if the written file does not validate
    return path


def write_report(folder: Path, identified: BagIdentification, parameters: HexapodParameters, bags,
                 overlay: Path | None) -> Path:
    """report.md and its figures in ``folder``; returns the report's path."""
    folder.mkdir(parents=True, exist_ok=True)
    result = identified.result
    names = parameters.ros.joint_names
    lines = [
        "# Drive identification",
        "",
        f"Bags: {', '.join(f'`{b}`' for b in bags)}. Rigid-body model: `{parameters.source}`. "
        f"Overlay: {f'`{overlay}`' if overlay else 'none written (nothing identifiable)'}.",
        "",
    ]
    for bag, why in identified.skipped:
        lines.append(f"- skipped `{bag}`: {why}")
    if result is None:
        lines.append("No bag had usable data.")
        path = folder / "report.md"
        path.write_text("\n".join(lines) + "\n")
        return path
    settings = parameters.identification
    lines += ["## Runs", "", "| run | grid period [ms] | filter window | delay [periods] | notes |", "| --- | --- | --- | --- | --- |"]
    for samples, fit in zip(identified.runs, result.runs):
        notes = "; ".join(samples.notes) or "-"
        lines.append(f"| {samples.label} | {samples.period * 1e3:.4g} | {samples.window} | {fit.delay} | {notes} |")
    counts = result.counts
    lines += [
        "",
        "## Rows per slider",
        "",
        f"A row is one slider at one grid point. Left out: slower than `min_speed` = {settings.min_speed} m/s, "
        f"a saturated command within the filter window, no full window or command, and outliers beyond "
        f"{settings.outlier_threshold} robust standard deviations.",
        "",
        "| slider | used | slow | saturated | no window/command | outliers | sigma [N] | kappa |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i in range(6):
        lines.append(
            f"| {names[i]} | {counts.used[i]} | {counts.slow[i]} | {counts.saturated[i]} | {counts.invalid[i]} | "
            f"{counts.outliers[i]} | {result.sigma[i]:.3g} | {result.inflation[i]:.3g} |"
        )
    lines += [
        "",
        "sigma: residual standard deviation; kappa: variance inflation from the residual's autocorrelation "
        "(the intervals count n / kappa effective rows).",
        "",
        f"## Values ({result.confidence_level:.0%} intervals)",
        "",
        "| slider | " + " | ".join(f"{n} [{UNITS[n]}]" for n in DRIVE_PARAMETERS) + " |",
        "| --- | --- | --- | --- |",
    ]
    for i in range(6):
        cells = []
        for name in DRIVE_PARAMETERS:
            e = result.estimate(name, i)
            cells.append(f"{_number(e.value)} +- {e.half_width:.2g}" if e.identified else f"not identifiable: {e.reason}")
        lines.append(f"| {names[i]} | " + " | ".join(cells) + " |")
    payload = next((e for e in result.estimates if e.name == PAYLOAD), None)
    if payload is not None:
        lines += ["", f"Payload on the platform: {_describe(payload, 'mass', result.confidence_level)}."]
    lines += [
        "",
        "## Force residual (measured - predicted, RMS over the rows of the fit)",
        "",
        "| slider | before (base file's drives) [N] | after (identified) [N] |",
        "| --- | --- | --- |",
    ]
    for i in range(6):
        lines.append(f"| {names[i]} | {result.rms_before[i]:.4g} | {result.rms_after[i]:.4g} |")
    lines += ["", "![measured and predicted forces](forces.png)", "", "![residuals](residuals.png)", ""]
    _plot_forces(folder / "forces.png", result, names)
    _plot_residuals(folder / "residuals.png", result, names)
    path = folder / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _plot_forces(path: Path, result: Identification, names) -> None:
    """Measured and predicted forces over FORCES_WINDOW seconds from the middle of the first run's rows."""
    fit = result.runs[0]
    used = np.flatnonzero(fit.candidates.any(axis=1))
    start = fit.t[used[used.size // 2]] if used.size else fit.t[0]
    window = (fit.t >= start) & (fit.t < start + FORCES_WINDOW)
    figure, axes = plt.subplots(3, 2, figsize=(12.0, 8.0), sharex=True)
    for i, axis in enumerate(axes.ravel()):
        t = fit.t[window]
        axis.plot(t, fit.measured[window, i], "k", lw=1.2, label="measured (filtered)")
        axis.plot(t, fit.before[window, i], "C3", lw=0.9, label="predicted before")
        axis.plot(t, fit.after[window, i], "C0--", lw=0.9, label="predicted after")
        axis.set_title(names[i])
        axis.set_ylabel("force [N]")
    for axis in axes[-1]:
        axis.set_xlabel("time [s]")
    axes[0, 0].legend(loc="best")
    figure.suptitle(f"{fit.label}: measured and predicted forces")
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)


def _plot_residuals(path: Path, result: Identification, names) -> None:
    figure, axes = plt.subplots(3, 2, figsize=(12.0, 8.0), sharex=True)
    for fit in result.runs:
        for i, axis in enumerate(axes.ravel()):
            rows = fit.candidates[:, i]
            axis.plot(fit.t[rows], (fit.measured - fit.before)[rows, i], "C3.", ms=1, label="before")
            axis.plot(fit.t[rows], (fit.measured - fit.after)[rows, i], "C0.", ms=1, label="after")
            axis.set_title(names[i])
            axis.set_ylabel("residual [N]")
    for axis in axes[-1]:
        axis.set_xlabel("time [s]")
    axes[0, 0].legend(loc="best", markerscale=8)
    figure.suptitle("force residual: measured - predicted")
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)
