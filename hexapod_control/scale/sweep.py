"""Robustness sweep: every case of a sweep spec in closed loop, on Ray; rows, report, worst bags.

    hexapod_sweep SPEC.yaml [-o DIR] [--force] [--address HOST:PORT] [--workers N] [--limit N]
    python -m hexapod_control.scale.sweep SPEC.yaml

Writes into the output folder: ``cases.parquet`` and ``cases.csv`` (one row per case, see
scale/case.py), ``report.md`` and ``report.html`` (error distributions per controller, the
stability maps, the cases where the simulation and the linear analysis disagree, the worst cases)
with their figures, and ``worst/`` (the worst cases run again and recorded as bags that
``hexapod_evaluate`` and ``hexapod_replay`` open). The spec format is in doc/sweeps_and_tuning.md.
Exit status 0 when every case ran, 1 when some failed (their rows carry the error), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.document import Document, Figure, Table
from hexapod_control.evaluation.evaluate import prepare_output
from hexapod_control.options import add_output
from hexapod_control.scale.case import run_case
from hexapod_control.scale.engine import Engine, Failure, Progress
from hexapod_control.scale.spec import Case, SweepSpec, expand, load_spec, swept

PROG = "hexapod_sweep"
SWEEP_FILES = ("cases.parquet", "cases.csv", "report.md", "report.html", "figure_*.png", "figure_*.svg")
WORST_FOLDER = "worst"
PERCENTILES = (50, 90, 100)
MAP_CELLS = 6  # a map axis with more distinct values (drawn at random) is cut into this many ranges


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="sweep spec (YAML, `sweep:` at the top)")
    add_output(parser, "output folder (default: sweeps/<name>_<time>)", type=Path)
    parser.add_argument("--force", action="store_true", help="write over an existing output folder")
    add_engine_arguments(parser)
    parser.add_argument("--limit", type=int, metavar="N", help="run the first N cases only (a quick look)")
    return parser


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="a running Ray cluster's address (default: Ray on this machine's cores, started "
                        "and stopped by the command)")
    parser.add_argument("--workers", type=int, metavar="N", help="local cores Ray may use (default: all)")


def run_cases(cases: Sequence[Case], engine: Engine, label: str, emit=None) -> list[dict]:
    """Every case's row, in case order; a task Ray lost becomes a row with its error."""
    rows: list[dict | None] = [None] * len(cases)
    progress = Progress(label, len(cases), emit)
    for index, result in engine.map(run_case, cases):
        if isinstance(result, Failure):
            result = {**cases[index].inputs(), "error": result.error, "stable": False}
        rows[index] = result
        progress.update(failed=bool(result["error"]))
    return rows


