"""MCAP storage files read in bulk: a whole chunk at a time, message positions from the file's index.

rosbag2 MCAP files (https://mcap.dev/spec) hold the messages in chunks of about 1 MB; after each
chunk a message index gives, per channel, the log time and offset of each of its messages in the
chunk, and a summary at the end of the file lists the chunks. From those indexes a chunk becomes one
:class:`MessageBlock` per topic with a few numpy operations, without a Python step per message.

A chunk without an index, or a file without a summary (a recorder killed before closing the bag),
is walked record by record instead; a file cut short or damaged yields the messages before the
damage and a note saying where reading stopped (a cut chunk keeps its complete records: it holds
about 1 MB of messages, too many to drop).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from hexapod_control.bags.contents import BagContents, MessageBlock, one_line
from hexapod_control.errors import BagError
from hexapod_control.model.parameters import safe_load_yaml

MAGIC = b"\x89MCAP0\r\n"
# Record opcodes (https://mcap.dev/spec#records).
OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK = 0x02, 0x03, 0x04, 0x05, 0x06
OP_MESSAGE_INDEX, OP_CHUNK_INDEX, OP_METADATA, OP_METADATA_INDEX, OP_DATA_END = 0x07, 0x08, 0x0C, 0x0D, 0x0F
RECORD_HEADER = 1 + 8  # opcode, length
FOOTER_SIZE = RECORD_HEADER + 8 + 8 + 4  # summary start, summary offset start, CRC
# A message record: opcode, length, channel id (2), sequence (4), log time (8), publish time (8), data.
MESSAGE_FIELDS = 2 + 4 + 8 + 8
MESSAGE_HEADER = RECORD_HEADER + MESSAGE_FIELDS
# Chunks (about 1 MB each) read and decoded together: one block per topic holds tens of thousands of
# messages, so the per-block cost of numpy calls is spread thin, and the bytes read stay small.
SPAN_BYTES = 16 * 2**20
# rosbag2 keeps its metadata.yaml text in a metadata record of this name, under this key.
ROSBAG2_METADATA, SERIALIZED_METADATA = "rosbag2", "serialized_metadata"


class _Truncated(Exception):
    """The data ends inside a record."""


class _Cursor:
    """Little-endian reads from bytes; running past the end raises _Truncated."""

    def __init__(self, data, offset: int = 0):
        self.data, self.offset = data, offset

    @property
    def remaining(self) -> int:
        return len(self.data) - self.offset

    def take(self, size: int, partial: bool = False):
        if size > self.remaining and not partial:
            raise _Truncated("data ends inside a record")
        value = self.data[self.offset : self.offset + size]
        self.offset += len(value)
        return value

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def string(self) -> str:
        return bytes(self.take(self.uint(4))).decode("utf-8")

    def string_map(self) -> dict[str, str]:
        end = self.uint(4) + self.offset
        pairs = {}
        while self.offset < end:
            key = self.string()
            pairs[key] = self.string()
        return pairs


def decompress(compression: str, data) -> bytes:
    """A chunk's records; a stream cut short yields the bytes decodable before the cut."""
    if compression == "":
        return data
    if compression == "zstd":
        try:
            from compression import zstd  # Python 3.14
        except ImportError:
            from backports import zstd  # what rosbags uses before 3.14
        return zstd.ZstdDecompressor().decompress(bytes(data))
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.LZ4FrameDecompressor().decompress(bytes(data))
    raise ValueError(f"unsupported chunk compression {compression!r}")


@dataclass
class _ChunkIndex:
    start: int  # file offset of the chunk record
    length: int  # of the chunk record
    message_index_offsets: dict[int, int]  # channel id -> file offset of its message index
    message_index_length: int


@dataclass
class _Channels:
    """Schemas and channels met so far, and the topics they register with the contents."""

    contents: BagContents
    wanted: object
    schemas: dict[int, str] = field(default_factory=dict)
    topics: dict[int, str] = field(default_factory=dict)  # channel id -> topic, for every channel
    types: dict[int, str] = field(default_factory=dict)  # channel id -> message type
    readable: set = field(default_factory=set)  # channel ids whose messages are CDR

    def schema(self, body: _Cursor) -> None:
        schema_id = body.uint(2)
        self.schemas[schema_id] = body.string()

    def channel(self, body: _Cursor, register: bool = True) -> None:
        """Read a channel record; ``register`` its topic now (a walk) or later (:meth:`register`)."""
        channel_id, schema_id = body.uint(2), body.uint(2)
        topic, encoding = body.string(), body.string()
        if channel_id in self.topics:
            return
        self.topics[channel_id], self.types[channel_id] = topic, self.schemas.get(schema_id)
        if encoding == "cdr":
            self.readable.add(channel_id)
        else:
            self.contents.notes.append(f"{topic}: message encoding {encoding!r}, not cdr: skipped")
        if register:
            self.contents.add_topic(self.wanted, topic, {self.types[channel_id]})

    def register(self) -> None:
        """Register every topic with all the types its channels carry (several: skipped, noted)."""
        types: dict[str, set] = {}
        for channel_id, topic in self.topics.items():
            types.setdefault(topic, set()).add(self.types[channel_id])
        for topic, msgtypes in types.items():
            self.contents.add_topic(self.wanted, topic, msgtypes)

    def wanted_channel(self, channel_id: int) -> bool:
        """Whether the channel's messages are kept: CDR, of a wanted topic, of the topic's type."""
        records = self.contents.topics.get(self.topics[channel_id])
        return channel_id in self.readable and records is not None and records.msgtype == self.types[channel_id]


