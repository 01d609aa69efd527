"""Bulk decoding of fixed-layout CDR messages: the numbers of a whole block of messages at once.

The messages the package records keep one byte layout for a whole recording: a JointState with
the same joint names and array sizes puts its positions at the same byte offset every time. The
first message of a block is walked field by field (a *layout*: where the numbers are, and which
bytes fix the layout: the encapsulation header, string lengths and contents, sequence counts);
every message of the same size whose layout-fixing bytes equal the template's has, field by
field, the same layout (each of those bytes sits where the previous ones put it), so its numbers
are read straight into numpy at the template's offsets. A message that fits no layout is left to
the caller's one-by-one decoder.

CDR as rosbag2 stores it (XCDR1): a 4-byte encapsulation header (byte 1 = 1: little-endian),
then the fields, each primitive aligned to its size relative to the end of the header; strings
and sequences start with a uint32 count (strings count their terminating NUL).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hexapod_control.bags.contents import MessageBlock

ENCAPSULATION = 4  # bytes of the CDR encapsulation header
_UINT32 = struct.Struct("<I")
TIME = struct.Struct("<iI")  # builtin_interfaces Time/Duration: int32 sec, uint32 nanosec
NANOSECONDS = 1_000_000_000
CDR_LITTLE_ENDIAN = 1  # its byte 1
# New layouts a block may introduce before the rest of its messages are decoded one by one, and the
# layouts kept for a topic: a recording has one or two (a driver that changes its joint list once);
# many means the topic has no fixed layout.
MAX_NEW_LAYOUTS = 4
MAX_KNOWN_LAYOUTS = 16


@dataclass(frozen=True)
class Layout:
    """Where the numbers of one message shape are, and the bytes that fix that shape."""

    size: int  # bytes of the whole message
    structure: np.ndarray  # positions of the layout-fixing bytes
    template: np.ndarray  # their values (uint8)
    float64: dict[str, tuple[int, int]]  # field -> (offset, count) of float64 values
    times: dict[str, int]  # field -> offset of a builtin_interfaces Time/Duration (int32 sec, uint32 nanosec)
    info: dict = field(default_factory=dict)  # strings and counts read while walking (joint names, ...)


class Walker:
    """Reads one CDR message field by field, noting the layout as it goes."""

    def __init__(self, data: bytes):
        if len(data) < ENCAPSULATION or data[1] != CDR_LITTLE_ENDIAN:
            raise ValueError("not little-endian CDR")
        self.data, self.offset = data, ENCAPSULATION
        self.structure: list[tuple[int, int]] = [(0, ENCAPSULATION)]
        self.float64: dict[str, tuple[int, int]] = {}
        self.times: dict[str, int] = {}
        self.info: dict = {}

    def _align(self, size: int) -> None:
        self.offset += -(self.offset - ENCAPSULATION) % size

    def _take(self, size: int) -> int:
        start = self.offset
        if start + size > len(self.data):
            raise ValueError("message shorter than its layout")
        self.offset += size
        return start

    def count(self) -> int:
        """A uint32 that fixes the layout (a sequence length, an array size)."""
        self._align(4)
        start = self._take(4)
        self.structure.append((start, 4))
        return int.from_bytes(self.data[start : start + 4], "little")

    def string(self) -> str:
        size = self.count()
        start = self._take(size)
        self.structure.append((start, size))
        return self.data[start : start + max(size - 1, 0)].decode("utf-8", errors="replace")

    def time(self, name: str) -> None:
        self._align(4)
        self.times[name] = self._take(8)

    def float64s(self, name: str, count: int) -> None:
        if count:
            self._align(8)
        self.float64[name] = (self._take(8 * count), count)

    def float64_sequence(self, name: str) -> int:
        count = self.count()
        self.float64s(name, count)
        return count

    def layout(self) -> Layout:
        if self.offset > len(self.data):
            raise ValueError("message shorter than its layout")
        positions = np.concatenate([np.arange(start, start + size) for start, size in self.structure])
        template = np.frombuffer(self.data, dtype=np.uint8)[positions]
        return Layout(len(self.data), positions, template, self.float64, self.times, self.info)


# ------------------------------------------------------------------------------------------ message layouts
def _header(walker: Walker) -> None:
    walker.time("stamp")
    walker.info["frame_id"] = walker.string()


def joint_state_layout(data: bytes) -> Layout:
    """sensor_msgs/JointState."""
    walker = Walker(data)
    _header(walker)
    walker.info["names"] = [walker.string() for _ in range(walker.count())]
    for name in ("position", "velocity", "effort"):
        walker.info[name] = walker.float64_sequence(name)
    return walker.layout()


def reference_layout(data: bytes) -> Layout:
    """trajectory_msgs/MultiDOFJointTrajectory (fields of point k: ``points[k].<field>[j]``)."""
    walker = Walker(data)
    _header(walker)
    walker.info["joint_names"] = [walker.string() for _ in range(walker.count())]
    points = walker.info["points"] = walker.count()
    for k in range(points):
        counts = []
        transforms = walker.count()
        for j in range(transforms):
            walker.float64s(f"points[{k}].transforms[{j}].translation", 3)
            walker.float64s(f"points[{k}].transforms[{j}].rotation", 4)
        counts.append(transforms)
        for twist in ("velocities", "accelerations"):
            twists = walker.count()
            for j in range(twists):
                walker.float64s(f"points[{k}].{twist}[{j}].linear", 3)
                walker.float64s(f"points[{k}].{twist}[{j}].angular", 3)
            counts.append(twists)
        walker.time(f"points[{k}].time_from_start")
        walker.info[f"points[{k}]"] = tuple(counts)  # (transforms, velocities, accelerations)
    return walker.layout()


def float64_array_layout(data: bytes) -> Layout:
    """std_msgs/Float64MultiArray."""
    walker = Walker(data)
    for _ in range(walker.count()):  # layout.dim: label, size, stride
        walker.string()
        walker.count(), walker.count()
    walker.count()  # layout.data_offset
    walker.info["data"] = walker.float64_sequence("data")
    return walker.layout()


def _stamped_layout(data: bytes, *fields: tuple[str, int]) -> Layout:
    """A header, then fixed float64 fields (name, count) in order."""
    walker = Walker(data)
    _header(walker)
    for name, count in fields:
        walker.float64s(name, count)
    return walker.layout()


def pose_stamped_layout(data: bytes) -> Layout:
    """geometry_msgs/PoseStamped."""
    return _stamped_layout(data, ("position", 3), ("orientation", 4))


def twist_stamped_layout(data: bytes) -> Layout:
    """geometry_msgs/TwistStamped."""
    return _stamped_layout(data, ("linear", 3), ("angular", 3))


def diagnostic_statuses(data: bytes) -> list[tuple[int, str, str]]:
    """(level, name, message) of each status of a diagnostic_msgs/DiagnosticArray, read straight from
    its CDR (hardware ids and key-values skipped); ValueError when the bytes do not hold one. Its
    layout varies from message to message (the key-values), so it is read one message at a time,
    but without building the message objects."""
    if len(data) < ENCAPSULATION or data[1] != CDR_LITTLE_ENDIAN:
        raise ValueError("not little-endian CDR")
    unpack, size = _UINT32.unpack_from, len(data)
    offset = ENCAPSULATION + 8  # header.stamp

    def skip_string(at: int) -> int:
        at += -(at - ENCAPSULATION) % 4
        return at + 4 + unpack(data, at)[0]

    def string(at: int) -> tuple[str, int]:
        at += -(at - ENCAPSULATION) % 4
        length = unpack(data, at)[0]
        return data[at + 4 : at + 3 + length].decode("utf-8"), at + 4 + length

    offset = skip_string(offset)  # header.frame_id
    offset += -(offset - ENCAPSULATION) % 4
    count, offset = unpack(data, offset)[0], offset + 4
    statuses = []
    for _ in range(count):
        level = data[offset]
        name, offset = string(offset + 1)
        message, offset = string(offset)
        offset = skip_string(offset)  # hardware_id
        offset += -(offset - ENCAPSULATION) % 4
        values, offset = unpack(data, offset)[0], offset + 4
        for _ in range(2 * values):  # key and value strings
            offset = skip_string(offset)
        if offset > size:
            raise ValueError("message shorter than its layout")
        statuses.append((int(level), name, message))
    return statuses


LAYOUTS: dict[str, Callable[[bytes], Layout]] = {
    "sensor_msgs/msg/JointState": joint_state_layout,
    "trajectory_msgs/msg/MultiDOFJointTrajectory": reference_layout,
    "std_msgs/msg/Float64MultiArray": float64_array_layout,
    "geometry_msgs/msg/PoseStamped": pose_stamped_layout,
}


# ------------------------------------------------------------------------------------------ blocks
def message_rows(block: MessageBlock, rows: np.ndarray, size: int) -> np.ndarray:
    """(len(rows), size) uint8: the bytes of the given messages (all of ``size`` bytes), one row each:
    the rows of the buffer's sliding window of ``size`` bytes at the messages' starts, one copy."""
    return sliding_window_view(block.buffer, size)[block.offsets[rows]]


def group_by_layout(block: MessageBlock, walk: Callable[[bytes], Layout],
                    known: list[Layout]) -> tuple[list[tuple[Layout, np.ndarray, np.ndarray]], np.ndarray]:
    """([(layout, rows, their bytes (n, size))], rows that fit no layout) of a block.

    ``known`` layouts (kept by the caller from block to block) are tried first; new ones are
    walked from the first message that fits none, and appended to ``known``.
    """
    groups: list[tuple[Layout, np.ndarray, np.ndarray]] = []
    unfit = []
    new_layouts = 0
    for size in np.unique(block.sizes).tolist():
        rows = np.flatnonzero(block.sizes == size)
        data = message_rows(block, rows, size)
        undecided = np.ones(rows.size, dtype=bool)
        candidates = [layout for layout in known if layout.size == size]
        while undecided.any():
            if not candidates:
                if new_layouts >= MAX_NEW_LAYOUTS or len(known) >= MAX_KNOWN_LAYOUTS:
                    break
                first = int(np.flatnonzero(undecided)[0])
                try:
                    layout = walk(data[first].tobytes())
                except (ValueError, UnicodeDecodeError):
                    unfit.append(int(rows[first]))
                    undecided[first] = False
                    continue
                new_layouts += 1
                known.append(layout)
                candidates = [layout]
            layout = candidates.pop(0)
            pending = np.flatnonzero(undecided)
            every = pending.size == rows.size  # the usual case: no copy of the rows before the comparison
            found = pending[np.all((data if every else data[pending])[:, layout.structure] == layout.template, axis=1)]
            if found.size:
                groups.append((layout, rows[found], data if found.size == rows.size else data[found]))
                undecided[found] = False
        unfit.extend(rows[undecided].tolist())
    return groups, np.sort(np.array(unfit, dtype=np.int64))


def float64_field(data: np.ndarray, layout: Layout, name: str) -> np.ndarray:
    """(n, count) float64 values of a field of messages' bytes ``data`` (n, size)."""
    offset, count = layout.float64[name]
    return np.ascontiguousarray(data[:, offset : offset + 8 * count]).view("<f8")


