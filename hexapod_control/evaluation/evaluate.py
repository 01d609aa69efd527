"""Bags to one report: the library under ``hexapod_evaluate`` and the commands that evaluate runs.

:func:`evaluate_bags` reads each bag with the parameters it recorded (or given ones), checks that
it holds what each metric needs, evaluates it and writes one report of them all; the rest names
report folders and applies a command line's settings. ``evaluation/cli.py`` is the command around
it; the main job, the sweeps and ``hexapod_evaluate_many`` call it too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from hexapod_control.bags import BagError, RunInfo
from hexapod_control.bags.reader import read_custom_data
from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.bag import RunData, load_run
from hexapod_control.evaluation.metrics import RunMetrics, evaluate_run
from hexapod_control.evaluation.report import write_report
from hexapod_control.model.parameters import EvaluationSettings, HexapodParameters, load_parameters

# What each metric needs (topic keys); all are requested unless --partial or --no-model-check.
METRIC_NEEDS = {
    "tracking": ("joint_states", "reference"),
    "forces": ("effort_commands",),
    "speeds": ("joint_states",),
    "model check": ("joint_states", "effort_commands"),
}
# Evaluation cost per MB of bag on one worker (benchmarks/bench_evaluate.py, 2-core machine, plots
# on), for the expected time printed before each bag.
EXPECTED_SECONDS_PER_MB = 0.007
OUTPUT_SUFFIX = "_evaluation"
# Files a report folder holds, removed before a report is written over an old one (--force).
REPORT_FILES = ("report.md", "report.html", "table_*.csv", "table_*.md", "figure_*.png", "figure_*.svg")


def bag_root(path: Path) -> Path:
    """The bag a path names: a bag directory, or the directory of a storage file inside one, else
    the file itself without its suffix."""
    path = Path(path)
    if path.is_file() and ((path.parent / "metadata.yaml").exists() or path.parent.name == path.stem):
        return path.parent
    return path.with_suffix("") if path.is_file() else path


def default_output(bag: Path, suffix: str = OUTPUT_SUFFIX) -> Path:
    """One rule for a bag directory and a storage file alike: ``<bag>_evaluation`` next to the bag."""
    root = bag_root(bag)
    return root.parent / f"{root.name}{suffix}"


def prepare_output(folder: Path, force: bool, prog: str, files: Sequence[str] = REPORT_FILES) -> None:
    """Refuse a non-empty folder unless ``force``; with it, remove the old report's files."""
    if folder.exists() and not folder.is_dir():
        raise HexapodError(f"output {folder} exists and is not a folder")
    if folder.exists() and any(folder.iterdir()):
        if not force:
            raise HexapodError(f"output folder {folder} exists and is not empty: give --force to write over it, "
                               f"or -o another folder")
        for pattern in files:
            for old in folder.glob(pattern):
                old.unlink()
    folder.mkdir(parents=True, exist_ok=True)


@dataclass
class SettingsOverrides:
    steady_state_start: Optional[float] = None
    reference_matching: Optional[str] = None
    model_check_stride: Optional[int] = None

    def applied(self, settings: EvaluationSettings) -> EvaluationSettings:
        changes = {}
        if self.steady_state_start is not None:
            if not self.steady_state_start >= 0.0:
                raise HexapodError(f"--steady-state-start must be >= 0 s, got {self.steady_state_start}")
            changes["steady_state_start"] = self.steady_state_start
        if self.reference_matching:
            changes["reference_matching"] = self.reference_matching
        if self.model_check_stride is not None:
            if self.model_check_stride < 1:
                raise HexapodError(f"--model-check-stride must be >= 1, got {self.model_check_stride}")
            changes["model_check_stride"] = self.model_check_stride
        return settings.model_copy(update=changes)  # each option checked above


def bag_parameters(bag: Path, label: str, parameters: Optional[HexapodParameters]) -> tuple[HexapodParameters, RunInfo]:
    """The given parameters, else those the bag recorded, else the shipped ones; and the bag's run info."""
    info = RunInfo.from_custom_data(read_custom_data(bag))
    if parameters is not None:
        return parameters, info
    return info.controller_parameters(label) or load_parameters(), info


