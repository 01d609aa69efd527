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
from hexapod_control.evaluation.decode import reference_point
from hexapod_control.evaluation.metrics import match_reference
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import (
    MATCHING_METHODS,
    HexapodParameters,
    default_parameters_path,
    load_parameters,
)
from hexapod_control.options import add_output, add_params, add_topic


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


def node_times(stamp_ns: np.ndarray) -> np.ndarray:
    """Stamps [ns] as a node reads them: sec + 1e-9 nanosec, the float operations of time_from_stamp."""
    sec, nanosec = np.divmod(np.asarray(stamp_ns, dtype=np.int64), 1_000_000_000)
    return sec.astype(np.float64) + 1e-9 * nanosec.astype(np.float64)


def replay_run(run: RunData, parameters: HexapodParameters, controller_name: str, matching: str,
               gain_set: str = "robot") -> ReplayResult:
    """Feed the run through the controller node's logic; raises BagError when there is nothing to replay.

    A fresh :class:`ControlLoop` (supervisor and controller, armed at the first valid joint state as
    the simulated stacks arm) takes, for each recorded joint state in stamp order, the references
    stamped up to it and then the joint state, exactly as the node would have. With ``latest``
    matching and the references' message numbers loaded (``load_run(..., replay=True)``)
    the references go in as received (message form, each once); otherwise (``interpolate``) the
    reference matched at each joint-state stamp is handed over as a trajectory sample.
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
    # The node's clock: a stamp read as sec + 1e-9 nanosec (conventions.time_from_stamp), not the
    # seconds from the run's origin, so that every time the controller sees is the recorded one.
    joint_times = node_times(run.joint_stamp_ns)
    as_received = matching == "latest" and len(run.ref_points) == run.ref_t.size
    reference_times, fed = node_times(run.ref_stamp_ns), 0
    for k, t in enumerate(joint_times.tolist()):
        if as_received:
            # Every reference stamped up to this joint state, once and in order, in its message form:
            # what the node had received when the joint state arrived.
            while fed < run.ref_stamp_ns.size and run.ref_stamp_ns[fed] <= run.joint_stamp_ns[k]:
                stamp = float(reference_times[fed])
                control.reference(stamp, stamp, reference_point(run.ref_points[fed]))
                fed += 1
        elif valid[k]:
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


REPLAY_SUFFIX = "_replay"
REPLAY_FILES = ("replay_*.md", "replay_*.html", "replay_*.png", "replay_*.svg")


def write_replay_report(result: ReplayResult, run: RunData, folder: Path, params_source: str, make_plot: bool = True) -> Path:
    """replay_<run>_<controller>.md and .html (with the figure) in ``folder``; returns the .md."""
    from hexapod_control.evaluation import plots
    from hexapod_control.evaluation.document import Document, Figure, Table
    from hexapod_control.evaluation.report import slug

    folder.mkdir(parents=True, exist_ok=True)
    name = f"replay_{slug(run.label)}_{result.controller}"
    document = Document(f"Replay of {run.label} through `{result.controller}`")
    document.bullets([
        f"bag: `{run.path}`; parameters: `{params_source}`; gain set `{result.gain_set}`; reference matched by `{result.matching}`",
        *(f"the bag records: {line}" for line in run.run_info.described()),
        f"joint states replayed: {result.t.size}; compared with a recorded command: {int(result.compared.sum())}",
        "controller statuses: " + ", ".join(f"{s} {n}" for s, n in result.statuses.most_common()),
        *(note for note in run.notes + result.notes),
    ])
    rms, peak = result.rms_difference, result.max_difference
    document.add(Table(f"Replayed - recorded force per actuator ({result.controller}).",
                       ["actuator", "RMS difference [N]", "max abs difference [N]"],
                       [[k + 1, float(rms[k]), float(peak[k])] for k in range(6)]))
    if make_plot and result.compared.any():
        document.add(Figure(
            f"Recorded forces of {run.label} and the forces of `{result.controller}` replayed on its joint states, "
            "with their difference below.",
            plots.plot_pairs_with_difference(
                result.t[result.compared], result.recorded[result.compared], result.replayed[result.compared],
                ("recorded", f"replayed ({result.controller})"), rms,
                f"Replay of {run.label} through {result.controller}", folder / name, "recorded - replayed")))
    markdown, _ = document.write(folder, name)
    return markdown


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hexapod_replay",
        description="Feed a bag's joint states and references through a controller offline, as the controller node "
        "would have answered them, and compare its forces with the recorded ones (RMS difference per actuator, "
        "figure, report.md and .html). By default the controller, gain set and parameters the bag records are used, "
        "so a main-job bag replays to its own forces exactly.",
    )
    parser.add_argument("bag", help="rosbag2 directory, .mcap or .db3 file")
    parser.add_argument("--controller", choices=CONTROLLER_NAMES,
                        help="controller to replay (default: the bag's custom_data hexapod.controller; required without it)")
    parser.add_argument("--gain-set", choices=GAIN_SETS,
                        help="robot: the hardware gains; simulated_plant: those of the simulated stacks "
                        "(default: the bag's hexapod.gain_set, else robot)")
    add_params(parser, type=Path,
               help="parameters YAML with the controller gains (default: the parameters recorded in the bag, "
                        f"else {default_parameters_path()})")
    add_output(parser, type=Path, help=f"output folder (default: <bag>{REPLAY_SUFFIX} next to the bag)")
    parser.add_argument("--force", action="store_true", help="write over an existing output folder (default: refuse)")
    parser.add_argument("--joint-names", nargs=6, metavar="NAME",
                        help="the bag's joint names of q1..q6 (default: ros.joint_names of the parameters)")
    add_topic(parser,
              help="topic name for a key (joint_states, reference, effort_commands, ...), e.g. "
                        "joint_states=/robot/joint_states (default: the names of conventions.py TOPICS)")
    parser.add_argument("--reference-matching", choices=MATCHING_METHODS,
                        help="reference at each joint-state stamp (default: recording.replay.reference_matching, latest: "
                        "what the controller node acts on)")
    parser.add_argument("--no-plot", action="store_true", help="report without the figure")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    from hexapod_control.evaluation.evaluate import bag_parameters, default_output, prepare_output

    args = build_parser().parse_args(argv)
    bag = Path(args.bag)
    try:
        parameters, info = bag_parameters(bag, bag.name, load_parameters(args.params) if args.params else None)
        controller = args.controller or info.controller
        if controller is None:
            raise HexapodError(f"{bag} does not record its controller (custom_data hexapod.controller): give --controller")
        if controller not in CONTROLLER_NAMES:
            raise HexapodError(f"{bag} records controller {controller!r}, not one of {list(CONTROLLER_NAMES)}: give --controller")
        gain_set = args.gain_set or info.gain_set or "robot"
        matching = args.reference_matching or parameters.recording.replay.reference_matching
        folder = args.output or default_output(bag, REPLAY_SUFFIX)
        prepare_output(folder, args.force, "hexapod_replay", REPLAY_FILES)
        run = load_run(bag, args.joint_names or parameters.ros.joint_names, parse_topic_overrides(args.topic),
                       replay=True)
        result = replay_run(run, parameters, controller, matching, gain_set)
        if not result.compared.any():
            raise BagError(f"{run.label}: no replayed joint state has a recorded force command to compare with")
        report = write_replay_report(result, run, folder, parameters.source, make_plot=not args.no_plot)
    except (BagError, HexapodError, OSError) as error:
        print(f"hexapod_replay: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    rms = result.rms_difference
    print(f"replay of {run.label} through {controller} (gain set {gain_set}, parameters {parameters.source}): "
          f"{int(result.compared.sum())} samples compared")
    print("RMS(replayed - recorded) per actuator [N]: " + ", ".join(f"{v:.4g}" for v in rms))
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
