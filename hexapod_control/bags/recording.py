"""Recording a run to a rosbag2 bag and reading bags back, through ``rosbags`` (no ROS needed).

Pure Python: the recorder node (``ros/recorder_node.py``) hands this module the serialized CDR
bytes its raw subscriptions receive, and the evaluation tools read bags recorded here or by
``ros2 bag record`` on the real robot. The same message builders write the synthetic bags of the
tests and the bags of the lockstep main job, so every bag goes through one code path.

* :class:`BagWriter` - a rosbag2 bag (MCAP by default, sqlite3 as an option) of raw CDR messages.
* ``*_cdr`` builders - CDR bytes of the project's messages from plain numbers.
* :func:`read_bag` - every message of the wanted topics as (log time, bytes), from a bag
  directory, a bag without ``metadata.yaml`` (recorder killed) or a lone ``.mcap``/``.db3`` file;
  a truncated or corrupt file yields what could be read plus a note saying where reading stopped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from hexapod_control.bags.settings import STORAGE_FORMATS
from hexapod_control.errors import InvalidInputError
from hexapod_control.ros.conventions import (
    MESSAGE_TYPES,
    REFERENCE_JOINT_NAME,
    reference_point_from_euler,
    stamp_fields,
)

ROSBAG2_VERSION = 9  # the rosbag2 format of Jazzy/Kilted; older `ros2 bag` versions read 8 and 9
# rosbags storage files, by suffix; used when a bag directory has no metadata.yaml.
STORAGE_SUFFIXES = {".mcap": "mcap", ".db3": "sqlite3"}


class BagError(Exception):
    """A bag cannot be opened or read at all (the message says why, in one line)."""


# ------------------------------------------------------------------------------------------ CDR
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


# ------------------------------------------------------------------------------------------ writing
class BagWriter:
    """A rosbag2 bag of raw CDR messages; use as a context manager or call :meth:`close`.

    ``add_topic`` registers a topic with its ROS type name (the type store supplies the message
    definition and type hash that ``ros2 bag`` and Foxglove expect); ``write`` takes the
    serialized bytes exactly as a raw subscription delivers them.
    """

    def __init__(self, path, storage: str = "mcap"):
        from rosbags.rosbag2 import StoragePlugin, Writer

        if storage not in STORAGE_FORMATS:
            raise InvalidInputError(f"unknown bag storage {storage!r}; expected one of {list(STORAGE_FORMATS)}")
        self.path = Path(path)
        if self.path.exists():
            raise InvalidInputError(f"{self.path} exists already; a bag is never overwritten")
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self.storage = storage
        self._writer = Writer(self.path, version=ROSBAG2_VERSION, storage_plugin=plugin)
        self._writer.open()
        self._connections: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        self.closed = False

    def add_topic(self, topic: str, msgtype: str) -> None:
        if topic in self._connections:
            raise InvalidInputError(f"topic {topic} added twice")
        if msgtype not in typestore().types:
            raise InvalidInputError(f"message type {msgtype!r} of {topic} is unknown to the rosbags type store")
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=typestore())
        self.counts[topic] = 0

    def write(self, topic: str, timestamp_ns: int, data: bytes) -> None:
        self._writer.write(self._connections[topic], int(timestamp_ns), data)
        self.counts[topic] += 1

    def close(self) -> None:
        """Write the index and metadata.yaml; idempotent."""
        if not self.closed:
            self.closed = True
            self._writer.close()

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ------------------------------------------------------------------------------------------ reading
@dataclass
class TopicRecords:
    topic: str
    msgtype: Optional[str]
    records: list = field(default_factory=list)  # [(log time ns, bytes)], in file order


@dataclass
class BagContents:
    """The raw messages of the wanted topics and what the bag said about itself."""

    path: Path
    storage: str  # mcap | sqlite3 | unknown
    topics: dict[str, TopicRecords]  # wanted topics present in the bag
    available: dict[str, tuple[Optional[str], int]]  # every topic of the bag: (type, message count read)
    notes: list[str] = field(default_factory=list)  # what went wrong while reading, one line each


def _storage_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in STORAGE_SUFFIXES and p.is_file())


def _storage_of(path: Path) -> str:
    if path.is_dir():
        files = _storage_files(path)
        return STORAGE_SUFFIXES[files[0].suffix] if files else "unknown"
    return STORAGE_SUFFIXES.get(path.suffix, "unknown")


def _one_line(error) -> str:
    text = " ".join(str(error).split()) if error is not None else "unknown error"
    return f"{type(error).__name__}: {text}" if error is not None else text


def read_bag(path, wanted_topics: Optional[Iterable[str]] = None) -> BagContents:
    """Raw messages of ``wanted_topics`` (all topics when None) of the bag at ``path``.

    ``path`` is a bag directory or one ``.mcap``/``.db3`` file. Raises BagError (one-line message)
    when nothing can be read. A bag rosbags cannot open (no metadata.yaml, a file cut short, a
    damaged index) is salvaged from its storage file: the messages before the damage are kept and
    a note says so. Other topics of the bag are listed in ``available``; their bytes are not kept.
    """
    path = Path(path)
    if not path.exists():
        raise BagError(f"{path}: no such bag")
    if path.is_dir():
        files = _storage_files(path)
        if not (path / "metadata.yaml").exists() and not files:
            raise BagError(f"{path}: not a rosbag2 bag (no metadata.yaml, no .mcap or .db3 file)")
    elif path.suffix not in STORAGE_SUFFIXES:
        raise BagError(f"{path}: not a bag directory, .mcap or .db3 file")
    else:
        files = [path]
    wanted = None if wanted_topics is None else set(wanted_topics)
    notes: list[str] = []
    contents = BagContents(path=path, storage=_storage_of(path), topics={}, available={}, notes=notes)
    try:
        _read_with_rosbags(path, wanted, contents)
        return contents
    except _CannotOpen as error:
        first_error = error.reason
    if not files:
        raise BagError(f"{path}: cannot open bag: {first_error}")
    if len(files) > 1:
        notes.append(f"split bag: salvaging {len(files)} storage files in name order")
    notes.append(f"rosbags cannot open the bag ({first_error}): salvaged from the storage file")
    for file in files:
        try:
            salvage = _salvage_mcap if file.suffix == ".mcap" else _salvage_sqlite3
            salvage(file, wanted, contents)
        except _CannotOpen as error:
            raise BagError(f"{path}: cannot open bag: {first_error}; salvage of {file.name}: {error.reason}") from None
    return contents


class _CannotOpen(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _add_topic(contents: BagContents, wanted, topic: str, msgtypes: set) -> None:
    msgtype = next(iter(msgtypes)) if len(msgtypes) == 1 else None
    previous = contents.available.get(topic)
    contents.available[topic] = (msgtype if previous is None else previous[0], 0 if previous is None else previous[1])
    if wanted is not None and topic not in wanted or topic in contents.topics:
        return
    if msgtype is None:
        contents.notes.append(f"{topic}: recorded with several types {sorted(msgtypes)}: skipped")
        return
    contents.topics[topic] = TopicRecords(topic, msgtype)


def _keep(contents: BagContents, topic: str, timestamp: int, data) -> None:
    msgtype, count = contents.available.get(topic, (None, 0))
    contents.available[topic] = (msgtype, count + 1)
    records = contents.topics.get(topic)
    if records is not None:
        records.records.append((int(timestamp), bytes(data)))


def _read_with_rosbags(path: Path, wanted, contents: BagContents) -> None:
    from rosbags.rosbag2 import Reader

    try:
        reader = Reader(path)
        reader.open()
    except Exception as error:  # noqa: BLE001 - rosbags, sqlite3 and yaml errors alike: salvage next
        raise _CannotOpen(_one_line(error)) from None
    read = 0
    try:
        types: dict[str, set] = {}
        for connection in reader.connections:
            types.setdefault(connection.topic, set()).add(connection.msgtype)
        for topic, msgtypes in types.items():
            _add_topic(contents, wanted, topic, msgtypes)
        try:
            for connection, timestamp, data in reader.messages():
                read += 1
                _keep(contents, connection.topic, timestamp, data)
        except Exception as error:  # noqa: BLE001 - a damaged chunk fails in storage-specific ways
            contents.notes.append(
                f"bag truncated or corrupt: reading stopped after {read} messages ({_one_line(error)})"
            )
    finally:
        try:
            reader.close()
        except Exception:  # noqa: BLE001 - closing a damaged file must not hide what was read
            pass


# MCAP record opcodes (https://mcap.dev/spec) the salvage needs.
_MCAP_MAGIC = b"\x89MCAP0\r\n"
_OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK = 0x03, 0x04, 0x05, 0x06


def _mcap_decompress(compression: str, data: bytes) -> bytes:
    """Decompress a chunk's records; a cut stream yields the bytes decodable before the cut."""
    if compression == "":
        return data
    if compression == "zstd":
        try:
            from compression import zstd  # Python 3.14
        except ImportError:
            from backports import zstd  # what rosbags uses before 3.14
        return zstd.ZstdDecompressor().decompress(data)
    if compression == "lz4":
        import lz4.frame

        decompressor = lz4.frame.LZ4FrameDecompressor()
        return decompressor.decompress(data)
    raise ValueError(f"unsupported chunk compression {compression!r}")