def time_field(data: np.ndarray, layout: Layout, name: str) -> np.ndarray:
    """(n,) int64 nanoseconds of a Time or Duration field."""
    offset = layout.times[name]
    sec = np.ascontiguousarray(data[:, offset : offset + 4]).view("<i4").ravel().astype(np.int64)
    nanosec = np.ascontiguousarray(data[:, offset + 4 : offset + 8]).view("<u4").ravel().astype(np.int64)
    return sec * 1_000_000_000 + nanosec


def encode_block(template: bytes, layout: Layout, float64: dict[str, np.ndarray], times: dict[str, np.ndarray]) -> np.ndarray:
    """(n, size) uint8: ``template`` (a message of ``layout``) with the given fields replaced row by row.

    The inverse of :func:`float64_field` and :func:`time_field`: ``float64`` maps a field to its
    (n, count) values, ``times`` a Time/Duration field to its (n,) nanoseconds; fields not given
    keep the template's values. Used to write long synthetic bags (benchmarks/bench_evaluate.py).
    """
    count = len(next(iter({**float64, **times}.values())))
    rows = np.tile(np.frombuffer(template, dtype=np.uint8), (count, 1))
    for name, values in float64.items():
        offset, size = layout.float64[name]
        data = np.ascontiguousarray(values, dtype="<f8").reshape(count, size)
        rows[:, offset : offset + 8 * size] = data.view(np.uint8).reshape(count, 8 * size)
    for name, nanoseconds in times.items():
        offset = layout.times[name]
        sec, nanosec = np.divmod(np.asarray(nanoseconds, dtype=np.int64), 1_000_000_000)
        rows[:, offset : offset + 4] = sec.astype("<i4").view(np.uint8).reshape(count, 4)
        rows[:, offset + 4 : offset + 8] = nanosec.astype("<u4").view(np.uint8).reshape(count, 4)
    return rows


