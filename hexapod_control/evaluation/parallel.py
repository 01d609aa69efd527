"""One evaluation on several cores: independent pieces of work in forked processes, results in order.

A bag's topics are decoded in two groups at once, its forward kinematics and model check in pieces
of rows, and its figures one per process (``evaluation.bag``, ``batch``, ``model_check``,
``report``). The pieces are fixed by the data, not by the number of workers, so a report is the same
on one core and on many.

The children are forked: they see the parent's arrays as they are (copy on write), so nothing is
sent to them. A piece's result comes back pickled, but its arrays' bytes go through a file in
shared memory that the parent maps (an hour's decoded series is over a gigabyte: through the
pool's pipe it would cost about as much as decoding it); where that file cannot be written (a full
or small /dev/shm, as in a container), the result comes through the pipe. Without ``fork`` (not
Linux), or with one worker, the pieces run in this process in turn. A child's exception is raised
here.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# The function, items and result folder of the running map_forked: set before the pool forks, so
# that the children inherit them instead of receiving them pickled.
_TASK: Optional[tuple[Callable, Sequence, Path]] = None
SHARED_MEMORY = Path("/dev/shm")  # tmpfs on Linux; else the temporary folder
FOLDER_PREFIX = "hexapod_parallel_"
ALIGNMENT = 64  # bytes: each array of a result starts at a multiple of this in its file


def available_cores() -> int:
    """CPUs this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _run(index: int) -> tuple[bytes, Optional[list[tuple[int, int]]]]:
    """In a child: the result's pickle without its buffers, which go to a file named by ``index``,
    and where each buffer lies in that file; the whole pickle and None when the file cannot be
    written (a full or small /dev/shm, as in a container)."""
    function, items, folder = _TASK
    result = function(items[index])
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
    try:
        return data, _write_buffers(folder / str(index), buffers)
    except OSError:
        return pickle.dumps(result, protocol=5), None


def _write_buffers(path: Path, buffers: list[pickle.PickleBuffer]) -> list[tuple[int, int]]:
    """Write the buffers into ``path``, each aligned; (offset, size) of each."""
    places, offset = [], 0
    with open(path, "wb") as file:
        for buffer in buffers:
            raw = buffer.raw()
            offset += -offset % ALIGNMENT
            file.seek(offset)
            file.write(raw)
            places.append((offset, raw.nbytes))
            offset += raw.nbytes
    return places


def _received(folder: Path, index: int, data: bytes, places: Optional[list[tuple[int, int]]]):
    """The result of item ``index``, its arrays in the mapped file (writable, private to this process)."""
    if places is None:
        return pickle.loads(data)
    path = folder / str(index)
    if not places or path.stat().st_size == 0:
        return pickle.loads(data, buffers=[memoryview(b"")] * len(places))
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    view = memoryview(mapped)
    return pickle.loads(data, buffers=[view[offset : offset + size] for offset, size in places])


def _result_folder() -> Path:
    """A new folder for the results' files: in shared memory, else in the temporary folder."""
    try:
        return Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=SHARED_MEMORY))
    except OSError:  # no /dev/shm, or not writable
        return Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))


def map_forked(function: Callable[[Item], Result], items: Sequence[Item], workers: int, here: int = 0) -> list[Result]:
    """[function(item) for item in items], on up to ``workers`` processes: this one takes the first
    ``here`` items (whose results then need no transfer), forked ones take the others in turn."""
    global _TASK
    processes = min(workers - 1 if here else workers, len(items) - here)
    # Inside a piece (_TASK set), the pieces of a nested call run in turn: the cores are taken.
    if processes < (1 if here else 2) or _TASK is not None or "fork" not in multiprocessing.get_all_start_methods():
        return [function(item) for item in items]
    folder = _result_folder()
    _TASK = (function, items, folder)
    try:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            pending = pool.map_async(_run, range(here, len(items)), chunksize=1)
            local = [function(item) for item in items[:here]]
            sent = pending.get()
        return local + [_received(folder, index, *result) for index, result in enumerate(sent, start=here)]
    finally:
        _TASK = None
        shutil.rmtree(folder, ignore_errors=True)  # mapped files stay readable until unmapped
