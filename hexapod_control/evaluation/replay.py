"""Replay: a bag's recorded joint states and references through a controller, offline.

The controller is driven exactly as the controller node drives it: through the node's ROS-free
logic, :class:`hexapod_control.control.loop.ControlLoop` (safety supervisor, arming at the first
valid joint state, the controller's ``update`` once per joint state in stamp order), so a lab can
try a gain or controller change on yesterday's bags:
``hexapod_replay yesterday_bag --controller computed_torque --params my_gains.yaml``.

The replayed force at a joint state is compared with the recorded command answering that same
joint state (see evaluation.bag for how commands are tied to joint states); joint states without
one are not compared. Closed-loop effects are not replayed: the recorded motion is what the
*recorded* forces produced, so the comparison shows how the new controller would have answered
the same measurements, sample by sample.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from hexapod_control.bags import BagError
from hexapod_control.bags.topics import parse_topic_overrides
from hexapod_control.control.controllers import CONTROLLER_NAMES, GAIN_SETS
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectories import Reference
from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.bag import RunData, load_run
from hexapod_control.evaluation.metrics import match_reference
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import MATCHING_METHODS, HexapodParameters, load_parameters


@dataclass
class ReplayResult:
    label: str
    controller: str
    matching: str
    t: np.ndarray  # joint-state stamps replayed [s]
    replayed: np.ndarray  # (N, 6) [N]
    recorded: np.ndarray  # (N, 6) [N], NaN where no recorded command answers the joint state
    statuses: Counter
    notes: list[str] = field(default_factory=list)
    gain_set: str = "robot"

    @property
    def compared(self) -> np.ndarray:
        return np.all(np.isfinite(self.recorded), axis=1)

    @property
    def rms_difference(self) -> np.ndarray:
        d = self.replayed[self.compared] - self.recorded[self.compared]
        return np.sqrt(np.mean(d**2, axis=0)) if d.size else np.full(6, np.nan)

    @property
    def max_difference(self) -> np.ndarray:
        d = self.replayed[self.compared] - self.recorded[self.compared]
        return np.max(np.abs(d), axis=0) if d.size else np.full(6, np.nan)


def replay_run(run: RunData, parameters: HexapodParameters, controller_name: str, matching: str,
               gain_set: str = "robot") -> ReplayResult:
    """Feed the run through the controller node's logic; raises BagError when there is nothing to replay.

    A fresh :class:`ControlLoop` (supervisor and controller, armed at the first valid joint state as
    the simulated stacks arm) takes, for each recorded joint state in stamp order, the reference
    matched at its stamp and then the joint state, exactly as the node would have.
    """
    if not run.has_joint_states:
        raise BagError(f"{run.label}: fewer than 2 joint states: nothing to replay")
    if not run.has_references:
        raise BagError(f"{run.label}: no references: nothing to replay")
    (pose, velocity, acceleration), valid = match_reference(
        matching, run.ref_t, [run.ref_pose, run.ref_velocity, run.ref_acceleration], run.joint_t
    )
    notes = []
    unmatched = int(np.count_nonzero(~valid))
    if unmatched:
        notes.append(f"{unmatched} joint state(s) without a matched reference ({matching}): answered with the last one")
    control = ControlLoop(HexapodModel(parameters), controller_name, gain_set, arm_on_start=True)
    replayed = np.zeros((run.joint_t.size, 6))
    answered = np.zeros(run.joint_t.size, dtype=bool)
    statuses = Counter()
    for k, t in enumerate(run.joint_t.tolist()):
        if valid[k]:
            control.reference_sample(t, Reference(t, pose[k], velocity[k], acceleration[k]))
        record = control.joint_state(t, t, control.joint_names, run.q[k], run.qd[k])
        if record is None:
            continue  # a repeated stamp: the node answered it already
        answered[k] = True
        replayed[k] = record.forces
        control_output = record.decision.control
        statuses[control_output.status.value if control_output is not None else record.decision.action.value] += 1
    if control.last_arm is None or not control.last_arm[0]:
        raise BagError(f"{run.label}: the controller could not start from the recorded joint states: "
                       f"{control.last_arm[1] if control.last_arm else 'no valid joint state'}")
    indices = np.flatnonzero(answered)
    replayed = replayed[indices]
    # The recorded command answering joint state k carries k's stamp exactly (same integer ns).
    recorded = np.full((indices.size, 6), np.nan)
    t = run.joint_t[indices]
    position = np.searchsorted(run.effort_t, t)
    hit = position < run.effort_t.size
    hit[hit] &= run.effort_t[position[hit]] == t[hit]
    recorded[hit] = run.forces[position[hit]]
    missing = int(np.count_nonzero(~hit))
    if missing:
        notes.append(f"{missing} replayed joint state(s) have no recorded force command answering them: not compared")
    return ReplayResult(run.label, controller_name, matching, t, replayed, recorded, statuses, notes, gain_set)


def write_replay_report(result: ReplayResult, run: RunData, folder: Path, params_source: str, make_plot: bool = True) -> Path:
    from hexapod_control.evaluation import plots
    from hexapod_control.evaluation.report import _f, _slug

    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"# Replay of {run.label} through `{result.controller}`", ""]
    lines.append(f"- bag: `{run.path}`; parameters: `{params_source}` (gain set `{result.gain_set}`); reference matched by `{result.matching}`")
    lines.append(f"- joint states replayed: {result.t.size}; compared with a recorded command: {int(result.compared.sum())}")
    lines.append("- controller statuses: " + ", ".join(f"{s} {n}" for s, n in result.statuses.most_common()))
    lines.extend(f"- {note}" for note in run.notes + result.notes)
    lines.append("")
    lines.append("| actuator | RMS(replayed - recorded) [N] | max abs difference [N] |")
    lines.append("|---|---:|---:|")
    rms, peak = result.rms_difference, result.max_difference
    for k in range(6):
        lines.append(f"| q{k} | {_f(rms[k])} | {_f(peak[k])} |")
    lines.append("")
    if make_plot and result.compared.any():
        figure = plots.plot_force_pairs(
            result.t[result.compared], result.recorded[result.compared], result.replayed[result.compared],
            ("recorded", f"replayed ({result.controller})"), rms,
            f"{run.label}: recorded forces vs replay through {result.controller}",
            folder / f"replay_{_slug(run.label)}_{result.controller}.png",
        )
        lines.append(f"![replay]({figure.name})")
        lines.append("")
    path = folder / f"replay_{_slug(run.label)}_{result.controller}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hexapod_replay",
        description="Feed a bag's joint states and references through a controller offline and compare its forces "
        "with the recorded ones (RMS difference per actuator, plot).",
    )
    parser.add_argument("bag", help="rosbag2 directory, .mcap or .db3 file")
    parser.add_argument("--controller", required=True, choices=CONTROLLER_NAMES)
    parser.add_argument("--params", help="parameters YAML with the controller gains (default: config/hexapod.yaml)")
    parser.add_argument("-o", "--output", help="output folder (default: <bag>_replay next to the bag)")
    parser.add_argument("--topic", action="append", default=[], metavar="KEY=NAME",
                        help="topic name for a key of ros_conventions.TOPICS, e.g. joint_states=/robot/joint_states")
    parser.add_argument("--reference-matching", choices=MATCHING_METHODS,
                        help="reference at each joint-state stamp (default: recording.replay.reference_matching, 'latest')")
    parser.add_argument("--gain-set", choices=GAIN_SETS, default="robot",
                        help="robot: the hardware gains; simulated_plant: those the simulated stacks use (default: %(default)s)")
    parser.add_argument("--no-plot", action="store_true", help="report only")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        parameters = load_parameters(args.params)
        matching = args.reference_matching or parameters.recording.replay.reference_matching
        run = load_run(args.bag, parameters.ros.joint_names, parse_topic_overrides(args.topic))
        result = replay_run(run, parameters, args.controller, matching, args.gain_set)
        if not result.compared.any():
            raise BagError(f"{run.label}: no replayed joint state has a recorded force command to compare with")
        bag = Path(args.bag)
        folder = Path(args.output) if args.output else bag.parent / f"{bag.name}_replay"
        report = write_replay_report(result, run, folder, parameters.source, make_plot=not args.no_plot)
    except (BagError, HexapodError, OSError) as error:
        print(f"hexapod_replay: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    rms = result.rms_difference
    print(f"replay of {run.label} through {args.controller}: {int(result.compared.sum())} samples compared")
    print("RMS(replayed - recorded) per actuator [N]: " + ", ".join(f"{v:.4g}" for v in rms))
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