def write_rows(rows: Sequence[dict], folder: Path, stem: str = "cases") -> tuple[Path, Path]:
    """<stem>.parquet and <stem>.csv (columns: the union of the rows' keys, in first-seen order)."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet

    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    table = pa.Table.from_pylist([{key: row.get(key) for key in columns} for row in rows])
    parquet, csv = folder / f"{stem}.parquet", folder / f"{stem}.csv"
    pyarrow.parquet.write_table(table, parquet)
    pyarrow.csv.write_csv(table, csv)
    return parquet, csv


# ------------------------------------------------------------------------------------------ report
def _finite(values) -> np.ndarray:
    array = np.array([v for v in values if v is not None], dtype=float)
    return array[np.isfinite(array)]


def distribution_table(rows: Sequence[dict], labels: Sequence[str]) -> Table:
    header = ["controller", "cases", "failed", "stable (simulated)", "stable (linear)"]
    header += [f"position RMS p{p} [mm]" for p in PERCENTILES] + [f"orientation RMS p{p} [mrad]" for p in PERCENTILES]
    header += ["peak force max [N]", "saturated time max [s]"]
    table_rows = []
    for label in labels:
        mine = [r for r in rows if r["controller"] == label]
        ran = [r for r in mine if not r["error"]]
        stable = [r for r in ran if r["stable"]]
        cells = [label, len(mine), len(mine) - len(ran), len(stable),
                 sum(1 for r in ran if r.get("linear_stable")) if any(r.get("linear_stable") is not None for r in ran) else None]
        for key, scale in (("position_rms", 1e3), ("orientation_rms", 1e3)):
            values = _finite(r[key] for r in stable)
            cells += [float(np.percentile(values, p)) * scale if values.size else None for p in PERCENTILES]
        cells += [float(np.max(_finite(r["peak_force"] for r in ran))) if ran else None,
                  float(np.max(_finite(r["saturated_time"] for r in ran))) if ran else None]
        table_rows.append(cells)
    return Table("Per controller: cases, verdicts and the distribution of the tracking error over its stable cases "
                 "(percentiles p50, p90, p100 of the run's RMS error norm).", header, table_rows)


def disagreement_table(rows: Sequence[dict], keys: Sequence[str]) -> Table:
    rows = [r for r in rows if not r["error"] and r.get("linear_stable") is not None and r["stable"] != r["linear_stable"]]
    header = ["case", "controller", *keys, "simulated", "linear", "spectral radius", "final position error max [mm]", "faults",
              "why"]
    body = [[r["case"], r["controller"], *[r[k] for k in keys], _verdict(r["stable"]), _verdict(r["linear_stable"]),
             r["linear_radius"], r["final_position_max"] * 1e3, r["faults"], disagreement_reason(r)] for r in rows]
    return Table("Cases where the simulated verdict and the linear analysis at home (`hexapod_margins`) disagree, and "
                 "why, from what the run recorded.", header, body)


def disagreement_reason(row: dict) -> str:
    """Why a case's simulated verdict differs from its linear one, read from its row."""
    if row["linear_stable"]:  # simulated unstable
        if row["failure"]:
            return f"the plant failed: {row['failure']}"
        if row["faults"]:
            return f"the supervisor faulted {row['faults']} time(s); the linear loop has no supervisor"
        if row["saturated_time"] > 0.0:
            return f"at the force limit for {row['saturated_time']:.3g} s; the linear loop has no force limit"
        return ("it did not settle as the stability criterion asks: the linear loop is linearised at home, without "
                "jitter, lost commands, sensor noise or dry friction")
    growth = row["linear_radius"] ** row["steps"]
    return (f"the linear loop's unstable mode grows {growth:.3g} x over the run's {row['steps']} periods: too little to "
            "break the stability criterion (a longer run shows it)")


def _verdict(stable: bool | None) -> str:
    return "-" if stable is None else ("stable" if stable else "unstable")


def worst_rows(rows: Sequence[dict], count: int) -> list[dict]:
    """The ``count`` cases with the largest position RMS error (a failed plant counts as infinite)."""
    ran = [r for r in rows if not r["error"]]
    return sorted(ran, key=lambda r: (not r["failure"], -_or_inf(r["position_rms"])))[:count]


def _or_inf(value) -> float:
    return math.inf if value is None or not math.isfinite(value) else value


def map_axis(values: Sequence) -> tuple[list[str], Callable[[Any], int]]:
    """Tick labels of a map axis and the cell of a value: each value its own cell, or MAP_CELLS
    equal ranges (labelled by their centres) for a quantity drawn at random."""
    distinct = sorted(set(values))
    if len(distinct) <= MAP_CELLS:
        return [f"{v:g}" for v in distinct], distinct.index
    edges = np.linspace(distinct[0], distinct[-1], MAP_CELLS + 1)
    centres = 0.5 * (edges[:-1] + edges[1:])
    return [f"{c:.3g}" for c in centres], lambda v: min(int(np.searchsorted(edges, v, side="right")) - 1, MAP_CELLS - 1)


