"""Writing a rosbag2 bag (MCAP by default, sqlite3 as an option) of raw CDR messages."""

from __future__ import annotations

from collections import defaultdict
from io import BytesIO
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from hexapod_control.bags.messages import typestore
from hexapod_control.errors import InvalidInputError
from hexapod_control.model.parameters import STORAGE_FORMATS

ROSBAG2_VERSION = 9  # the rosbag2 format of Jazzy/Kilted; older `ros2 bag` versions read 8 and 9
# rosbags' MCAP writer closes a chunk once it holds more than this many bytes (storage_mcap.py).
MCAP_CHUNK_BYTES = 2**20
# An MCAP message record's header: opcode, record length, channel id, sequence, log and publish time.
MESSAGE_HEADER = np.dtype([("opcode", "u1"), ("length", "<u8"), ("channel", "<u2"), ("sequence", "<u4"),
                           ("log_time", "<u8"), ("publish_time", "<u8")])


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

    def write_blocks(self, blocks: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> None:
        """Write blocks of messages as :meth:`write` would write them one by one, in the order of
        their log times, and at equal times in the order of the blocks. Each block is (topic, log
        times (n,) [ns], serialized messages (n, size) uint8 of one size).

        Into an MCAP bag the records are laid out with a few numpy operations and handed to the
        storage a chunk at a time, at the bytes where rosbags' writer closes its chunks, so that
        the file is the one per-message writes give (test_bags.py compares them byte for byte).
        """
        blocks = [(topic, np.asarray(times, dtype=np.int64), np.asarray(rows, dtype=np.uint8))
                  for topic, times, rows in blocks if len(times)]
        if not blocks:
            return
        storage = self._bulk_storage()
        times = np.concatenate([block[1] for block in blocks])
        rank = np.concatenate([np.full(len(block[1]), index) for index, block in enumerate(blocks)])
        order = np.lexsort((rank, times))
        if storage is None:
            rows = [row for block in blocks for row in block[2]]
            topics = [block[0] for block in blocks for _ in block[1]]
            for index in order.tolist():
                self.write(topics[index], int(times[index]), rows[index].tobytes())
            return
        records = []  # (record bytes (n, width)) per block, in the blocks' order
        for topic, block_times, rows in blocks:
            header = np.zeros(len(block_times), dtype=MESSAGE_HEADER)
            header["opcode"] = 0x05
            header["length"] = MESSAGE_HEADER.itemsize - 9 + rows.shape[1]
            header["channel"] = self._connections[topic].id
            header["log_time"] = header["publish_time"] = block_times
            records.append(np.hstack((header.view(np.uint8).reshape(len(block_times), -1), rows)))
        widths = np.concatenate([np.full(len(block), block.shape[1]) for block in records])[order]
        ends = np.cumsum(widths)
        starts = ends - widths
        data = np.empty(int(ends[-1]), dtype=np.uint8)
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        first = 0
        for block in records:
            at = starts[position[first:first + len(block)]]
            data[at[:, None] + np.arange(block.shape[1])] = block
            first += len(block)
        channels = np.concatenate([np.full(len(block[1]), self._connections[block[0]].id) for block in blocks])[order]
        times = times[order]
        begin = 0
        while begin < len(order):
            chunk = storage.chunk
            base = chunk.bio.tell() - int(starts[begin])
            # rosbags closes the chunk after the first write that takes it past MCAP_CHUNK_BYTES.
            end = min(int(np.searchsorted(base + ends, MCAP_CHUNK_BYTES, side="right")) + 1, len(order))
            chunk.bio.write(data[starts[begin]:ends[end - 1]].tobytes())
            low, high = int(times[begin:end].min()), int(times[begin:end].max())
            chunk.message_start_time = min(chunk.message_start_time, low)
            chunk.message_end_time = max(chunk.message_end_time, high)
            storage.message_start_time = min(storage.message_start_time, low)
            storage.message_end_time = max(storage.message_end_time, high)
            self._writer.min_timestamp = min(self._writer.min_timestamp, low)
            self._writer.max_timestamp = max(self._writer.max_timestamp, high)
            offsets = base + starts[begin:end]
            present, first_at = np.unique(channels[begin:end], return_index=True)
            for channel in present[np.argsort(first_at)].tolist():  # rosbags indexes them in this order
                mine = channels[begin:end] == channel
                chunk.msgs[channel].extend(zip(times[begin:end][mine].tolist(), offsets[mine].tolist()))
                storage.channel_stats[channel] += int(mine.sum())
                self._writer.counts[channel] += int(mine.sum())
            if chunk.bio.tell() > MCAP_CHUNK_BYTES:
                _close_chunk(storage)
            begin = end
        for topic, block_times, _ in blocks:
            self.counts[topic] += len(block_times)

    def _bulk_storage(self):
        """rosbags' MCAP storage when :meth:`write_blocks` may lay out its records (uncompressed
        messages; the writer's attributes as rosbags 0.11 has them), else None."""
        from rosbags.rosbag2.writer import CompressionMode

        storage = getattr(self._writer, "storage", None)
        if self.storage != "mcap" or self._writer.compression_mode == CompressionMode.MESSAGE:
            return None
        chunk = getattr(storage, "chunk", None)
        if not all(hasattr(chunk, name) for name in ("bio", "msgs", "message_start_time", "message_end_time")):
            return None
        if not all(hasattr(storage, name) for name in ("channel_stats", "message_start_time", "compressor",
                                                       "compression", "bio", "chunks")):
            return None
        if not all(hasattr(self._writer, name) for name in ("counts", "min_timestamp", "max_timestamp")):
            return None
        return storage

    def close(self) -> None:
        """Write the index and metadata.yaml; idempotent."""
        if not self.closed:
            self.closed = True
            storage = self._bulk_storage()
            if storage is not None and storage.chunk.bio.tell():
                _close_chunk(storage)  # the last chunk, as rosbags' close would, faster
            self._writer.close()

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _close_chunk(storage) -> None:
    """rosbags' McapWriter.close_chunk (rosbags 0.11), with each channel's message index laid out by
    numpy rather than two writes per message: the same bytes (test_bags_bulk.py compares them)."""
    from rosbags.rosbag2.storage_mcap import (
        PendingChunk,
        write_record,
        write_string,
        write_uint16,
        write_uint32,
        write_uint64,
    )

    chunk = storage.chunk
    record = BytesIO()
    write_uint64(record, chunk.message_start_time)
    write_uint64(record, chunk.message_end_time)
    write_uint64(record, chunk.bio.tell())
    write_uint32(record, 0)
    compressed = storage.compressor(chunk.bio.getvalue())
    write_string(record, storage.compression)
    write_uint64(record, len(compressed))
    record.write(compressed)
    chunk_start = storage.bio.tell()
    write_record(storage.bio, 0x06, record)
    chunk_end = storage.bio.tell()
    offsets = []
    for channel, messages in chunk.msgs.items():
        offsets.append((channel, storage.bio.tell()))
        record = BytesIO()
        write_uint16(record, channel)
        write_uint32(record, len(messages) * 16)
        record.write(np.array(messages, dtype="<u8").reshape(-1, 2).tobytes())  # (log time, offset) each
        write_record(storage.bio, 0x07, record)
    record = BytesIO()
    write_uint64(record, chunk.message_start_time)
    write_uint64(record, chunk.message_end_time)
    write_uint64(record, chunk_start)
    write_uint64(record, chunk_end - chunk_start)
    write_uint32(record, len(offsets) * 10)
    for channel, offset in offsets:
        write_uint16(record, channel)
        write_uint64(record, offset)
    write_uint64(record, storage.bio.tell() - chunk_end)
    write_string(record, storage.compression)
    write_uint64(record, len(compressed))
    write_uint64(record, chunk.bio.tell())
    storage.chunks.append(record)
    storage.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))
