"""Decode a run's bag into time series: joint states, references, forces, platform pose, diagnostics.

Reading. The bag is read block by block (``bags.read_bag`` with a consumer) and each block is
decoded at once (``evaluation.decode``: in bulk where the message layout is fixed), so an hour at
1 kHz is never held as raw bytes. The run's ``custom_data`` (controller, gain set, parameters,
plant, loop delay: ``bags.run_info``) comes along.

Times. Every series is put on the clock of the ``/joint_states`` header stamps, in seconds from the
run's origin: the first reference stamp (the trajectory's t = 0, where the kappa ramp starts), or
the first joint-state stamp when there is no reference.

* JointState, PoseStamped and the reference use their header stamps (the reference adds the
  point's ``time_from_start``). A topic whose stamps are all zero (an unstamped publisher) uses
  its bag log times instead, with a note. A topic stamped on another clock than the joint states
  is moved onto theirs (``evaluation.timing``), with a note.
* Float64MultiArray has no header. Each force command gets the stamp of the latest joint state
  *logged before it* in the bag: the controller answers the joint state it last received, so a
  command is tied to the measurement it was computed from, whatever the offset or rate between
  the recorder's clock and the stamps (sim time, a faster-than-real-time run).

Robustness. Messages that cannot be decoded or have the wrong sizes (a JointState with 5 positions,
a Float64MultiArray with 7 values, NaN) are skipped and counted per reason; out-of-order stamps
are sorted and duplicated stamps dropped (first kept), each with a note. Nothing here raises for
bad data: :class:`RunData` carries what could be decoded, ``notes`` says what could not, and
:meth:`RunData.missing` says, per topic, why a metric that needs it cannot be computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from hexapod_control.bags import BagContents, MessageBlock, RunInfo, read_bag
from hexapod_control.bags.topics import resolve_topic_names
from hexapod_control.conventions import MESSAGE_TYPES
from hexapod_control.evaluation import parallel, timing
from hexapod_control.evaluation.decode import Skips, TopicDecoder, TopicSeries

# Topics the evaluation decodes (keys of ros_conventions.TOPICS).
EVALUATED_TOPICS = ("joint_states", "reference", "platform_pose", "effort_commands", "diagnostics")
DIAGNOSTIC_LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}
# Samples each metric needs, per topic key (a period needs two joint states).
REQUIRED_SAMPLES = {"joint_states": 2, "reference": 1, "effort_commands": 1}
# The evaluated topics decoded together when a bag is decoded on several processes: the first group
# in the calling process (the most bytes: nothing to transfer), the second, of about as much decoding
# work (the references' rotations), in another.
TOPIC_GROUPS = (("joint_states", "effort_commands", "diagnostics"), ("reference", "platform_pose"))


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
    joint_names: list[str] = field(default_factory=list)  # the bag's names of q1..q6
    joint_t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (N,) [s]
    joint_stamp_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (N,) the stamps themselves
    q: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # [m]
    qd: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # [m/s]
    applied: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # joint-state effort [N], NaN where absent
    ref_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ref_pose: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # xi_d [m, rad]
    ref_velocity: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # load_run(replay=True) only
    ref_acceleration: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # load_run(replay=True) only
    ref_stamp_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # on the joint-state clock
    ref_points: np.ndarray = field(default_factory=lambda: np.zeros((0, 19)))  # message numbers (load_run replay=True)
    effort_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    forces: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # [N]
    pose_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pose: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # recorded platform pose
    diagnostics: list[DiagnosticEntry] = field(default_factory=list)
    origin_ns: int = 0  # absolute stamp of t = 0 [ns]
    origin: str = ""  # what t = 0 is
    effort_timing: str = ""  # how the force commands were placed in time
    run_info: RunInfo = field(default_factory=RunInfo)  # what the bag's metadata says about the run
    sampling: dict[str, timing.Sampling] = field(default_factory=dict)  # key -> periods, jitter, gaps
    decoded: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (messages, decoded)
    skip_reasons: dict[str, str] = field(default_factory=dict)  # key -> most frequent skip reason
    bag_joint_names: Optional[list[str]] = None  # joint names of the bag's first joint state
    notes: list[str] = field(default_factory=list)  # missing topics, skipped messages, repairs, clocks

    @property
    def has_joint_states(self) -> bool:
        return self.joint_t.size >= REQUIRED_SAMPLES["joint_states"]

    @property
    def has_references(self) -> bool:
        return self.ref_t.size >= REQUIRED_SAMPLES["reference"]

    @property
    def has_forces(self) -> bool:
        return self.effort_t.size >= REQUIRED_SAMPLES["effort_commands"]

    def missing(self, key: str) -> Optional[str]:
        """Why the topic of ``key`` gives too few samples for a metric (one line), or None."""
        needed = REQUIRED_SAMPLES[key]
        topic, expected = self.topic_names[key], MESSAGE_TYPES[key]
        messages, decoded = self.decoded.get(key, (0, 0))
        if decoded >= needed:
            return None
        if topic not in self.available:
            alike = [f"{name} ({count} messages)" for name, (msgtype, count) in sorted(self.available.items())
                     if msgtype == expected]
            found = (f"topics of that type: {', '.join(alike)} (map one with --topic {key}=NAME)" if alike else
                     "it has " + ", ".join(f"{name} ({msgtype})" for name, (msgtype, _) in sorted(self.available.items())))
            return f"{topic} ({expected}) is not in the bag; {found}"
        msgtype = self.available[topic][0]
        if msgtype != expected:
            return f"{topic} has type {msgtype}, expected {expected} (map another topic with --topic {key}=NAME)"
        if messages == 0:
            return f"{topic} has no messages"
        text = f"{topic}: {decoded} of {messages} messages decoded, {needed} needed"
        if key in self.skip_reasons:
            text += f"; skipped: {self.skip_reasons[key]}"
        if key == "joint_states" and self.bag_joint_names is not None and not set(self.joint_names) <= set(self.bag_joint_names):
            text += f" (the bag names the joints {self.bag_joint_names}: map them to q1..q6 with --joint-names)"
        return text


class _RunDecoder:
    """Decodes the evaluated topics block by block as the bag is read."""

    def __init__(self, names: dict[str, str], joint_names, bulk: bool, replay: bool):
        self.names, self.joint_names, self.bulk, self.replay = names, list(joint_names), bulk, replay
        self.keys = {names[key]: key for key in EVALUATED_TOPICS}
        self.skips = Skips()
        self.decoders: dict[str, TopicDecoder] = {}

    def __call__(self, block: MessageBlock, msgtype: str) -> None:
        key = self.keys[block.topic]
        if msgtype != MESSAGE_TYPES[key]:
            return  # noted once at the end
        decoder = self.decoders.get(key)
        if decoder is None:
            decoder = self.decoders[key] = TopicDecoder(key, block.topic, msgtype, self.joint_names, self.skips, self.bulk,
                                                        self.replay)
        decoder.add(block)

    def series(self) -> dict[str, TopicSeries]:
        return {key: topic_decoder.series() for key, topic_decoder in self.decoders.items()}


@dataclass
class _TopicRead:
    """What reading a bag for a group of evaluated topics gave: every topic's counts, notes, the
    group's series and skips."""

    path: Path
    storage: str
    available: dict[str, tuple[Optional[str], int]]
    notes: list[str]
    custom_data: dict[str, str]
    series: dict[str, TopicSeries]
    skips: Skips


