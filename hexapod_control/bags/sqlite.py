"""SQLite (``.db3``) storage files: the rows of the wanted topics in batches, and the salvage of a cut file.

rosbag2's SQLite storage keeps the topics in a ``topics`` table and every message as a row of
``messages`` (topic id, log time, CDR bytes), in insertion order. Rows are fetched in batches and
joined into one :class:`MessageBlock` per topic and batch.

A recorder killed mid-run can leave a file shorter than its header says; SQLite refuses it. The
salvage reads a padded copy up to its first unreadable page, so the rows written before the cut
are kept, with a note.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
import tempfile
from pathlib import Path

from hexapod_control.bags.contents import BagContents, block_of, one_line
from hexapod_control.errors import BagError

SQLITE_HEADER = b"SQLite format 3\x00"
ROWS_PER_BATCH = 100_000  # rows joined into one block: large enough for numpy, small next to a long bag


def read_sqlite3(file: Path, wanted, contents: BagContents) -> None:
    """Add the messages of one ``.db3`` file to ``contents``; a cut file is salvaged (with a note),
    BagError when the file is not an SQLite bag at all."""
    _check_header(file)
    before = contents.messages_read()
    try:
        with _connect(file) as connection:
            _read_rows(connection, _register_topics(connection, wanted, contents), contents)
    except sqlite3.Error as error:
        read = contents.messages_read() - before
        if read == 0:
            contents.notes.append(f"{file.name}: SQLite cannot read it ({one_line(error)}): salvaged from a padded copy")
            _salvage(file, wanted, contents)
        else:
            contents.notes.append(
                f"{file.name} truncated or corrupt: kept the {read} messages before the damage ({one_line(error)})"
            )


def _check_header(file: Path) -> None:
    with file.open("rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(SQLITE_HEADER):
        raise BagError(f"{file.name}: not an SQLite database (bad header)")


class _connect:
    """A read-only connection, closed on exit."""

    def __init__(self, file: Path):
        self.connection = sqlite3.connect(f"file:{file}?mode=ro", uri=True)

    def __enter__(self) -> sqlite3.Connection:
        return self.connection

    def __exit__(self, *exc) -> None:
        self.connection.close()


def _register_topics(connection, wanted, contents: BagContents) -> dict[int, str]:
    """topic id -> name, each topic registered with the contents."""
    names = {}
    for topic_id, name, msgtype in connection.execute("SELECT id, name, type FROM topics"):
        names[topic_id] = name
        contents.add_topic(wanted, name, {msgtype})
    return names


def _read_rows(connection, topics: dict[int, str], contents: BagContents) -> None:
    """The kept topics' rows in insertion order, in batches; then the other topics' counts."""
    kept = {topic_id for topic_id, name in topics.items() if name in contents.topics}
    if kept:
        marks = ", ".join("?" * len(kept))
        cursor = connection.execute(
            f"SELECT topic_id, timestamp, data FROM messages WHERE topic_id IN ({marks}) ORDER BY id", sorted(kept)
        )
        while rows := cursor.fetchmany(ROWS_PER_BATCH):
            batches: dict[int, tuple[list, list]] = {}
            for topic_id, timestamp, data in rows:
                logs, messages = batches.setdefault(topic_id, ([], []))
                logs.append(timestamp), messages.append(data)
            for topic_id, (logs, messages) in batches.items():
                contents.keep(block_of(topics[topic_id], logs, messages))
    for topic_id, count in connection.execute("SELECT topic_id, COUNT(*) FROM messages GROUP BY topic_id").fetchall():
        if topic_id not in kept and topic_id in topics:
            contents.count(topics[topic_id], count)


def _salvage(file: Path, wanted, contents: BagContents) -> None:
    """Rows up to the first unreadable page of a ``.db3`` cut short, read from a padded copy."""
    with file.open("rb") as handle:
        header = handle.read(100)
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
        with _connect(copy) as connection:
            try:
                topics = _register_topics(connection, wanted, contents)
            except sqlite3.Error as error:
                raise BagError(f"{file.name}: topics table unreadable ({one_line(error)})") from None
            before = contents.messages_read()
            try:
                _read_rows_one_by_one(connection, topics, contents)
            except sqlite3.Error as error:
                read = contents.messages_read() - before
                contents.notes.append(
                    f"{file.name} truncated or corrupt: kept the {read} messages before the damage ({one_line(error)})"
                )


def _read_rows_one_by_one(connection, topics: dict[int, str], contents: BagContents) -> None:
    """Every row in insertion order, kept as it comes: a damaged page stops the read after the rows before it."""
    for topic_id, timestamp, data in connection.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY id"):
        if topic_id in topics:
            contents.keep(block_of(topics[topic_id], [timestamp], [data]))