def stability_maps(rows: Sequence[dict], spec: SweepSpec, labels: Sequence[str], stem: Path) -> Path | None:
    """One panel per controller (and per value of report.panels): the fraction of stable cases per
    cell of the two mapped quantities, and the linear verdict's fraction in each cell's text."""
    keys = spec.report.map or tuple(swept(spec)[:2])
    if len(keys) != 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hexapod_control.evaluation.plots import save

    panel_key = spec.report.panels
    panel_values = sorted({r[panel_key] for r in rows}) if panel_key else [None]
    (x_values, x_cell), (y_values, y_cell) = (map_axis([r[k] for r in rows]) for k in keys)
    figure, axes = plt.subplots(len(panel_values), len(labels), squeeze=False,
                                figsize=(3.2 * len(labels) + 1, 2.6 * len(panel_values) + 0.6))
    for i, panel in enumerate(panel_values):
        for j, label in enumerate(labels):
            ax = axes[i][j]
            grid = np.full((len(y_values), len(x_values)), np.nan)
            for yi in range(len(y_values)):
                for xi in range(len(x_values)):
                    cell = [r for r in rows if r["controller"] == label and x_cell(r[keys[0]]) == xi
                            and y_cell(r[keys[1]]) == yi and (panel_key is None or r[panel_key] == panel) and not r["error"]]
                    if not cell:
                        continue
                    grid[yi, xi] = np.mean([r["stable"] for r in cell])
                    linear = [r["linear_stable"] for r in cell if r.get("linear_stable") is not None]
                    text = f"{sum(r['stable'] for r in cell)}/{len(cell)}"
                    if linear:
                        text += f"\nlin {sum(linear)}/{len(linear)}"
                    ax.text(xi, yi, text, ha="center", va="center", fontsize=7)
            ax.imshow(grid, origin="lower", cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(x_values)), x_values, fontsize=7)
            ax.set_yticks(range(len(y_values)), y_values, fontsize=7)
            ax.set_xlabel(keys[0], fontsize=8)
            ax.set_ylabel(keys[1], fontsize=8)
            title = label if panel_key is None else f"{label}\n{panel_key} = {panel}"
            ax.set_title(title, fontsize=8)
    figure.tight_layout()
    path = save(figure, stem)
    plt.close(figure)
    return path


