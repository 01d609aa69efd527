"""The evaluated topics' messages as arrays: decoded in bulk where the layout is fixed, else one by one.

Each block of a topic (``bags.contents.MessageBlock``) is split by ``bags.cdr`` into messages of
known layouts and the rest. A layout is first checked as a whole, through the same conversion the
one-by-one decoder applies, on zeros (a JointState without the wanted joints, a reference with two
points: every message of that layout is skipped with that reason); then the numbers of all its
messages are read at once and checked row by row (finite, unit quaternion, no Euler singularity).
Rows that fail a check and messages of no layout go through the one-by-one decoder (rosbags
deserialisation and the conversions of ``conventions``), which skips them with the reason in
their own words. Both paths give the same numbers (the tests compare them on the same bags).
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from hexapod_control.bags import MessageBlock, cdr, deserialize
from hexapod_control.conventions import (
    QUATERNION_NORM_TOLERANCE,
    ReferencePoint,
    effort_array,
    euler_from_reference_point,
    joint_state_arrays,
)
from hexapod_control.errors import InvalidInputError
from hexapod_control.model import rotation_rows
from hexapod_control.model.rotations import euler_zyx_from_quaternion

# A reference point's numbers in message order (conventions.ReferencePoint), kept for replay.
POINT_FIELDS = ("translation", "rotation", "linear_velocity", "angular_velocity", "linear_acceleration", "angular_acceleration")
POINT_SIZES = (3, 4, 3, 3, 3, 3)
# |cos(mu)| below which a reference orientation counts as the ZYX singularity (as in
# conventions.euler_from_reference_point, which the one-by-one path uses).
EULER_SINGULARITY_COS = 1e-6
# A conversion error's text up to the first number list groups alike messages in one skip note.
REASON_CUT = ": ["


def reason_of(error: Exception) -> str:
    text = " ".join(str(error).split())
    cut = text.find(REASON_CUT)
    return text[:cut] if cut > 0 else text


@dataclass
class Skips:
    """Skipped messages per topic and reason, for one note per (topic, reason)."""

    counts: dict[str, Counter] = field(default_factory=dict)

    def add(self, topic: str, reason: str, count: int = 1) -> None:
        self.counts.setdefault(topic, Counter())[reason] += count

    def merge(self, other: Skips) -> None:
        for topic, reasons in other.counts.items():
            self.counts.setdefault(topic, Counter()).update(reasons)

    def notes(self) -> list[str]:
        return [f"{topic}: skipped {count} message(s): {reason}"
                for topic, reasons in self.counts.items() for reason, count in reasons.most_common()]

    def first_reason(self, topic: str) -> Optional[str]:
        reasons = self.counts.get(topic)
        return reasons.most_common(1)[0][0] if reasons else None


@dataclass
class Decoded:
    """What one block gave: rows of the block that decoded, their stamps and values (in block order)."""

    rows: np.ndarray
    stamp_ns: Optional[np.ndarray]  # None for a message without a header
    values: tuple  # one array per quantity, first axis over rows; a list of objects for diagnostics


# ------------------------------------------------------------------------------------------ one by one
def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _vector3(v) -> tuple[float, float, float]:
    return (float(v.x), float(v.y), float(v.z))


def _applied_efforts(names, efforts, joint_names) -> np.ndarray:
    """The joint state's effort (6,) in the order of ``joint_names``: NaN unless it names every joint finitely.

    ros2_control fills ``effort`` with the force the drive applies; many drivers leave it empty.
    """
    efforts = np.asarray(efforts, dtype=float).ravel()
    if efforts.size != len(names):
        return np.full(len(joint_names), np.nan)
    index = {str(name): k for k, name in enumerate(names)}
    applied = np.array([efforts[index[name]] for name in joint_names])
    return applied if np.all(np.isfinite(applied)) else np.full(len(joint_names), np.nan)


def _convert_joint_state(joint_names):
    def convert(message):
        q, qd = joint_state_arrays(message.name, message.position, message.velocity, joint_names)
        return _stamp_ns(message.header.stamp), (q, qd, _applied_efforts(message.name, message.effort, joint_names))

    return convert


def _check_reference_shape(points: int, counts: tuple[int, int, int]) -> None:
    if points != 1:
        raise InvalidInputError(f"reference has {points} points, expected 1")
    if counts != (1, 1, 1):
        raise InvalidInputError(
            "reference point needs one transform, velocity and acceleration, got " + ", ".join(map(str, counts))
        )


def _convert_reference(_joint_names):
    def convert(message):
        _check_reference_shape(len(message.points), tuple(
            len(getattr(message.points[0], f)) for f in ("transforms", "velocities", "accelerations")
        ) if message.points else (1, 1, 1))
        point = message.points[0]
        transform, velocity, acceleration = point.transforms[0], point.velocities[0], point.accelerations[0]
        rotation = transform.rotation
        numbers = ReferencePoint(
            translation=_vector3(transform.translation),
            rotation=(float(rotation.x), float(rotation.y), float(rotation.z), float(rotation.w)),
            linear_velocity=_vector3(velocity.linear),
            angular_velocity=_vector3(velocity.angular),
            linear_acceleration=_vector3(acceleration.linear),
            angular_acceleration=_vector3(acceleration.angular),
        )
        values = euler_from_reference_point(numbers)
        return _stamp_ns(message.header.stamp) + _stamp_ns(point.time_from_start), (*values, point_array(numbers))

    return convert


def point_array(point: ReferencePoint) -> np.ndarray:
    """The 19 numbers of a reference point in message order (POINT_FIELDS)."""
    return np.array([v for name in POINT_FIELDS for v in getattr(point, name)])


def reference_point(row: np.ndarray) -> ReferencePoint:
    """The ReferencePoint of 19 numbers in message order: what the controller node receives."""
    values, start = {}, 0
    for name, size in zip(POINT_FIELDS, POINT_SIZES):
        values[name] = tuple(float(v) for v in row[start : start + size])
        start += size
    return ReferencePoint(**values)



def _convert_effort(_joint_names):
    def convert(message):
        return None, (effort_array(message.data),)

    return convert


def _convert_pose(_joint_names):
    def convert(message):
        p, o = message.pose.position, message.pose.orientation
        values = (float(p.x), float(p.y), float(p.z), float(o.x), float(o.y), float(o.z), float(o.w))
        if not all(np.isfinite(values)):
            raise InvalidInputError("platform pose holds a non-finite value")
        euler = euler_zyx_from_quaternion(*values[3:])
        return _stamp_ns(message.header.stamp), (np.array(values[:3] + tuple(euler)),)

    return convert


def _convert_diagnostics(_joint_names):
    def convert(message):
        return None, ([(int(s.level), str(s.name), str(s.message)) for s in message.status],)

    return convert


CONVERTERS = {
    "joint_states": _convert_joint_state,
    "reference": _convert_reference,
    "effort_commands": _convert_effort,
    "platform_pose": _convert_pose,
    "diagnostics": _convert_diagnostics,
}


# ------------------------------------------------------------------------------------------ in bulk
class _BulkJointState:
    def __init__(self, joint_names):
        self.joint_names = list(joint_names)

    def shape_error(self, layout: cdr.Layout) -> Optional[str]:
        info = layout.info
        try:
            joint_state_arrays(info["names"], np.zeros(info["position"]), np.zeros(info["velocity"]), self.joint_names)
        except InvalidInputError as error:
            return reason_of(error)
        return None

    def values(self, data: np.ndarray, layout: cdr.Layout):
        index = {name: k for k, name in enumerate(layout.info["names"])}  # as joint_state_arrays: the last wins
        columns = [index[name] for name in self.joint_names]
        q = np.ascontiguousarray(cdr.float64_field(data, layout, "position")[:, columns])  # fancy indexing: F order
        qd = np.ascontiguousarray(cdr.float64_field(data, layout, "velocity")[:, columns])
        ok = np.all(np.isfinite(q), axis=1) & np.all(np.isfinite(qd), axis=1)
        if layout.info["effort"] == len(index):
            applied = np.ascontiguousarray(cdr.float64_field(data, layout, "effort")[:, columns])
            applied = np.where(np.all(np.isfinite(applied), axis=1, keepdims=True), applied, np.nan)
        else:
            applied = np.full(q.shape, np.nan)
        return cdr.time_field(data, layout, "stamp"), (q, qd, applied), ok


class _BulkReference:
    def shape_error(self, layout: cdr.Layout) -> Optional[str]:
        points = layout.info["points"]
        try:
            _check_reference_shape(points, layout.info["points[0]"] if points else (1, 1, 1))
        except InvalidInputError as error:
            return reason_of(error)
        return None

    def values(self, data: np.ndarray, layout: cdr.Layout):
        def field_(name):
            return cdr.float64_field(data, layout, "points[0]." + name)

        translation, rotation = field_("transforms[0].translation"), field_("transforms[0].rotation")
        linear_velocity, angular_velocity = field_("velocities[0].linear"), field_("velocities[0].angular")
        linear_acceleration, angular_acceleration = field_("accelerations[0].linear"), field_("accelerations[0].angular")
        numbers = np.hstack((translation, rotation, linear_velocity, angular_velocity, linear_acceleration, angular_acceleration))
        ok = np.all(np.isfinite(numbers), axis=1)
        ok &= np.abs(np.linalg.norm(rotation, axis=1) - 1.0) <= QUATERNION_NORM_TOLERANCE
        with np.errstate(invalid="ignore", divide="ignore"):
            euler = rotation_rows.euler_zyx_from_quaternion(rotation)
            ok &= np.abs(np.cos(euler[:, 1])) >= EULER_SINGULARITY_COS
            rates = rotation_rows.euler_rates_from_angular_velocity(euler, angular_velocity)
            accelerations = rotation_rows.euler_accelerations(euler, rates, angular_acceleration)
        stamp = cdr.time_field(data, layout, "stamp") + cdr.time_field(data, layout, "points[0].time_from_start")
        return stamp, (np.hstack((translation, euler)), np.hstack((linear_velocity, rates)),
                       np.hstack((linear_acceleration, accelerations)), numbers), ok


class _BulkEffort:
    def shape_error(self, layout: cdr.Layout) -> Optional[str]:
        try:
            effort_array(np.zeros(layout.info["data"]))
        except InvalidInputError as error:
            return reason_of(error)
        return None

    def values(self, data: np.ndarray, layout: cdr.Layout):
        forces = cdr.float64_field(data, layout, "data")
        return None, (forces,), np.all(np.isfinite(forces), axis=1)


class _BulkPose:
    def shape_error(self, layout: cdr.Layout) -> Optional[str]:
        return None

    def values(self, data: np.ndarray, layout: cdr.Layout):
        position = cdr.float64_field(data, layout, "position")
        orientation = cdr.float64_field(data, layout, "orientation")
        euler = rotation_rows.euler_zyx_from_quaternion(orientation)
        ok = np.all(np.isfinite(position), axis=1) & np.all(np.isfinite(orientation), axis=1) & np.all(np.isfinite(euler), axis=1)
        return cdr.time_field(data, layout, "stamp"), (np.hstack((position, euler)),), ok


BULK = {
    "joint_states": lambda joint_names: _BulkJointState(joint_names),
    "reference": lambda _: _BulkReference(),
    "effort_commands": lambda _: _BulkEffort(),
    "platform_pose": lambda _: _BulkPose(),
}


class TopicDecoder:
    """Decodes the blocks of one evaluated topic as they are read; :meth:`series` joins them."""

    def __init__(self, key: str, topic: str, msgtype: str, joint_names, skips: Skips, bulk: bool = True,
                 replay: bool = False):
        self.key, self.topic, self.msgtype, self.skips = key, topic, msgtype, skips
        # The references' derivatives and message numbers (31 numbers per reference) only for
        # replay: the evaluation needs the pose alone, and an hour of them is 0.9 GB.
        self.columns = None if key != "reference" or replay else 1
        self.convert: Callable = CONVERTERS[key](joint_names)
        self.bulk = BULK[key](joint_names) if bulk and key in BULK and msgtype in cdr.LAYOUTS else None
        self.own_reader = bulk and key == "diagnostics"  # bags.cdr.diagnostic_statuses, no message objects
        self.walk = cdr.LAYOUTS.get(msgtype)
        self.layouts: list[cdr.Layout] = []
        self.shape_errors: dict[int, Optional[str]] = {}  # id(layout) -> reason its messages are skipped
        # What the blocks gave, per quantity: log times, stamps, and each value column's arrays.
        self.logs: list[np.ndarray] = []
        self.stamps: list[np.ndarray] = []
        self.values: list[list] = []
        self.messages = 0
        self.decoded = 0
        self.bag_joint_names: Optional[list[str]] = None  # the names of the first joint state met

    def add(self, block: MessageBlock) -> None:
        self.messages += len(block)
        pieces: list[Decoded] = []
        one_by_one = np.arange(len(block))
        if self.bulk is not None:
            groups, one_by_one = cdr.group_by_layout(block, self.walk, self.layouts)
            slow = [one_by_one]
            for layout, rows, data in groups:
                if self.bag_joint_names is None and "names" in layout.info:
                    self.bag_joint_names = list(layout.info["names"])
                if id(layout) not in self.shape_errors:
                    self.shape_errors[id(layout)] = self.bulk.shape_error(layout)
                reason = self.shape_errors[id(layout)]
                if reason is not None:
                    self.skips.add(self.topic, reason, rows.size)
                    continue
                stamp, values, ok = self.bulk.values(data, layout)
                if ok.all():  # the usual block: no copies
                    pieces.append(Decoded(rows, stamp, values))
                    continue
                pieces.append(Decoded(rows[ok], None if stamp is None else stamp[ok], tuple(v[ok] for v in values)))
                slow.append(rows[~ok])
            one_by_one = np.sort(np.concatenate(slow))
        if one_by_one.size:
            pieces.append(self._one_by_one(block, one_by_one))
        pieces = [p for p in pieces if p.rows.size]
        if not pieces:
            return
        if len(pieces) == 1:  # the usual block: one layout, every message good, already in file order
            rows, stamps, values = pieces[0].rows, pieces[0].stamp_ns, pieces[0].values
        else:
            rows = np.concatenate([p.rows for p in pieces])
            order = np.argsort(rows, kind="stable")  # back to file order
            rows = rows[order]
            stamps = None if pieces[0].stamp_ns is None else np.concatenate([p.stamp_ns for p in pieces])[order]
            values = tuple(_join([p.values[m] for p in pieces], order) for m in range(len(pieces[0].values)))
        values = values[: self.columns]
        self.logs.append(block.log_ns[rows])
        if stamps is not None:
            self.stamps.append(stamps)
        if not self.values:
            self.values = [[] for _ in values]
        for column, value in zip(self.values, values):
            column.append(value)
        self.decoded += rows.size

    def _one_by_one(self, block: MessageBlock, rows: np.ndarray) -> Decoded:
        kept, stamps, values = [], [], []
        for row in rows.tolist():
            if self.own_reader:
                try:  # no message objects for the many key-values
                    values.append((cdr.diagnostic_statuses(block.message(row)),))
                    kept.append(row), stamps.append(None)
                    continue
                except (ValueError, IndexError, struct.error, UnicodeDecodeError):
                    pass  # the general decoder says what is wrong with it
            try:
                message = deserialize(block.message(row), self.msgtype)
            except Exception as error:  # noqa: BLE001 - a damaged CDR buffer fails in many ways
                self.skips.add(self.topic, f"undecodable CDR ({type(error).__name__})")
                continue
            if self.bag_joint_names is None and self.key == "joint_states":
                self.bag_joint_names = [str(n) for n in message.name]
            try:
                stamp, value = self.convert(message)
            except (InvalidInputError, ValueError, IndexError, TypeError, AttributeError) as error:
                self.skips.add(self.topic, reason_of(error))
                continue
            kept.append(row), stamps.append(stamp), values.append(value)
        rows = np.array(kept, dtype=np.int64)
        stamp_ns = None if not stamps or stamps[0] is None else np.array(stamps, dtype=np.int64)
        if self.key == "diagnostics":
            columns = ([v[0] for v in values],)
        else:
            width = len(values[0]) if values else len(self._empty())
            columns = tuple(np.array([v[m] for v in values]).reshape(len(values), -1) if values else self._empty()[m]
                            for m in range(width))
        return Decoded(rows, stamp_ns if self.key not in ("effort_commands", "diagnostics") else None, columns)

    def _empty(self) -> tuple:
        widths = {"joint_states": (6, 6), "reference": (6, 6, 6, sum(POINT_SIZES)), "effort_commands": (6,),
                  "platform_pose": (6,)}
        return tuple(np.zeros((0, width)) for width in widths.get(self.key, (6,)))

    def series(self) -> TopicSeries:
        """Every decoded message in file order; the blocks' arrays are released column by column as
        they are joined (an hour holds ~1 GB of them)."""
        series = TopicSeries(self.topic, self.messages, self.decoded, self.bag_joint_names)
        if not self.logs:
            series.values = self._empty()[: self.columns]
            return series
        series.logs = _take_joined(self.logs)
        series.stamps = _take_joined(self.stamps) if self.stamps else None
        series.values = tuple(_take_joined(column) for column in self.values)
        return series


@dataclass
class TopicSeries:
    """What a topic decoded to: its messages, log times, stamps and values, in file order."""

    topic: str
    messages: int  # read
    decoded: int
    bag_joint_names: Optional[list[str]]  # the names of the first joint state met
    logs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    stamps: Optional[np.ndarray] = field(default_factory=lambda: np.zeros(0, np.int64))  # None without a header
    values: tuple = ()  # one array per quantity (a list of statuses for diagnostics)


def _take_joined(parts: list):
    """The parts joined (arrays, or lists for diagnostics), emptying ``parts``."""
    joined = _join(parts, None)
    parts.clear()
    return joined


def _join(parts: list, order: Optional[np.ndarray]):
    """Concatenate arrays (or lists, for diagnostics) and put them in ``order``."""
    if isinstance(parts[0], list):
        joined = [item for part in parts for item in part]
        return joined if order is None else [joined[k] for k in order]
    joined = np.concatenate(parts)
    return joined if order is None else joined[order]