def read_mcap(file: Path, wanted, contents: BagContents) -> None:
    """Add the messages of one MCAP file to ``contents``: indexed when the file has a summary,
    else walked; BagError when the file is not MCAP at all."""
    with file.open("rb") as handle:
        if handle.read(len(MAGIC)) != MAGIC:
            raise BagError(f"{file.name}: not an MCAP file (bad magic)")
        size = file.stat().st_size
        channels = _Channels(contents, wanted)
        try:
            chunks = _read_summary(handle, size, channels)
        except (_Truncated, ValueError, UnicodeDecodeError) as error:
            contents.notes.append(f"{file.name}: unreadable summary ({one_line(error)}): walked the records")
            channels, chunks = _Channels(contents, wanted), None
        if chunks is None:
            _walk_file(file, channels)
            return
        for span in _spans(chunks):
            try:
                _read_span(handle, span, channels)
            except (_Truncated, ValueError) as error:
                # A complete file damaged inside: the other chunks are still indexed and readable.
                contents.notes.append(
                    f"{file.name} truncated or corrupt: the {len(span)} chunk(s) from byte {span[0].start} are "
                    f"unreadable, their messages are missing ({one_line(error)})"
                )


def read_mcap_metadata(file: Path, contents: BagContents) -> None:
    """Only the topics and the custom data of an MCAP file's summary (no messages)."""
    with file.open("rb") as handle:
        if handle.read(len(MAGIC)) != MAGIC:
            raise BagError(f"{file.name}: not an MCAP file (bad magic)")
        try:
            _read_summary(handle, file.stat().st_size, _Channels(contents, set()))
        except (_Truncated, ValueError, UnicodeDecodeError):
            pass


def _read_summary(handle, size: int, channels: _Channels) -> list[_ChunkIndex] | None:
    """Chunk indexes from the summary (registering schemas, channels, custom data); None without one."""
    if size < 2 * len(MAGIC) + FOOTER_SIZE:
        return None
    handle.seek(size - len(MAGIC) - FOOTER_SIZE)
    tail = handle.read(FOOTER_SIZE + len(MAGIC))
    if tail[-len(MAGIC) :] != MAGIC or tail[0] != OP_FOOTER:
        return None  # cut short: no footer
    summary_start, summary_offset_start = struct.unpack_from("<QQ", tail, RECORD_HEADER)
    if summary_start == 0:
        return None
    end = summary_offset_start or size - len(MAGIC) - FOOTER_SIZE
    handle.seek(summary_start)
    cursor = _Cursor(handle.read(end - summary_start))
    chunks, metadata = [], []
    while cursor.remaining:
        opcode, body = cursor.uint(1), _Cursor(cursor.take(cursor.uint(8)))
        if opcode == OP_SCHEMA:
            channels.schema(body)
        elif opcode == OP_CHANNEL:
            channels.channel(body, register=False)
        elif opcode == OP_CHUNK_INDEX:
            body.uint(8), body.uint(8)  # message start and end time
            start, length = body.uint(8), body.uint(8)
            offsets_end = body.uint(4) + body.offset
            offsets = {}
            while body.offset < offsets_end:
                channel_id = body.uint(2)
                offsets[channel_id] = body.uint(8)
            chunks.append(_ChunkIndex(start, length, offsets, body.uint(8)))
        elif opcode == OP_METADATA_INDEX:
            offset, length = body.uint(8), body.uint(8)
            if body.string() == ROSBAG2_METADATA:
                metadata.append((offset, length))
    if not channels.topics:
        return None  # a summary without channels cannot place the messages: walk instead
    channels.register()
    for offset, length in metadata:
        handle.seek(offset + RECORD_HEADER)
        _read_metadata(_Cursor(handle.read(length - RECORD_HEADER)), channels.contents)
    return chunks


