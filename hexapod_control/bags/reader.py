"""Reading a bag back: the messages of the wanted topics, in blocks, and the bag's custom data.

From a bag directory (with or without ``metadata.yaml``: a recorder killed before closing leaves
none) or a lone ``.mcap``/``.db3`` file. The storage files are read directly (``mcap.py``,
``sqlite.py``): ``metadata.yaml`` only adds the bag's ``custom_data`` (what the main job and
``ros2 bag record --custom-data`` record about the run) and the order of split files. A truncated
or corrupt file yields what could be read plus a note saying where reading stopped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

import yaml

from hexapod_control.bags.contents import STORAGE_SUFFIXES, BagContents, BlockConsumer, one_line
from hexapod_control.bags.mcap import custom_data_of, read_mcap, read_mcap_metadata
from hexapod_control.bags.sqlite import read_sqlite3
from hexapod_control.errors import BagError
from hexapod_control.model.parameters import safe_load_yaml

METADATA_FILE = "metadata.yaml"


def _split_order(path: Path) -> tuple:
    """Natural order of split files: bag_2 before bag_10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


def _storage_files(directory: Path) -> list[Path]:
    return sorted((p for p in directory.iterdir() if p.suffix in STORAGE_SUFFIXES and p.is_file()), key=_split_order)


def read_bag(path, wanted_topics: Optional[Iterable[str]] = None, consumer: Optional[BlockConsumer] = None) -> BagContents:
    """Messages of ``wanted_topics`` (all topics when None) of the bag at ``path``.

    ``path`` is a bag directory or one ``.mcap``/``.db3`` file. Raises BagError (one-line message)
    when nothing can be read. Other topics of the bag are listed in ``available`` with their counts;
    their bytes are not kept. With ``consumer``, each block of a wanted topic is handed to it as it
    is read instead of being kept (a long bag is decoded without holding its bytes).
    """
    path = Path(path)
    if not path.exists():
        raise BagError(f"{path}: no such bag")
    if path.is_dir():
        files = _storage_files(path)
        if not files:
            reason = "no .mcap or .db3 file" + ("" if (path / METADATA_FILE).exists() else ", no metadata.yaml")
            raise BagError(f"{path}: not a rosbag2 bag ({reason})")
    elif path.suffix not in STORAGE_SUFFIXES:
        raise BagError(f"{path}: not a bag directory, .mcap or .db3 file")
    else:
        files = [path]
    wanted = None if wanted_topics is None else set(wanted_topics)
    storages = {STORAGE_SUFFIXES[f.suffix] for f in files}
    contents = BagContents(path=path, storage=storages.pop() if len(storages) == 1 else "mixed", topics={},
                           available={}, consumer=consumer)
    if path.is_dir():
        contents.custom_data = _directory_metadata(path, contents)
    if len(files) > 1:
        contents.notes.append(f"split bag: {len(files)} storage files read in order ({', '.join(f.name for f in files)})")
    for file in files:
        reader = read_mcap if file.suffix == ".mcap" else read_sqlite3
        try:
            reader(file, wanted, contents)
        except (BagError, OSError) as error:
            raise BagError(f"{path}: cannot open bag: {' '.join(str(error).split())}") from None
    return contents


def _directory_metadata(path: Path, contents: BagContents) -> dict[str, str]:
    """custom_data of the directory's metadata.yaml; a note when it is missing or unreadable."""
    metadata = path / METADATA_FILE
    if not metadata.exists():
        contents.notes.append(f"no {METADATA_FILE} (the recorder did not close the bag): read the storage files directly")
        return {}
    try:
        document = safe_load_yaml(metadata.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        contents.notes.append(f"{METADATA_FILE} unreadable ({one_line(error)}): read the storage files directly")
        return {}
    return custom_data_of(document)


def read_custom_data(path) -> dict[str, str]:
    """The bag's custom_data alone (from metadata.yaml, else from an MCAP file's summary), without
    reading its messages; empty when there is none or the bag cannot be read."""
    path = Path(path)
    if path.is_dir() and (path / METADATA_FILE).exists():
        try:
            return custom_data_of(safe_load_yaml((path / METADATA_FILE).read_text()))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return {}
    files = _storage_files(path) if path.is_dir() else [path] if path.suffix == ".mcap" else []
    for file in files:
        if file.suffix == ".mcap":
            contents = BagContents(path=path, storage="mcap", topics={}, available={})
            try:
                read_mcap_metadata(file, contents)
            except (BagError, OSError):
                continue
            if contents.custom_data:
                return contents.custom_data
    return {}
