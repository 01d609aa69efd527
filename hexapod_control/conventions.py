"""How the package meets ROS 2: topics, message types, names, and message-field conversions.

Pure Python on purpose: the nodes (rclpy message classes) and the bag tools (rosbags message
classes) both use these functions, which only read and write plain numbers. Topic names are the
defaults; nodes accept ROS remapping and the bag tools take them as options.

The reference travels as ``trajectory_msgs/MultiDOFJointTrajectory`` with one point: the pose as
translation + quaternion, the velocity and acceleration as ``Twist`` in the base frame with the
*angular velocity* omega and its derivative (the standard meaning of a Twist), converted from and
to ZYX Euler-angle rates with the map T(psi) of erratum 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hexapod_control.errors import InvalidInputError
from hexapod_control.model.rotations import (
    angular_acceleration_from_euler,
    angular_velocity_from_euler_rates,
    euler_accelerations,
    euler_rates_from_angular_velocity,
    euler_zyx_from_quaternion,
    quaternion_from_euler_zyx,
)

# Default topic names (remappable) and their message types, as rosbag2 names them.
TOPICS = {
    "joint_states": "/joint_states",
    "reference": "/hexapod/reference",
    "platform_pose": "/hexapod/platform_pose",
    "platform_twist": "/hexapod/platform_twist",
    "passive_joint_states": "/hexapod/passive_joint_states",
    "description_joint_states": "/hexapod/description_joint_states",
    "effort_commands": "/effort_controller/commands",
    "predicted_forces": "/hexapod/inverse_dynamics/predicted",
    "force_residual": "/hexapod/inverse_dynamics/residual",
    "feedforward_forces": "/hexapod/inverse_dynamics/feedforward",
    "diagnostics": "/diagnostics",
    "clock": "/clock",
}
MESSAGE_TYPES = {
    "joint_states": "sensor_msgs/msg/JointState",
    "reference": "trajectory_msgs/msg/MultiDOFJointTrajectory",
    "platform_pose": "geometry_msgs/msg/PoseStamped",
    "platform_twist": "geometry_msgs/msg/TwistStamped",
    "passive_joint_states": "sensor_msgs/msg/JointState",
    "description_joint_states": "sensor_msgs/msg/JointState",
    "effort_commands": "std_msgs/msg/Float64MultiArray",
    "predicted_forces": "sensor_msgs/msg/JointState",
    "force_residual": "sensor_msgs/msg/JointState",
    "feedforward_forces": "sensor_msgs/msg/JointState",
    "diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    "clock": "rosgraph_msgs/msg/Clock",
}
REFERENCE_JOINT_NAME = "platform"  # the one "joint" of the MultiDOF reference
# A message's quaternion must be a rotation: a norm this far from 1 means a garbage or zero-filled
# orientation, which normalising would turn into an arbitrary large rotation target.
QUATERNION_NORM_TOLERANCE = 1e-6


def time_from_stamp(stamp) -> float:
    """builtin_interfaces/Time (sec, nanosec) -> seconds."""
    return stamp.sec + 1e-9 * stamp.nanosec


def stamp_fields(t: float) -> tuple[int, int]:
    """Seconds -> (sec, nanosec) with 0 <= nanosec < 1e9."""
    nanoseconds = round(t * 1e9)
    return nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000


def joint_state_arrays(names, positions, velocities, expected_names,
                       max_names: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(q, qd) in the order of ``expected_names`` from a JointState's fields, validated.

    Extra joints are ignored (a driver may publish more); a missing or repeated joint name (which
    value would be meant?), mismatched lengths, absent velocities, a non-number or a non-finite
    value raise InvalidInputError naming the joint. With ``max_names``, a message naming more
    joints is rejected before any field is read. The work is linear in the number of names.
    """
    try:
        count = len(names)
    except TypeError as error:
        raise InvalidInputError(f"joint state fields are not sequences: {error}") from error
    if max_names is not None and count > max_names:
        raise InvalidInputError(f"joint state names {count} joints, more than max_joint_state_names {max_names}")
    try:
        names = [str(name) for name in names]
        positions, velocities = list(positions), list(velocities)
    except TypeError as error:
        raise InvalidInputError(f"joint state fields are not sequences: {error}") from error
    if len(positions) != len(names):
        raise InvalidInputError(f"joint state has {len(names)} names but {len(positions)} positions")
    if len(velocities) != len(names):
        raise InvalidInputError(f"joint state has {len(names)} names but {len(velocities)} velocities")
    index = {name: k for k, name in enumerate(names)}
    if len(index) != len(names):
        seen, repeated = set(), set()
        for name in names:
            (repeated if name in seen else seen).add(name)
        raise InvalidInputError(f"joint state names joint(s) {sorted(repeated)} more than once")
    missing = [name for name in expected_names if name not in index]
    if missing:
        raise InvalidInputError(f"joint state lacks joint(s) {missing}")
    try:
        q = np.array([positions[index[name]] for name in expected_names], dtype=float)
        qd = np.array([velocities[index[name]] for name in expected_names], dtype=float)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"joint state holds a value that is not a number: {error}") from error
    if q.shape != (len(expected_names),) or qd.shape != q.shape:
        raise InvalidInputError(f"joint state values are not numbers: positions {q.shape}, velocities {qd.shape}")
    for label, values in (("position", q), ("velocity", qd)):
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise InvalidInputError(f"joint state {label} of {expected_names[bad[0]]} is {values[bad[0]]}")
    return q, qd