def error_figure(rows: Sequence[dict], labels: Sequence[str], stem: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hexapod_control.evaluation.plots import save

    data = [_finite(r["position_rms"] * 1e3 for r in rows if r["controller"] == label and r["stable"]) for label in labels]
    if not any(d.size for d in data):
        return None
    figure, ax = plt.subplots(figsize=(7.2, 3.0))
    ax.boxplot([d if d.size else [np.nan] for d in data], whis=(0, 100))
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("position RMS error [mm]")
    figure.tight_layout()
    path = save(figure, stem)
    plt.close(figure)
    return path


def write_report(rows: Sequence[dict], spec: SweepSpec, spec_path: Path, folder: Path, worst: Sequence[tuple[dict, Path]],
                 wall: float, cpus: int) -> Path:
    labels = list(dict.fromkeys(r["controller"] for r in rows))
    keys = swept(spec)
    document = Document(f"Sweep {spec.name}")
    document.paragraph(
        f"Spec `{spec_path}`: {len(rows)} cases ({', '.join(labels)}; swept: {', '.join(keys) or 'nothing'}), "
        f"trajectory `{spec.trajectory}` for {spec.duration:g} s on the `{spec.plant}` plant, seed {spec.seed}. "
        f"Ran in {wall:.0f} s on {cpus} Ray CPU(s). Rows: `cases.parquet`, `cases.csv`.")
    document.paragraph(
        f"Stable (simulated): the plant never stopped, no fault latched, and over the last {spec.stability.window:g} s the "
        f"pose error stayed within {spec.stability.max_position_error * 1e3:g} mm and "
        f"{spec.stability.max_orientation_error * 1e3:g} mrad"
        + (f", its spread grew by less than {spec.stability.max_growth:g}x from the window before" if spec.stability.max_growth else "")
        + ", and no force was at its limit. Stable (linear): every eigenvalue of the loop "
        "linearised at home at the case's delay and compensation (`hexapod_margins`) inside the unit circle.")
    document.add(distribution_table(rows, labels))
    document.heading(2, "Stability maps")
    stem = folder / f"figure_{document.figures + 1}_stability"
    path = stability_maps(rows, spec, labels, stem)
    if path is not None:
        document.add(Figure("Fraction of stable cases per cell (green: all, red: none); text: simulated, then linear "
                            "stable over cases.", path))
    disagreements = disagreement_table(rows, keys)
    document.heading(2, "Simulation against the linear analysis")
    if disagreements.rows:
        document.add(disagreements)
    else:
        document.paragraph("The simulated and the linear verdicts agree on every case that both judge.")
    path = error_figure(rows, labels, folder / f"figure_{document.figures + 1}_errors")
    if path is not None:
        document.heading(2, "Error distributions")
        document.add(Figure("Position RMS error of the stable cases per controller (box: quartiles, whiskers: extremes).", path))
    document.heading(2, "Worst cases")
    header = ["case", "controller", *keys, "position RMS [mm]", "orientation RMS [mrad]", "peak force [N]", "failure", "bag"]
    document.add(Table("The cases with the largest position error (a stopped plant first), recorded as bags.", header, [
        [r["case"], r["controller"], *[r[k] for k in keys], r["position_rms"] * 1e3, r["orientation_rms"] * 1e3,
         r["peak_force"], r["failure"] or "-", bag.relative_to(folder).as_posix()] for r, bag in worst]))
    failed = [r for r in rows if r["error"]]
    if failed:
        document.heading(2, "Failed cases")
        document.bullets([f"case {r['case']} ({r['controller']}): {r['error']}" for r in failed])
    markdown, _ = document.write(folder)
    return markdown


# ------------------------------------------------------------------------------------------ main
def _stderr(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def sweep(spec_path: Path, output: Path, engine: Engine, limit: int | None = None, emit=_stderr) -> tuple[Path, list[dict]]:
    """Run the spec's cases on ``engine``, write the rows, the worst bags and the report; (report, rows)."""
    spec, folder = load_spec(spec_path)
    cases = expand(spec, folder)[:limit]
    emit(f"{len(cases)} cases on {engine.cpus} CPU(s); output {output}")
    started = time.monotonic()
    rows = run_cases(cases, engine, spec.name, emit)
    wall = time.monotonic() - started
    write_rows(rows, output)
    worst = []
    if spec.report.worst:
        (output / WORST_FOLDER).mkdir(exist_ok=True)
        for row in worst_rows(rows, spec.report.worst):
            bag = output / WORST_FOLDER / f"case_{row['case']}"
            emit(f"recording case {row['case']} to {bag}")
            run_case(cases[row["case"]], bag)
            worst.append((row, bag))
    return write_report(rows, spec, spec_path, output, worst, wall, engine.cpus), rows


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.limit is not None and args.limit < 1:
        _stderr(f"error: --limit must be >= 1, got {args.limit}")
        return 2
    try:
        spec, _ = load_spec(args.spec)
        output = args.output or Path("sweeps") / f"{spec.name}_{datetime.now():%Y%m%d_%H%M%S}"
        prepare_output(output, args.force, PROG, SWEEP_FILES)
        with Engine(args.address, args.workers) as engine:
            report, rows = sweep(args.spec, output, engine, args.limit)
    except (HexapodError, OSError, ValueError) as error:
        _stderr("error: " + " ".join(str(error).split()))
        return 1
    failed = sum(1 for r in rows if r["error"])
    print(f"{len(rows)} cases, {sum(1 for r in rows if r['stable'])} stable, {failed} failed; report: {report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
