"""Kinematics benchmark: warm FK along trajectory (6.82) at 1 kHz, IK, J_A and assembly modes.

Run: ./scripts/bootstrap.sh && source scripts/env.sh && python benchmarks/bench_kinematics.py
Target (issue 2): warm FK <= 30 us median in CPython.
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import print_header, print_row, time_calls, time_sequence

from hexapod_control import HexapodModel
from hexapod_control.control.trajectories import JointSpaceTrajectory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the FK path at 1 kHz")
    arguments = parser.parse_args()

    model = HexapodModel.from_yaml()
    trajectory = JointSpaceTrajectory.from_model(model)
    path = [trajectory.sample_joints(k * 1e-3).position.tolist() for k in range(int(arguments.seconds * 1e3))]
    sample_q = path[len(path) // 2]
    pose = model.forward_kinematics(sample_q)
    qd = np.full(6, 0.1)

    print_header("hexapod_control kinematics")
    state = model.create_state()
    warm = time_sequence(lambda q: model.forward_kinematics(q, state), path)
    print_row("forward_kinematics, warm along (6.82) 1 kHz", warm)
    cold = time_calls(lambda: model.forward_kinematics(sample_q), 300, warmup=10)
    print_row("forward_kinematics, cold (from home, no state)", cold)
    print_row(
        "inverse_kinematics",
        time_calls(lambda: model.inverse_kinematics(pose.position, pose.euler_zyx), 3000),
    )
    print_row("analytic_jacobian (J_A, A, conditioning)", time_calls(lambda: model.analytic_jacobian(sample_q, phi=pose.phi), 3000))
    print_row(
        "analytic_jacobian with J_A_dot q_dot",
        time_calls(lambda: model.analytic_jacobian(sample_q, qd, phi=pose.phi), 3000),
    )
    print_row("assembly_modes", time_calls(lambda: model.assembly_modes(sample_q), 300, warmup=10))


if __name__ == "__main__":
    main()
