"""What reading a bag yields: blocks of raw messages of the wanted topics, every topic's count, notes.

The readers (``mcap.py``, ``sqlite.py``) hand over the messages of one topic in blocks: all the
messages of that topic in one MCAP chunk, or in one batch of SQLite rows, as offsets into one
buffer. A consumer decodes a block with a few numpy operations (``bags.cdr``) instead of one call
per message; :meth:`MessageBlock.records` gives the messages one by one where that is wanted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

# rosbag2 storage files, by suffix; used when a bag directory has no metadata.yaml.
STORAGE_SUFFIXES = {".mcap": "mcap", ".db3": "sqlite3"}


@dataclass(frozen=True)
class MessageBlock:
    """Messages of one topic read together, in file order."""

    topic: str
    log_ns: np.ndarray  # (n,) int64 log (receive) times [ns]
    buffer: np.ndarray  # uint8: holds the CDR bytes of every message of the block
    offsets: np.ndarray  # (n,) int64: where each message starts in ``buffer``
    sizes: np.ndarray  # (n,) int64: its length [bytes]

    def __len__(self) -> int:
        return int(self.log_ns.size)

    def message(self, k: int) -> bytes:
        start = int(self.offsets[k])
        return self.buffer[start : start + int(self.sizes[k])].tobytes()

    def records(self) -> list[tuple[int, bytes]]:
        """[(log time ns, bytes)] one by one."""
        return [(int(self.log_ns[k]), self.message(k)) for k in range(len(self))]

    def subset(self, rows: np.ndarray) -> MessageBlock:
        return MessageBlock(self.topic, self.log_ns[rows], self.buffer, self.offsets[rows], self.sizes[rows])


def block_of(topic: str, log_ns, messages: list) -> MessageBlock:
    """A block from separate messages (bytes-like), joined into one buffer."""
    sizes = np.fromiter((len(m) for m in messages), dtype=np.int64, count=len(messages))
    offsets = np.zeros(len(messages), dtype=np.int64)
    np.cumsum(sizes[:-1], out=offsets[1:])
    buffer = np.frombuffer(b"".join(bytes(m) for m in messages), dtype=np.uint8)
    return MessageBlock(topic, np.asarray(log_ns, dtype=np.int64), buffer, offsets, sizes)


@dataclass
class TopicRecords:
    topic: str
    msgtype: Optional[str]
    blocks: list[MessageBlock] = field(default_factory=list)  # in file order (kept unless streamed)

    @property
    def records(self) -> list[tuple[int, bytes]]:
        """[(log time ns, bytes)] of every kept message, in file order."""
        return [record for block in self.blocks for record in block.records()]


BlockConsumer = Callable[[MessageBlock, str], None]  # (block, message type)


@dataclass
class BagContents:
    """The wanted topics' messages (or their consumer) and what the bag said about itself.

    With ``consumer`` set, each block of a wanted topic goes to it as it is read and is not kept:
    a long bag is decoded chunk by chunk without ever holding all of its bytes.
    """

    path: Path
    storage: str  # mcap | sqlite3 | unknown
    topics: dict[str, TopicRecords]  # wanted topics present in the bag
    available: dict[str, tuple[Optional[str], int]]  # every topic of the bag: (type, message count read)
    notes: list[str] = field(default_factory=list)  # what went wrong while reading, one line each
    custom_data: dict[str, str] = field(default_factory=dict)  # rosbag2 custom_data of the bag's metadata
    consumer: Optional[BlockConsumer] = None

    def add_topic(self, wanted, topic: str, msgtypes: set) -> None:
        """Register ``topic`` (recorded with ``msgtypes``); keep its messages if ``wanted`` (None: all)."""
        msgtype = next(iter(msgtypes)) if len(msgtypes) == 1 else None
        previous = self.available.get(topic)
        self.available[topic] = (msgtype if previous is None else previous[0], 0 if previous is None else previous[1])
        if wanted is not None and topic not in wanted or topic in self.topics:
            return
        if msgtype is None:
            self.notes.append(f"{topic}: recorded with several types {sorted(msgtypes)}: skipped")
            return
        self.topics[topic] = TopicRecords(topic, msgtype)

    def count(self, topic: str, messages: int) -> None:
        """Count ``messages`` of ``topic`` as read, whether they are kept or not."""
        msgtype, count = self.available.get(topic, (None, 0))
        self.available[topic] = (msgtype, count + messages)

    def keep(self, block: MessageBlock) -> None:
        """Count a block of ``block.topic``; keep it (or hand it on) when the topic is wanted."""
        self.count(block.topic, len(block))
        records = self.topics.get(block.topic)
        if records is None or not len(block):
            return
        if self.consumer is not None:
            self.consumer(block, records.msgtype)
        else:
            records.blocks.append(block)

    def messages_read(self) -> int:
        """Messages counted so far, over every topic."""
        return sum(count for _, count in self.available.values())


def one_line(error) -> str:
    """``Type: message`` of an exception on one line, for a note."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"
