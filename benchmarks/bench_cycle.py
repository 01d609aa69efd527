"""One control cycle (compiled and Python), and the whole step per joint state, against one MuJoCo
step of the same robot, in one process.

    python benchmarks/bench_cycle.py [--steps 3000] [--parameters config/hexapod.yaml]

Per control period, interleaved so that all of them see the same machine load and caches:
``controller.update`` of each controller on its compiled cycle and on its Python code (the
thesis 6.5 trajectory, robot states from its inverse kinematics with ~0.1 mm / 1 mm/s tracking
errors, as bench_controllers.py), the bare ctypes call of each compiled cycle (its buffers
already filled), one ``MujocoPlant.step()`` (one control period: ``simulation.mujoco.substeps``
MuJoCo steps with the plant's guards) and one ``mujoco.mj_step`` of the same 25-body model (the
plant held at home by bench_mujoco.py's PD).

Two passes over the same sequence: wall-clock time (median and p99) and the thread's CPU time
(median, less the cost of reading that clock), which other processes on a busy machine
disturb much less. Prints the ratios of the medians to one plant step and to one mj_step, and
the load average: run it on an idle core to compare with the 20 us goal.

Then the whole step per joint state of each controller, the law inside it: the compiled step's C
calls (the supervisor's checks, the delay compensation's prediction and estimator, the law, the
clamps, the pose), which the robot stack's loop in C runs for each state, timed within
``ControlLoop.joint_state`` closed on MuJoCo as bench_step.py does, beside one ``mj_step`` per
period (goal: at most one ``mj_step``, under 30 us median on an idle core).
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

from bench_controllers import measured_states  # noqa: E402 - the benchmarks' own states, beside this file
from bench_mujoco import DAMPING, STIFFNESS  # noqa: E402 - the benchmarks' own PD, beside this file

from hexapod_control.control.controllers import CONTROLLER_NAMES, make_controller  # noqa: E402
from hexapod_control.control.trajectories import make_trajectory  # noqa: E402
from hexapod_control.model.hexapod import HexapodModel  # noqa: E402
from hexapod_control.simulation.mujoco_plant import MujocoPlant  # noqa: E402

TRAJECTORY_START = 2.0  # [s]: past the start, where the ramp moves the platform
CLOCK_CALIBRATION_READS = 10000
# The whole step's runs as bench_step.py's defaults: periods run before measuring (arming, the hold
# until the rate is known), and the plant's transport delay [control periods].
WHOLE_STEP_SETTLE, WHOLE_STEP_DELAY = 200, 2


def clock_cost(clock: Callable[[], int]) -> float:
    """Median time between two consecutive reads of ``clock`` [us]: what each sample includes."""
    reads = np.empty(CLOCK_CALIBRATION_READS)
    for k in range(reads.size):
        start = clock()
        reads[k] = clock() - start
    return float(np.median(reads)) / 1e3


class SideBySide:
    """The workloads of one run, rebuilt for each pass so that both passes see the same sequence."""

    def __init__(self, parameters_path, steps: int):
        self.model = HexapodModel.from_yaml(parameters_path)
        trajectory = make_trajectory("operational_space", self.model)
        self.times = TRAJECTORY_START + np.arange(steps) * self.model.parameters.controllers.period
        self.references = [trajectory.sample(t) for t in self.times]
        self.states = measured_states(self.model, trajectory, self.times)

    def measure(self, clock: Callable[[], int]) -> tuple[dict[str, np.ndarray], dict]:
        """{workload: per-call times [us]} with ``clock``, and the compiled cycles' counts."""
        model, steps = self.model, self.times.size
        controllers = {}
        for name in CONTROLLER_NAMES:
            for backend in ("c", "python"):
                controller = make_controller(name, model)
                if controller.select_cycle(backend) != backend:
                    raise SystemExit(f"the compiled cycle is unavailable: {name} runs in Python")
                controller.reset(self.times[0], *self.states[0])
                controllers[f"{name} ({'compiled' if backend == 'c' else 'Python'})"] = controller
        cycles = {name: controllers[f"{name} (compiled)"].cycle for name in CONTROLLER_NAMES}
        # The bare call repeats the update's call with the state that call started from, in a scratch
        # copy (the call advances it), so that the controller's own C state stays as the update left it.
        scratch = {name: cycle._state.copy() for name, cycle in cycles.items()}
        # The period and feedback-scale arguments: the nominal period and 1, which the update's
        # evenly spaced times give too.
        bare_arguments = {
            name: (*cycle._inputs, cycle.controller.period, 1.0,
                   *(scratch[name].ctypes.data if buffer == cycle._state.ctypes.data else buffer for buffer in cycle._buffers))
            for name, cycle in cycles.items()
        }
        plant = MujocoPlant(model.parameters)
        plant.reset(model.home_q)
        holding = plant.holding_forces()
        plant.apply_forces(holding)
        bare_data = copy.copy(plant.data)  # mj_step alone, on a copy so that the plant's own state is not disturbed
        plant_key = f"MujocoPlant.step() ({plant.settings.substeps} substeps)"
        keys = [*controllers, *(f"{name} bare C call" for name in cycles), plant_key, "mujoco.mj_step (1 substep)"]
        samples = {key: np.empty(steps) for key in keys}

        gc.disable()  # a collection in the loop is the runtime's cost, not the cycle's
        try:
            for k, (t, reference, (q, qd)) in enumerate(zip(self.times, self.references, self.states)):
                for name, cycle in cycles.items():
                    layout, warm_start = cycle.library.state, cycle.controller.kinematic_state
                    for field in ("last_q", "last_phi", "previous_q", "previous_phi"):
                        scratch[name][layout[field]] = getattr(warm_start, field)
                    if name == "double_loop":
                        scratch[name][layout["integral"]] = cycle.controller.integral
                for key, controller in controllers.items():
                    start = clock()
                    output = controller.update(t, q, qd, reference)
                    samples[key][k] = clock() - start
                    if output.safe_output:
                        raise SystemExit(f"{key}: safe output at t = {t}: {output.message}")
                for name, cycle in cycles.items():
                    function, arguments = cycle._function, bare_arguments[name]  # as the update's call saw them
                    start = clock()
                    function(*arguments)
                    samples[f"{name} bare C call"][k] = clock() - start
                # Held at home by bench_mujoco's PD (outside the timed region), so that any --steps runs.
                plant.apply_forces(
                    holding + STIFFNESS * (model.home_q - plant.joint_positions()) - DAMPING * plant.joint_velocities()
                )
                start = clock()
                plant.step()
                samples[plant_key][k] = clock() - start
                start = clock()
                mujoco.mj_step(plant.model, bare_data)
                samples["mujoco.mj_step (1 substep)"][k] = clock() - start
        finally:
            gc.enable()
        counts = {name: (cycle.finished, dict(cycle.deferred)) for name, cycle in cycles.items()}
        return {key: values / 1e3 for key, values in samples.items()}, counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="control periods measured")
    parser.add_argument("--parameters", default=None, help="parameters file (default config/hexapod.yaml)")
    args = parser.parse_args(argv)
    run = SideBySide(args.parameters, args.steps)
    load_before = os.getloadavg()[0]
    wall, counts = run.measure(time.perf_counter_ns)
    cpu, _ = run.measure(time.thread_time_ns)
    cpu_clock_cost = clock_cost(time.thread_time_ns)
    cpu_median = {key: max(0.0, float(np.median(values)) - cpu_clock_cost) for key, values in cpu.items()}
    wall_median = {key: float(np.median(values)) for key, values in wall.items()}

    print(f"# one control cycle vs one MuJoCo step: {args.steps} periods of {run.model.parameters.source}")
    print(
        f"# {os.cpu_count()} CPUs, load average {load_before:.2f} before and {os.getloadavg()[0]:.2f} after; "
        f"CPU times less {cpu_clock_cost:.2f} us per clock read"
    )
    print(f"{'what [us]':<40} {'wall median':>12} {'wall p99':>10} {'CPU median':>11}")
    for key in wall:
        print(f"{key:<40} {wall_median[key]:>12.1f} {np.percentile(wall[key], 99):>10.1f} {cpu_median[key]:>11.1f}")
    print(f"# compiled cycles (finished in C, deferred to Python): {counts}")
    plant_key = next(key for key in wall if key.startswith("MujocoPlant"))
    mj_key = "mujoco.mj_step (1 substep)"
    print(f"{'ratio of medians: wall (CPU)':<40} {'/ plant step':>16} {'/ mj_step':>16}")
    for key in wall:
        if "(" not in key or key in (plant_key, mj_key):
            continue
        ratios = [
            f"{wall_median[key] / wall_median[other]:.2f} ({cpu_median[key] / cpu_median[other]:.2f})"
            for other in (plant_key, mj_key)
        ]
        print(f"{key:<40} {ratios[0]:>16} {ratios[1]:>16}")
    print_whole_steps(run.model, args.steps, cpu_clock_cost)
    return 0


