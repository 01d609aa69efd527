"""The main job: the controllers on a thesis trajectory, each run recorded to a bag, evaluated, reported.

    python -m hexapod_control.main_job [--duration 30] [--trajectory operational_space|joint_space]
        [--plant embedded|mujoco] [--model-mismatch | --plant-params FILE] [--sensor-noise STD]
        [--loop-delay N] [--controllers ...] [--transport direct|ros] [--output DIR] [--storage mcap|sqlite3]

For each controller (double loop, computed torque) the simulated robot follows the trajectory
(default: the operational-space trajectory of thesis 6.5) from home for ``--duration`` simulated
seconds at the control rate; the run is recorded to a rosbag2 bag (MCAP by default) whose metadata
(custom_data, ``bags.run_info``) names the controller, its gain set, the parameters (the whole
validated tree), the plant, the trajectory, the loop delay and the sensor noise, so that
``hexapod_replay`` reproduces the recorded forces and ``hexapod_evaluate`` uses the same model by
default. Then the bags are evaluated together: report.md and report.html with the tables (also as
CSV) and the figures (PNG and SVG). Everything lands in one folder, ``<recording.output_directory>/
<timestamp>/`` by default, printed at the start and the end. Progress goes to stderr: the set-up,
one line per simulated second of each run with the wall time left, and each evaluation phase.

What the plant is:

* ``--plant``: the embedded reduced-model simulator or the MuJoCo model of the 25 bodies;
* ``--model-mismatch``: the plant runs on the validation parameter set (thesis Table 6.1,
  ``config/hexapod_validation.yaml``) while the controllers keep the experiments set
  (``--plant-params`` names any other file);
* ``--sensor-noise``: white noise on the measured positions [m] (embedded plant only: MuJoCo has
  no sensor model);
* ``--loop-delay N``: each force acts N periods after the joint state it answers (``simulation/
  delay.py``; 0 = the lockstep where a force acts from the stamp of its state), which the
  controllers compensate as ``controllers.delay_compensation`` says.

Plant settings go into an overlay parameters file written to the output folder
(``plant_parameters.yaml``), so both transports and the evaluation read the same numbers.

Transports (how the stack runs; both write the same topics, types and stamps):

* ``direct`` (default): the ROS-free lockstep loop (``simulation/lockstep.py``) in this process:
  the plant (``simulation.make_plant`` behind its loop delay), the trajectory sampled at each control
  instant and the controller node's logic (``control/loop.py``: supervisor, controller with the
  ``simulated_plant`` gain set, armed at the first joint state like ``arm_on_start``, FK pose,
  diagnostics). Each step's record is serialized to the CDR messages the nodes publish and written
  with the recorder's ``BagWriter``.
* ``ros``: the real nodes (``ros/stack.py``'s SimStack: simulator, FK, trajectory, controller)
  plus the recorder node (raw subscriptions) in one executor, talking over DDS. The bags agree
  with ``direct`` to round-off (test_main_job.py checks it), but every message crosses rclpy
  several times, which makes it a few times slower than ``direct`` (doc/benchmarks.md). The
  nodes share one parameters file, so ``--model-mismatch`` needs ``direct``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import yaml

from hexapod_control.bags import BagWriter, RunInfo
from hexapod_control.bags.run_info import parameters_yaml
from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.document import Table
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import (
    EXTENDS_KEY,
    ROOT_KEY,
    STORAGE_FORMATS,
    HexapodParameters,
    default_parameters_path,
    load_parameters,
)
from hexapod_control.options import add_output, add_params
from hexapod_control.simulation import BACKENDS, make_plant
from hexapod_control.simulation.delay import loop_delay_words, with_loop_delay
from hexapod_control.simulation.lockstep import LockstepLoop
from hexapod_control.simulation.lockstep_recording import RecordWriter

TRAJECTORIES = ("operational_space", "joint_space")  # thesis 6.5 and the image of (6.82)
TRANSPORTS = ("direct", "ros")
SIMULATION_GAIN_SET = "simulated_plant"  # what SimStack gives its controller node
DEFAULT_DURATION_S = 30.0  # [s] the ~10 s kappa ramp, then two periods of the 0.1 Hz trajectory
MISMATCH_PARAMETERS = "hexapod_validation.yaml"  # the other parameter set of the thesis (Table 6.1)
PLANT_OVERLAY = "plant_parameters.yaml"
PROG = "main_job"
# Wall time of the first simulated second is noisy (caches, compilation); the expected time left is
# extrapolated from the rate after this much simulated time.
ESTIMATE_AFTER_S = 1.0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """A line on stderr per simulated second: run, time, wall time, expected wall time left, action."""

    def __init__(self, label: str, duration: float, emit: Callable[[str], None] = _stderr):
        self.label, self.duration, self.emit = label, duration, emit
        self.start = time.monotonic()
        self.next_second = 1

    def update(self, sim_time: float, status: str = "") -> None:
        if sim_time + 1e-9 >= self.next_second:
            self.next_second = int(math.floor(sim_time + 1e-9)) + 1
            wall = time.monotonic() - self.start
            left = ""
            if sim_time >= ESTIMATE_AFTER_S:
                left = f", ~{wall / sim_time * (self.duration - sim_time):.0f} s left"
            self.emit(f"[{self.label}] t = {sim_time:5.1f} s of {self.duration:g} s, wall {wall:6.1f} s{left} {status}".rstrip())


@dataclass(frozen=True)
class JobSettings:
    """What every run of the job shares."""

    params_file: str  # the controllers' parameters
    plant_params_file: str  # the plant's: the same file, or an overlay (noise, delay), or the mismatch set
    trajectory: str
    plant: str
    storage: str
    topic_keys: tuple


def run_info(job: JobSettings, controller: str, parameters: HexapodParameters, plant_parameters: HexapodParameters) -> RunInfo:
    """What the bag's metadata records about a run (bags.run_info)."""
    return RunInfo(
        controller=controller, gain_set=SIMULATION_GAIN_SET, parameters_file=job.params_file,
        parameters=parameters_yaml(parameters), plant=job.plant, plant_parameters_file=job.plant_params_file,
        trajectory=job.trajectory, loop_delay=loop_delay_words(plant_parameters),
        sensor_noise=f"{plant_parameters.simulation.sensor.noise_std:g} m",
    )


