"""Salvage of a bag rosbags cannot open: the messages before the damage, read from the storage file.

A recorder killed mid-run leaves an MCAP file without its summary and index, or an SQLite file
shorter than its header says; both still hold every message written before the cut. The MCAP
records are walked from the start (https://mcap.dev/spec); the SQLite file is read from a padded
copy up to its first unreadable page.
"""

from __future__ import annotations

from pathlib import Path

from hexapod_control.bags.contents import BagContents, one_line
from hexapod_control.errors import BagError


def salvage_storage_file(file: Path, wanted, contents: BagContents) -> None:
    """Add the readable messages of one ``.mcap`` or ``.db3`` file to ``contents``, with a note where
    the damage starts; BagError (the reason) when the file is not of its format at all."""
    salvage = _salvage_mcap if file.suffix == ".mcap" else _salvage_sqlite3
    salvage(file, wanted, contents)


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
            contents.add_topic(wanted, topic, {schemas.get(schema_id)})
        elif opcode == _OP_MESSAGE and not cut:
            channel_id, _sequence, log_time = body.uint(2), body.uint(4), body.uint(8)
            body.uint(8)  # publish time
            if channel_id in channels:
                contents.keep(channels[channel_id], log_time, body.data[body.offset :])
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
        raise BagError("not an MCAP file (bad magic)")
    before = contents.messages_read()
    try:
        _mcap_records(_Cursor(data, len(_MCAP_MAGIC)), {}, {}, contents, wanted)
    except Exception as error:  # noqa: BLE001 - a cut record, bad lengths, undecodable chunks: "damaged here"
        read = contents.messages_read() - before
        reason = str(error) if isinstance(error, _Truncated) else one_line(error)
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
        raise BagError("not an SQLite database (bad header)")
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
                raise BagError(f"topics table unreadable ({one_line(error)})") from None
            names = {}
            for topic_id, name, msgtype in topic_rows:
                names[topic_id] = name
                contents.add_topic(wanted, name, {msgtype})
            try:
                for topic_id, timestamp, data in connection.execute(
                    "SELECT topic_id, timestamp, data FROM messages ORDER BY id"
                ):
                    read += 1
                    if topic_id in names:
                        contents.keep(names[topic_id], timestamp, data)
            except sqlite3.Error as error:
                contents.notes.append(
                    f"{file.name} truncated or corrupt: kept the {read} messages before the damage ({one_line(error)})"
                )
        finally:
            connection.close()
