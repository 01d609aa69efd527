"""The ZYX Euler conversions of :mod:`.rotations` on (N, 3) and (N, 4) arrays, row by row.

The evaluation decodes recorded orientations with them, and the lockstep recording encodes the
references and poses of many steps at once; the scalar functions stay the loop's.
"""

from __future__ import annotations

import numpy as np


def euler_zyx_from_axes(x_axis: np.ndarray, y_axis: np.ndarray, z_axis: np.ndarray) -> np.ndarray:
    """(N, 3) ZYX angles of the rotations with columns x, y, z (each (N, 3)), as rotations.euler_zyx_from_axes."""
    return np.column_stack((
        np.arctan2(x_axis[:, 1], x_axis[:, 0]),
        np.arctan2(-x_axis[:, 2], np.hypot(x_axis[:, 0], x_axis[:, 1])),
        np.arctan2(y_axis[:, 2], z_axis[:, 2]),
    ))


def euler_zyx_from_quaternion(quaternion: np.ndarray) -> np.ndarray:
    """(N, 3) ZYX angles of (N, 4) quaternions (x, y, z, w), normalised first; rows of zero or
    non-finite norm give NaN (the scalar function raises for them)."""
    norm = np.linalg.norm(quaternion, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        x, y, z, w = (quaternion / norm[:, None]).T
    x_axis = np.column_stack((1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)))
    y_axis = np.column_stack((2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)))
    z_axis = np.column_stack((2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)))
    angles = euler_zyx_from_axes(x_axis, y_axis, z_axis)
    angles[~(np.isfinite(norm) & (norm > 0.0))] = np.nan
    return angles


def euler_rates_from_angular_velocity(euler: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """psi_dot = T(psi)^-1 omega, row by row (rotations.euler_rates_from_angular_velocity)."""
    cl, sl, cm, sm = np.cos(euler[:, 0]), np.sin(euler[:, 0]), np.cos(euler[:, 1]), np.sin(euler[:, 1])
    nu_rate = (cl * omega[:, 0] + sl * omega[:, 1]) / cm
    mu_rate = -sl * omega[:, 0] + cl * omega[:, 1]
    return np.column_stack((omega[:, 2] + sm * nu_rate, mu_rate, nu_rate))


def euler_accelerations(euler: np.ndarray, rates: np.ndarray, angular_acceleration: np.ndarray) -> np.ndarray:
    """psi_ddot = T^-1 (omega_dot - T_dot psi_dot), row by row (rotations.euler_accelerations)."""
    return euler_rates_from_angular_velocity(euler, angular_acceleration - _t_dot_times_rates(euler, rates))


def quaternion_from_euler_zyx(euler: np.ndarray) -> np.ndarray:
    """(N, 4) quaternions (x, y, z, w), w >= 0, of (N, 3) ZYX angles (rotations.quaternion_from_euler_zyx)."""
    half = 0.5 * euler
    cl, sl = np.cos(half[:, 0]), np.sin(half[:, 0])
    cm, sm = np.cos(half[:, 1]), np.sin(half[:, 1])
    cn, sn = np.cos(half[:, 2]), np.sin(half[:, 2])
    quaternion = np.column_stack((
        cl * cm * sn - sl * sm * cn, cl * sm * cn + sl * cm * sn, sl * cm * cn - cl * sm * sn, cl * cm * cn + sl * sm * sn,
    ))
    return np.where(quaternion[:, 3:] < 0.0, -quaternion, quaternion)


def angular_velocity_from_euler_rates(euler: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """omega = T(psi) psi_dot, row by row (rotations.angular_velocity_from_euler_rates)."""
    cl, sl, cm, sm = np.cos(euler[:, 0]), np.sin(euler[:, 0]), np.cos(euler[:, 1]), np.sin(euler[:, 1])
    lam_rate, mu_rate, nu_rate = rates.T
    return np.column_stack((-sl * mu_rate + cl * cm * nu_rate, cl * mu_rate + sl * cm * nu_rate, lam_rate - sm * nu_rate))


def _t_dot_times_rates(euler: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """T_dot(psi, psi_dot) psi_dot row by row (rotations._t_dot_times_rates)."""
    cl, sl, cm, sm = np.cos(euler[:, 0]), np.sin(euler[:, 0]), np.cos(euler[:, 1]), np.sin(euler[:, 1])
    lam_rate, mu_rate, nu_rate = rates.T
    return np.column_stack((
        -cl * lam_rate * mu_rate + (-sl * cm * lam_rate - cl * sm * mu_rate) * nu_rate,
        -sl * lam_rate * mu_rate + (cl * cm * lam_rate - sl * sm * mu_rate) * nu_rate,
        -cm * mu_rate * nu_rate,
    ))


def angular_acceleration_from_euler(euler: np.ndarray, rates: np.ndarray, accelerations: np.ndarray) -> np.ndarray:
    """omega_dot = T psi_ddot + T_dot psi_dot, row by row (rotations.angular_acceleration_from_euler)."""
    return angular_velocity_from_euler_rates(euler, accelerations) + _t_dot_times_rates(euler, rates)
