"""Evaluation throughput as the bag grows, on 1 and 2 workers: seconds per recorded minute and peak
memory (goal: an hour at 1 kHz evaluated in at most 30 s on a 2-core machine).

Run: ./scripts/bootstrap.sh && source scripts/env.sh && python benchmarks/bench_evaluate.py
     [--minutes 0.5 5 60] [--workers 1 2] [--repeat N] [--directory DIR] [--no-plots]

Generates (once; reused from ``--directory`` on later runs) bags like the main job's at 1 kHz:
joint states, references, platform poses and force commands every millisecond, diagnostics every
0.1 s. The motion is the joint-space trajectory (6.82) of the parameters file; the reference is its
forward kinematics plus a known micrometre-sized tracking error, so every stage of the evaluation
(decoding, forward kinematics, model check, plots, report) does its full work. The messages are
encoded in bulk (``bags.cdr.encode_block`` on templates from ``bags.messages``) and written with the
package's ``BagWriter``.

Each bag is then evaluated by ``python -m hexapod_control.evaluation --workers N`` in a fresh process
(imports included, as a user runs it), ``--repeat`` times per number of workers, alternating; the
table gives each run's wall time, the seconds per recorded minute, the peak resident memory of the
largest of the process and its children, and the load average before the run.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hexapod_control.bags import BagWriter, cdr, diagnostics_cdr, effort_cdr, joint_state_cdr, pose_cdr, reference_cdr
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.evaluation import batch
from hexapod_control.model import rotation_rows
from hexapod_control.model.kinematics import Kinematics
from hexapod_control.model.parameters import load_parameters

DEFAULT_MINUTES = (0.5, 5.0, 60.0)
SLAB_S = 60.0  # [s] generated and written at a time (bounds the generator's memory)
DIAGNOSTICS_PERIOD_S = 0.1
TRACKING_ERROR_M = 5e-6  # amplitude of the imposed position error [m]
TRACKING_ERROR_RAD = 5e-5  # and of the orientation error [rad]
ERROR_FREQUENCY_HZ = 0.7
FORCE_OFFSET_N, FORCE_AMPLITUDE_N, FORCE_FREQUENCY_HZ = 4.0, 2.0, 1.3
GENERATOR_VERSION = "1"  # bump when the generated content changes, so cached bags are rebuilt
KEYS = ("reference", "joint_states", "platform_pose", "effort_commands")  # written in this order each step


def _joint_motion(parameters, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q and q_dot of the joint-space trajectory (6.82) at the times t."""
    settings = parameters.trajectories.joint_space
    kappa, amplitudes, omegas = settings.ramp_rate, np.array(settings.amplitudes), np.array(settings.angular_frequencies)
    s = 1.0 - np.exp(-kappa * t**3)
    s_dot = 3.0 * kappa * t**2 * np.exp(-kappa * t**3)
    wave = np.sin(omegas * t[:, None])
    q = parameters.home_actuator_position + amplitudes * s[:, None] * wave
    qd = amplitudes * (s_dot[:, None] * wave + s[:, None] * omegas * np.cos(omegas * t[:, None]))
    return q, qd


def _slab(parameters, kinematics: Kinematics, t: np.ndarray, period: float) -> dict:
    """The numbers of every message of one slab of time."""
    q, qd = _joint_motion(parameters, t)
    pose = batch.forward_kinematics_batch(kinematics, q).pose
    w = 2.0 * math.pi * ERROR_FREQUENCY_HZ * t[:, None]
    error = np.hstack((TRACKING_ERROR_M * np.sin(w + np.arange(3)), TRACKING_ERROR_RAD * np.cos(w + np.arange(3))))
    reference = pose + error
    velocity = np.gradient(reference, period, axis=0)
    acceleration = np.gradient(velocity, period, axis=0)
    euler = reference[:, 3:]
    forces = FORCE_OFFSET_N + FORCE_AMPLITUDE_N * np.sin(2.0 * math.pi * FORCE_FREQUENCY_HZ * t[:, None] + np.arange(6))
    return {
        "ns": np.round(t * 1e9).astype(np.int64), "q": q, "qd": qd, "pose": pose, "forces": forces,
        "translation": reference[:, :3], "rotation": rotation_rows.quaternion_from_euler_zyx(euler),
        "linear_velocity": velocity[:, :3],
        "angular_velocity": rotation_rows.angular_velocity_from_euler_rates(euler, velocity[:, 3:]),
        "linear_acceleration": acceleration[:, :3],
        "angular_acceleration": rotation_rows.angular_acceleration_from_euler(euler, velocity[:, 3:], acceleration[:, 3:]),
    }


def _templates(parameters) -> dict:
    """One message of each kind and its layout."""
    names, frame = parameters.ros.joint_names, parameters.ros.base_frame
    zeros = np.zeros(6)
    messages = {
        "joint_states": joint_state_cdr(0.0, names, zeros, zeros, zeros),
        "reference": reference_cdr(0.0, zeros, zeros, zeros, frame),
        "platform_pose": pose_cdr(0.0, zeros[:3], (0.0, 0.0, 0.0, 1.0), frame),
        "effort_commands": effort_cdr(zeros),
    }
    return {key: (data, cdr.LAYOUTS[MESSAGE_TYPES[key]](data)) for key, data in messages.items()}


