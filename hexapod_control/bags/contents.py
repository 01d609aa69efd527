"""What reading a bag yields: the raw messages of the wanted topics, every topic's count, and notes.

Filled by the reader (``reader.py``) and, for a bag rosbags cannot open, by the salvage of its
storage files (``salvage.py``), through the same two methods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# rosbags storage files, by suffix; used when a bag directory has no metadata.yaml.
STORAGE_SUFFIXES = {".mcap": "mcap", ".db3": "sqlite3"}


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

    def keep(self, topic: str, timestamp: int, data) -> None:
        """Count one message of ``topic``; keep its bytes when the topic is wanted."""
        msgtype, count = self.available.get(topic, (None, 0))
        self.available[topic] = (msgtype, count + 1)
        records = self.topics.get(topic)
        if records is not None:
            records.records.append((int(timestamp), bytes(data)))

    def messages_read(self) -> int:
        """Messages counted so far, over every topic."""
        return sum(count for _, count in self.available.values())


def one_line(error) -> str:
    """``Type: message`` of an exception on one line, for a note."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"
