"""The model on whole arrays (evaluation.batch) against the one-sample model: forward kinematics along a
motion, its failures, inverse dynamics, and the rotation conversions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hexapod_control.evaluation import batch
from hexapod_control.model import rotation_rows, rotations
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import load_parameters

PARAMETERS = load_parameters()
MODEL = HexapodModel(PARAMETERS)
# Both solve the closure to FK_TOLERANCE = 1e-12 m from different starts: poses agree to 1.1e-12
# (measured along (6.82)); the leg lengths close to 1e-12 m like the scalar FK's.
POSE_TOLERANCE = 5e-12
CLOSURE_TOLERANCE = 5e-12


def joint_motion(seconds: float, rate: float = 1000.0) -> np.ndarray:
    """q of the joint-space trajectory (6.82) sampled at ``rate``: large, fast actuator motions."""
    settings = PARAMETERS.trajectories.joint_space
    t = np.arange(int(seconds * rate)) / rate
    s = 1.0 - np.exp(-settings.ramp_rate * t**3)
    return PARAMETERS.home_actuator_position + np.array(settings.amplitudes) * s[:, None] * np.sin(
        np.array(settings.angular_frequencies) * t[:, None])


def leg_lengths(q: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """|P_i - D_j| of every leg, from the pose alone (the platform's apexes placed by R and r_F)."""
    chains = MODEL.kinematics.chains
    lengths = []
    for row, xi in zip(q, pose):
        rotation = rotations.rotation_from_euler_zyx(xi[3:])
        centroid = xi[:3] - chains.platform_offset * rotation[:, 2]
        apexes = centroid + (rotation @ np.array(chains.platform_apexes).T).T
        sliders = MODEL.slider_positions(row)
        lengths.append([np.linalg.norm(apexes[j // 2] - sliders[j]) for j in range(6)])
    return np.array(lengths)


# The batch forward kinematics in C (the loop's warm start, row after row) and in NumPy (anchors and
# Newton on every row at once).
BACKENDS = ("c", "python")


@pytest.mark.parametrize("choice", BACKENDS)
def test_batch_forward_kinematics_matches_the_one_sample_model(choice):
    q = joint_motion(8.0)[::4]  # 2000 samples 4 ms apart, through the ramp and full amplitude
    solved = batch.forward_kinematics_batch(MODEL.kinematics, q, choice)
    assert solved.failures == [] and solved.one_by_one < q.shape[0] / 50
    state = MODEL.create_state()
    expected = np.array([MODEL.forward_kinematics(row, state).pose for row in q])
    np.testing.assert_allclose(solved.pose, expected, rtol=0, atol=POSE_TOLERANCE)
    picked = np.arange(0, q.shape[0], 97)
    np.testing.assert_allclose(leg_lengths(q[picked], solved.pose[picked]), PARAMETERS.geometry.leg_length,
                               rtol=0, atol=CLOSURE_TOLERANCE)


@pytest.mark.parametrize("choice", BACKENDS)
def test_batch_forward_kinematics_lists_failures_and_keeps_the_rest(choice):
    q = joint_motion(1.0)[::10].copy()
    q[20, 0] = np.nan
    q[40, :2] = 0.9  # the legs of side 1 cannot span 1.8 m: no assembly
    solved = batch.forward_kinematics_batch(MODEL.kinematics, q, choice)
    assert [k for k, _ in solved.failures] == [20, 40]
    assert "AssemblyError" in solved.failures[1][1]
    assert np.isnan(solved.pose[[20, 40]]).all() and np.isfinite(np.delete(solved.pose, [20, 40], axis=0)).all()


def test_compiled_rows_from_mid_motion_match_the_one_sample_model():
    """A series that starts mid-motion (a piece of a long run), solved in C from the home state."""
    q = joint_motion(8.0)[5000:7000]
    assert np.max(np.abs(q[0] - PARAMETERS.home_actuator_position)) > 0.05
    solved = batch.forward_kinematics_batch(MODEL.kinematics, q, "c")
    assert solved.failures == [] and solved.one_by_one == 0
    state = MODEL.create_state()
    expected = np.array([MODEL.forward_kinematics(row, state).pose for row in q])
    np.testing.assert_allclose(solved.pose, expected, rtol=0, atol=POSE_TOLERANCE)


def test_batch_inverse_dynamics_matches_the_one_sample_model():
    rng = np.random.default_rng(11)
    q = joint_motion(4.0)[::40]
    phi = batch.forward_kinematics_batch(MODEL.kinematics, q).phi
    qd, qdd = rng.normal(0.0, 0.2, q.shape), rng.normal(0.0, 2.0, q.shape)
    forces = batch.inverse_dynamics_batch(PARAMETERS, q, phi, qd, qdd)
    expected = np.array([MODEL.inverse_dynamics(q[k], qd[k], qdd[k], phi=phi[k]) for k in range(len(q))])
    np.testing.assert_allclose(forces, expected, rtol=1e-12, atol=1e-12)
    nan_phi = phi.copy()
    nan_phi[3] = np.nan
    assert np.isnan(batch.inverse_dynamics_batch(PARAMETERS, q, nan_phi, qd, qdd)[3]).all()


@pytest.mark.parametrize("seed", range(3))
def test_array_rotations_match_the_scalar_ones(seed):
    rng = np.random.default_rng(seed)
    euler = rng.uniform(-1.2, 1.2, (50, 3))
    rates, accelerations = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    quaternion = rotation_rows.quaternion_from_euler_zyx(euler)
    np.testing.assert_allclose(quaternion, [rotations.quaternion_from_euler_zyx(e) for e in euler], rtol=0, atol=1e-15)
    np.testing.assert_allclose(rotation_rows.euler_zyx_from_quaternion(quaternion),
                               [rotations.euler_zyx_from_quaternion(*x) for x in quaternion], rtol=0, atol=1e-15)
    omega = rotation_rows.angular_velocity_from_euler_rates(euler, rates)
    np.testing.assert_allclose(omega, [rotations.angular_velocity_from_euler_rates(e, r) for e, r in zip(euler, rates)],
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(rotation_rows.euler_rates_from_angular_velocity(euler, omega), rates, rtol=0, atol=1e-14)
    omega_dot = rotation_rows.angular_acceleration_from_euler(euler, rates, accelerations)
    np.testing.assert_allclose(omega_dot, [rotations.angular_acceleration_from_euler(e, r, a)
                                           for e, r, a in zip(euler, rates, accelerations)], rtol=0, atol=1e-14)
    np.testing.assert_allclose(rotation_rows.euler_accelerations(euler, rates, omega_dot), accelerations, rtol=0, atol=1e-13)
    assert np.isnan(rotation_rows.euler_zyx_from_quaternion(np.zeros((1, 4)))).all()  # no orientation, as the scalar one raises
    assert math.isfinite(float(np.sum(quaternion)))


def test_savitzky_golay_weights_reproduce_polynomials():
    """A fit of order 3 reproduces any cubic: its derivative at the window's centre is exact."""
    from hexapod_control.evaluation.model_check import _filtered_at, savgol_coefficients

    dt, window = 1e-3, 21
    t = np.arange(200) * dt
    y = 0.3 - 2.0 * t + 5.0 * t**2 - 40.0 * t**3
    slope = -2.0 + 10.0 * t - 120.0 * t**2
    half = window // 2
    centres = np.arange(half, t.size - half)
    derivative = _filtered_at(y[:, None], savgol_coefficients(window, 3, 1, dt), centres)[:, 0]
    np.testing.assert_allclose(derivative, slope[centres], rtol=0, atol=1e-9)
    smoothed = _filtered_at(y[:, None], savgol_coefficients(window, 3, 0, dt), centres)[:, 0]
    np.testing.assert_allclose(smoothed, y[centres], rtol=0, atol=1e-13)
