"""ZYX Euler angles (R = Rz(lambda) Ry(mu) Rx(nu)), quaternions and their rates.

The map between angular velocity and Euler rates is omega = T(psi) psi_dot with
T = [[0, -sin l, cos l cos m], [0, cos l, sin l cos m], [1, 0, -sin m]] (erratum 2 of the thesis,
whose printed T is the ZXZ one). omega is expressed in the base frame.
"""

from __future__ import annotations

import math

import numpy as np

Vec = tuple[float, float, float]


def euler_zyx_from_axes(x_axis: Vec, y_axis: Vec, z_axis: Vec) -> Vec:
    """ZYX Euler angles of R = [x y z] (columns), with atan2 throughout."""
    r11, r21, r31 = x_axis
    r32, r33 = y_axis[2], z_axis[2]
    return (math.atan2(r21, r11), math.atan2(-r31, math.hypot(r11, r21)), math.atan2(r32, r33))


def euler_zyx_from_rotation(rotation) -> Vec:
    rotation = np.asarray(rotation, dtype=float)
    return euler_zyx_from_axes(tuple(rotation[:, 0]), tuple(rotation[:, 1]), tuple(rotation[:, 2]))


def rotation_from_euler_zyx(euler) -> np.ndarray:
    return np.array(rotation_rows_from_euler_zyx(euler))


def rotation_rows_from_euler_zyx(euler) -> tuple[Vec, Vec, Vec]:
    """Rows of Rz(lambda) Ry(mu) Rx(nu) as float tuples (for loops where numpy costs more)."""
    lam, mu, nu = euler
    cl, sl, cm, sm, cn, sn = (math.cos(lam), math.sin(lam), math.cos(mu), math.sin(mu), math.cos(nu), math.sin(nu))
    return (
        (cl * cm, cl * sm * sn - sl * cn, cl * sm * cn + sl * sn),
        (sl * cm, sl * sm * sn + cl * cn, sl * sm * cn - cl * sn),
        (-sm, cm * sn, cm * cn),
    )


def quaternion_from_euler_zyx(euler) -> tuple[float, float, float, float]:
    """(x, y, z, w) of Rz(lambda) Ry(mu) Rx(nu), w >= 0."""
    lam, mu, nu = (0.5 * a for a in euler)
    cl, sl, cm, sm, cn, sn = (math.cos(lam), math.sin(lam), math.cos(mu), math.sin(mu), math.cos(nu), math.sin(nu))
    w = cl * cm * cn + sl * sm * sn
    x = cl * cm * sn - sl * sm * cn
    y = cl * sm * cn + sl * cm * sn
    z = sl * cm * cn - cl * sm * sn
    sign = -1.0 if w < 0.0 else 1.0
    return (sign * x, sign * y, sign * z, sign * w)


def euler_zyx_from_quaternion(x: float, y: float, z: float, w: float) -> Vec:
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if not norm > 0.0 or not math.isfinite(norm):
        raise ValueError(f"quaternion ({x}, {y}, {z}, {w}) has no orientation")
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    x_axis = (1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y))
    y_axis = (2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x))
    z_axis = (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y))
    return euler_zyx_from_axes(x_axis, y_axis, z_axis)


def angular_velocity_from_euler_rates(euler, rates) -> Vec:
    """omega = T(psi) psi_dot."""
    lam, mu, _ = euler
    lam_rate, mu_rate, nu_rate = rates
    cl, sl, cm, sm = math.cos(lam), math.sin(lam), math.cos(mu), math.sin(mu)
    return (-sl * mu_rate + cl * cm * nu_rate, cl * mu_rate + sl * cm * nu_rate, lam_rate - sm * nu_rate)


def euler_rates_from_angular_velocity(euler, omega) -> Vec:
    """psi_dot = T(psi)^-1 omega (singular at mu = +-pi/2)."""
    lam, mu, _ = euler
    cl, sl, cm, sm = math.cos(lam), math.sin(lam), math.cos(mu), math.sin(mu)
    nu_rate = (cl * omega[0] + sl * omega[1]) / cm
    mu_rate = -sl * omega[0] + cl * omega[1]
    return (omega[2] + sm * nu_rate, mu_rate, nu_rate)


def _t_dot_times_rates(euler, rates) -> Vec:
    """T_dot(psi, psi_dot) psi_dot, the part of omega_dot not due to psi_ddot."""
    lam, mu, _ = euler
    lam_rate, mu_rate, nu_rate = rates
    cl, sl, cm, sm = math.cos(lam), math.sin(lam), math.cos(mu), math.sin(mu)
    return (
        -cl * lam_rate * mu_rate + (-sl * cm * lam_rate - cl * sm * mu_rate) * nu_rate,
        -sl * lam_rate * mu_rate + (cl * cm * lam_rate - sl * sm * mu_rate) * nu_rate,
        -cm * mu_rate * nu_rate,
    )


def angular_acceleration_from_euler(euler, rates, accelerations) -> Vec:
    """omega_dot = T psi_ddot + T_dot psi_dot."""
    base = angular_velocity_from_euler_rates(euler, accelerations)
    drift = _t_dot_times_rates(euler, rates)
    return (base[0] + drift[0], base[1] + drift[1], base[2] + drift[2])


def euler_accelerations(euler, rates, angular_acceleration) -> Vec:
    """psi_ddot = T^-1 (omega_dot - T_dot psi_dot)."""
    drift = _t_dot_times_rates(euler, rates)
    return euler_rates_from_angular_velocity(
        euler, tuple(a - b for a, b in zip(angular_acceleration, drift))
    )


def wrap_angle(angle):
    """Angle(s) wrapped to (-pi, pi]; element-wise on arrays, a float for a scalar."""
    wrapped = math.pi - np.mod(math.pi - np.asarray(angle, dtype=float), 2.0 * math.pi)
    return float(wrapped) if wrapped.ndim == 0 else wrapped


def wrap_angle_float(angle: float) -> float:
    """:func:`wrap_angle` of one float, without NumPy's per-call overhead (the same formula, the same bits)."""
    return math.pi - (math.pi - angle) % (2.0 * math.pi)