def _encoded(templates: dict, slab: dict) -> dict:
    ns = slab["ns"]
    point = "points[0]."
    fields = {
        "joint_states": ({"position": slab["q"], "velocity": slab["qd"], "effort": slab["forces"]}, {"stamp": ns}),
        "reference": ({point + "transforms[0].translation": slab["translation"],
                       point + "transforms[0].rotation": slab["rotation"],
                       point + "velocities[0].linear": slab["linear_velocity"],
                       point + "velocities[0].angular": slab["angular_velocity"],
                       point + "accelerations[0].linear": slab["linear_acceleration"],
                       point + "accelerations[0].angular": slab["angular_acceleration"]}, {"stamp": ns}),
        "platform_pose": ({"position": slab["pose"][:, :3], "orientation": rotation_rows.quaternion_from_euler_zyx(slab["pose"][:, 3:])},
                          {"stamp": ns}),
        "effort_commands": ({"data": slab["forces"]}, {}),
    }
    return {key: cdr.encode_block(templates[key][0], templates[key][1], *fields[key]) for key in KEYS}


def generate(path: Path, minutes: float) -> None:
    parameters = load_parameters()
    kinematics = Kinematics(parameters)
    period = parameters.controllers.period
    steps = int(round(minutes * 60.0 / period))
    templates = _templates(parameters)
    diagnostics_every = int(round(DIAGNOSTICS_PERIOD_S / period))
    with BagWriter(path, custom_data={"hexapod.benchmark": f"bench_evaluate {GENERATOR_VERSION}"}) as writer:
        for key in (*KEYS, "diagnostics"):
            writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
        slab_steps = int(round(SLAB_S / period))
        for start in range(0, steps, slab_steps):
            k = np.arange(start, min(start + slab_steps, steps))
            slab = _slab(parameters, kinematics, k * period, period)
            encoded = _encoded(templates, slab)
            rows = {key: [row.tobytes() for row in encoded[key]] for key in KEYS}
            write = writer.write
            for j, log in enumerate(slab["ns"].tolist()):
                for key in KEYS:
                    write(TOPICS[key], log, rows[key][j])
                if (start + j) % diagnostics_every == 0:
                    write(TOPICS["diagnostics"], log, diagnostics_cdr(log * 1e-9, [(0, "hexapod_controller: safety", "tracking", {})]))


def cached_bag(directory: Path, minutes: float) -> Path:
    path = directory / f"bench_{minutes:g}min_v{GENERATOR_VERSION}"
    if not (path / "metadata.yaml").is_file():
        if path.exists():
            raise SystemExit(f"{path} exists but is incomplete: remove it")
        started = time.perf_counter()
        print(f"# generating {path} ({minutes:g} min at 1 kHz) ...", flush=True)
        generate(path, minutes)
        print(f"# generated in {time.perf_counter() - started:.0f} s", flush=True)
    return path


CHILD = """
import resource, sys, time
started = time.perf_counter()
from hexapod_control.evaluation.cli import main
code = main(sys.argv[1:])
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(f"BENCH {time.perf_counter() - started:.3f} {peak}")
sys.exit(code)
"""


def evaluate(bag: Path, output: Path, plots: bool, workers: int) -> tuple[float, float]:
    """(wall seconds, peak resident memory MB) of one evaluation in a fresh process."""
    arguments = [str(bag), "-o", str(output), "--force", "--workers", str(workers)] + ([] if plots else ["--no-plots"])
    completed = subprocess.run([sys.executable, "-c", CHILD, *arguments], capture_output=True, text=True, check=False)
    line = [row for row in completed.stdout.splitlines() if row.startswith("BENCH ")]
    if completed.returncode != 0 or not line:
        raise SystemExit(f"evaluation of {bag} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    seconds, kilobytes = line[0].split()[1:]
    return float(seconds), float(kilobytes) / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=list(DEFAULT_MINUTES),
                        help="recorded minutes of each bag (default: %(default)s)")
    parser.add_argument("--directory", type=Path, default=Path(tempfile.gettempdir()) / "hexapod_bench_evaluate",
                        help="where the generated bags are kept and reused (default: %(default)s)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="--workers of each evaluation (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=1, help="evaluations per bag and number of workers (default: %(default)s)")
    parser.add_argument("--no-plots", action="store_true", help="evaluate without figures")
    args = parser.parse_args()
    args.directory.mkdir(parents=True, exist_ok=True)
    print(f"# evaluation benchmark: {os.cpu_count()} CPUs, plots {'off' if args.no_plots else 'on'}")
    print(f"{'recorded':>10} {'messages':>10} {'bag MB':>8} {'workers':>8} {'load':>6} {'wall s':>8} {'s per recorded min':>19} "
          f"{'peak MB':>8}")
    for minutes in args.minutes:
        bag = cached_bag(args.directory, minutes)
        size = sum(f.stat().st_size for f in bag.iterdir()) / 1e6
        messages = int(round(minutes * 60 / 1e-3)) * len(KEYS) + int(round(minutes * 60 / DIAGNOSTICS_PERIOD_S))
        for _ in range(args.repeat):
            for workers in args.workers:
                load = os.getloadavg()[0]
                with tempfile.TemporaryDirectory(prefix="hexapod_bench_report_") as output:
                    seconds, peak = evaluate(bag, Path(output) / "report", not args.no_plots, workers)
                print(f"{minutes:>8g} m {messages:>10d} {size:>8.0f} {workers:>8d} {load:>6.2f} {seconds:>8.1f} "
                      f"{seconds / minutes:>19.2f} {peak:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
