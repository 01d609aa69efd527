"""Both controllers track the thesis 6.5 trajectory on the independent MuJoCo plant for 30 s.

The error is measured twice: as the controller sees it (its FK of the measured q) and from
MuJoCo's own platform pose, which does not go through the project's kinematics. Figures on this
machine (simulated_plant gains, 1 kHz): computed torque RMS 8.8e-9 m / 1.9e-8 rad (max 1.3e-8 m,
2.7e-8 rad); double loop RMS 5.0e-5 m / 1.7e-4 rad (max 8.2e-5 m, 2.9e-4 rad); the loops stay
closed to 2.4e-8 m.
"""

import numpy as np
import pytest

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.control.controllers import ControlStatus, make_controller
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.simulation import make_plant

pytest.importorskip("mujoco")

DURATION = 30.0  # [s], the trajectory's ramp (kappa = 0.01 s^-3) is complete after ~10 s


def track_on_mujoco(controller_name):
    parameters = load_parameters()
    plant = make_plant("mujoco", parameters)
    model = HexapodModel(parameters)
    controller = make_controller(controller_name, model, gain_set="simulated_plant")
    trajectory = make_trajectory("operational_space", model)
    controller.reset(0.0, plant.joint_positions(), plant.joint_velocities())
    seen, true, closure, statuses = [], [], 0.0, set()
    for _ in range(int(round(DURATION / plant.dt))):
        t = plant.time
        reference = trajectory.sample(t)
        mujoco_pose = plant.platform_pose()  # at time t, like the measurement the controller gets
        error = reference.pose - np.concatenate((mujoco_pose.position, mujoco_pose.euler_zyx))
        true.append((np.linalg.norm(error[:3]), np.linalg.norm(wrap_angle(error[3:]))))
        output = controller.update(t, plant.joint_positions(), plant.joint_velocities(), reference)
        plant.apply_forces(output.forces)
        plant.step()
        statuses.add(output.status)
        seen.append((output.position_error_norm, output.orientation_error_norm))
        closure = max(closure, plant.closure_error())
    return np.array(seen), np.array(true), closure, statuses


def rms(values):
    return float(np.sqrt(np.mean(values**2)))


@pytest.mark.parametrize(
    "controller_name, position_rms, position_max, orientation_rms, orientation_max",
    [
        # Regression bounds about 2x the figures in the module docstring (as in test_controllers.py).
        ("computed_torque", 2e-8, 3e-8, 4e-8, 6e-8),
        ("double_loop", 1e-4, 1.6e-4, 3.4e-4, 5.8e-4),
    ],
)
def test_controllers_track_the_thesis_trajectory_on_mujoco(
    controller_name, position_rms, position_max, orientation_rms, orientation_max
):
    seen, true, closure, statuses = track_on_mujoco(controller_name)
    assert statuses == {ControlStatus.OK}
    for errors in (seen, true):
        assert rms(errors[:, 0]) < position_rms and errors[:, 0].max() < position_max
        assert rms(errors[:, 1]) < orientation_rms and errors[:, 1].max() < orientation_max
    assert closure < 1e-7  # 2.4e-8 m measured
