"""Decode a run's bag into time series: joint states, references, forces, platform pose, diagnostics.

Times. Every series is put on the clock of the ``/joint_states`` header stamps, in seconds from the
run's origin: the first reference stamp (the trajectory's t = 0, where the kappa ramp starts), or
the first joint-state stamp when there is no reference.

* JointState, PoseStamped and the reference use their header stamps (the reference adds the
  point's ``time_from_start``). A topic whose stamps are all zero (an unstamped publisher) uses
  its bag log times instead, with a note.
* Float64MultiArray has no header. Each force command gets the stamp of the latest joint state
  *logged before it* in the bag: the controller answers the joint state it last received, so a
  command is tied to the measurement it was computed from, whatever the offset or rate between
  the recorder's clock and the stamps (sim time, a faster-than-real-time run).

Robustness. Messages that cannot be decoded or have the wrong sizes (a JointState with 5 positions,
a Float64MultiArray with 7 values, NaN) are skipped and counted per reason; out-of-order stamps
are sorted and duplicated stamps dropped (first kept), each with a note. Nothing here raises for
bad data: :class:`RunData` carries what could be decoded and ``notes`` says what could not.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from hexapod_control.bags import BagContents, deserialize, read_bag
from hexapod_control.bags.topics import resolve_topic_names
from hexapod_control.errors import InvalidInputError
from hexapod_control.model.rotations import euler_zyx_from_quaternion
from hexapod_control.ros.conventions import (
    MESSAGE_TYPES,
    ReferencePoint,
    effort_array,
    euler_from_reference_point,
    joint_state_arrays,
)

# Topics the evaluation decodes (keys of ros_conventions.TOPICS).
EVALUATED_TOPICS = ("joint_states", "reference", "platform_pose", "effort_commands", "diagnostics")
DIAGNOSTIC_LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}


@dataclass
class DiagnosticEntry:
    t: float  # [s] on the run clock (log time mapped like the forces)
    level: int
    name: str
    message: str


@dataclass
class RunData:
    label: str
    path: Path
    storage: str
    topic_names: dict[str, str]  # key -> topic name used
    available: dict[str, tuple[Optional[str], int]]  # every topic of the bag
    joint_t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (N,) [s]
    q: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # [m]
    qd: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # [m/s]
    ref_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ref_pose: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # xi_d [m, rad]
    ref_velocity: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    ref_acceleration: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    effort_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    forces: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # [N]
    pose_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pose: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # recorded platform pose
    diagnostics: list[DiagnosticEntry] = field(default_factory=list)
    origin_ns: int = 0  # absolute stamp of t = 0 [ns]
    origin: str = ""  # what t = 0 is
    effort_timing: str = ""  # how the force commands were placed in time
    notes: list[str] = field(default_factory=list)  # missing topics, skipped messages, repairs

    @property
    def has_joint_states(self) -> bool:
        return self.joint_t.size >= 2

    @property
    def has_references(self) -> bool:
        return self.ref_t.size >= 1

    @property
    def has_forces(self) -> bool:
        return self.effort_t.size >= 1


class _Skips:
    """Counts skipped messages per topic and reason, for one note per (topic, reason)."""

    def __init__(self):
        self.counts: dict[str, Counter] = {}

    def add(self, topic: str, reason: str) -> None:
        self.counts.setdefault(topic, Counter())[reason] += 1

    def notes(self) -> list[str]:
        lines = []
        for topic, reasons in self.counts.items():
            for reason, count in reasons.most_common():
                lines.append(f"{topic}: skipped {count} message(s): {reason}")
        return lines


def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _decode(records, msgtype, topic, skips, convert):
    """[(log ns, stamp ns or None, values)] of the records ``convert`` accepts."""
    out = []
    for log_ns, data in records:
        try:
            message = deserialize(data, msgtype)
        except Exception as error:  # noqa: BLE001 - a damaged CDR buffer fails in many ways
            skips.add(topic, f"undecodable CDR ({type(error).__name__})")
            continue
        try:
            stamp_ns, values = convert(message)
        except (InvalidInputError, ValueError, IndexError, TypeError, AttributeError) as error:
            skips.add(topic, _reason(error))
            continue
        out.append((log_ns, stamp_ns, values))
    return out


def _reason(error: Exception) -> str:
    """A skip reason that groups alike messages: the error text up to the first number list."""
    text = " ".join(str(error).split())
    cut = text.find(": [")
    return text[:cut] if cut > 0 else text


def _order(times_ns: np.ndarray, topic: str, notes: list[str]) -> np.ndarray:
    """Indices that sort by time with duplicated stamps dropped (first kept), noted."""
    if times_ns.size == 0:
        return np.zeros(0, dtype=int)
    unsorted = int(np.count_nonzero(np.diff(times_ns) < 0))
    order = np.argsort(times_ns, kind="stable")
    sorted_ns = times_ns[order]
    keep = np.ones(sorted_ns.size, dtype=bool)
    keep[1:] = np.diff(sorted_ns) != 0
    duplicates = int(np.count_nonzero(~keep))
    if unsorted:
        notes.append(f"{topic}: {unsorted} stamp(s) out of order: sorted by stamp")
    if duplicates:
        notes.append(f"{topic}: {duplicates} duplicated stamp(s): kept the first message of each")
    return order[keep]


def _times(decoded, topic: str, notes: list[str]) -> np.ndarray:
    """Stamps [ns], or log times when the publisher left every stamp at zero."""
    stamps = np.array([s for _, s, _ in decoded], dtype=np.int64)
    if stamps.size and not np.any(stamps):
        notes.append(f"{topic}: every header stamp is zero: using the bag's log (receive) times")
        return np.array([log for log, _, _ in decoded], dtype=np.int64)
    return stamps


def load_run(
    path,
    joint_names,
    topic_overrides: Optional[Mapping[str, str]] = None,
    label: Optional[str] = None,
) -> RunData:
    """Read and decode the bag at ``path``; raises BagError only when it cannot be opened."""
    names = resolve_topic_names(topic_overrides)
    wanted = {names[key] for key in EVALUATED_TOPICS}
    contents = read_bag(path, wanted)
    return decode_run(contents, list(joint_names), names, label or Path(path).name)


def decode_run(contents: BagContents, joint_names, names: dict[str, str], label: str) -> RunData:
    run = RunData(label=label, path=contents.path, storage=contents.storage, topic_names=dict(names), available=dict(contents.available))
    notes = run.notes
    notes.extend(contents.notes)
    skips = _Skips()
    decoded = {}
    for key in EVALUATED_TOPICS:
        topic = names[key]
        records = contents.topics.get(topic)
        if records is None:
            notes.append(f"{topic} ({key}): not in the bag")
            continue
        if records.msgtype != MESSAGE_TYPES[key]:
            notes.append(f"{topic} ({key}): type {records.msgtype}, expected {MESSAGE_TYPES[key]}: skipped")
            continue
        if not records.records:
            notes.append(f"{topic} ({key}): no messages")
            continue
        decoded[key] = _decode(records.records, records.msgtype, topic, skips, _CONVERTERS[key](joint_names))

    joints = decoded.get("joint_states", [])
    joint_ns = _times(joints, names["joint_states"], notes)
    references = decoded.get("reference", [])
    reference_ns = _times(references, names["reference"], notes)
    # t = 0: the trajectory's start (first reference), else the first measurement.
    if reference_ns.size:
        run.origin_ns, run.origin = int(reference_ns.min()), f"first reference stamp on {names['reference']}"
    elif joint_ns.size:
        run.origin_ns, run.origin = int(joint_ns.min()), f"first joint-state stamp on {names['joint_states']} (no reference)"

    def seconds(ns):
        return (np.asarray(ns, dtype=np.int64) - run.origin_ns) * 1e-9

    if joints:
        keep = _order(joint_ns, names["joint_states"], notes)
        run.joint_t = seconds(joint_ns[keep])
        run.q = np.array([joints[k][2][0] for k in keep]).reshape(-1, 6)
        run.qd = np.array([joints[k][2][1] for k in keep]).reshape(-1, 6)
    if references:
        keep = _order(reference_ns, names["reference"], notes)
        run.ref_t = seconds(reference_ns[keep])
        run.ref_pose, run.ref_velocity, run.ref_acceleration = (
            np.array([references[k][2][m] for k in keep]).reshape(-1, 6) for m in range(3)
        )
    poses = decoded.get("platform_pose", [])
    if poses:
        pose_ns = _times(poses, names["platform_pose"], notes)
        keep = _order(pose_ns, names["platform_pose"], notes)
        run.pose_t = seconds(pose_ns[keep])
        run.pose = np.array([poses[k][2] for k in keep]).reshape(-1, 6)

    # Map log times onto the joint-state clock: the stamp of the latest joint state logged before.
    joint_log = np.array([log for log, _, _ in joints], dtype=np.int64)
    log_order = np.argsort(joint_log, kind="stable")
    joint_log, joint_log_stamp = joint_log[log_order], joint_ns[log_order] if joints else joint_ns

    def log_to_stamp(log_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(stamp ns, valid) for log times; invalid before the first joint state was logged."""
        if joint_log.size == 0:
            return log_ns, np.ones(log_ns.size, dtype=bool)
        index = np.searchsorted(joint_log, log_ns, side="right") - 1
        valid = index >= 0
        return np.where(valid, joint_log_stamp[np.maximum(index, 0)], 0), valid

    efforts = decoded.get("effort_commands", [])
    if efforts:
        log_ns = np.array([log for log, _, _ in efforts], dtype=np.int64)
        effort_ns, valid = log_to_stamp(log_ns)
        if joint_log.size:
            run.effort_timing = (
                "each force command is placed at the stamp of the latest joint state logged before it "
                "(the measurement the controller answered)"
            )
            early = int(np.count_nonzero(~valid))
            if early:
                notes.append(f"{names['effort_commands']}: {early} command(s) logged before any joint state: skipped")
        else:
            run.effort_timing = "force commands are placed at their bag log times (no joint states)"
        values = np.array([v for _, _, v in efforts]).reshape(-1, 6)[valid]
        effort_ns = effort_ns[valid]
        # Several commands answering one joint state: the last one is what the drive applied.
        order = np.argsort(effort_ns, kind="stable")
        effort_ns, values = effort_ns[order], values[order]
        last = np.ones(effort_ns.size, dtype=bool)
        last[:-1] = np.diff(effort_ns) != 0
        repeated = int(np.count_nonzero(~last))
        if repeated:
            notes.append(
                f"{names['effort_commands']}: {repeated} command(s) superseded by a later one for the same joint state"
            )
        run.effort_t, run.forces = seconds(effort_ns[last]), values[last]

    for log_ns, _, statuses in decoded.get("diagnostics", []):
        stamp_ns, valid = log_to_stamp(np.array([log_ns], dtype=np.int64))
        t = float(seconds(stamp_ns)[0]) if valid[0] else math.nan
        run.diagnostics.extend(DiagnosticEntry(t, level, name, message) for level, name, message in statuses)

    notes.extend(skips.notes())
    return run