class TemplateEncoder:
    """Messages of one layout, one at a time: ``template`` (a message of ``layout``) with the Time
    fields ``times`` and the float64 fields ``float64`` written in place. The per-message form of
    :func:`encode_block`, for a loop that sends or records a message per step: a few ``struct``
    writes instead of building and serializing a message object."""

    def __init__(self, template: bytes, layout: Layout, times: Sequence[str], float64: Sequence[str]):
        self._template, self._layout, self._names = bytes(template), layout, (tuple(times), tuple(float64))
        self._buffer = bytearray(template)
        self._times = tuple(layout.times[name] for name in times)
        self._float64 = tuple((layout.float64[name][0], struct.Struct(f"<{layout.float64[name][1]}d").pack_into)
                              for name in float64)

    def encode(self, times: Sequence[int], *values) -> bytes:
        """The message with ``times`` [ns] and ``values`` (one sequence of floats per float64 field),
        each in the order their fields were named."""
        buffer = self._buffer
        for offset, nanoseconds in zip(self._times, times):
            TIME.pack_into(buffer, offset, *divmod(nanoseconds, NANOSECONDS))
        for (offset, pack), field_values in zip(self._float64, values):
            pack(buffer, offset, *field_values)
        return bytes(buffer)

    def encode_rows(self, times: Sequence[np.ndarray], *values) -> np.ndarray:
        """(n, size) messages of :meth:`encode` at once: ``times`` (n,) [ns] and ``values`` (n, count)
        per field, in the order their fields were named (:func:`encode_block`)."""
        time_names, float64_names = self._names
        return encode_block(self._template, self._layout, dict(zip(float64_names, values)), dict(zip(time_names, times)))
