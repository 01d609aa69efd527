"""Identify the drives from bags: ``hexapod identify BAG... -o overlay.yaml``.

Also ``hexapod_identify`` and ``python -m hexapod_control.identification``.

Estimates each slider's reflected inertia, viscous and Coulomb friction, and where the data
support them a lead screw's Coulomb asymmetry, Stribeck hump and viscous ripple (and with
``--payload`` a mass on the platform) from the joint states (with their effort, when recorded) and
force commands of the bags, on the rigid-body model of ``--params``; writes the overlay (only the identified entries differ from ``--params``)
and a report with figures. A parameter the bags cannot determine is reported as not identifiable,
with the reason, and keeps the base file's value.

Exit status: 0 with the overlay written, 2 when nothing was identifiable (report written, no
overlay), 1 with one line on stderr when the bags or options cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from hexapod_control.bags.topics import parse_topic_overrides
from hexapod_control.errors import HexapodError
from hexapod_control.identification import identify_bags
from hexapod_control.identification.regression import PAYLOAD
from hexapod_control.identification.report import write_overlay, write_report
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.options import add_output, add_params, add_topic

PROG = "hexapod_identify"
NOTHING_IDENTIFIED = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Identify the drives of the hexapod's sliders (reflected inertia, viscous and Coulomb "
        "friction, a lead screw's asymmetry, Stribeck hump and ripple where the data support them, optionally "
        "a payload) from recorded bags; write a parameters overlay and a report (doc/identification.md).",
    )
    parser.add_argument("bags", nargs="+", help="rosbag2 directories, .mcap or .db3 files with joint states and force commands")
    add_output(parser, required=True, help="overlay to write, e.g. config/lab_drives.yaml")
    add_params(parser, default=str(default_parameters_path()),
               help="parameters file whose rigid-body model the fit uses and the overlay extends (default: %(default)s)")
    parser.add_argument("--report", help="report folder (default: <overlay without .yaml>_report next to the overlay)")
    parser.add_argument("--payload", action="store_true", help="also estimate a mass added to the platform [kg]")
    add_topic(parser,
              help="topic name for a key of ros_conventions.TOPICS, e.g. joint_states=/robot/joint_states")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    overlay = Path(args.output)
    report_folder = Path(args.report) if args.report else overlay.with_name(overlay.stem + "_report")
    try:
        parameters = load_parameters(args.params)
        identified = identify_bags(args.bags, parameters, args.payload, parse_topic_overrides(args.topic))
        result = identified.result
        for bag, why in identified.skipped:
            print(f"{PROG}: skipped {bag}: {' '.join(why.split())}", file=sys.stderr)
        if result is None:
            raise HexapodError("no bag holds usable joint states and force commands")
        written = write_overlay(overlay, identified, parameters) if result.any_identified else None
        report = write_report(report_folder, identified, parameters, args.bags, written)
    except (HexapodError, OSError) as error:
        print(f"{PROG}: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    names = parameters.ros.joint_names
    for estimate in result.estimates:
        where = "platform" if estimate.name == PAYLOAD else names[estimate.slider]
        if estimate.identified:
            print(f"{where} {estimate.name}: {estimate.value:.6g} +- {estimate.half_width:.2g} {estimate.unit}")
        else:
            print(f"{where} {estimate.name}: not identifiable: {estimate.reason}")
    print(f"residual RMS [N] before {' '.join(f'{v:.3g}' for v in result.rms_before)}, "
          f"after {' '.join(f'{v:.3g}' for v in result.rms_after)}")
    print(f"report: {report}")
    if written is None:
        print(f"{PROG}: nothing identifiable: no overlay written", file=sys.stderr)
        return NOTHING_IDENTIFIED
    print(f"overlay: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