# ------------------------------------------------------------------------------------------ converters
def _joint_state(joint_names):
    def convert(message):
        q, qd = joint_state_arrays(message.name, message.position, message.velocity, joint_names)
        return _stamp_ns(message.header.stamp), (q, qd)

    return convert


def _vector3(v) -> tuple[float, float, float]:
    return (float(v.x), float(v.y), float(v.z))


def _reference(_joint_names):
    def convert(message):
        if len(message.points) != 1:
            raise InvalidInputError(f"reference has {len(message.points)} points, expected 1")
        point = message.points[0]
        if not (len(point.transforms) == len(point.velocities) == len(point.accelerations) == 1):
            raise InvalidInputError(
                "reference point needs one transform, velocity and acceleration, got "
                f"{len(point.transforms)}, {len(point.velocities)}, {len(point.accelerations)}"
            )
        transform, velocity, acceleration = point.transforms[0], point.velocities[0], point.accelerations[0]
        rotation = transform.rotation
        values = euler_from_reference_point(
            ReferencePoint(
                translation=_vector3(transform.translation),
                rotation=(float(rotation.x), float(rotation.y), float(rotation.z), float(rotation.w)),
                linear_velocity=_vector3(velocity.linear),
                angular_velocity=_vector3(velocity.angular),
                linear_acceleration=_vector3(acceleration.linear),
                angular_acceleration=_vector3(acceleration.angular),
            )
        )
        stamp = _stamp_ns(message.header.stamp) + _stamp_ns(point.time_from_start)
        return stamp, values

    return convert


def _effort(_joint_names):
    def convert(message):
        return None, effort_array(message.data)

    return convert


def _pose(_joint_names):
    def convert(message):
        p, o = message.pose.position, message.pose.orientation
        values = (float(p.x), float(p.y), float(p.z), float(o.x), float(o.y), float(o.z), float(o.w))
        if not all(math.isfinite(v) for v in values):
            raise InvalidInputError("platform pose holds a non-finite value")
        euler = euler_zyx_from_quaternion(*values[3:])
        return _stamp_ns(message.header.stamp), np.array(values[:3] + tuple(euler))

    return convert


def _diagnostics(_joint_names):
    def convert(message):
        return None, [(int(s.level), str(s.name), str(s.message)) for s in message.status]

    return convert


_CONVERTERS = {
    "joint_states": _joint_state,
    "reference": _reference,
    "effort_commands": _effort,
    "platform_pose": _pose,
    "diagnostics": _diagnostics,
}
