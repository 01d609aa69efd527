"""The hot path's joint states as serialized bytes, read and written without rclpy message objects.

Why. In the 1 kHz loop, rclpy's conversion of each JointState into a Python object (a list of
name strings, three arrays, a header) costs several times what reading its numbers does
(doc/benchmarks.md). A driver sends the same joint names in the same order every
time, so its messages keep one byte layout: the numbers sit at fixed offsets
(:mod:`hexapod_control.bags.cdr`). :class:`JointStateWire` learns that layout from the first
message whose names are the robot's joints, checks the layout-fixing bytes of every later message
against it (a few slice comparisons), and reads the stamp and the numbers with ``struct``. Any
other message (other names or order, a missing field, another size, bytes that differ) is not
read here: the caller deserializes it in full and the usual validation judges it, so the fast path
never widens what is accepted. :class:`JointStateWriter` is the driver's side: the stamp and the
numbers written into the bytes of a template message at the same offsets (a test compares its
messages with rclpy's serialization of the same values).

Pure Python: nothing here imports rclpy.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

import numpy as np

from hexapod_control.bags.cdr import (
    CDR_LITTLE_ENDIAN,
    ENCAPSULATION,
    TIME,
    Layout,
    TemplateEncoder,
    joint_state_layout,
)
from hexapod_control.codegen.control_step import WIRE_FIELDS, WIRE_RUNS
from hexapod_control.conventions import time_from_stamp

# A JointState of six joints with a short frame_id is a few hundred bytes; one this large is not
# walked for a layout (a message naming thousands of joints goes to the full decoder and is refused).
MAX_LAYOUT_BYTES = 2048
# Layouts kept: a driver has one; another frame_id or an effort field that comes and goes adds one.
# Beyond these a message is deserialized in full.
MAX_LAYOUTS = 4


class JointStateFields(NamedTuple):
    """What the loop reads of a sensor_msgs/JointState: the header stamp [s] and the four fields."""

    stamp: float
    names: Sequence[str]
    positions: Sequence[float]
    velocities: Sequence[float]
    efforts: Sequence[float]

    @classmethod
    def of(cls, message) -> JointStateFields:
        """The fields of a deserialized message (its arrays as they are, not copied)."""
        return cls(time_from_stamp(message.header.stamp), message.name, message.position, message.velocity,
                   message.effort)


class _Shape:
    """One learned layout: its size, the runs of layout-fixing bytes, where the numbers are, and
    whether it is read here (``readable``: the robot's joints in order) or left to the full decoder."""

    def __init__(self, data: bytes, layout: Layout, readable: bool):
        self.size = layout.size
        self.runs = _runs(data, layout)
        self.readable = readable
        self.stamp = layout.times["stamp"]
        self.numbers = {name: struct.Struct(f"<{count}d").unpack_from if count else None
                        for name, (_, count) in layout.float64.items()}
        self.offsets = {name: offset for name, (offset, _) in layout.float64.items()}

    def native_layout(self, command_offset: int) -> tuple[np.ndarray, bytes] | None:
        """This readable layout as the compiled step reads it (control_step.WIRE_FIELDS, int64) and
        bytes with its layout-fixing values; None when it has more runs than the C code takes."""
        if len(self.runs) > WIRE_RUNS:
            return None
        effort = self.offsets["effort"] if self.numbers["effort"] is not None else -1
        header = dict(size=self.size, stamp=self.stamp, position=self.offsets["position"],
                      velocity=self.offsets["velocity"], effort=effort, command=command_offset, runs=len(self.runs))
        wire = [header[name] for name in WIRE_FIELDS] + [bound for start, stop, _ in self.runs for bound in (start, stop)]
        learned = bytearray(self.size)
        for start, stop, expected in self.runs:
            learned[start:stop] = expected
        return np.array(wire, dtype=np.int64), bytes(learned)

    def fits(self, data: bytes) -> bool:
        return len(data) == self.size and all(data[start:stop] == expected for start, stop, expected in self.runs)


def _runs(data: bytes, layout: Layout) -> list[tuple[int, int, bytes]]:
    """The layout-fixing byte positions of ``layout`` as contiguous runs with the bytes ``data`` has there."""
    runs: list[tuple[int, int, bytes]] = []
    start = previous = None
    for position in layout.structure.tolist():
        if start is not None and position == previous + 1:
            previous = position
            continue
        if start is not None:
            runs.append((start, previous + 1, data[start : previous + 1]))
        start = previous = position
    if start is not None:
        runs.append((start, previous + 1, data[start : previous + 1]))
    return runs


class JointStateWire:
    """Reads serialized JointStates of the robot's joints, in the robot's order, at fixed offsets."""

    def __init__(self, joint_names: Sequence[str]):
        self.joint_names = tuple(joint_names)
        self._shapes: list[_Shape] = []
        self.last_read: _Shape | None = None  # the layout of the last message read here

    def read(self, data: bytes) -> JointStateFields | None:
        """The fields of one serialized message, or None when it has no learned or learnable layout
        (then deserialize it in full: the caller's validation judges it)."""
        shape = next((shape for shape in self._shapes if shape.fits(data)), None) or self._learn(data)
        if shape is None or not shape.readable:
            return None
        self.last_read = shape
        return self._fields(shape, data)

    def native_layout(self, command_offset: int) -> tuple[np.ndarray, bytes] | None:
        """The layout of the last message read here, for the compiled step (_Shape.native_layout); None
        before one (or when the C code cannot take it)."""
        return self.last_read.native_layout(command_offset) if self.last_read is not None else None

    def _learn(self, data: bytes) -> _Shape | None:
        """The layout of a message that fits none kept; kept too when there is room, also one that is
        not read here (a driver naming the joints in another order: each of its messages is then
        known at once as one for the full decoder, not walked again)."""
        if len(self._shapes) >= MAX_LAYOUTS or len(data) > MAX_LAYOUT_BYTES or len(data) < ENCAPSULATION \
                or data[1] != CDR_LITTLE_ENDIAN:
            return None
        try:
            layout = joint_state_layout(data)
        except (ValueError, UnicodeDecodeError):
            return None
        joints = len(self.joint_names)
        info = layout.info
        readable = (tuple(info["names"]) == self.joint_names and info["position"] == joints
                    and info["velocity"] == joints and info["effort"] in (0, joints))
        shape = _Shape(data, layout, readable)
        self._shapes.append(shape)
        return shape

    def _fields(self, shape: _Shape, data: bytes) -> JointStateFields:
        sec, nanosec = TIME.unpack_from(data, shape.stamp)
        numbers, offsets = shape.numbers, shape.offsets
        effort = numbers["effort"]
        return JointStateFields(
            sec + 1e-9 * nanosec, self.joint_names,
            numbers["position"](data, offsets["position"]), numbers["velocity"](data, offsets["velocity"]),
            effort(data, offsets["effort"]) if effort is not None else ())


class JointStateWriter:
    """Serialized JointStates of fixed names and frame_id: each one a template's bytes with the
    stamp and the numbers written in place."""

    def __init__(self, template: bytes):
        """``template``: a serialized JointState with the names and frame_id to send, and position,
        velocity and effort each as long as the names."""
        layout = joint_state_layout(template)
        joints = len(layout.info["names"])
        if not layout.info["position"] == layout.info["velocity"] == layout.info["effort"] == joints:
            raise ValueError(f"the template's position, velocity and effort must each hold {joints} values")
        self._encoder = TemplateEncoder(template, layout, ("stamp",), ("position", "velocity", "effort"))
        self.template = bytes(template)
        # Where a writer in C puts the stamp and the numbers (ros/native_driver.py).
        self.offsets = {"stamp": layout.times["stamp"],
                        **{name: layout.float64[name][0] for name in ("position", "velocity", "effort")}}

    def message(self, stamp_nanoseconds: int, positions, velocities, efforts) -> bytes:
        """The serialized message stamped ``stamp_nanoseconds`` (ROS time) with these values."""
        return self._encoder.encode((stamp_nanoseconds,), positions, velocities, efforts)


def float64_array_message(count: int) -> tuple[bytes, int]:
    """A serialized std_msgs/Float64MultiArray of ``count`` zeros with an empty layout (how a
    ros2_control forward command controller reads it), and the offset of its first value. CDR: the
    encapsulation, the layout's empty dim sequence and its data_offset, the data's length, then
    the values aligned to 8 bytes from the end of the encapsulation."""
    body = struct.pack("<III", 0, 0, count)
    padding = -len(body) % 8
    offset = ENCAPSULATION + len(body) + padding
    return bytes((0, CDR_LITTLE_ENDIAN, 0, 0)) + body + bytes(padding) + bytes(8 * count), offset