# ------------------------------------------------------------------------------------------ direct
def run_direct(job: JobSettings, controller_name: str, duration: float, bag_path: Path,
               progress: Optional[Progress] = None) -> dict:
    """The lockstep loop without middleware (module docstring); returns a summary dict."""
    parameters = load_parameters(job.params_file)
    plant_parameters = load_parameters(job.plant_params_file)
    model = HexapodModel(parameters)  # one model; each component keeps its own FK warm start
    plant = with_loop_delay(make_plant(job.plant, plant_parameters), plant_parameters.simulation)
    plant.reset(np.full(6, plant_parameters.home_actuator_position))
    # The simulated stacks' gain set: the thesis K_p is unstable on the rigid-body plant without
    # rotor inertia (config: controllers.double_loop.simulated_plant).
    control = ControlLoop(model, controller_name, gain_set=SIMULATION_GAIN_SET, arm_on_start=True)
    loop = LockstepLoop(plant, control, make_trajectory(job.trajectory, model))
    writer = BagWriter(bag_path, job.storage, custom_data=run_info(job, controller_name, parameters, plant_parameters).custom_data())
    for key in job.topic_keys:
        writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
    recorder = RecordWriter(writer, job.topic_keys, parameters.ros)
    started = time.monotonic()
    try:
        for block in loop.run_blocks(duration):
            recorder.write_block(block)
            if progress:
                progress.update(plant.time, block.action)
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