class _Truncated(Exception):
    """The data ends inside a record."""


class _Cursor:
    def __init__(self, data: bytes, offset: int = 0):
        self.data, self.offset = data, offset

    @property
    def remaining(self) -> int:
        return len(self.data) - self.offset

    def take(self, size: int, partial: bool = False) -> bytes:
        if size > self.remaining and not partial:
            raise _Truncated("data ends inside a record")
        value = self.data[self.offset : self.offset + size]
        self.offset += len(value)
        return value

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def string(self) -> str:
        return self.take(self.uint(4)).decode("utf-8")


def _mcap_records(cursor: _Cursor, schemas: dict, channels: dict, contents: BagContents, wanted) -> None:
    """Walk the records to the end of the cursor's data.

    A record cut by the end of the data raises _Truncated, after the complete records inside a cut
    chunk have been kept (a chunk holds about 1 MB of messages: dropping it whole would lose them).
    """
    while cursor.remaining:
        opcode = cursor.uint(1)
        length = cursor.uint(8)
        cut = length > cursor.remaining
        body = _Cursor(cursor.take(length, partial=True))
        if opcode == _OP_SCHEMA:
            schema_id = body.uint(2)
            schemas[schema_id] = body.string()
        elif opcode == _OP_CHANNEL:
            channel_id, schema_id = body.uint(2), body.uint(2)
            topic = body.string()
            channels[channel_id] = topic
            _add_topic(contents, wanted, topic, {schemas.get(schema_id)})
        elif opcode == _OP_MESSAGE and not cut:
            channel_id, _sequence, log_time = body.uint(2), body.uint(4), body.uint(8)
            body.uint(8)  # publish time
            if channel_id in channels:
                _keep(contents, channels[channel_id], log_time, body.data[body.offset :])
        elif opcode == _OP_CHUNK:
            body.uint(8), body.uint(8), body.uint(8)  # message start and end time, uncompressed size
            body.uint(4)  # CRC: not checked, the messages are checked when decoded
            compression = body.string()
            size = body.uint(8)
            records = _mcap_decompress(compression, body.take(size, partial=True))
            _mcap_records(_Cursor(records), schemas, channels, contents, wanted)
        if cut:
            raise _Truncated("the file ends inside a record")