def _decode_by_topic(path, names: dict[str, str], joint_names, bulk: bool, replay: bool, workers: int):
    """(contents, decoded topics, skips) of the bag, each group of TOPIC_GROUPS read and decoded on
    its own on up to ``workers`` processes. A topic's arrays come back whole, with nothing to join;
    each group reads the whole bag, and skips the other topics' messages (their index only)."""

    def read(keys: tuple[str, ...]) -> _TopicRead:
        decoder = _RunDecoder(names, joint_names, bulk, replay)
        contents = read_bag(path, {names[key] for key in keys}, consumer=decoder)
        return _TopicRead(contents.path, contents.storage, contents.available, contents.notes, contents.custom_data,
                          decoder.series(), decoder.skips)

    reads = parallel.map_forked(read, TOPIC_GROUPS, workers, here=1)
    first = reads[0]
    contents = BagContents(path=first.path, storage=first.storage, topics={}, available=first.available,
                           custom_data=first.custom_data)
    series, skips = {}, Skips()
    for result in reads:
        contents.notes.extend(note for note in result.notes if note not in contents.notes)  # the bag's own, once
        series.update(result.series)
        skips.merge(result.skips)
    return contents, series, skips


def load_run(
    path,
    joint_names,
    topic_overrides: Optional[Mapping[str, str]] = None,
    label: Optional[str] = None,
    bulk: bool = True,
    replay: bool = False,
    workers: int = 1,
) -> RunData:
    """Read and decode the bag at ``path``; raises BagError only when it cannot be opened.

    ``joint_names`` are the bag's names of q1..q6; ``bulk=False`` decodes every message one by one
    (the reference path the tests compare the bulk decoding with); ``replay`` keeps what replay needs
    besides the reference poses: their velocities, accelerations and message numbers (``ref_points``).
    ``workers`` > 1 decodes the topics on that many processes (``evaluation.parallel``); the result
    is the same.
    """
    names = resolve_topic_names(topic_overrides)
    if workers > 1:
        contents, series, skips = _decode_by_topic(path, names, joint_names, bulk, replay, workers)
    else:
        decoder = _RunDecoder(names, joint_names, bulk, replay)
        contents = read_bag(path, {names[key] for key in EVALUATED_TOPICS}, consumer=decoder)
        series, skips = decoder.series(), decoder.skips
    run = RunData(label=label or Path(path).name, path=contents.path, storage=contents.storage,
                  topic_names=dict(names), available=dict(contents.available), joint_names=list(joint_names),
                  run_info=RunInfo.from_custom_data(contents.custom_data))
    run.notes.extend(contents.notes)
    for key in EVALUATED_TOPICS:
        topic = names[key]
        found = contents.available.get(topic)
        if found is None:
            run.notes.append(f"{topic} ({key}): not in the bag")
        elif found[0] != MESSAGE_TYPES[key]:
            run.notes.append(f"{topic} ({key}): type {found[0] or 'several'}, expected {MESSAGE_TYPES[key]}: skipped")
        elif found[1] == 0:
            run.notes.append(f"{topic} ({key}): no messages")
    _assemble(run, series, skips)
    run.notes.extend(skips.notes())
    return run


