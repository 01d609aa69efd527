"""What ``hexapod_identify`` writes: the parameters overlay and the report with its figures.

The overlay extends the parameters file the fit was made on and sets the schema's ``actuators``
keys (and, with the payload, ``bodies.platform.mass``). An entry that is not identifiable keeps the
base file's value, and a comment above each key gives every slider's value with its interval or
the reason. The overlay is loaded back before the command returns, so it always validates.

The report (report.md) lists the bags, the force used (effort or commands) and the delay kept per
bag, the rows used and left out, the friction model chosen per slider with every model's held-out
residual, the values with their intervals (or "not identifiable: why"), noise and model error, and
the force residual before (base file's drives) and after (identified), with three figures: measured
against predicted forces over a few seconds of the first run, the residuals over the whole runs,
and per slider the residual against speed, held-out rows apart (doc/identification.md reads them).
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
from hexapod_control.identification.regression import (  # noqa: E402
    DRIVE_PARAMETERS,
    LEAD_SCREW_PARAMETERS,
    PAYLOAD,
    SYMMETRIC,
    UNITS,
    VALIDATION_BLOCK,
    Identification,
    model_name,
    validation_every,
)
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
    """{key: six values} of the drive keys with at least one identified slider (others: the base values).

    The lead screw's keys come with the chosen models: a slider whose model lacks a term (or whose
    value is not identifiable) gets 0 for it, and the Stribeck level becomes static_friction
    F_c + (F_s - F_c) with the chosen stribeck_speed.
    """
    drives, values = parameters.actuators, {}
    for name in DRIVE_PARAMETERS:
        estimates = [result.estimate(name, i) for i in range(6)]
        if any(e.identified for e in estimates):
            base = getattr(drives, name)
            # A value whose interval reaches below zero is consistent with no such term: written as 0.
            values[name] = [max(e.value, 0.0) if e.identified else float(b) for e, b in zip(estimates, base)]
    if "coulomb_friction" not in values or not any(result.choice.chosen):
        return values
    coulomb, viscous = values["coulomb_friction"], values.get("viscous_friction", list(drives.viscous_friction))

    def term(name, i):
        found = [e for e in result.estimates if e.name == name and e.slider == i and e.identified]
        return found[0].value if found else 0.0

    asymmetry = [float(np.clip(term("coulomb_asymmetry", i), -coulomb[i], coulomb[i])) for i in range(6)]
    hump = [max(term("stribeck_friction", i), 0.0) for i in range(6)]
    ripple = np.array([[term("viscous_ripple_cos", i), term("viscous_ripple_sin", i)] for i in range(6)])
    # The ripple's amplitude within b, so that the viscous friction never turns negative.
    ripple *= np.minimum(1.0, np.divide(viscous, np.hypot(*ripple.T), out=np.ones(6), where=np.hypot(*ripple.T) > 0))[:, None]
    values["coulomb_asymmetry"] = asymmetry
    values["stribeck_speed"] = [float(v) if h > 0.0 else 0.0 for v, h in zip(result.choice.stribeck_speed, hump)]
    values["static_friction"] = [c + h if h > 0.0 else max(float(s), c)
                                 for c, h, s in zip(coulomb, hump, drives.static_friction)]
    values["viscous_ripple_cos"], values["viscous_ripple_sin"] = ripple[:, 0].tolist(), ripple[:, 1].tolist()
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
        *(f"#   {run.label}: {fit.source}, force-to-motion delay {fit.delay} period(s)"
          for run, fit in zip(identified.runs, result.runs)),
        "#   friction models: " + ", ".join(f"{names[i]} {model_name(m)}" for i, m in enumerate(result.choice.chosen)),
        f"# on the rigid-body model of {base}. Entries not identifiable keep that file's value.",
        f"{EXTENDS_KEY}: {os.path.relpath(base.resolve(), path.resolve().parent)}",
        "hexapod:",
    ]
    drives = []
    for name, six in values.items():
        if name in DRIVE_PARAMETERS:
            drives += [f"    # {_describe(result.estimate(name, i), names[i], result.confidence_level)}" for i in range(6)]
        elif name == "static_friction":
            drives.append("    # F_c + (F_s - F_c) where a Stribeck hump was chosen; else not identified, at least F_c")
        else:
            drives.append("    # from the chosen friction models (0 where a slider's model has no such term)")
        unit = {"static_friction": "N", "stribeck_speed": "m/s"}.get(name, UNITS.get(name, ""))
        drives.append(f"    {name}: [{', '.join(_number(v) for v in six)}]   # [{unit}]")
    coulomb = values.get("coulomb_friction")
    if coulomb is not None and "static_friction" not in values:
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
    lines += ["## Runs", "",
              "| run | grid period [ms] | filter window | force | delay [periods] | delay margin | command-to-effort [periods] | notes |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for samples, fit in zip(identified.runs, result.runs):
        notes = "; ".join(samples.notes) or "-"
        effort = "-" if fit.effort_delay is None else f"{fit.effort_delay} (RMS mismatch {fit.effort_mismatch:.3g} N)"
        lines.append(f"| {samples.label} | {samples.period * 1e3:.4g} | {samples.window} | {fit.source} | {fit.delay} | "
                     f"{fit.delay_margin:.3g} | {effort} | {notes} |")
    counts = result.counts
    lines += [
        "",
        "force: the joint states' effort (the force applied) when the bag has it, else the commands. Delay: "
        "periods from the force to the motion it explains (-1 for an effort read back over the period before "
        "its stamp); margin: the residual variance at the runner-up delay over the kept one's (well above 1: "
        "unambiguous). command-to-effort: the measured delay between a command and the effort showing it.",
        "",
        "## Rows per slider",
        "",
        f"A row is one slider at one grid point. Left out: slower than `min_speed` = {settings.min_speed} m/s "
        f"somewhere in the filter window (reversals, rest), a saturated command within the filter window, no full "
        f"window or command. Rows beyond {settings.robust_threshold} robust standard deviations weigh less (Huber), none is "
        "dropped.",
        "",
        "| slider | used | slow | saturated | no window/command | downweighted | noise sigma [N] | model error [N] | kappa |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i in range(6):
        lines.append(
            f"| {names[i]} | {counts.used[i]} | {counts.slow[i]} | {counts.saturated[i]} | {counts.invalid[i]} | "
            f"{counts.downweighted[i]} | {result.sigma[i]:.3g} | {result.model_error[i]:.3g} | {result.inflation[i]:.3g} |"
        )
    lines += [
        "",
        "noise sigma: the residual less its mean by speed; model error: RMS of that mean (what the friction law "
        "misses); kappa: variance inflation of the noise's autocorrelation (the intervals count n / kappa "
        "effective rows and hold the noise only).",
        "",
        "## Friction model per slider (held-out validation)",
        "",
        f"Each model is fitted without the held-out rows (every {validation_every(settings)}th "
        f"block of {VALIDATION_BLOCK:g} s) and predicts them; the simplest within {settings.model_improvement:.0%} of the best held-out Huber loss is chosen. "
        "RMS held-out residual [N]:",
        "",
    ]
    models = sorted({m for rms in result.choice.held_out_rms for m in rms}, key=lambda m: (m != SYMMETRIC, m.count("+"), m))
    lines += ["| slider | chosen | v_st [m/s] | held-out rows | " + " | ".join(models) + " |",
              "| --- | --- | --- | --- | " + " | ".join("---" for _ in models) + " |"]
    for i in range(6):
        rms = result.choice.held_out_rms[i]
        lines.append(f"| {names[i]} | {model_name(result.choice.chosen[i])} | {result.choice.stribeck_speed[i]:g} | "
                     f"{result.choice.held_out_rows[i]} | " + " | ".join(f"{rms[m]:.3g}" if m in rms else "-" for m in models) + " |")
    parameters_shown = [*DRIVE_PARAMETERS, *(n for n in LEAD_SCREW_PARAMETERS if any(e.name == n for e in result.estimates))]
    lines += [
        "",
        f"## Values ({result.confidence_level:.0%} intervals)",
        "",
        "stribeck_friction is F_s - F_c (static friction F_s = F_c + it, moving up F_c + A); "
        "coulomb_asymmetry A: F_c + A moving up, F_c - A moving down.",
        "",
        "| slider | " + " | ".join(f"{n} [{UNITS[n]}]" for n in parameters_shown) + " |",
        "| --- | " + " | ".join("---" for _ in parameters_shown) + " |",
    ]
    for i in range(6):
        cells = []
        for name in parameters_shown:
            found = [e for e in result.estimates if e.name == name and e.slider == i]
            if not found:
                cells.append("-")
                continue
            e = found[0]
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
    lines += ["", "![measured and predicted forces](forces.png)", "", "![residuals](residuals.png)", "",
              "Residual against speed: identified model on the rows of the fit, and the chosen model fitted "
              "without the held-out rows on those rows. A pattern left at low speed is stick-slip or a "
              "Stribeck law the model lacks; a spread that grows with speed is viscous ripple.", "",
              "![residual against speed](residual_speed.png)", ""]
    _plot_forces(folder / "forces.png", result, names)
    _plot_residuals(folder / "residuals.png", result, names)
    _plot_residual_speed(folder / "residual_speed.png", result, names)
    path = folder / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _plot_forces(path: Path, result: Identification, names) -> None:
    """Measured and predicted forces over FORCES_WINDOW seconds from the middle of the first run's rows."""
    fit = result.runs[0]
    used = np.flatnonzero(fit.rows.any(axis=1))
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