def _salvage_mcap(file: Path, wanted, contents: BagContents) -> None:
    data = file.read_bytes()
    if not data.startswith(_MCAP_MAGIC):
        raise _CannotOpen("not an MCAP file (bad magic)")
    before = sum(count for _, count in contents.available.values())
    try:
        _mcap_records(_Cursor(data, len(_MCAP_MAGIC)), {}, {}, contents, wanted)
    except Exception as error:  # noqa: BLE001 - a cut record, bad lengths, undecodable chunks: "damaged here"
        read = sum(count for _, count in contents.available.values()) - before
        reason = str(error) if isinstance(error, _Truncated) else _one_line(error)
        contents.notes.append(f"{file.name} truncated or corrupt: kept the {read} messages before the damage ({reason})")


def _salvage_sqlite3(file: Path, wanted, contents: BagContents) -> None:
    """Read rows up to the first unreadable page of a .db3 cut short (on a padded temporary copy)."""
    import shutil
    import sqlite3
    import struct
    import tempfile

    with file.open("rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise _CannotOpen("not an SQLite database (bad header)")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    declared_size = page_size * struct.unpack(">I", header[28:32])[0]
    with tempfile.TemporaryDirectory(prefix="hexapod_salvage_") as scratch:
        copy = Path(scratch) / file.name
        shutil.copyfile(file, copy)
        # SQLite rejects a file shorter than its header's page count; pad it so that the pages
        # that survived can be read and the missing ones fail as "malformed" when reached.
        if copy.stat().st_size < declared_size:
            with copy.open("r+b") as handle:
                handle.truncate(declared_size)
        connection = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        read = 0
        try:
            try:
                topic_rows = connection.execute("SELECT id, name, type FROM topics").fetchall()
            except sqlite3.Error as error:
                raise _CannotOpen(f"topics table unreadable ({_one_line(error)})") from None
            names = {}
            for topic_id, name, msgtype in topic_rows:
                names[topic_id] = name
                _add_topic(contents, wanted, name, {msgtype})
            try:
                for topic_id, timestamp, data in connection.execute(
                    "SELECT topic_id, timestamp, data FROM messages ORDER BY id"
                ):
                    read += 1
                    if topic_id in names:
                        _keep(contents, names[topic_id], timestamp, data)
            except sqlite3.Error as error:
                contents.notes.append(
                    f"{file.name} truncated or corrupt: kept the {read} messages before the damage ({_one_line(error)})"
                )
        finally:
            connection.close()
