"""The robot stack's joint states served by an rcl loop in C (rcl_loop.c): tracking, disarmed or faulted.

Why. In an rclpy node the wait set, the take and the publish are Python calls with their objects
at every state: at 1 kHz that floor alone is above the loop's budget (doc/benchmarks.md, "The
floor"). While the stack tracks, and while it is disarmed or faulted, everything per joint state is
already one C call of the compiled step (reading the bytes, the reference off the grid, the
decision, the command's bytes: ControlLoop.serialized_joint_state); this loop makes the wait, the
take and the publish C calls too, so that no Python runs per state. It returns to the Python loop
for everything else: a pause in the joint states long enough for the watchdogs to look (while
states come, the compiled step rejects a stale one itself), a message the compiled step does not
finish, and the work that follows an answer now and then (the executor's poll, a diagnostics
status, the decimated outputs unless they are recorded for another thread (:class:`RecordRing`), a
law status that is not ok): right after an answer, so that the Python runs in the gap before
the next state instead of holding one up. Its wait also watches the node's entities that the
executor runs (:meth:`WaitSetLoop.executor_entities`) and returns when one is ready, so that a service
request waits for no blind poll of the executor, and the blind poll, a costly rebuild of rclpy's wait
set, is rare while it serves. What it counted and logged meanwhile is handed over then
(:meth:`RclLoop.run`).

The C file is compiled at first use against this environment's rcl (the PyPI wheels' headers, or
a ROS 2 installation on AMENT_PREFIX_PATH) into the package's cache directory, keyed by the source
and the prefix; without gcc or headers the stack runs the Python wait-set loop, as before. The io
layout is read from the C file's ``#define LOOP_*`` lines, its one source.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hexapod_control.errors import CompilationError
from hexapod_control.model import compiled
from hexapod_control.ros.wait_set_loop import NO_ENTITIES, WATCHED_KINDS, ExecutorEntities

SOURCE = Path(__file__).with_name("rcl_loop.c")
RCL_LIBRARIES = ("rcl", "rmw", "rcutils")
# Answers logged between two returns at most (the loop returns when full): more than a second's at
# 4 kHz, so that the log never is the reason to return while the executor's polls come.
LOG_ENTRIES = 4096
PENDING_BYTES = 1 << 16  # the messages handed back at one return (a JointState of six joints: ~300 B)


def rcl_prefix() -> Path | None:
    """The install prefix holding rcl's headers and libraries: this environment's (the PyPI wheels)
    or a ROS 2 installation's on AMENT_PREFIX_PATH; None when neither has them."""
    prefixes = [Path(sys.prefix)] + [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in prefixes:
        if (prefix / "include" / "rcl" / "rcl" / "rcl.h").is_file() and (prefix / "lib").is_dir():
            return prefix
    return None


def rcl_compile_command(source: Path, library: Path | str, prefix: Path) -> list[str]:
    """The C compiler's command (compiled.default_compiler) for a shared library from ``source`` against
    the rcl of ``prefix``."""
    # ROS 2 installs each package's headers one level down: include/<package>/<package>/...
    includes = [f"-I{d}" for d in sorted((prefix / "include").iterdir()) if d.is_dir()]
    return [*compiled.default_compiler(), "-O2", "-shared", "-fPIC", str(source), *includes, f"-L{prefix / 'lib'}",
            *(f"-l{name}" for name in RCL_LIBRARIES), f"-Wl,-rpath,{prefix / 'lib'}", "-o", str(library)]


def loop_constants(source: Path = SOURCE, prefixes: tuple[str, ...] = ("LOOP", "STEP")) -> dict[str, int]:
    """The ``#define <PREFIX>_* n`` constants of a C file, for each of ``prefixes``."""
    text = source.read_text(encoding="utf-8")
    pattern = rf"^#define ((?:{'|'.join(prefixes)})_\w+) \(?(-?\d+)\)?"
    return {name: int(value) for name, value in re.findall(pattern, text, re.M)}


def compile_library(source: Path, cache: Path | None = None) -> ctypes.CDLL | str:
    """A C file against rcl (``source``), compiled once per source, prefix and compiler into the cache
    and loaded; or why not (a str)."""
    prefix = rcl_prefix()
    if prefix is None:
        return "no rcl headers in this environment or on AMENT_PREFIX_PATH"
    cache = cache or compiled.cache_directory()
    if cache is None:
        return "no writable cache directory"
    key = hashlib.sha256(source.read_bytes() + str(prefix).encode() + shlex.join(compiled.default_compiler()).encode())
    key = key.hexdigest()[:16]
    library = cache / f"libhexapod_{source.stem}-{key}.so"
    try:
        compiled.compile_into(library, lambda output: rcl_compile_command(source, output, prefix))
    except (CompilationError, OSError) as error:
        return f"{source.name} not compiled: {error}"
    return ctypes.CDLL(str(library))


def compiled_function(source: Path, name: str, argtypes: list, cache: Path | None = None):
    """The int function ``name`` of ``source`` compiled (compile_library) and loaded, with its argument
    types; or why not (a str)."""
    library = compile_library(source, cache)
    if isinstance(library, str):
        return library
    function = getattr(library, name)
    function.restype = ctypes.c_int
    function.argtypes = argtypes
    return function


def build(cache: Path | None = None):
    """The C loop's function, compiled and loaded; or why not (a str)."""
    return compiled_function(SOURCE, "hexapod_rcl_loop", [ctypes.c_void_p] * 5 + [
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long,
        ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p], cache)


@dataclass
class Served:
    """What one run of the C loop did and left to Python."""

    reason: str  # "deadline", "pending", "answered", "log_full", "executor"
    answers: int
    taken: int  # superseded states it judged valid
    repeated: int
    superseded: int
    message_now: float  # ROS time of the last message it took (NaN: none)
    taken_now: float  # ROS time and monotonic time of the last state it took (NaN: none)
    taken_steady: float
    last_answered: float  # stamp of its last answer (NaN: none)
    log: np.ndarray  # (answers, 2): answered stamp, publication time (ROS time: the wall clock)
    pending: list[bytes]  # messages for the Python loop, oldest first
    pending_status: int  # the compiled step's status of the first pending message
    pending_answer: bool  # it was to be answered (the others after it were taken with it)
    pending_now: float
    pending_steady: float
    executor_ready: bool  # a watched entity was ready: the executor has work
    publication_due: float  # the stamp from which the next decimated publication is due


class RecordRing:
    """The records of the decimated outputs that the C loop writes while it runs (rcl_loop.c), each
    the compiled step's inputs and outputs of one answer, read by another thread (the outputs one)."""

    def __init__(self, inputs_size: int, out_size: int, slots: int | None = None):
        slots = slots or loop_constants(prefixes=("LOOP",))["LOOP_RECORD_SLOTS"]
        self.inputs_size, self.out_size, self.slots = inputs_size, out_size, slots
        self.slot_size = 1 + inputs_size + out_size
        self.array = np.zeros(1 + slots * self.slot_size)
        self._read = 0  # records read so far
        self.lost = 0  # records written over, or being written over, before they were read

    def new_records(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(inputs, outputs) of each record written since the last call, oldest first, as copies; one
        that the loop was writing, or had written over meanwhile, is dropped (its slot's sequence
        number is not the one of its record: two per write, even once written)."""
        written = int(self.array[0])
        records = []
        first = max(self._read, written - self.slots)
        self.lost += first - self._read
        for number in range(first, written):
            at = 1 + (number % self.slots) * self.slot_size
            expected = 2.0 * (number // self.slots + 1)
            before = self.array[at]
            values = self.array[at + 1:at + self.slot_size].copy()
            if before == expected == self.array[at]:
                records.append((values[:self.inputs_size], values[self.inputs_size:]))
            else:
                self.lost += 1
        self._read = written
        return records


class RclLoop:
    """The C loop over one subscription and one publisher of a node, around a compiled step."""

    REASONS = ("deadline", "pending", "answered", "log_full", "executor")

    def __init__(self, function, context, subscription, publisher, step, records: RecordRing):
        self.function = function
        self.records = records
        self.context, self.subscription, self.publisher = context, subscription, publisher
        self.step = step
        names = loop_constants(prefixes=("LOOP", "STEP", "WATCHED"))
        self.io_index = {name[len("LOOP_IO_"):].lower(): value for name, value in names.items()
                         if name.startswith("LOOP_IO_") and name != "LOOP_IO_SIZE"}
        statuses = step.library.statuses
        if (names["STEP_TAKEN"], names["STEP_REPEATED"], names["STEP_ANSWERED"]) != tuple(
                statuses.index(name) for name in ("taken", "repeated", "answered")):
            raise ValueError(f"{SOURCE.name}'s step statuses differ from the library's {statuses}")
        if [names[f"WATCHED_{kind.upper()}"] for kind in WATCHED_KINDS] != list(range(names["WATCHED_KINDS"])):
            raise ValueError(f"{SOURCE.name}'s watched kinds are not in the order {WATCHED_KINDS}")
        self.codes = {names[f"LOOP_{reason.upper()}"]: reason for reason in self.REASONS}
        self._deadline_code = names["LOOP_DEADLINE"]
        self.io = np.zeros(names["LOOP_IO_SIZE"])
        self.io[self.io_index["law_status_at"]] = step.library.outputs["law_status"].start
        self.io[self.io_index["inputs_size"]], self.io[self.io_index["out_size"]] = records.inputs_size, records.out_size
        if records.slots != names["LOOP_RECORD_SLOTS"]:
            raise ValueError(f"{SOURCE.name} writes {names['LOOP_RECORD_SLOTS']} slots, the ring has {records.slots}")
        self.entry = names["LOOP_LOG_ENTRY"]
        self.log = np.zeros(LOG_ENTRIES * self.entry)
        self.pending = np.zeros(PENDING_BYTES, dtype=np.uint8)
        self._outputs = [self.io_index[name] for name in (
            "answers", "taken", "repeated", "superseded", "message_now", "taken_now", "taken_steady", "log_count",
            "pending_count", "pending_status", "pending_answer", "pending_now", "pending_steady",
            "last_answered", "executor_ready")]
        self._watched = None
        self._watched_pointers = (ctypes.c_void_p * 0)()
        self._watched_counts = np.zeros(len(WATCHED_KINDS), dtype=ctypes.c_long)

    def _watch(self, watched: ExecutorEntities) -> None:
        """The pointer and count arrays of the watched entities, rebuilt when they change."""
        if watched is self._watched:
            return
        kinds = watched.by_kind()
        pointers = [entity.handle.pointer for entities in kinds for entity in entities]
        self._watched_pointers = (ctypes.c_void_p * len(pointers))(*pointers)
        self._watched_counts[:] = [len(entities) for entities in kinds]
        self._watched = watched

    def run(self, deadline: float, quiet: float, poll_due: float, diagnostic_due: float, publication_due: float,
            publication_period: float = 0.0, watched: ExecutorEntities = NO_ENTITIES) -> Served:
        """Serve the subscription until ``deadline`` (monotonic), or ``quiet`` seconds without a message,
        or until Python is needed (module doc). ``poll_due`` (monotonic), ``diagnostic_due`` (ROS
        time) and ``publication_due`` (a stamp): an answer at or past them returns, but one due to
        be published is recorded in :attr:`records` instead when ``publication_period`` > 0 (the next
        due a period later: ``Served.publication_due``); ``watched``: the entities whose readiness
        returns (``Served.executor_ready``), their handles held valid by the caller
        (WaitSetLoop.executor_entities)."""
        io, index = self.io, self.io_index
        io[self._outputs] = 0.0
        for name in ("message_now", "taken_now", "taken_steady", "last_answered"):
            io[index[name]] = np.nan
        io[index["deadline"]], io[index["quiet"]], io[index["poll_due"]] = deadline, quiet, poll_due
        io[index["diagnostic_due"]] = diagnostic_due
        io[index["publication_due"]], io[index["publication_period"]] = publication_due, publication_period
        step = self.step
        self._watch(watched)
        with self.context.handle, self.subscription.handle, self.publisher.handle:
            code = self.function(self.context.handle.pointer, self.subscription.handle.pointer,
                                 self.publisher.handle.pointer, step.message_address, step.published_address,
                                 step.message_arrays, step.command_length, io.ctypes.data, self.log.ctypes.data,
                                 LOG_ENTRIES, self.pending.ctypes.data, PENDING_BYTES, self._watched_pointers,
                                 self._watched_counts.ctypes.data, self.records.array.ctypes.data)
        if code not in self.codes:
            if not self.context.ok():  # shut down under it (Ctrl-C): nothing is left to serve
                code = self._deadline_code
                io[index["log_count"]] = io[index["pending_count"]] = 0.0
            else:
                raise RuntimeError(f"the rcl loop failed (rcl error; status {code})")
        answers, logged = int(io[index["answers"]]), int(io[index["log_count"]])
        pending, at = [], 0
        for _ in range(int(io[index["pending_count"]])):
            size = int(self.pending[at:at + 8].view(np.int64)[0])
            pending.append(self.pending[at + 8:at + 8 + size].tobytes())
            at += 8 + size
        return Served(
            self.codes[code], answers, int(io[index["taken"]]), int(io[index["repeated"]]),
            int(io[index["superseded"]]), float(io[index["message_now"]]), float(io[index["taken_now"]]),
            float(io[index["taken_steady"]]), float(io[index["last_answered"]]),
            self.log[: logged * self.entry].reshape(logged, self.entry).copy(), pending,
            int(io[index["pending_status"]]), bool(io[index["pending_answer"]]), float(io[index["pending_now"]]),
            float(io[index["pending_steady"]]), bool(io[index["executor_ready"]]), float(io[index["publication_due"]]))
