"""``hexapod_evaluate`` (also ``python -m hexapod_control.evaluation``): bags -> report.md + PNGs.

Exit status 0 when at least one bag was evaluated (the report lists what was missing or skipped),
1 with one line on stderr when nothing could be evaluated or the options are wrong, 2 for usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from hexapod_control.bags import BagError
from hexapod_control.bags.topics import parse_topic_overrides
from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.bag import RunData, load_run
from hexapod_control.evaluation.metrics import RunMetrics, evaluate_run
from hexapod_control.evaluation.report import write_report
from hexapod_control.model.parameters import (
    MATCHING_METHODS,
    EvaluationSettings,
    HexapodParameters,
    load_parameters,
)

PROG = "hexapod_evaluate"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Evaluate recorded hexapod runs: tracking errors (FK of the joint states vs the reference), "
        "forces, saturation, speeds, FK failures and a model check; writes report.md with PNG plots.",
    )
    parser.add_argument("bags", nargs="+", help="rosbag2 directories, .mcap or .db3 files (one run each)")
    parser.add_argument("-o", "--output", help="report folder (default: <first bag's folder>/evaluation)")
    parser.add_argument("--label", action="append", default=[], help="run name in the report, once per bag (default: bag name)")
    parser.add_argument("--params", help="parameters YAML: model, limits, joint names, recording settings (default: config/hexapod.yaml)")
    parser.add_argument("--topic", action="append", default=[], metavar="KEY=NAME",
                        help="topic name for a key of ros_conventions.TOPICS, e.g. joint_states=/robot/joint_states")
    parser.add_argument("--steady-state-start", type=float, metavar="S",
                        help="steady-state window start after the first reference [s] (default: recording.evaluation)")
    parser.add_argument("--reference-matching", choices=MATCHING_METHODS,
                        help="reference at each joint-state stamp (default: recording.evaluation.reference_matching)")
    parser.add_argument("--model-check-stride", type=int, metavar="N", help="inverse dynamics at every N-th sample")
    parser.add_argument("--no-model-check", action="store_true", help="skip the inverse-dynamics model check")
    parser.add_argument("--no-plots", action="store_true", help="report without figures")
    return parser


def evaluation_settings(args, settings: EvaluationSettings) -> EvaluationSettings:
    changes = {}
    if args.steady_state_start is not None:
        if not args.steady_state_start >= 0.0:
            raise HexapodError(f"--steady-state-start must be >= 0 s, got {args.steady_state_start}")
        changes["steady_state_start"] = args.steady_state_start
    if args.reference_matching:
        changes["reference_matching"] = args.reference_matching
    if args.model_check_stride is not None:
        if args.model_check_stride < 1:
            raise HexapodError(f"--model-check-stride must be >= 1, got {args.model_check_stride}")
        changes["model_check_stride"] = args.model_check_stride
    return settings.model_copy(update=changes)  # each option checked above


def evaluate_bags(
    bags: Sequence[str],
    parameters: HexapodParameters,
    settings: EvaluationSettings,
    output: Path,
    labels: Sequence[str] = (),
    topic_overrides=None,
    model_check: bool = True,
    make_plots: bool = True,
    title: str = "Hexapod run evaluation",
    preamble: Sequence[str] = (),
    progress: Optional[Callable[[str], None]] = None,
) -> tuple[Optional[Path], list[tuple[RunData, RunMetrics]], list[tuple[str, str]]]:
    """Evaluate every bag; (report path or None when nothing was evaluated, results, failures)."""
    joint_names = parameters.ros.joint_names
    pairs, failed = [], []
    for index, bag in enumerate(bags):
        label = labels[index] if index < len(labels) else None
        if progress:
            progress(f"evaluating {bag}")
        try:
            run = load_run(bag, joint_names, topic_overrides, label=label)
        except BagError as error:
            failed.append((str(bag), str(error)))
            continue
        metrics = evaluate_run(run, parameters, settings, model_check=model_check)
        if metrics.evaluated:
            pairs.append((run, metrics))
        else:
            reasons = "; ".join(run.notes + metrics.notes) or "no usable data"
            failed.append((str(bag), reasons))
    if not pairs:
        return None, pairs, failed
    report = write_report(pairs, output, settings, failed, title=title, make_plots=make_plots, preamble=preamble)
    return report, pairs, failed


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.label and len(args.label) != len(args.bags):
        print(f"{PROG}: give --label once per bag ({len(args.bags)}), or not at all", file=sys.stderr)
        return 1
    try:
        parameters = load_parameters(args.params)
        settings = evaluation_settings(args, parameters.recording.evaluation)
        overrides = parse_topic_overrides(args.topic)
        first = Path(args.bags[0])
        output = Path(args.output) if args.output else first.parent / "evaluation"
        report, pairs, failed = evaluate_bags(
            args.bags, parameters, settings, output, args.label, overrides,
            model_check=not args.no_model_check, make_plots=not args.no_plots,
        )
    except (HexapodError, OSError) as error:
        print(f"{PROG}: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    if report is None:
        reasons = "; ".join(f"{bag}: {reason}" for bag, reason in failed)
        print(f"{PROG}: nothing could be evaluated: {' '.join(reasons.split())}", file=sys.stderr)
        return 1
    for bag, reason in failed:
        print(f"{PROG}: not evaluated: {bag}: {' '.join(reason.split())}", file=sys.stderr)
    for run, metrics in pairs:
        print(summary_line(run, metrics))
    print(f"report: {report}")
    return 0


def summary_line(run: RunData, m: RunMetrics) -> str:
    """One line per run for the terminal."""
    from hexapod_control.evaluation.report import DEG, MM, _f

    parts = [run.label]
    for name, stats, scale, unit in (
        ("e_p", m.position_whole, MM, "mm"), ("e_p steady", m.position_steady, MM, "mm"),
        ("e_o", m.orientation_whole, DEG, "deg"), ("e_o steady", m.orientation_steady, DEG, "deg"),
    ):
        if stats is not None:
            parts.append(f"{name} RMS {_f(stats.rms_norm * scale)} {unit} max {_f(stats.max_norm * scale)} {unit}")
    if m.forces is not None:
        parts.append(f"peak force {_f(float(m.forces.peak.max()))} N, saturated {_f(m.forces.saturation_time_any, 3)} s")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
