"""Evaluate many bags at once, one bag per Ray task, and compare them in one report.

    hexapod_evaluate_many BAG [BAG ...] -o DIR [--address HOST:PORT] [--workers N] [hexapod_evaluate's options]
    python -m hexapod_control.scale.evaluate ...

Each task reads, decodes and evaluates one bag and writes that bag's own report with its figures
(``DIR/<label>/report.md``), so decoding, metrics and figures all run in parallel; the tasks send
back only their tables. ``DIR/report.md`` (and .html) then compares the runs: the tracking and
actuator tables of every bag in one, a link to each bag's report, the bags that failed. The options
are ``hexapod_evaluate``'s (evaluation/cli.py), plus the engine's.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hexapod_control.bags.topics import parse_topic_overrides
from hexapod_control.errors import HexapodError
from hexapod_control.evaluation import cli
from hexapod_control.evaluation import evaluate as bag_evaluation
from hexapod_control.evaluation.document import Document, Table, write_table_files
from hexapod_control.evaluation.report import actuator_table, slug, summary_line, tracking_table
from hexapod_control.model.parameters import load_parameters
from hexapod_control.scale.engine import Engine, Failure, Progress
from hexapod_control.scale.sweep import add_engine_arguments

PROG = "hexapod_evaluate_many"


@dataclass
class BagResult:
    """What a task sends back: one bag's table rows, its summary line and report, or why it failed."""

    bag: str
    label: str
    report: str | None = None
    summary: str = ""
    tables: dict = field(default_factory=dict)  # "tracking", "actuators" -> Table of this bag
    failures: list = field(default_factory=list)  # (bag, reason)


def evaluate_one(item: tuple[str, str], options: dict) -> BagResult:
    """One bag's evaluation and report in ``options["output"]/<label>`` (module doc)."""
    bag, label = item
    result = BagResult(bag, label)
    parameters = load_parameters(options["params"]) if options["params"] else None
    try:
        report, pairs, failed = bag_evaluation.evaluate_bags(
            [bag], parameters, Path(options["output"]) / slug(label), [label], options["topics"],
            options["joint_names"], options["overrides"], model_check=options["model_check"],
            make_plots=options["make_plots"], partial=options["partial"],
        )
    except (HexapodError, OSError) as error:
        result.failures = [(bag, " ".join(str(error).split()))]
        return result
    result.failures = failed
    if report is not None:
        result.report, result.summary = str(report), summary_line(*pairs[0])
        result.tables = {"tracking": tracking_table(pairs), "actuators": actuator_table(pairs)}
    return result


def comparison_report(results: list[BagResult], output: Path, wall: float, cpus: int) -> Path:
    document = Document("Hexapod runs compared")
    evaluated = [r for r in results if r.report]
    document.paragraph(f"{len(results)} bag(s) evaluated in parallel ({cpus} Ray CPU(s), {wall:.1f} s); each bag's own "
                       "report, with its figures, is linked below.")
    document.bullets([f"not evaluated: `{bag}`: {reason}" for r in results for bag, reason in r.failures])
    if evaluated:
        for kind in ("tracking", "actuators"):
            first = evaluated[0].tables[kind]
            table = Table(first.caption, first.header, [row for r in evaluated for row in r.tables[kind].rows])
            document.add(table)
            write_table_files(table, output / f"table_{table.number}_{kind}")
        document.heading(2, "Reports of the runs")
        document.bullets([f"{r.label}: `{Path(r.report).relative_to(output.resolve())}` ({r.summary})" for r in evaluated])
    markdown, _ = document.write(output)
    return markdown


def build_parser() -> argparse.ArgumentParser:
    parser = cli.build_parser(workers_option=False)  # here --workers are Ray's, one bag each
    parser.prog = PROG
    parser.description = __doc__.splitlines()[0]
    add_engine_arguments(parser)
    return parser


def _stderr(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    labels = args.label or [bag_evaluation.bag_root(Path(bag)).name for bag in args.bags]
    if len(labels) != len(args.bags) or len(set(map(slug, labels))) != len(labels):
        _stderr("error: give --label once per bag, each distinct (the bags' names must differ otherwise)")
        return 1
    try:
        base = load_parameters(args.params) if args.params else load_parameters()
        overrides = bag_evaluation.SettingsOverrides(args.steady_state_start, args.reference_matching, args.model_check_stride)
        overrides.applied(base.recording.evaluation)  # check the options now
        output = args.output or bag_evaluation.default_output(Path(args.bags[0]), "_comparison")
        bag_evaluation.prepare_output(output, args.force, PROG, (*bag_evaluation.REPORT_FILES, *(f"{slug(label)}/*" for label in labels)))
        options = {"params": str(args.params) if args.params else None, "output": str(output.resolve()),
                   "topics": parse_topic_overrides(args.topic), "joint_names": args.joint_names, "overrides": overrides,
                   "model_check": not args.no_model_check, "make_plots": not args.no_plots, "partial": args.partial}
        started = time.monotonic()
        results: list[BagResult | None] = [None] * len(args.bags)
        with Engine(args.address, args.workers) as engine:
            progress = Progress("bags", len(args.bags), _stderr)
            for index, result in engine.map(evaluate_one, list(zip(args.bags, labels)), options):
                if isinstance(result, Failure):
                    result = BagResult(args.bags[index], labels[index], failures=[(args.bags[index], result.error)])
                results[index] = result
                progress.update(failed=bool(result.failures))
            cpus = engine.cpus
        report = comparison_report(results, output, time.monotonic() - started, cpus)
    except (HexapodError, OSError) as error:
        _stderr("error: " + " ".join(str(error).split()))
        return 1
    for result in results:
        for bag, reason in result.failures:
            _stderr(f"error: {bag}: {reason}")
        if result.summary:
            print(result.summary)
    print(f"report: {report} (and {report.with_suffix('.html').name})")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