def _plot_per_slider(path: Path, result: Identification, names, title: str, xlabel: str, draw) -> None:
    """A 3 x 2 grid of residual plots, one per slider: ``draw(axis, fit, i)`` for every run."""
    figure, axes = plt.subplots(3, 2, figsize=(12.0, 8.0), sharex=True)
    for fit in result.runs:
        for i, axis in enumerate(axes.ravel()):
            draw(axis, fit, i)
            axis.set_title(names[i])
            axis.set_ylabel("residual [N]")
    for axis in axes[-1]:
        axis.set_xlabel(xlabel)
    axes[0, 0].legend(loc="best", markerscale=8)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)


def _plot_residuals(path: Path, result: Identification, names) -> None:
    def draw(axis, fit, i):
        rows = fit.rows[:, i]
        axis.plot(fit.t[rows], (fit.measured - fit.before)[rows, i], "C3.", ms=1, label="before")
        axis.plot(fit.t[rows], (fit.measured - fit.after)[rows, i], "C0.", ms=1, label="after")

    _plot_per_slider(path, result, names, "force residual: measured - predicted", "time [s]", draw)


def _plot_residual_speed(path: Path, result: Identification, names) -> None:
    """Per slider: measured - predicted against the speed, the held-out rows in their own colour."""
    def draw(axis, fit, i):
        fitted, held = fit.rows[:, i] & ~fit.held_out[:, i], fit.held_out[:, i]
        axis.plot(fit.velocity[fitted, i], (fit.measured - fit.after)[fitted, i], "C0.", ms=1, label="rows of the fit")
        axis.plot(fit.velocity[held, i], (fit.measured - fit.validation)[held, i], "C1.", ms=1,
                  label="held out (predicted)")

    _plot_per_slider(path, result, names, "force residual against speed", "speed [m/s]", draw)
