"""ZYX Euler angles, quaternions, their rates, and the message-field conversions of ros_conventions."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexapod_control import InvalidInputError
from hexapod_control.conventions import (
    ReferencePoint,
    check_frame,
    effort_array,
    euler_from_reference_point,
    joint_state_arrays,
    reference_point_from_euler,
    stamp_fields,
    time_from_stamp,
)
from hexapod_control.model.rotations import (
    angular_acceleration_from_euler,
    angular_velocity_from_euler_rates,
    euler_accelerations,
    euler_rates_from_angular_velocity,
    euler_zyx_from_quaternion,
    euler_zyx_from_rotation,
    quaternion_from_euler_zyx,
    rotation_from_euler_zyx,
    wrap_angle,
)

angles = st.tuples(st.floats(-3.1, 3.1), st.floats(-1.5, 1.5), st.floats(-3.1, 3.1))


def elementary(axis, angle):
    c, s = math.cos(angle), math.sin(angle)
    return {
        "x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
        "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
        "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
    }[axis]


def quaternion_product(a, b):
    (ax, ay, az, aw), (bx, by, bz, bw) = a, b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


def axis_quaternion(axis, angle):
    s = math.sin(angle / 2)
    return {"x": (s, 0, 0), "y": (0, s, 0), "z": (0, 0, s)}[axis] + (math.cos(angle / 2),)


@settings(max_examples=200, deadline=None)
@given(euler=angles)
def test_rotation_quaternion_and_angles_agree(euler):
    lam, mu, nu = euler
    expected = elementary("z", lam) @ elementary("y", mu) @ elementary("x", nu)
    np.testing.assert_allclose(rotation_from_euler_zyx(euler), expected, atol=1e-14)
    q = quaternion_product(quaternion_product(axis_quaternion("z", lam), axis_quaternion("y", mu)), axis_quaternion("x", nu))
    sign = 1.0 if q[3] >= 0 else -1.0
    np.testing.assert_allclose(quaternion_from_euler_zyx(euler), [sign * v for v in q], atol=1e-14)
    np.testing.assert_allclose(euler_zyx_from_rotation(expected), euler, atol=1e-10)
    np.testing.assert_allclose(euler_zyx_from_quaternion(*quaternion_from_euler_zyx(euler)), euler, atol=1e-10)


def vee(skew):
    return np.array([skew[2, 1], skew[0, 2], skew[1, 0]])


def test_angular_velocity_and_acceleration_match_finite_differences():
    rng = np.random.default_rng(4)
    for _ in range(20):
        psi0, rate, acceleration = rng.uniform(-1, 1, 3), rng.normal(size=3), rng.normal(size=3)
        psi = lambda t: psi0 + rate * t + 0.5 * acceleration * t * t  # noqa: E731
        h = 1e-5
        # Bounds about 4x the worst error of these central differences measured over the 20 draws
        # (5.1e-10, 5.9e-10, 3.7e-10, 4.3e-10, in the order of the assertions).
        rotation_rate = (rotation_from_euler_zyx(psi(h)) - rotation_from_euler_zyx(psi(-h))) / (2 * h)
        omega = vee(rotation_rate @ rotation_from_euler_zyx(psi0).T)  # omega^ = R_dot R^T
        np.testing.assert_allclose(angular_velocity_from_euler_rates(psi0, rate), omega, rtol=0, atol=2e-9)
        np.testing.assert_allclose(euler_rates_from_angular_velocity(psi0, omega), rate, rtol=0, atol=2e-9)
        omega_at = lambda t: np.array(angular_velocity_from_euler_rates(psi(t), rate + acceleration * t))  # noqa: E731
        omega_dot = (omega_at(h) - omega_at(-h)) / (2 * h)
        np.testing.assert_allclose(angular_acceleration_from_euler(psi0, rate, acceleration), omega_dot, rtol=0, atol=1.5e-9)
        np.testing.assert_allclose(euler_accelerations(psi0, rate, omega_dot), acceleration, rtol=0, atol=1.5e-9)


def test_wrap_angle_lands_in_the_half_open_interval():
    values = np.linspace(-20, 20, 4001)
    wrapped = wrap_angle(values)
    assert np.all(wrapped > -math.pi) and np.all(wrapped <= math.pi)
    np.testing.assert_allclose(np.cos(wrapped), np.cos(values), atol=1e-12)
    np.testing.assert_allclose(np.sin(wrapped), np.sin(values), atol=1e-12)
    assert wrap_angle(-math.pi) == math.pi and isinstance(wrap_angle(1.0), float)


def test_reference_point_round_trip_and_bad_numbers():
    rng = np.random.default_rng(5)
    for _ in range(20):
        pose = np.concatenate((rng.normal(0, 0.1, 3), rng.uniform(-1, 1, 3)))
        velocity, acceleration = rng.normal(size=6), rng.normal(size=6)
        point = reference_point_from_euler(pose, velocity, acceleration)
        assert np.isclose(np.linalg.norm(point.rotation), 1.0)
        back = euler_from_reference_point(point)
        for original, recovered in zip((pose, velocity, acceleration), back):
            np.testing.assert_allclose(recovered, original, atol=1e-12)
    good = reference_point_from_euler(np.zeros(6), np.zeros(6), np.zeros(6))
    fields = dict(good.__dict__)
    with pytest.raises(InvalidInputError, match="non-finite"):
        euler_from_reference_point(ReferencePoint(**{**fields, "linear_velocity": (0.0, float("nan"), 0.0)}))
    with pytest.raises(InvalidInputError, match="orientation"):
        euler_from_reference_point(ReferencePoint(**{**fields, "rotation": (0.0, 0.0, 0.0, 0.0)}))
    with pytest.raises(InvalidInputError, match="norm"):  # 2x a unit quaternion: not a rotation message
        euler_from_reference_point(ReferencePoint(**{**fields, "rotation": (0.0, 0.0, 0.0, 2.0)}))
    gimbal = quaternion_from_euler_zyx((0.0, math.pi / 2, 0.0))
    with pytest.raises(InvalidInputError, match="singularity"):
        euler_from_reference_point(ReferencePoint(**{**fields, "rotation": gimbal}))


def test_joint_state_arrays_reorder_ignore_extras_and_reject_bad_states():
    expected = [f"slider_{k}" for k in range(6)]
    names = list(reversed(expected)) + ["gripper"]
    positions = [float(k) for k in range(7)]
    velocities = [10.0 + k for k in range(7)]
    q, qd = joint_state_arrays(names, positions, velocities, expected)
    np.testing.assert_array_equal(q, [5, 4, 3, 2, 1, 0])
    np.testing.assert_array_equal(qd, [15, 14, 13, 12, 11, 10])
    with pytest.raises(InvalidInputError, match="slider_3"):
        joint_state_arrays(expected[:3] + expected[4:], [0.0] * 5, [0.0] * 5, expected)
    with pytest.raises(InvalidInputError, match="positions"):
        joint_state_arrays(expected, [0.0] * 5, [0.0] * 6, expected)
    with pytest.raises(InvalidInputError, match="velocities"):
        joint_state_arrays(expected, [0.0] * 6, [], expected)
    with pytest.raises(InvalidInputError, match="slider_2"):
        joint_state_arrays(expected, [0.0, 0.0, math.inf, 0.0, 0.0, 0.0], [0.0] * 6, expected)


def test_effort_arrays_and_stamps():
    np.testing.assert_array_equal(effort_array([1, 2, 3, 4, 5, 6]), [1, 2, 3, 4, 5, 6])
    with pytest.raises(InvalidInputError, match="7 values"):
        effort_array([0.0] * 7)
    with pytest.raises(InvalidInputError, match="non-finite"):
        effort_array([0.0] * 5 + [math.nan])
    for t in (0.0, 1e-9, 12.345678901, 1e6 + 0.5):
        sec, nanosec = stamp_fields(t)
        assert 0 <= nanosec < 1_000_000_000
        assert time_from_stamp(SimpleNamespace(sec=sec, nanosec=nanosec)) == pytest.approx(t, abs=1e-9)


def test_frames_other_than_the_base_are_rejected():
    check_frame("", "hexapod_base", "reference")
    check_frame("hexapod_base", "hexapod_base", "reference")
    with pytest.raises(InvalidInputError, match="'map'"):
        check_frame("map", "hexapod_base", "reference")
