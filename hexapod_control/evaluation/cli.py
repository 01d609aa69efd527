"""Evaluate recorded runs: bags -> report, tables, figures (``hexapod evaluate``).

Also ``hexapod_evaluate`` and ``python -m hexapod_control.evaluation``.

The command line around :func:`hexapod_control.evaluation.evaluate.evaluate_bags`.

What each bag needs, by metric: tracking needs the joint states and the reference, forces the
force commands, speeds the joint states, the model check joint states and force commands. A bag
missing any of them is an error (exit 1, one line naming the topic and what the bag has instead)
unless ``--partial`` asks for whatever can be evaluated.

Exit status 0 when every bag was evaluated, 1 otherwise with one ``error:`` line per problem on
stderr (wrong options, an unreadable bag, missing data, an existing report folder without
``--force``), 2 for usage errors. Progress lines go to stderr too, without ``error:``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Optional

from hexapod_control.bags.topics import parse_topic_overrides
from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.bag import EVALUATED_TOPICS
from hexapod_control.evaluation.evaluate import (
    OUTPUT_SUFFIX,
    SettingsOverrides,
    default_output,
    evaluate_bags,
    prepare_output,
)
from hexapod_control.evaluation.parallel import available_cores
from hexapod_control.evaluation.report import summary_line
from hexapod_control.model.parameters import MATCHING_METHODS, default_parameters_path, load_parameters

PROG = "hexapod_evaluate"


def _shipped_settings() -> tuple[str, str, str, str]:
    """(parameters file, steady-state start, reference matching, model-check stride) of the shipped
    file, for the help texts; placeholders when it cannot be loaded (main() then says why)."""
    try:
        settings = load_parameters().recording.evaluation
        return (str(default_parameters_path()), f"{settings.steady_state_start:g} s", settings.reference_matching,
                str(settings.model_check_stride))
    except HexapodError:
        return "config/hexapod.yaml", "?", "?", "?"


def build_parser(workers_option: bool = True) -> argparse.ArgumentParser:
    """The command's options; without ``workers_option`` for a command that spreads whole bags over
    its own workers (``hexapod evaluate-many``)."""
    keys = ", ".join(EVALUATED_TOPICS)
    shipped, steady, matching, stride = _shipped_settings()
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Evaluate recorded hexapod runs (bags of the main job, the recorder node or `ros2 bag record` on the "
        "robot): tracking errors (forward kinematics of the joint states against the reference) per axis, forces, "
        "saturation, speeds, forward-kinematics failures, travel violations and a model check. Writes report.md, "
        "report.html (self-contained), the tables as CSV and the figures as PNG and SVG.",
        epilog="A bag records its controller, gain set and parameters in its metadata (custom_data hexapod.*) when the "
        "main job or `ros2 bag record --custom-data` wrote them; they are used unless --params is given.",
    )
    parser.add_argument("bags", nargs="+", help="rosbag2 directories, .mcap or .db3 files (one run each)")
    parser.add_argument("-o", "--output", type=Path,
                        help=f"report folder (default: <first bag>{OUTPUT_SUFFIX} next to it, for a bag folder or a "
                        "storage file alike)")
    parser.add_argument("--force", action="store_true", help="write over an existing report folder (default: refuse)")
    parser.add_argument("--label", action="append", default=[], help="run name in the report, once per bag (default: bag name)")
    parser.add_argument("--params", type=Path,
                        help="parameters YAML: model, limits, joint names, evaluation settings (default: the parameters "
                        f"recorded in each bag, else {shipped})")
    parser.add_argument("--joint-names", nargs=6, metavar="NAME",
                        help="the bag's joint names of q1..q6, in that order (default: ros.joint_names of the parameters, "
                        "slider_0 .. slider_5)")
    parser.add_argument("--topic", action="append", default=[], metavar="KEY=NAME",
                        help=f"topic name for a key, once per key; KEY is one of {keys}; e.g. "
                        "joint_states=/robot/joint_states (default: the names of conventions.py TOPICS)")
    parser.add_argument("--partial", action="store_true",
                        help="evaluate what a bag allows when topics are missing (default: missing data is an error)")
    parser.add_argument("--steady-state-start", type=float, metavar="S",
                        help="steady-state window start after the first reference [s] (default: "
                        f"recording.evaluation.steady_state_start = {steady})")
    parser.add_argument("--reference-matching", choices=MATCHING_METHODS,
                        help="reference at each joint-state stamp: interpolate between neighbours or take the latest "
                        f"(default: recording.evaluation.reference_matching = {matching})")
    parser.add_argument("--model-check-stride", type=int, metavar="N",
                        help=f"inverse dynamics at every N-th grid point (default: recording.evaluation.model_check_stride = {stride})")
    parser.add_argument("--no-model-check", action="store_true", help="skip the inverse-dynamics model check")
    parser.add_argument("--no-plots", action="store_true", help="report and tables without figures")
    if workers_option:
        parser.add_argument("--workers", type=int, metavar="N", default=available_cores(),
                            help="processes that decode a bag, compute its model and draw the figures; the report is "
                            "the same for any N (default: the CPUs this process may use, %(default)s here)")
    return parser


def _stderr(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.label and len(args.label) != len(args.bags):
        _stderr(f"error: give --label once per bag ({len(args.bags)}), or not at all")
        return 1
    try:
        parameters = load_parameters(args.params) if args.params else None
        overrides = SettingsOverrides(args.steady_state_start, args.reference_matching, args.model_check_stride)
        overrides.applied((parameters or load_parameters()).recording.evaluation)  # check the options now
        if args.workers < 1:
            raise HexapodError(f"--workers must be >= 1, got {args.workers}")
        topics = parse_topic_overrides(args.topic)
        output = args.output or default_output(Path(args.bags[0]))
        prepare_output(output, args.force, PROG)
        report, pairs, failed = evaluate_bags(
            args.bags, parameters, output, args.label, topics, args.joint_names, overrides,
            model_check=not args.no_model_check, make_plots=not args.no_plots, partial=args.partial, progress=_stderr,
            workers=args.workers,
        )
    except (HexapodError, OSError) as error:
        _stderr("error: " + " ".join(str(error).split()))
        return 1
    for bag, reason in failed:
        _stderr(f"error: {bag}: {reason}")
    if report is None:
        if output.exists() and not any(output.iterdir()):
            shutil.rmtree(output)  # made for nothing
        return 1
    for run, metrics in pairs:
        print(summary_line(run, metrics))
    print(f"report: {report} (and {report.with_suffix('.html').name})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
