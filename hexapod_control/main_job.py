"""The main job: both controllers on the thesis 6.5 trajectory, recorded, evaluated, reported.

    python -m hexapod_control.main_job [--duration 30] [--backend embedded|mujoco] [--loop-delay N]
                                       [--transport direct|ros] [--output DIR] [--storage mcap|sqlite3]

For each controller (double loop, computed torque) the simulated robot runs the operational-space
trajectory of thesis 6.5 from home for ``--duration`` simulated seconds at the control rate; the
run is recorded to a rosbag2 bag (MCAP by default), then ``hexapod_evaluate`` reads both bags and
writes ``report.md`` with the plots and a comparison table. Everything lands in one folder,
``<recording.output_directory>/<timestamp>/`` by default, printed at the start and the end.
Progress goes to stderr, one line per simulated second.

The loop closes as it does on the robot: the plant applies each force ``simulation.loop_delay``
periods after the joint state it answers (1 by default, jitter and drops optional;
``simulation/delay.py``), and the controllers compensate the delay as ``controllers.delay_compensation``
says. ``--loop-delay N`` overrides the periods (0 = the old lockstep, where a force acts from the
stamp of its state) through an overlay parameters file written to the output folder, so both
transports and the evaluation read the same parameters. The report states the delay.

Transports (how the stack runs; both write the same topics, types and stamps):

* ``direct`` (default): the ROS-free lockstep loop (``simulation/lockstep.py``) in this process:
  the plant (``simulation.make_plant`` behind its loop delay), the trajectory sampled at each control instant and the
  controller node's logic (``control/loop.py``: supervisor, controller with the ``simulated_plant``
  gain set, armed at the first joint state like ``arm_on_start``, FK pose, diagnostics). Each step's
  record is serialized to the CDR messages the nodes publish and written with the recorder's
  ``BagWriter``.
* ``ros``: the real nodes (``ros/stack.py``'s SimStack: simulator, FK, trajectory, controller)
  plus the recorder node (raw subscriptions) in one executor, talking over DDS. The bags agree
  with ``direct`` to round-off (test_main_job.py checks it), but every message crosses rclpy:
  measured on the shared 2-core machine, ~3 ms of wall time per 1 ms step against ~1.2 ms for
  ``direct`` at load 2.5 (and up to ~25 ms against ~4.5 ms when the machine is saturated).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from hexapod_control.bags import (
    BagWriter,
    diagnostics_cdr,
    effort_cdr,
    joint_state_cdr,
    nanoseconds,
    pose_cdr,
    reference_cdr,
)
from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.errors import HexapodError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import (
    EXTENDS_KEY,
    ROOT_KEY,
    STORAGE_FORMATS,
    default_parameters_path,
    load_parameters,
)
from hexapod_control.model.rotations import quaternion_from_euler_zyx
from hexapod_control.ros.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.simulation import BACKENDS, make_plant
from hexapod_control.simulation.delay import with_loop_delay
from hexapod_control.simulation.lockstep import LockstepLoop, LoopRecord

TRAJECTORY = "operational_space"  # thesis 6.5
TRANSPORTS = ("direct", "ros")
SIMULATION_GAIN_SET = "simulated_plant"  # what SimStack gives its controller node
DEFAULT_DURATION_S = 30.0  # [s] the ~10 s kappa ramp, then two periods of the 0.1 Hz trajectory
PROG = "main_job"
CONTROLLER_NODE_NAME = "hexapod_controller"  # the diagnostics name the controller node gives


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """A line on stderr per simulated second: run, time, wall time, current action."""

    def __init__(self, label: str, duration: float, emit: Callable[[str], None] = _stderr):
        self.label, self.duration, self.emit = label, duration, emit
        self.start = time.monotonic()
        self.next_second = 1

    def update(self, sim_time: float, status: str = "") -> None:
        if sim_time + 1e-9 >= self.next_second:
            self.next_second = int(math.floor(sim_time + 1e-9)) + 1
            wall = time.monotonic() - self.start
            self.emit(f"[{self.label}] t = {sim_time:5.1f} s of {self.duration:g} s, wall {wall:6.1f} s {status}".rstrip())


# ------------------------------------------------------------------------------------------ direct
def run_direct(params_file: str, controller_name: str, backend: str, duration: float, bag_path: Path,
               storage: str, topic_keys, progress: Optional[Progress] = None) -> dict:
    """The lockstep loop without middleware (module docstring); returns a summary dict."""
    parameters = load_parameters(params_file)
    names = parameters.ros
    model = HexapodModel(parameters)  # one model; each component keeps its own FK warm start
    plant = with_loop_delay(make_plant(backend, parameters), parameters.simulation)
    plant.reset(np.full(6, parameters.home_actuator_position))
    # The simulated stacks' gain set: the thesis K_p is unstable on the rigid-body plant without
    # rotor inertia (config: controllers.double_loop.simulated_plant).
    control = ControlLoop(model, controller_name, gain_set=SIMULATION_GAIN_SET, arm_on_start=True)
    loop = LockstepLoop(plant, control, make_trajectory(TRAJECTORY, model))
    keys = set(topic_keys)
    writer = BagWriter(bag_path, storage)
    for key in topic_keys:
        writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
    started = time.monotonic()
    try:
        for record in loop.run(duration):
            write_record(writer, keys, record, names, controller_name)
            if progress:
                progress.update(plant.time, record.step.decision.action.value)
    finally:
        writer.close()
    return {
        "steps": loop.steps,
        "sim_time": plant.time,
        "wall_time": time.monotonic() - started,
        "failure": loop.failure,
        "supervisor": control.supervisor.state.value,
        "counts": dict(writer.counts),
    }


def write_record(writer: BagWriter, keys: set, record: LoopRecord, names, controller_name: str) -> None:
    """The messages the DDS stack's nodes publish for one lockstep step, stamped and logged at t."""
    t, step = record.t, record.step
    log = nanoseconds(t)
    reference = record.reference
    if reference is not None and "reference" in keys:
        writer.write(TOPICS["reference"], log, reference_cdr(t, reference.pose, reference.velocity,
                                                            reference.acceleration, names.base_frame))
    if "joint_states" in keys:
        writer.write(TOPICS["joint_states"], log, joint_state_cdr(t, names.joint_names, step.q, step.qd,
                                                                  record.applied_forces))
    if step.pose is not None and "platform_pose" in keys:
        writer.write(TOPICS["platform_pose"], log,
                     pose_cdr(t, step.pose[:3], quaternion_from_euler_zyx(tuple(step.pose[3:])), names.base_frame))
    if "effort_commands" in keys:
        writer.write(TOPICS["effort_commands"], log, effort_cdr(step.forces))
    if step.diagnostic is not None and "diagnostics" in keys:
        status = step.diagnostic
        writer.write(TOPICS["diagnostics"], log, diagnostics_cdr(
            t, [(int(status.level), f"{CONTROLLER_NODE_NAME}: safety", status.message, status.values)]))


