"""CDR bytes of the project's messages from plain numbers, and back, through the ``rosbags`` type store.

The recorder writes the bytes its raw subscriptions receive; the main job and the tests build the
same messages here, so every bag holds what the nodes publish (type names: ``MESSAGE_TYPES`` of
``conventions``).
"""

from __future__ import annotations

import functools
from typing import Mapping, Sequence

import numpy as np

from hexapod_control.bags import cdr
from hexapod_control.model import rotation_rows
from hexapod_control.conventions import (
    MESSAGE_TYPES,
    REFERENCE_JOINT_NAME,
    reference_point_from_euler,
    stamp_fields,
)


@functools.lru_cache(maxsize=1)
def typestore():
    """The rosbags type store of ROS 2 Kilted (the distribution of the project's rclpy wheels)."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def _types():
    return typestore().types


def _time(t: float):
    sec, nanosec = stamp_fields(t)
    return _types()["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def _header(t: float, frame_id: str = ""):
    return _types()["std_msgs/msg/Header"](stamp=_time(t), frame_id=frame_id)


def serialize(message, msgtype: str) -> bytes:
    return bytes(typestore().serialize_cdr(message, msgtype))


def deserialize(data: bytes, msgtype: str):
    return typestore().deserialize_cdr(data, msgtype)


def joint_state_cdr(t: float, names: Sequence[str], positions, velocities, efforts=()) -> bytes:
    """sensor_msgs/JointState stamped ``t`` [s]. Sizes are written as given (tests write bad ones)."""
    message = _types()["sensor_msgs/msg/JointState"](
        header=_header(t),
        name=list(names),
        position=np.asarray(positions, dtype=np.float64),
        velocity=np.asarray(velocities, dtype=np.float64),
        effort=np.asarray(efforts, dtype=np.float64),
    )
    return serialize(message, MESSAGE_TYPES["joint_states"])


def reference_cdr(t: float, pose, velocity, acceleration, frame_id: str = "") -> bytes:
    """trajectory_msgs/MultiDOFJointTrajectory with one point: xi_d, xi_d_dot, xi_d_ddot (ZYX Euler)."""
    point = reference_point_from_euler(pose, velocity, acceleration)
    types = _types()
    vector3, twist = types["geometry_msgs/msg/Vector3"], types["geometry_msgs/msg/Twist"]

    def v3(values):
        return vector3(x=float(values[0]), y=float(values[1]), z=float(values[2]))

    transform = types["geometry_msgs/msg/Transform"](
        translation=v3(point.translation),
        rotation=types["geometry_msgs/msg/Quaternion"](*map(float, point.rotation)),
    )
    trajectory_point = types["trajectory_msgs/msg/MultiDOFJointTrajectoryPoint"](
        transforms=[transform],
        velocities=[twist(linear=v3(point.linear_velocity), angular=v3(point.angular_velocity))],
        accelerations=[twist(linear=v3(point.linear_acceleration), angular=v3(point.angular_acceleration))],
        time_from_start=types["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
    )
    message = types["trajectory_msgs/msg/MultiDOFJointTrajectory"](
        header=_header(t, frame_id), joint_names=[REFERENCE_JOINT_NAME], points=[trajectory_point]
    )
    return serialize(message, MESSAGE_TYPES["reference"])


def effort_cdr(forces) -> bytes:
    """std_msgs/Float64MultiArray of the actuator forces [N] (as many values as given)."""
    types = _types()
    message = types["std_msgs/msg/Float64MultiArray"](
        layout=types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
        data=np.asarray(forces, dtype=np.float64),
    )
    return serialize(message, MESSAGE_TYPES["effort_commands"])


def pose_cdr(t: float, position, quaternion, frame_id: str = "") -> bytes:
    """geometry_msgs/PoseStamped; ``quaternion`` is (x, y, z, w)."""
    types = _types()
    pose = types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](*map(float, position)),
        orientation=types["geometry_msgs/msg/Quaternion"](*map(float, quaternion)),
    )
    return serialize(types["geometry_msgs/msg/PoseStamped"](header=_header(t, frame_id), pose=pose), MESSAGE_TYPES["platform_pose"])


def twist_cdr(t: float, linear, angular, frame_id: str = "") -> bytes:
    """geometry_msgs/TwistStamped; ``angular`` is omega [rad/s]."""
    types = _types()
    vector3 = types["geometry_msgs/msg/Vector3"]
    twist = types["geometry_msgs/msg/Twist"](linear=vector3(*map(float, linear)), angular=vector3(*map(float, angular)))
    return serialize(types["geometry_msgs/msg/TwistStamped"](header=_header(t, frame_id), twist=twist),
                     MESSAGE_TYPES["platform_twist"])


def diagnostics_cdr(t: float, statuses: Sequence[tuple[int, str, str, Mapping[str, str]]]) -> bytes:
    """diagnostic_msgs/DiagnosticArray of (level, name, message, key-values) entries."""
    types = _types()
    status_type, key_value = types["diagnostic_msgs/msg/DiagnosticStatus"], types["diagnostic_msgs/msg/KeyValue"]
    status = [
        status_type(
            level=int(level), name=name, message=text, hardware_id="",
            values=[key_value(key=str(k), value=str(v)) for k, v in values.items()],
        )
        for level, name, text, values in statuses
    ]
    message = types["diagnostic_msgs/msg/DiagnosticArray"](header=_header(t), status=status)
    return serialize(message, MESSAGE_TYPES["diagnostics"])


def nanoseconds(t: float) -> int:
    """Seconds -> integer nanoseconds (the bag's log-time unit)."""
    return int(round(t * 1e9))


def nanoseconds_array(t: np.ndarray) -> np.ndarray:
    """:func:`nanoseconds` of each element (both round half to even)."""
    return np.rint(np.asarray(t, dtype=float) * 1e9).astype(np.int64)


class StepMessages:
    """The messages a closed loop records every step (and the robot stack's decimated outputs), for
    fixed joint names and frame, encoded in place (:class:`hexapod_control.bags.cdr.TemplateEncoder`):
    the bytes the functions above give, without building a message object per step. Times are
    seconds, as for those functions."""

    def __init__(self, joint_names: Sequence[str], frame_id: str):
        zeros = np.zeros(6)
        template = joint_state_cdr(0.0, joint_names, zeros, zeros, zeros)
        self._joint_state = cdr.TemplateEncoder(template, cdr.joint_state_layout(template), ("stamp",),
                                                ("position", "velocity", "effort"))
        template = effort_cdr(zeros)
        self._effort = cdr.TemplateEncoder(template, cdr.float64_array_layout(template), (), ("data",))
        template = pose_cdr(0.0, zeros[:3], (0.0, 0.0, 0.0, 1.0), frame_id)
        self._pose = cdr.TemplateEncoder(template, cdr.pose_stamped_layout(template), ("stamp",),
                                         ("position", "orientation"))
        template = twist_cdr(0.0, zeros[:3], zeros[:3], frame_id)
        self._twist = cdr.TemplateEncoder(template, cdr.twist_stamped_layout(template), ("stamp",), ("linear", "angular"))
        template = reference_cdr(0.0, zeros, zeros, zeros, frame_id)
        self._reference = cdr.TemplateEncoder(
            template, cdr.reference_layout(template), ("stamp",),
            tuple(f"points[0].{field}" for field in ("transforms[0].translation", "transforms[0].rotation",
                                                     "velocities[0].linear", "velocities[0].angular",
                                                     "accelerations[0].linear", "accelerations[0].angular")))

    # Many steps at once: (n, size) message bytes from (n,) times [s] and (n, k) arrays.
    def joint_states(self, t: np.ndarray, positions, velocities, efforts) -> np.ndarray:
        return self._joint_state.encode_rows((nanoseconds_array(t),), positions, velocities, efforts)

    def efforts(self, forces) -> np.ndarray:
        return self._effort.encode_rows((), forces)

    def poses(self, t: np.ndarray, positions, quaternions) -> np.ndarray:
        return self._pose.encode_rows((nanoseconds_array(t),), positions, quaternions)

    def references(self, t: np.ndarray, poses, velocities, accelerations) -> np.ndarray:
        """The reference messages of xi_d, xi_d_dot, xi_d_ddot rows, as :meth:`reference` converts one."""
        euler, rates = poses[:, 3:], velocities[:, 3:]
        return self._reference.encode_rows(
            (nanoseconds_array(t),), poses[:, :3], rotation_rows.quaternion_from_euler_zyx(euler), velocities[:, :3],
            rotation_rows.angular_velocity_from_euler_rates(euler, rates), accelerations[:, :3],
            rotation_rows.angular_acceleration_from_euler(euler, rates, accelerations[:, 3:]))

    def joint_state(self, t: float, positions, velocities, efforts) -> bytes:
        return self._joint_state.encode((nanoseconds(t),), positions, velocities, efforts)

    def effort(self, forces) -> bytes:
        return self._effort.encode((), forces)

    def pose(self, t: float, position, quaternion) -> bytes:
        return self._pose.encode((nanoseconds(t),), position, quaternion)

    def twist(self, t: float, linear, angular) -> bytes:
        return self._twist.encode((nanoseconds(t),), linear, angular)

    def reference(self, t: float, pose, velocity, acceleration) -> bytes:
        point = reference_point_from_euler(pose, velocity, acceleration)
        return self._reference.encode((nanoseconds(t),), point.translation, point.rotation, point.linear_velocity,
                                      point.angular_velocity, point.linear_acceleration, point.angular_acceleration)
