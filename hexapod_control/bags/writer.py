"""Writing a rosbag2 bag (MCAP by default, sqlite3 as an option) of raw CDR messages."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

from hexapod_control.bags.messages import typestore
from hexapod_control.errors import InvalidInputError
from hexapod_control.model.parameters import STORAGE_FORMATS

ROSBAG2_VERSION = 9  # the rosbag2 format of Jazzy/Kilted; older `ros2 bag` versions read 8 and 9


class BagWriter:
    """A rosbag2 bag of raw CDR messages; use as a context manager or call :meth:`close`.

    ``add_topic`` registers a topic with its ROS type name (the type store supplies the message
    definition and type hash that ``ros2 bag`` and Foxglove expect); ``write`` takes the
    serialized bytes exactly as a raw subscription delivers them. ``custom_data`` (string keys and
    values) goes into the bag's metadata, as ``ros2 bag record --custom-data`` puts it (see
    ``bags.run_info`` for what the package records about a run).
    """

    def __init__(self, path, storage: str = "mcap", custom_data: Optional[Mapping[str, str]] = None):
        from rosbags.rosbag2 import StoragePlugin, Writer

        if storage not in STORAGE_FORMATS:
            raise InvalidInputError(f"unknown bag storage {storage!r}; expected one of {list(STORAGE_FORMATS)}")
        self.path = Path(path)
        if self.path.exists():
            raise InvalidInputError(f"{self.path} exists already; a bag is never overwritten")
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self.storage = storage
        self._writer = Writer(self.path, version=ROSBAG2_VERSION, storage_plugin=plugin)
        for key, value in (custom_data or {}).items():
            if not isinstance(value, str):
                raise InvalidInputError(f"custom data {key!r} must be a string, got {type(value).__name__}")
            self._writer.set_custom_data(key, value)
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
