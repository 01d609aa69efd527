"""Time one control step of each controller along the thesis 6.5 trajectory.

    PYTHONPATH=. python benchmarks/bench_controllers.py [--steps N] [--parameters config/hexapod.yaml]

Each step is ``controller.update`` exactly as the 1 kHz loop calls it: FK warm-started from the
previous step, J_A and J_A_dot q_dot, the control law (and, for computed torque, the inverse
dynamics). The robot state fed in is the reference's own inverse kinematics (the controller then
sees the small errors of a tracking robot, not a still one), computed outside the timed region.
Reports median and p99 in microseconds; the target for computed torque is <= 300 us median and
<= 1 ms p99. Timings depend on the machine's load: run it on an idle core to compare.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

from hexapod_control.control.controllers import CONTROLLER_NAMES, make_controller
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.model.hexapod import HexapodModel

# Tracking errors of the order the double loop shows [m], [m/s].
TRACKING_POSITION_NOISE, TRACKING_VELOCITY_NOISE = 1e-4, 1e-3
MEDIAN_TARGET_US = {"computed_torque": 300.0}
P99_TARGET_US = {"computed_torque": 1000.0}


def measured_states(model: HexapodModel, trajectory, times):
    """(q, qd) along the reference: IK of the pose and qd = J_A^-1 xi_d_dot, slightly perturbed."""
    rng = np.random.default_rng(0)
    states = []
    for t in times:
        ref = trajectory.sample(t)
        ik = model.inverse_kinematics(ref.pose[:3], ref.pose[3:])
        jacobian = model.analytic_jacobian(ik.q, phi=ik.phi).analytic
        qd = np.linalg.solve(jacobian, ref.velocity)
        states.append((ik.q + rng.normal(0.0, TRACKING_POSITION_NOISE, 6), qd + rng.normal(0.0, TRACKING_VELOCITY_NOISE, 6)))
    return states


def bench(name: str, parameters_path, steps: int) -> dict:
    model = HexapodModel.from_yaml(parameters_path)
    controller = make_controller(name, model)
    trajectory = make_trajectory("operational_space", model)
    times = np.arange(steps) * controller.period + 2.0  # past the start, where the ramp is moving
    references = [trajectory.sample(t) for t in times]
    states = measured_states(model, trajectory, times)
    controller.reset(times[0], *states[0])
    durations = []
    gc.disable()  # a collection in the loop is the runtime's cost, not the controller's
    try:
        for t, reference, (q, qd) in zip(times, references, states):
            start = time.perf_counter()
            output = controller.update(t, q, qd, reference)
            durations.append(time.perf_counter() - start)
            if output.safe_output:
                raise RuntimeError(f"{name}: safe output at t={t}: {output.message}")
    finally:
        gc.enable()
    micro = sorted(d * 1e6 for d in durations)
    return {
        "median": statistics.median(micro),
        "p99": micro[min(len(micro) - 1, int(0.99 * len(micro)))],
        "max": micro[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--parameters", default=None, help="parameters file (default config/hexapod.yaml)")
    args = parser.parse_args()
    for name in CONTROLLER_NAMES:
        result = bench(name, args.parameters, args.steps)
        target = ""
        if name in MEDIAN_TARGET_US:
            met = result["median"] <= MEDIAN_TARGET_US[name] and result["p99"] <= P99_TARGET_US[name]
            target = f"  target <= {MEDIAN_TARGET_US[name]:.0f} / {P99_TARGET_US[name]:.0f} us: {'met' if met else 'NOT met'}"
        print(f"{name:16s} median {result['median']:7.1f} us  p99 {result['p99']:7.1f} us  max {result['max']:7.1f} us{target}")


if __name__ == "__main__":
    main()