def missing_data(run: RunData, metrics: Sequence[str]) -> list[str]:
    """One line per topic that a requested metric needs and the bag does not give."""
    needed = {}
    for metric in metrics:
        for key in METRIC_NEEDS[metric]:
            needed.setdefault(key, []).append(metric)
    problems = []
    for key, wanting in needed.items():
        reason = run.missing(key)
        if reason:
            problems.append(f"{', '.join(wanting)} need {key}: {reason}")
    return problems


def evaluate_bags(
    bags: Sequence[str],
    parameters: Optional[HexapodParameters],
    output: Path,
    labels: Sequence[str] = (),
    topic_overrides=None,
    joint_names: Optional[Sequence[str]] = None,
    overrides: SettingsOverrides = SettingsOverrides(),
    model_check: bool = True,
    make_plots: bool = True,
    partial: bool = False,
    title: str = "Hexapod run evaluation",
    preamble: Sequence[str] = (),
    progress: Optional[Callable[[str], None]] = None,
    workers: int = 1,
) -> tuple[Optional[Path], list[tuple[RunData, RunMetrics]], list[tuple[str, str]]]:
    """Evaluate every bag; (report path or None when nothing was evaluated, results, failures).

    ``parameters`` None: each bag's recorded parameters, else the shipped ones. Without ``partial``
    a bag that lacks data a metric needs is a failure; with it, the report says what is missing.
    ``workers`` > 1 decodes each bag, computes its forward kinematics and model check and draws the
    figures on that many processes (``evaluation.parallel``); the report is the same.
    """
    say = progress or (lambda line: None)
    metrics_wanted = [m for m in METRIC_NEEDS if model_check or m != "model check"]
    pairs, failed, settings = [], [], None
    for index, bag in enumerate(bags):
        label = labels[index] if index < len(labels) else bag_root(Path(bag)).name
        started = time.monotonic()
        size = _size_mb(Path(bag))
        say(f"evaluating {bag} ({size:.0f} MB; ~{max(1.0, size * EXPECTED_SECONDS_PER_MB):.0f} s expected)")
        try:
            bag_params, _ = bag_parameters(Path(bag), label, parameters)
            run = load_run(bag, joint_names or bag_params.ros.joint_names, topic_overrides, label=label, workers=workers)
        except (BagError, HexapodError) as error:
            failed.append((str(bag), _without_path(" ".join(str(error).split()), bag)))
            continue
        say(f"  read and decoded {sum(n for n, _ in run.decoded.values())} messages in {time.monotonic() - started:.1f} s")
        problems = [] if partial else missing_data(run, metrics_wanted)
        if problems:
            failed.append((str(bag), "; ".join(problems) + " (--partial evaluates what the bag has)"))
            continue
        run_settings = overrides.applied(bag_params.recording.evaluation)
        settings = settings or run_settings
        metrics = evaluate_run(run, bag_params, run_settings, model_check=model_check, workers=workers)
        say(f"  metrics{' and model check' if model_check else ''} done at {time.monotonic() - started:.1f} s")
        if metrics.evaluated:
            pairs.append((run, metrics))
        else:
            failed.append((str(bag), "; ".join(run.notes + metrics.notes) or "no usable data"))
    if not pairs:
        return None, pairs, failed
    started = time.monotonic()
    report = write_report(pairs, output, settings, failed, title=title, make_plots=make_plots, preamble=preamble,
                          workers=workers)
    say(f"report{' and figures' if make_plots else ''} written in {time.monotonic() - started:.1f} s")
    return report, pairs, failed


def _without_path(message: str, bag) -> str:
    """The message without a leading "<bag>: ": the caller names the bag once."""
    prefix = f"{bag}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def _size_mb(path: Path) -> float:
    files = path.rglob("*") if path.is_dir() else [path]
    return sum(f.stat().st_size for f in files if f.is_file()) / 1e6 if path.exists() else 0.0
