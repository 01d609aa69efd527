"""The whole step per joint state (``ControlLoop.joint_state``) compiled, in Python with the delay
compensation's core in C, and in Python with that core in NumPy, against one MuJoCo step of the
same robot, in one process.

    python benchmarks/bench_step.py [--steps 3000] [--delay 2] [--controller computed_torque] [--parameters ...]

Three control loops (supervisor, delay-compensated controller, pose) close the loop on three MuJoCo
plants of the robot along the thesis 6.5 trajectory, stepped as simulation/lockstep.py steps
(reference, joint state, forces, one plant period), each plant behind a transport delay of
``--delay`` periods (simulation/delay.py; the estimator finds it): one runs the compiled step
(control/compiled_step.py), one the Python objects with the compensation's numeric core in C
(control/compiled_prediction.py), one the Python objects with the NumPy code. Per control period, interleaved so
that both see the same machine load and caches, the timer covers ``joint_state`` of each loop and
one bare ``mujoco.mj_step`` of a third copy of the model. The first ``--settle`` periods (arming,
the hold until the rate is known) are not counted.

The compiled step's C calls are also timed alone (around each call, inside its ``joint_state``).
Two passes over the same sequence: wall-clock time (median and p99) and the thread's CPU time
(median, less the cost of reading that clock). Prints the load average: quote it with the figures.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_cycle import clock_cost  # noqa: E402 - the benchmarks' own clock calibration, beside this file

from hexapod_control.control.loop import ControlLoop  # noqa: E402
from hexapod_control.control.trajectories import Reference, make_trajectory  # noqa: E402
from hexapod_control.model.hexapod import HexapodModel  # noqa: E402
from hexapod_control.simulation.delay import DelayedPlant  # noqa: E402
from hexapod_control.simulation.lockstep import message_time  # noqa: E402
from hexapod_control.simulation.mujoco_plant import MujocoPlant  # noqa: E402

GAIN_SET = "simulated_plant"  # the simulators' gains: the loop closes on MuJoCo
# label: (the loop's step, the delay compensation's core)
VARIANTS = {
    "joint_state, compiled step": ("c", "c"),
    "joint_state, Python, C core": ("python", "c"),
    "joint_state, Python, NumPy core": ("python", "python"),
}
COMPILED = "joint_state, compiled step"
MJ_STEP = "mujoco.mj_step (1 substep)"
C_CALLS = "its C calls (intake, command)"  # of the compiled step, within its joint_state


def measure(model: HexapodModel, controller_name: str, steps: int, settle: int, delay: int,
            clock: Callable[[], int], variants: tuple[str, ...] = tuple(VARIANTS)) -> tuple[dict[str, np.ndarray], dict]:
    """{workload: per-call times [us]} over ``steps`` periods after ``settle``, and the compiled step's
    counts; ``variants``: which of VARIANTS run (the compiled step always does)."""
    trajectory = make_trajectory("operational_space", model)
    loops = {}
    for label in dict.fromkeys((COMPILED, *variants)):
        step, core = VARIANTS[label]
        control = ControlLoop(model, controller_name, gain_set=GAIN_SET, arm_on_start=True)
        if control.controller.select_core(core) != core or control.select_step(step) != step:
            raise SystemExit("the compiled code is unavailable: the loops would all run Python")
        robot = MujocoPlant(model.parameters)
        robot.reset(model.home_q)
        loops[label] = (control, DelayedPlant(robot, delay))
    bare_data = copy.copy(robot.data)  # mj_step alone, on a copy so that no plant's state is disturbed
    samples = {key: np.zeros(steps) for key in (*loops, C_CALLS, MJ_STEP)}
    step = loops[COMPILED][0].compiled_step
    c_time = [0]  # the compiled step's C calls in this period, timed around each call

    def timed(function):
        def call(*arguments):
            start = clock()
            code = function(*arguments)
            c_time[0] += clock() - start
            return code
        return call

    step._intake, step._command = timed(step._intake), timed(step._command)
    gc.disable()  # a collection in the loop is the runtime's cost, not the step's
    try:
        for k in range(settle + steps):
            for label, (control, plant) in loops.items():
                stamp = message_time(plant.time)
                if k > 0:  # as lockstep.py: the trajectory starts with the second state
                    sample = trajectory.sample(plant.time - plant.dt)
                    control.reference_sample(stamp, Reference(stamp, sample.pose, sample.velocity, sample.acceleration))
                positions, velocities = plant.joint_positions(), plant.joint_velocities()
                start = clock()
                answer = control.joint_state(stamp, stamp, control.joint_names, positions, velocities)
                elapsed = clock() - start
                if k >= settle:
                    samples[label][k - settle] = elapsed
                    if control.compiled_step is step:
                        samples[C_CALLS][k - settle], c_time[0] = c_time[0], 0
                c_time[0] = 0
                plant.apply_forces(answer.forces)
                plant.step()
            start = clock()
            mujoco.mj_step(robot.model, bare_data)
            if k >= settle:
                samples[MJ_STEP][k - settle] = clock() - start
    finally:
        gc.enable()
    for label, (control, _) in loops.items():
        decision = control.last_decision
        if decision is None or decision.action.value != "control":
            raise SystemExit(f"the loop '{label}' does not control at the end: {decision}")
    compiled = loops[COMPILED][0]
    compiled.synchronize()
    step = compiled.compiled_step
    counts = {"finished": dict(step.finished), "deferred": dict(step.deferred),
              "delay estimate": compiled.controller.delay_periods}
    return {key: values / 1e3 for key, values in samples.items()}, counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="control periods measured")
    parser.add_argument("--settle", type=int, default=200, help="control periods run before measuring")
    parser.add_argument("--delay", type=int, default=2, help="the plants' transport delay [control periods]")
    parser.add_argument("--controller", default="computed_torque", choices=("computed_torque", "double_loop"))
    parser.add_argument("--parameters", default=None, help="parameters file (default config/hexapod.yaml)")
    args = parser.parse_args(argv)
    model = HexapodModel.from_yaml(args.parameters)
    load_before = os.getloadavg()
    wall, counts = measure(model, args.controller, args.steps, args.settle, args.delay, time.perf_counter_ns)
    cpu, _ = measure(model, args.controller, args.steps, args.settle, args.delay, time.thread_time_ns)
    cpu_clock_cost = clock_cost(time.thread_time_ns)
    wall_median = {key: float(np.median(values)) for key, values in wall.items()}
    cpu_median = {key: max(0.0, float(np.median(values)) - cpu_clock_cost) for key, values in cpu.items()}

    print(f"# ControlLoop.joint_state ({args.controller}, {GAIN_SET} gains, closed on MuJoCo {args.delay} periods late) "
          f"vs one mj_step: "
          f"{args.steps} periods of {model.parameters.source}")
    print(f"# {os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in load_before)} before and "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} after; CPU times less {cpu_clock_cost:.2f} us per clock read")
    print(f"{'what [us]':<34} {'wall median':>12} {'wall p99':>10} {'CPU median':>11} {'/ mj_step (wall, CPU)':>22}")
    for key in wall:
        ratio = f"{wall_median[key] / wall_median[MJ_STEP]:.2f}, {cpu_median[key] / cpu_median[MJ_STEP]:.2f}"
        print(f"{key:<34} {wall_median[key]:>12.1f} {np.percentile(wall[key], 99):>10.1f} {cpu_median[key]:>11.1f} {ratio:>22}")
    step_key, core_key, numpy_key = VARIANTS
    print(f"# Python with the C core / compiled step (wall medians): {wall_median[core_key] / wall_median[step_key]:.2f}; "
          f"NumPy core / compiled step: {wall_median[numpy_key] / wall_median[step_key]:.2f}")
    print(f"# the compiled step's calls (finished, deferred to Python) and the delay it ended at: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