def _read_metadata(body: _Cursor, contents: BagContents) -> None:
    """custom_data of rosbag2's serialized metadata (what metadata.yaml holds), unless read already."""
    if body.string() != ROSBAG2_METADATA or contents.custom_data:
        return
    contents.custom_data = custom_data_of(body.string_map().get(SERIALIZED_METADATA))


def custom_data_of(document) -> dict[str, str]:
    """``custom_data`` of a rosbag2 metadata document (its YAML text, or parsed); empty when it has
    none or is unreadable."""
    if isinstance(document, str):
        try:
            document = safe_load_yaml(document)
        except yaml.YAMLError:
            return {}
    # metadata.yaml wraps the fields in rosbag2_bagfile_information; the copy inside MCAP does not.
    info = document.get("rosbag2_bagfile_information", document) if isinstance(document, dict) else None
    data = info.get("custom_data") if isinstance(info, dict) else None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _chunk_records(record, offset: int = RECORD_HEADER, partial: bool = False):
    """The (decompressed) records of a chunk record's body starting at ``offset``."""
    body = _Cursor(record, offset)
    body.uint(8), body.uint(8), body.uint(8)  # message start and end time, uncompressed size
    body.uint(4)  # CRC: not checked, the messages are checked when decoded
    compression = body.string()
    size = body.uint(8)
    return decompress(compression, body.take(size, partial=partial))


def _spans(chunks: list[_ChunkIndex]) -> list[list[_ChunkIndex]]:
    """Consecutive chunks grouped into spans of about SPAN_BYTES, read and decoded together."""
    spans, current, size = [], [], 0
    for index in sorted(chunks, key=lambda c: c.start):
        current.append(index)
        size += index.length + index.message_index_length
        if size >= SPAN_BYTES:
            spans.append(current)
            current, size = [], 0
    return spans + ([current] if current else [])


def _read_span(handle, span: list[_ChunkIndex], channels: _Channels) -> None:
    """The messages of consecutive chunks, one block per wanted topic.

    Uncompressed chunks are used where they lie in the bytes read (no copy); compressed ones are
    decompressed and appended after them.
    """
    first = span[0].start
    end = max(index.start + index.length + index.message_index_length for index in span)
    handle.seek(first)
    raw = handle.read(end - first)
    if len(raw) < end - first:
        raise _Truncated(f"the chunks from byte {first} are cut short")
    view = memoryview(raw)
    pieces, extra = [raw], len(raw)
    starts: dict[int, list[np.ndarray]] = {}
    contents, walk = channels.contents, []
    for index in span:
        at = index.start - first
        if raw[at] != OP_CHUNK:
            raise ValueError(f"no chunk record at byte {index.start}")
        records_at, compression, size = _chunk_header(view, at + RECORD_HEADER)
        if compression:
            pieces.append(decompress(compression, view[records_at : records_at + size]))
            base, extra = extra, extra + len(pieces[-1])
        else:
            base = records_at
        if not index.message_index_offsets and size:
            walk.append(bytes(pieces[-1]) if compression else bytes(view[records_at : records_at + size]))
            continue
        for channel_id, offset in index.message_index_offsets.items():
            if channel_id not in channels.topics:
                raise ValueError(f"message index of unknown channel {channel_id}")
            position = offset - first
            if raw[position] != OP_MESSAGE_INDEX:
                raise ValueError(f"no message index at byte {offset}")
            count = struct.unpack_from("<I", raw, position + RECORD_HEADER + 2)[0] // 16
            if not channels.wanted_channel(channel_id):
                contents.count(channels.topics[channel_id], count)
                continue
            pairs = np.frombuffer(raw, dtype="<u8", count=2 * count, offset=position + RECORD_HEADER + 2 + 4)
            order = np.argsort(pairs[1::2], kind="stable")  # file order
            starts.setdefault(channel_id, []).append(
                (base + pairs[1::2][order].astype(np.int64), pairs[0::2][order].astype(np.int64)))
    buffer = np.frombuffer(raw if len(pieces) == 1 else b"".join(pieces), dtype=np.uint8)
    for channel_id, parts in starts.items():
        block = _indexed_block(buffer, np.concatenate([offsets for offsets, _ in parts]),
                               np.concatenate([logs for _, logs in parts]), channel_id, channels.topics[channel_id])
        if block is None:
            raise ValueError(f"the message index of {channels.topics[channel_id]} does not point at its messages")
        contents.keep(block)
    for records in walk:
        _walk_chunk(records, channels)


def _chunk_header(view, offset: int) -> tuple[int, str, int]:
    """(where the records start, compression, their stored size) of a chunk record's body."""
    body = _Cursor(view, offset)
    body.uint(8), body.uint(8), body.uint(8)  # message start and end time, uncompressed size
    body.uint(4)  # CRC: not checked, the messages are checked when decoded
    compression = body.string()
    size = body.uint(8)
    if size > body.remaining:
        raise _Truncated("chunk records cut short")
    return body.offset, compression, size