def _order(times_ns: np.ndarray, topic: str, notes: list[str]):
    """Indices that sort by time with duplicated stamps dropped (first kept), noted; a slice of
    everything when the stamps already rise strictly (the usual case: no copies of long arrays)."""
    if times_ns.size == 0:
        return np.zeros(0, dtype=int)
    if np.all(times_ns[1:] > times_ns[:-1]):
        return slice(None)
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


def _times(log_ns: np.ndarray, stamp_ns: np.ndarray, topic: str, notes: list[str]) -> tuple[np.ndarray, str]:
    """(times [ns], their source): the stamps, or the log times when every stamp is zero."""
    if stamp_ns.size and not np.any(stamp_ns):
        notes.append(f"{topic}: every header stamp is zero: using the bag's log (receive) times")
        return log_ns, "bag log (receive) times"
    return stamp_ns, "header stamps"


def _assemble(run: RunData, decoded: dict[str, TopicSeries], skips: Skips) -> None:
    """Put the decoded topics on one clock, sorted, and tie the force commands to joint states."""
    names, notes = run.topic_names, run.notes
    series = {}
    for key, topic in decoded.items():
        series[key] = (topic.logs, topic.stamps, topic.values)
        run.decoded[key] = (topic.messages, topic.decoded)
        reason = skips.first_reason(topic.topic)
        if reason:
            run.skip_reasons[key] = reason
        if key == "joint_states":
            run.bag_joint_names = topic.bag_joint_names
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), ())
    joint_log, joint_stamp, joint_values = series.get("joint_states", empty)
    joint_ns, joint_clock = _times(joint_log, joint_stamp, names["joint_states"], notes)
    joint_offset = timing.receive_offset(joint_log, joint_ns)

    def on_joint_clock(key: str):
        """(times ns on the joint-state clock, how they were obtained, values) of a stamped topic."""
        log, stamp, values = series.get(key, empty)
        ns, clock = _times(log, stamp, names[key], notes)
        shift = timing.clock_shift(joint_offset, timing.receive_offset(log, ns))
        if shift:
            notes.append(
                f"{names[key]}: stamped on another clock than {names['joint_states']} (their receive-time offsets "
                f"differ by {shift * timing.NS:.6g} s): moved onto the joint-state clock by that difference"
            )
            ns, clock = ns + shift, f"{clock} moved by {shift * timing.NS:.6g} s onto the joint-state clock"
        return ns, clock, values

    reference_ns, reference_clock, reference_values = on_joint_clock("reference")
    # t = 0: the trajectory's start (first reference), else the first measurement.
    if reference_ns.size:
        run.origin_ns, run.origin = int(reference_ns.min()), f"first reference stamp on {names['reference']}"
    elif joint_ns.size:
        run.origin_ns, run.origin = int(joint_ns.min()), f"first joint-state stamp on {names['joint_states']} (no reference)"

    def seconds(ns):
        return (np.asarray(ns, dtype=np.int64) - run.origin_ns) * 1e-9

    if joint_ns.size:
        keep = _order(joint_ns, names["joint_states"], notes)
        run.joint_stamp_ns = joint_ns[keep]
        run.joint_t = seconds(run.joint_stamp_ns)
        run.q, run.qd, run.applied = joint_values[0][keep], joint_values[1][keep], joint_values[2][keep]
    run.sampling["joint_states"] = timing.sampling("joint_states", names["joint_states"], run.joint_t, joint_clock)
    if reference_ns.size:
        keep = _order(reference_ns, names["reference"], notes)
        run.ref_stamp_ns = reference_ns[keep]
        run.ref_t = seconds(run.ref_stamp_ns)
        run.ref_pose = reference_values[0][keep]
        if len(reference_values) > 1:
            run.ref_velocity, run.ref_acceleration, run.ref_points = (v[keep] for v in reference_values[1:])
        run.sampling["reference"] = timing.sampling("reference", names["reference"], run.ref_t, reference_clock)
    pose_ns, pose_clock, pose_values = on_joint_clock("platform_pose")
    if pose_ns.size:
        keep = _order(pose_ns, names["platform_pose"], notes)
        run.pose_t, run.pose = seconds(pose_ns[keep]), pose_values[0][keep]

    # Map log times onto the joint-state clock: the stamp of the latest joint state logged before.
    log_order = slice(None) if np.all(joint_log[1:] >= joint_log[:-1]) else np.argsort(joint_log, kind="stable")
    joint_log_sorted, joint_log_stamp = joint_log[log_order], joint_ns[log_order]

    def log_to_stamp(log_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(stamp ns, valid) for log times; invalid before the first joint state was logged."""
        if joint_log_sorted.size == 0:
            return log_ns, np.ones(log_ns.size, dtype=bool)
        index = np.searchsorted(joint_log_sorted, log_ns, side="right") - 1
        valid = index >= 0
        return np.where(valid, joint_log_stamp[np.maximum(index, 0)], 0), valid

    effort_log, _, effort_values = series.get("effort_commands", empty)
    if effort_log.size:
        _place_forces(run, effort_log, effort_values[0], log_to_stamp, joint_log_sorted.size > 0, seconds)
    diagnostics_log, _, diagnostics_values = series.get("diagnostics", empty)
    if diagnostics_log.size:
        stamp_ns, valid = log_to_stamp(diagnostics_log)
        times = seconds(stamp_ns)
        for k, statuses in enumerate(diagnostics_values[0]):
            t = float(times[k]) if valid[k] else math.nan
            run.diagnostics.extend(DiagnosticEntry(t, level, name, message) for level, name, message in statuses)


def _place_forces(run: RunData, log_ns, values, log_to_stamp, joint_states_logged: bool, seconds) -> None:
    names, notes = run.topic_names, run.notes
    effort_ns, valid = log_to_stamp(log_ns)
    if joint_states_logged:
        run.effort_timing = (
            "each force command is placed at the stamp of the latest joint state logged before it "
            "(the measurement the controller answered)"
        )
        early = int(np.count_nonzero(~valid))
        if early:
            notes.append(f"{names['effort_commands']}: {early} command(s) logged before any joint state: skipped")
    else:
        run.effort_timing = "force commands are placed at their bag log times (no joint states)"
    if not valid.all():
        values, effort_ns = values[valid], effort_ns[valid]
    # Several commands answering one joint state: the last one is what the drive applied.
    if not np.all(effort_ns[1:] >= effort_ns[:-1]):
        order = np.argsort(effort_ns, kind="stable")
        effort_ns, values = effort_ns[order], values[order]
    last = np.ones(effort_ns.size, dtype=bool)
    last[:-1] = np.diff(effort_ns) != 0
    repeated = int(np.count_nonzero(~last))
    if repeated:
        notes.append(f"{names['effort_commands']}: {repeated} command(s) superseded by a later one for the same joint state")
    if last.all():
        run.effort_t, run.forces = seconds(effort_ns), values
    else:
        run.effort_t, run.forces = seconds(effort_ns[last]), values[last]
    run.sampling["effort_commands"] = timing.sampling("effort_commands", names["effort_commands"], run.effort_t,
                                                      "stamp of the joint state each command answers")