def print_whole_steps(model: HexapodModel, steps: int, cpu_clock_cost: float) -> None:
    """The whole step per joint state of each controller, as the robot stack runs it in C: the
    compiled step's calls within ``ControlLoop.joint_state`` (bench_step.py), closed on MuJoCo
    ``WHOLE_STEP_DELAY`` periods late, each period beside one ``mj_step`` of the same robot."""
    from bench_step import C_CALLS, MJ_STEP, measure  # imported here: bench_step imports this module

    print(f"# the whole step per joint state (the compiled step's C calls: supervisor, prediction, estimator, law,"
          f" clamps, pose), closed on MuJoCo {WHOLE_STEP_DELAY} periods late, beside one mj_step per period")
    print(f"{'what [us]':<40} {'wall median':>12} {'wall p99':>10} {'CPU median':>11} {'/ mj_step (wall, CPU)':>22}")
    for name in CONTROLLER_NAMES:
        wall, _ = measure(model, name, steps, WHOLE_STEP_SETTLE, WHOLE_STEP_DELAY, time.perf_counter_ns, variants=())
        cpu, _ = measure(model, name, steps, WHOLE_STEP_SETTLE, WHOLE_STEP_DELAY, time.thread_time_ns, variants=())
        medians = [float(np.median(wall[key])) for key in (C_CALLS, MJ_STEP)]
        cpu_medians = [max(0.0, float(np.median(cpu[key])) - cpu_clock_cost) for key in (C_CALLS, MJ_STEP)]
        ratio = f"{medians[0] / medians[1]:.2f}, {cpu_medians[0] / cpu_medians[1]:.2f}"
        print(f"{name + ' whole step':<40} {medians[0]:>12.1f} {np.percentile(wall[C_CALLS], 99):>10.1f} "
              f"{cpu_medians[0]:>11.1f} {ratio:>22}")


if __name__ == "__main__":
    sys.exit(main())
