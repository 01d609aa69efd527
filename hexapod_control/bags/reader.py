"""Reading a bag back: every message of the wanted topics as (log time, bytes).

From a bag directory, a bag without ``metadata.yaml`` (recorder killed) or a lone ``.mcap``/``.db3``
file; a truncated or corrupt file yields what could be read plus a note saying where reading stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from hexapod_control.bags.contents import STORAGE_SUFFIXES, BagContents, one_line
from hexapod_control.bags.salvage import salvage_storage_file
from hexapod_control.errors import BagError


def _storage_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in STORAGE_SUFFIXES and p.is_file())


def _storage_of(path: Path) -> str:
    if path.is_dir():
        files = _storage_files(path)
        return STORAGE_SUFFIXES[files[0].suffix] if files else "unknown"
    return STORAGE_SUFFIXES.get(path.suffix, "unknown")


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
    except BagError as error:
        first_error = str(error)
    if not files:
        raise BagError(f"{path}: cannot open bag: {first_error}")
    if len(files) > 1:
        notes.append(f"split bag: salvaging {len(files)} storage files in name order")
    notes.append(f"rosbags cannot open the bag ({first_error}): salvaged from the storage file")
    for file in files:
        try:
            salvage_storage_file(file, wanted, contents)
        except BagError as error:
            raise BagError(f"{path}: cannot open bag: {first_error}; salvage of {file.name}: {error}") from None
    return contents


def _read_with_rosbags(path: Path, wanted, contents: BagContents) -> None:
    from rosbags.rosbag2 import Reader

    try:
        reader = Reader(path)
        reader.open()
    except Exception as error:  # noqa: BLE001 - rosbags, sqlite3 and yaml errors alike: salvage next
        raise BagError(one_line(error)) from None
    read = 0
    try:
        types: dict[str, set] = {}
        for connection in reader.connections:
            types.setdefault(connection.topic, set()).add(connection.msgtype)
        for topic, msgtypes in types.items():
            contents.add_topic(wanted, topic, msgtypes)
        try:
            for connection, timestamp, data in reader.messages():
                read += 1
                contents.keep(connection.topic, timestamp, data)
        except Exception as error:  # noqa: BLE001 - a damaged chunk fails in storage-specific ways
            contents.notes.append(
                f"bag truncated or corrupt: reading stopped after {read} messages ({one_line(error)})"
            )
    finally:
        try:
            reader.close()
        except Exception:  # noqa: BLE001 - closing a damaged file must not hide what was read
            pass