# ------------------------------------------------------------------------------------------ ros
def run_ros(params_file: str, controller_name: str, backend: str, duration: float, bag_path: Path,
            storage: str, topic_keys, progress: Optional[Progress] = None) -> dict:
    """SimStack's nodes + the recorder node in one executor over DDS; returns a summary dict."""
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from hexapod_control.ros.recorder_node import RecorderNode, recorded_topics
    from hexapod_control.ros.stack import DISCOVERY_TIMEOUT_S, STEP_TIMEOUT_S, SimStack

    context = Context()
    rclpy.init(context=context)
    try:
        stack = SimStack(context, params_file, controller_name, backend, TRAJECTORY)
        recorder = None
        try:
            # Sim time: a command is logged at the /clock time of the joint state it answers.
            recorder = RecorderNode(bag_path, recorded_topics(topic_keys), storage, context=context,
                                    parameter_overrides=[Parameter("use_sim_time", value=True)])
            stack.executor.add_node(recorder)
            stack.wait_for_discovery()
            stack.spin_until(
                lambda: all(s.get_publisher_count() >= 1 for s in recorder.subscriptions_by_topic.values()),
                DISCOVERY_TIMEOUT_S, "recorder matched with every recorded topic's publisher",
            )
            steps = round(duration / stack.simulator.plant.dt)
            started = time.monotonic()
            for _ in range(steps):
                if not stack.step():
                    break
                if progress:
                    progress.update(stack.simulator.plant.time)
            joint_topic, effort_topic = TOPICS["joint_states"], TOPICS["effort_commands"]
            published = stack.steps
            stack.spin_until(
                lambda: recorder.counts.get(joint_topic, published) >= published
                and recorder.counts.get(effort_topic, published) >= published,
                STEP_TIMEOUT_S, "the recorder to receive the last messages",
            )
            wall = time.monotonic() - started
            recorder.close()
            return {
                "steps": stack.steps,
                "sim_time": stack.simulator.plant.time,
                "wall_time": wall,
                "failure": stack.simulator.failure,
                "supervisor": stack.controller.supervisor.state.value,
                "counts": recorder.counts,
            }
        finally:
            if recorder is not None:
                recorder.destroy_node()
            stack.destroy()
    finally:
        rclpy.try_shutdown(context=context)