def _indexed_block(records: np.ndarray, starts: np.ndarray, log_ns: np.ndarray, channel_id: int,
                   topic: str) -> MessageBlock | None:
    """The block of the message records at ``starts`` (log times from the index), or None when
    they are not that channel's messages."""
    if starts.size == 0:
        return MessageBlock(topic, log_ns, records, starts, starts)
    if starts[-1] + MESSAGE_HEADER > records.size or starts[0] < 0:
        return None
    head = records[starts[:, None] + np.arange(RECORD_HEADER + 2)]  # opcode, length, channel id
    lengths = head[:, 1:RECORD_HEADER].copy().view("<u8").ravel().astype(np.int64)
    channels = head[:, RECORD_HEADER:].copy().view("<u2").ravel()
    ok = (head[:, 0] == OP_MESSAGE) & (channels == channel_id)
    ok &= (lengths >= MESSAGE_FIELDS) & (starts + RECORD_HEADER + lengths <= records.size)
    if not ok.all():
        return None
    return MessageBlock(topic, log_ns, records, starts + MESSAGE_HEADER, lengths - MESSAGE_FIELDS)


class _Collector:
    """Messages met by a walk, per wanted channel, handed over as blocks of one buffer."""

    def __init__(self, channels: _Channels, data):
        self.channels, self.data = channels, data
        self.found: dict[int, tuple[list, list, list]] = {}

    def message(self, channel_id: int, log_ns: int, start: int, size: int) -> None:
        if channel_id not in self.channels.topics:
            return
        if not self.channels.wanted_channel(channel_id):
            self.channels.contents.count(self.channels.topics[channel_id], 1)
            return
        logs, starts, sizes = self.found.setdefault(channel_id, ([], [], []))
        logs.append(log_ns), starts.append(start), sizes.append(size)

    def flush(self) -> None:
        buffer = np.frombuffer(self.data, dtype=np.uint8)
        for channel_id, (logs, starts, sizes) in self.found.items():
            self.channels.contents.keep(MessageBlock(
                self.channels.topics[channel_id], np.array(logs, dtype=np.int64), buffer,
                np.array(starts, dtype=np.int64), np.array(sizes, dtype=np.int64),
            ))
        self.found = {}


def _walk_records(cursor: _Cursor, channels: _Channels, collector: _Collector) -> None:
    """Walk records to the end of the cursor's data; a record cut by the end raises _Truncated
    after everything before it (and the complete records of a cut chunk) has been kept."""
    while cursor.remaining:
        opcode = cursor.uint(1)
        length = cursor.uint(8)
        cut = length > cursor.remaining
        start = cursor.offset
        body = _Cursor(cursor.take(length, partial=True))
        if opcode == OP_SCHEMA and not cut:
            channels.schema(body)
        elif opcode == OP_CHANNEL and not cut:
            channels.channel(body)
        elif opcode == OP_MESSAGE and not cut:
            channel_id, _sequence, log_ns = body.uint(2), body.uint(4), body.uint(8)
            collector.message(channel_id, log_ns, start + MESSAGE_FIELDS, length - MESSAGE_FIELDS)
        elif opcode == OP_CHUNK:
            chunk = _chunk_records(body.data, 0, partial=True)
            inner = _Collector(channels, chunk)
            try:
                _walk_records(_Cursor(chunk), channels, inner)
            finally:
                inner.flush()
        elif opcode == OP_METADATA and not cut:
            _read_metadata(body, channels.contents)
        elif opcode in (OP_DATA_END, OP_FOOTER):
            return
        if cut:
            raise _Truncated("the file ends inside a record")


def _walk_chunk(records: bytes, channels: _Channels) -> None:
    collector = _Collector(channels, records)
    try:
        _walk_records(_Cursor(records), channels, collector)
    finally:
        collector.flush()


def _walk_file(file: Path, channels: _Channels) -> None:
    """Every record from the start; a note where the damage starts, if the file is damaged."""
    data = file.read_bytes()
    contents = channels.contents
    before = contents.messages_read()
    collector = _Collector(channels, data)
    try:
        _walk_records(_Cursor(data, len(MAGIC)), channels, collector)
    except Exception as error:  # noqa: BLE001 - a cut record, bad lengths, undecodable chunks: "damaged here"
        collector.flush()
        read = contents.messages_read() - before
        reason = str(error) if isinstance(error, _Truncated) else one_line(error)
        contents.notes.append(f"{file.name} truncated or corrupt: kept the {read} messages before the damage ({reason})")
    else:
        collector.flush()