def effort_in_order(names, efforts, expected_names) -> np.ndarray | None:
    """A JointState's effort field in the order of ``expected_names``; None when it is absent, of
    another length than the names, or not all finite numbers (an optional field, never an error).
    Call it on a message whose names were validated (joint_state_arrays)."""
    try:
        if len(efforts) != len(names):
            return None
        index = {str(name): k for k, name in enumerate(names)}
        ordered = [efforts[index[name]] for name in expected_names]
    except (TypeError, KeyError):
        return None
    return finite_effort(ordered, len(expected_names))


def finite_effort(values, size: int) -> np.ndarray | None:
    """``values`` as an array of ``size`` finite numbers; None when they are not (effort_in_order's
    check, for an effort field already in joint order)."""
    try:
        array = np.array(values, dtype=float)
    except (TypeError, ValueError):
        return None
    return array if array.shape == (size,) and np.isfinite(array).all() else None


def effort_array(data, size: int = 6) -> np.ndarray:
    """Validated force vector of a Float64MultiArray's data."""
    values = np.asarray(list(data), dtype=float)
    if values.shape != (size,):
        raise InvalidInputError(f"effort command has {values.size} values, expected {size}")
    if not np.all(np.isfinite(values)):
        raise InvalidInputError(f"effort command holds a non-finite value: {values.tolist()}")
    return values


@dataclass(frozen=True)
class ReferencePoint:
    """The numbers of one MultiDOFJointTrajectoryPoint (base frame)."""

    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]  # quaternion (x, y, z, w)
    linear_velocity: tuple[float, float, float]
    angular_velocity: tuple[float, float, float]  # omega
    linear_acceleration: tuple[float, float, float]
    angular_acceleration: tuple[float, float, float]  # omega_dot


def reference_point_from_euler(pose, velocity, acceleration) -> ReferencePoint:
    """xi_d, xi_d_dot, xi_d_ddot with ZYX Euler angles -> message numbers."""
    pose, velocity, acceleration = (np.asarray(v, dtype=float) for v in (pose, velocity, acceleration))
    euler = tuple(pose[3:])
    return ReferencePoint(
        translation=tuple(pose[:3]),
        rotation=quaternion_from_euler_zyx(euler),
        linear_velocity=tuple(velocity[:3]),
        angular_velocity=angular_velocity_from_euler_rates(euler, velocity[3:]),
        linear_acceleration=tuple(acceleration[:3]),
        angular_acceleration=angular_acceleration_from_euler(euler, velocity[3:], acceleration[3:]),
    )


def euler_from_message_quaternion(x: float, y: float, z: float, w: float) -> tuple[float, float, float]:
    """ZYX Euler angles of a message's unit quaternion; InvalidInputError unless |q| = 1."""
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if not abs(norm - 1.0) <= QUATERNION_NORM_TOLERANCE:
        raise InvalidInputError(f"orientation quaternion ({x}, {y}, {z}, {w}) has norm {norm}, not 1")
    return euler_zyx_from_quaternion(x, y, z, w)


def check_frame(frame_id: str, base_frame: str, what: str) -> None:
    """A message in another frame would be taken as a base-frame target: reject it (empty = base)."""
    if frame_id not in ("", base_frame):
        raise InvalidInputError(f"{what} is in frame {frame_id!r}; expected {base_frame!r}")


def euler_from_reference_point(point: ReferencePoint) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Message numbers -> (xi_d, xi_d_dot, xi_d_ddot); raises InvalidInputError on bad numbers."""
    values = (
        point.translation + point.rotation + point.linear_velocity + point.angular_velocity
        + point.linear_acceleration + point.angular_acceleration
    )
    if len(values) != 19 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        raise InvalidInputError(f"reference point holds a non-finite or missing value: {values}")
    try:
        euler = euler_from_message_quaternion(*point.rotation)
    except InvalidInputError as error:
        raise InvalidInputError(f"reference orientation: {error}") from error
    if abs(math.cos(euler[1])) < 1e-6:
        raise InvalidInputError(f"reference orientation is at the ZYX Euler singularity mu = {euler[1]}")
    rates = euler_rates_from_angular_velocity(euler, point.angular_velocity)
    accelerations = euler_accelerations(euler, rates, point.angular_acceleration)
    return (
        np.array(point.translation + euler),
        np.array(tuple(point.linear_velocity) + rates),
        np.array(tuple(point.linear_acceleration) + accelerations),
    )