# ------------------------------------------------------------------------------------------ main
def write_loop_delay_overlay(folder: Path, params_file: str, periods: int) -> str:
    """An overlay of ``params_file`` with ``simulation.loop_delay.periods`` set, in ``folder``; its path."""
    overlay = folder / "parameters.yaml"
    overlay.write_text(
        f"# main job --loop-delay {periods}: {params_file} with the loop delay changed\n"
        f"{EXTENDS_KEY}: {json.dumps(str(Path(params_file).resolve()))}\n"
        f"{ROOT_KEY}:\n  simulation:\n    loop_delay:\n      periods: {periods}\n"
    )
    return str(overlay)


def loop_delay_line(parameters) -> str:
    """The report's sentence on the loop delay and its compensation."""
    delay, compensation = parameters.simulation.loop_delay, parameters.controllers.delay_compensation
    line = (f"Loop delay: each force acts {delay.periods} period(s) after the joint state it answers"
            + (f", jitter {delay.jitter_periods:g} period(s)" if delay.jitter_periods else "")
            + (f", {100 * delay.drop_probability:g} % of the commands lost" if delay.drop_probability else "")
            + " (`simulation.loop_delay`). ")
    if compensation.predictor == "none":
        return line + "The controllers do not compensate it (`controllers.delay_compensation.predictor: none`)."
    assumed = (f"estimated online from {compensation.delay_periods} period(s) on" if compensation.estimate
               else f"taken as {compensation.delay_periods} period(s)")
    return line + f"The controllers act on the model's prediction of the state when their force applies, the delay {assumed}."


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hexapod_control.main_job",
        description="Run the simulated hexapod under both controllers on the thesis 6.5 trajectory, record the "
        "runs to bags, evaluate them and write a report with plots.",
    )
    parser.add_argument("--duration", type=float, default=DEFAULT_DURATION_S,
                        help="simulated seconds per controller (default: %(default)s; the kappa ramp takes ~10 s)")
    parser.add_argument("--backend", choices=BACKENDS, default="embedded", help="simulated plant (default: %(default)s)")
    parser.add_argument("--controllers", nargs="+", choices=CONTROLLER_NAMES, default=list(CONTROLLER_NAMES),
                        help="controllers to run (default: both)")
    parser.add_argument("--transport", choices=TRANSPORTS, default="direct",
                        help="direct: lockstep without middleware (fast); ros: the ROS nodes over DDS (default: %(default)s)")
    parser.add_argument("--params", help="parameters YAML (default: config/hexapod.yaml)")
    parser.add_argument("--loop-delay", type=int, metavar="N",
                        help="periods from a joint state to the force answering it acting on the plant "
                        "(default: simulation.loop_delay.periods; 0 = lockstep)")
    parser.add_argument("--storage", choices=STORAGE_FORMATS, help="bag storage (default: recording.storage)")
    parser.add_argument("-o", "--output", help="output folder (default: <recording.output_directory>/<timestamp>)")
    parser.add_argument("--no-model-check", action="store_true", help="skip the inverse-dynamics model check")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if not (math.isfinite(args.duration) and args.duration > 0.0):
        print(f"{PROG}: --duration must be a positive number of seconds, got {args.duration}", file=sys.stderr)
        return 1
    if args.loop_delay is not None and args.loop_delay < 0:
        print(f"{PROG}: --loop-delay must be a whole number of periods >= 0, got {args.loop_delay}", file=sys.stderr)
        return 1
    from hexapod_control.evaluation.cli import evaluate_bags, summary_line

    job_start = time.monotonic()
    try:
        params_file = str(args.params or default_parameters_path())
        parameters = load_parameters(params_file)
        recording = parameters.recording
        storage = args.storage or recording.storage
        folder = Path(args.output) if args.output else Path(recording.output_directory) / datetime.now().strftime("%Y%m%d_%H%M%S")
        if folder.exists() and any(folder.iterdir()):
            raise HexapodError(f"output folder {folder} exists and is not empty")
        (folder / "bags").mkdir(parents=True, exist_ok=True)
        if args.loop_delay is not None:
            params_file = write_loop_delay_overlay(folder, params_file, args.loop_delay)
            parameters = load_parameters(params_file)
    except (HexapodError, OSError) as error:
        print(f"{PROG}: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    print(f"{PROG}: output folder {folder.resolve()}", flush=True)
    runner = run_direct if args.transport == "direct" else run_ros
    bags, labels, preamble, problems = [], [], [], []
    preamble.append(
        f"Main job: thesis 6.5 trajectory, {args.duration:g} s simulated per controller, `{args.backend}` plant, "
        f"`{args.transport}` transport, `{storage}` bags, parameters `{params_file}`."
    )
    preamble.append("")
    preamble.append(loop_delay_line(parameters))
    preamble.append("")
    preamble.append("| controller | steps | simulated [s] | wall [s] | supervisor at the end | problem |")
    preamble.append("|---|---:|---:|---:|---|---|")
    for controller in args.controllers:
        bag = folder / "bags" / controller
        _stderr(f"{PROG}: running {controller} ({args.backend}, {args.transport}) for {args.duration:g} s -> {bag}")
        try:
            summary = runner(params_file, controller, args.backend, args.duration, bag, storage, recording.topics,
                             Progress(controller, args.duration))
        except (HexapodError, OSError) as error:
            problems.append(f"{controller}: {' '.join(str(error).split())}")
            _stderr(f"{PROG}: {controller} failed: {problems[-1]}")
            if bag.exists():
                bags.append(str(bag))  # evaluate what was recorded before the failure
                labels.append(controller)
            continue
        bags.append(str(bag))
        labels.append(controller)
        if summary["failure"]:
            problems.append(f"{controller}: {summary['failure']}")
        preamble.append(
            f"| {controller} | {summary['steps']} | {summary['sim_time']:.3f} | {summary['wall_time']:.1f} | "
            f"{summary['supervisor']} | {summary['failure'] or '-'} |"
        )
        _stderr(f"{PROG}: {controller}: {summary['steps']} steps, {summary['sim_time']:.3f} s simulated in "
                f"{summary['wall_time']:.1f} s wall")
    if not bags:
        print(f"{PROG}: no run was recorded: {'; '.join(problems)}", file=sys.stderr)
        return 1
    _stderr(f"{PROG}: evaluating {len(bags)} bag(s)")
    evaluation_start = time.monotonic()
    report, pairs, failed = evaluate_bags(
        bags, parameters, recording.evaluation, folder, labels, model_check=not args.no_model_check,
        title="Hexapod main job: double loop vs computed torque", preamble=preamble,
        progress=lambda line: _stderr(f"{PROG}: {line}"),
    )
    if report is None:
        print(f"{PROG}: nothing could be evaluated: {'; '.join(f'{b}: {r}' for b, r in failed)}", file=sys.stderr)
        return 1
    _stderr(f"{PROG}: evaluation took {time.monotonic() - evaluation_start:.1f} s")
    for run, metrics in pairs:
        print(summary_line(run, metrics))
    print(f"{PROG}: report {report.resolve()}")
    print(f"{PROG}: done in {time.monotonic() - job_start:.1f} s; results in {folder.resolve()}")
    if problems or failed:
        for line in problems + [f"{b}: {r}" for b, r in failed]:
            print(f"{PROG}: problem: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