# ------------------------------------------------------------------------------------------ ros
def run_ros(job: JobSettings, controller_name: str, duration: float, bag_path: Path,
            progress: Optional[Progress] = None) -> dict:
    """SimStack's nodes + the recorder node in one executor over DDS; returns a summary dict."""
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from hexapod_control.ros.recorder_node import RecorderNode, recorded_topics
    from hexapod_control.ros.stack import DISCOVERY_TIMEOUT_S, STEP_TIMEOUT_S, SimStack

    parameters = load_parameters(job.params_file)  # every node's (main() puts a plant overlay here)
    info = run_info(job, controller_name, parameters, parameters)
    context = Context()
    rclpy.init(context=context)
    try:
        stack = SimStack(context, job.params_file, controller_name, job.plant, job.trajectory)
        recorder = None
        try:
            # Sim time: a command is logged at the /clock time of the joint state it answers.
            recorder = RecorderNode(bag_path, recorded_topics(job.topic_keys), job.storage, context=context,
                                    custom_data=info.custom_data(),
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
def write_plant_overlay(folder: Path, base_file: str, loop_delay: Optional[int], sensor_noise: Optional[float]) -> str:
    """An overlay of ``base_file`` with the plant's simulation settings changed, in ``folder``; its path.

    Only the ``simulation`` section changes, which the controllers do not read: the controllers'
    parameters stay those of ``base_file`` (and of the bag's metadata).
    """
    simulation: dict = {}
    if loop_delay is not None:
        simulation["loop_delay"] = {"periods": loop_delay}
    if sensor_noise is not None:
        simulation["sensor"] = {"noise_std": float(sensor_noise)}
    overlay = folder / PLANT_OVERLAY
    overlay.write_text(
        f"# main job: {base_file} with the plant's simulation settings changed (--loop-delay, --sensor-noise)\n"
        + yaml.safe_dump({EXTENDS_KEY: str(Path(base_file).resolve()), ROOT_KEY: {"simulation": simulation}}, sort_keys=False)
    )
    return str(overlay)


def loop_delay_line(plant_parameters: HexapodParameters, parameters: HexapodParameters) -> str:
    """The report's sentence on the loop delay and its compensation."""
    compensation = parameters.controllers.delay_compensation
    line = (f"Loop delay: each force acts {loop_delay_words(plant_parameters)} after the joint state it answers "
            "(`simulation.loop_delay`). ")
    if compensation.predictor == "none":
        return line + "The controllers do not compensate it (`controllers.delay_compensation.predictor: none`)."
    assumed = (f"estimated online from {compensation.delay_periods} period(s) on" if compensation.estimate
               else f"taken as {compensation.delay_periods} period(s)")
    return line + f"The controllers act on the model's prediction of the state when their force applies, the delay {assumed}."


def _defaults() -> Optional[HexapodParameters]:
    try:
        return load_parameters()
    except HexapodError:
        return None  # the shipped file is broken: --help still works, main() reports the error


def build_parser() -> argparse.ArgumentParser:
    defaults = _defaults()
    simulation = defaults.simulation if defaults else None
    recording = defaults.recording if defaults else None
    parser = argparse.ArgumentParser(
        prog="python -m hexapod_control.main_job",
        description="Run the simulated hexapod under each controller on a thesis trajectory, record every run to a bag "
        "(with its controller, gains and parameters in the bag's metadata), evaluate the bags and write report.md, "
        "report.html, the tables as CSV and the figures as PNG and SVG into one folder.",
    )
    parser.add_argument("--duration", type=float, default=DEFAULT_DURATION_S, metavar="S",
                        help="simulated seconds per controller (default: %(default)s; the kappa ramp of 6.5 takes ~10 s)")
    parser.add_argument("--trajectory", choices=TRAJECTORIES, default="operational_space",
                        help="operational_space: thesis 6.5; joint_space: the image of (6.82) (default: %(default)s)")
    parser.add_argument("--controllers", nargs="+", choices=CONTROLLER_NAMES, default=list(CONTROLLER_NAMES),
                        help=f"controllers to run, one bag each (default: {' '.join(CONTROLLER_NAMES)})")
    parser.add_argument("--plant", "--backend", choices=BACKENDS, default="embedded", dest="plant",
                        help="the simulated plant: embedded is the reduced-model simulator, mujoco the 25-body MuJoCo model "
                        "(default: %(default)s)")
    mismatch = parser.add_mutually_exclusive_group()
    mismatch.add_argument("--model-mismatch", action="store_true",
                          help=f"run the plant on the validation set ({MISMATCH_PARAMETERS}, thesis Table 6.1) while "
                          "the controllers keep --params (default: off, plant and controllers on one set)")
    mismatch.add_argument("--plant-params", metavar="FILE",
                          help="parameters of the plant only (default: --params)")
    parser.add_argument("--sensor-noise", type=float, metavar="STD",
                        help="standard deviation of white noise on the measured positions [m], embedded plant only "
                        f"(default: simulation.sensor.noise_std = {simulation.sensor.noise_std if simulation else 0.0:g})")
    parser.add_argument("--loop-delay", type=int, metavar="N",
                        help="periods from a joint state to the force answering it acting on the plant; 0 = lockstep "
                        f"(default: simulation.loop_delay.periods = {simulation.loop_delay.periods if simulation else '?'})")
    parser.add_argument("--transport", choices=TRANSPORTS, default="direct",
                        help="direct: lockstep without middleware (fast); ros: the ROS nodes over DDS (default: %(default)s)")
    add_params(parser, help=f"parameters of the controllers and the evaluation (default: {_shipped()})")
    parser.add_argument("--storage", choices=STORAGE_FORMATS,
                        help=f"bag storage (default: recording.storage = {recording.storage if recording else 'mcap'})")
    add_output(parser, metavar="DIR",
               help="output folder, must be new or empty (default: "
               f"{recording.output_directory if recording else 'runs'}/<YYYYmmdd_HHMMSS>)")
    parser.add_argument("--no-model-check", action="store_true", help="skip the inverse-dynamics model check")
    parser.add_argument("--no-plots", action="store_true", help="report and tables without figures")
    return parser


def _shipped() -> str:
    try:
        return str(default_parameters_path())
    except HexapodError:
        return "config/hexapod.yaml"


def _check_options(args) -> Optional[str]:
    if not (math.isfinite(args.duration) and args.duration > 0.0):
        return f"--duration must be a positive number of seconds, got {args.duration}"
    if args.loop_delay is not None and args.loop_delay < 0:
        return f"--loop-delay must be a whole number of periods >= 0, got {args.loop_delay}"
    if args.sensor_noise is not None and not (math.isfinite(args.sensor_noise) and args.sensor_noise >= 0.0):
        return f"--sensor-noise must be a standard deviation >= 0 m, got {args.sensor_noise}"
    if args.sensor_noise and args.plant != "embedded":
        return f"--sensor-noise needs the embedded plant: the {args.plant} plant has no sensor model"
    if (args.model_mismatch or args.plant_params) and args.transport != "direct":
        return "the ros transport runs every node on one parameters file: --model-mismatch and --plant-params need --transport direct"
    return None


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    problem = _check_options(args)
    if problem:
        _stderr(f"{PROG}: {problem}")
        return 1
    from hexapod_control.evaluation.evaluate import evaluate_bags
    from hexapod_control.evaluation.report import summary_line

    job_start = time.monotonic()
    try:
        params_file = str(args.params or default_parameters_path())
        parameters = load_parameters(params_file)
        recording = parameters.recording
        folder = Path(args.output) if args.output else Path(recording.output_directory) / datetime.now().strftime("%Y%m%d_%H%M%S")
        if folder.exists() and any(folder.iterdir()):
            raise HexapodError(f"output folder {folder} exists and is not empty")
        (folder / "bags").mkdir(parents=True, exist_ok=True)
        plant_file = str(default_parameters_path(MISMATCH_PARAMETERS)) if args.model_mismatch else args.plant_params or params_file
        if args.loop_delay is not None or args.sensor_noise is not None:
            plant_file = write_plant_overlay(folder, plant_file, args.loop_delay, args.sensor_noise)
            if args.transport == "ros":
                params_file = plant_file  # one file for every node; the simulation section only changes the plant
        plant_parameters = load_parameters(plant_file)
        job = JobSettings(params_file, plant_file, args.trajectory, args.plant, args.storage or recording.storage,
                          tuple(recording.topics))
    except (HexapodError, OSError) as error:
        _stderr(f"{PROG}: {' '.join(str(error).split())}")
        return 1
    print(f"{PROG}: output folder {folder.resolve()}", flush=True)
    runner = run_direct if args.transport == "direct" else run_ros
    bags, labels, problems, rows = [], [], [], []
    preamble: list = [
        f"Main job: `{args.trajectory}` trajectory, {args.duration:g} s simulated per controller, `{args.plant}` plant "
        f"on `{plant_file}`, controllers on `{params_file}`"
        + (" (a model mismatch)" if plant_parameters.geometry != parameters.geometry or plant_parameters.bodies != parameters.bodies else "")
        + f", sensor noise {plant_parameters.simulation.sensor.noise_std:g} m, `{args.transport}` transport, `{job.storage}` bags.",
        loop_delay_line(plant_parameters, parameters),
    ]
    _stderr(f"{PROG}: {len(args.controllers)} run(s) of {args.duration:g} s simulated; the first run builds the model "
            "(a machine's first use compiles its C code: up to a minute), then each line below gives the wall time left")
    for controller in args.controllers:
        bag = folder / "bags" / controller
        _stderr(f"{PROG}: running {controller} ({args.plant}, {args.trajectory}, {args.transport}) for {args.duration:g} s -> {bag}")
        try:
            summary = runner(job, controller, args.duration, bag, Progress(controller, args.duration))
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
        rows.append([controller, summary["steps"], summary["sim_time"], summary["wall_time"], summary["supervisor"],
                     summary["failure"] or "-"])
        _stderr(f"{PROG}: {controller}: {summary['steps']} steps, {summary['sim_time']:.3f} s simulated in "
                f"{summary['wall_time']:.1f} s wall")
    if not bags:
        _stderr(f"{PROG}: no run was recorded: {'; '.join(problems)}")
        return 1
    preamble.append(Table("The runs of the main job.", ["controller", "steps", "simulated [s]", "wall [s]",
                                                          "supervisor at the end", "problem"], rows))
    _stderr(f"{PROG}: evaluating {len(bags)} bag(s)")
    evaluation_start = time.monotonic()
    report, pairs, failed = evaluate_bags(
        bags, None, folder, labels, model_check=not args.no_model_check, make_plots=not args.no_plots,
        title=f"Hexapod main job: {' vs '.join(args.controllers)}", preamble=preamble,
        progress=lambda line: _stderr(f"{PROG}: {line}"),
    )
    if report is None:
        _stderr(f"{PROG}: nothing could be evaluated: {'; '.join(f'{b}: {r}' for b, r in failed)}")
        return 1
    _stderr(f"{PROG}: evaluation took {time.monotonic() - evaluation_start:.1f} s")
    for run, metrics in pairs:
        print(summary_line(run, metrics))
    print(f"{PROG}: report {report.resolve()} and {report.with_suffix('.html').name}")
    print(f"{PROG}: done in {time.monotonic() - job_start:.1f} s; results in {folder.resolve()}")
    if problems or failed:
        for line in problems + [f"{b}: {r}" for b, r in failed]:
            _stderr(f"{PROG}: problem: {line}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
