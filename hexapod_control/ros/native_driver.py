"""The fake driver's ticks served by an rcl loop in C while a controller commands it (driver_loop.c).

Why. Most of a Python tick (publish the state, take the commands, step the plant) goes to the
objects around the plant's C step and the message; at the higher rates the driver overran its
ticks, so the driver, not the stack under test, set the benchmark's limits (doc/benchmarks.md).
While a valid command is held and the plant moves freely, this loop runs the ticks in C, in the
Python tick's order, with the same plant step (hexapod_plant_step of the generated library).
Everything else stays the Python tick's: no command yet or a timed-out one, a command other than
six finite values with an empty layout, an end stop, a plant step the C step does not finish
(also in the ticks a late tick skipped), and the driver's boards and injected faults, which never
run here.

The C loop runs in a thread of its own (:meth:`DriverLoop.start`; one thread for the driver's life,
which waits between runs) and returns only when a tick needs Python. Meanwhile the node's thread serves the executor and the diagnostics: it takes what the
loop counted, logged and stepped so far (:meth:`DriverLoop.collect`) without stopping the ticks.
When the loop returned to Python between its ticks for them instead, each return cost the ticks
of a millisecond or more of Python: at 2 and 4 kHz, overruns (doc/benchmarks.md).

driver_loop.c is compiled at first use against this environment's rcl, as rcl_loop.c is
(:func:`hexapod_control.ros.native_loop.compile_library`); without it the driver runs its Python
ticks. Its io layout is read from the C file's ``#define DRIVER_*`` lines, its one source.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hexapod_control.ros.native_loop import compile_library, compiled_function, loop_constants

SOURCE = Path(__file__).with_name("driver_loop.c")
# Ticks and commands logged between two hand-overs at most (the loop returns when a log is full):
# seconds at the highest rates, against hand-overs every SERVICE_POLL_PERIOD_S of the driver.
TICK_ENTRIES = 1 << 13
COMMAND_ENTRIES = 1 << 14
PENDING_BYTES = 1 << 20  # commands handed to Python at one return (a six-force command: 68 B)
RUNNING = "running"  # the reason of a hand-over while the loop goes on
# How long a stop waits for the run under way and for the worker thread [s]: a tick and a hand-over.
# It is not waited for longer, since a Ctrl-C inside start() can keep the worker from starting at all.
STOP_WAIT_S = 1.0
OUT_FIELDS = ("q", "qd", "phi", "state")  # the plant step's outputs the loop reads, DRIVER_OUT_* order
PLANT_FIELDS = ("q", "qd", "phi", "warm", "applied", "last_start")  # PlantState's, in the plant array


@dataclass
class DriverLibrary:
    """The C loop's functions: the loop, and the hand-over, the stamps' offset and the stop, which
    another thread calls while it runs."""

    loop: ctypes._CFuncPtr
    drain: ctypes._CFuncPtr
    set_offset: ctypes._CFuncPtr
    stop: ctypes._CFuncPtr


def build(cache: Path | None = None) -> DriverLibrary | str:
    """The C loop's functions, compiled and loaded; or why not (a str)."""
    if sys.byteorder != "little":
        return "the C loop writes the little-endian CDR of this host's doubles"
    library = compile_library(SOURCE, cache)
    if isinstance(library, str):
        return library
    functions = {}
    for name, restype, argtypes in (
            ("loop", ctypes.c_int, [ctypes.c_void_p] * 10 + [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p,
                                                            ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t]),
            ("drain", None, [ctypes.c_void_p] * 8),
            ("set_offset", None, [ctypes.c_void_p, ctypes.c_double, ctypes.c_double]),
            ("stop", None, [ctypes.c_void_p])):
        function = getattr(library, f"hexapod_driver_{name}")
        function.restype, function.argtypes = restype, argtypes
        functions[name] = function
    return DriverLibrary(**functions)


def command_reader(cache: Path | None = None):
    """``hexapod_driver_command_forces(data, size, forces)`` of the C loop, for the tests; or why not (a str)."""
    return compiled_function(SOURCE, "hexapod_driver_command_forces",
                             [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p], cache)


@dataclass
class PlantState:
    """The plant as the C loop steps it: q, q_d, phi, the C step's warm start (18,), the forces
    acting [N], and q at the start of the last step (EndStopPlant.compiled_state)."""

    q: np.ndarray
    qd: np.ndarray
    phi: np.ndarray
    warm: np.ndarray
    applied: np.ndarray
    last_start: np.ndarray


@dataclass
class Held:
    """The latest valid command [N] and its monotonic arrival [s]."""

    forces: np.ndarray
    arrival: float


@dataclass
class DriverSchedule:
    """What the C loop needs of the driver's schedule and limits."""

    period: float  # [s]
    timeout: float  # [s] the command timeout
    force_max: float  # [N]
    lower: float  # [m] the end stops
    upper: float
    steps_per_tick: int


@dataclass
class Ticked:
    """What the C loop did since the last hand-over, and what it left to Python when it returned.
    The counts, the logs and the plant steps are those since the last hand-over."""

    reason: str  # RUNNING (a hand-over while it goes on), "shutdown", "stopped", "late", "rest", "log_full"
    deadline: float  # the next tick's (monotonic)
    ticks: int  # begun here (the last one Python finishes when ``reason`` is "rest")
    overruns: int  # ticks skipped because one began a period or more late
    received: int  # valid commands read and held here
    commands: int  # commands taken, read here or handed to Python
    oversized: int  # commands too large to hand to Python: never applied
    steps: int  # plant steps done here
    held_ticks: int  # ticks that stepped the plant under the held command
    plant: PlantState
    held: Held | None
    starts: np.ndarray  # monotonic start of each tick
    stamps: np.ndarray  # each state's stamp, its publication and the tick's take (ROS time [s])
    publications: np.ndarray
    takes: np.ndarray
    arrivals: np.ndarray  # each command's DDS reception and source timestamps (ROS time [s]; NaN: none)
    sources: np.ndarray
    pending: list[tuple[bytes, float]]  # commands for Python, in order: bytes, monotonic arrival [s]
    taken: float  # when the tick Python finishes took its commands (monotonic)
    steps_left: int  # the plant steps that tick has left


class DriverLoop:
    """The C loop over the driver's command subscription and joint-state publisher, in a thread of its own."""

    REASONS = ("shutdown", "stopped", "late", "rest", "log_full")
    # The counts of the io array handed over as the change since the last hand-over.
    COUNTS = ("ticks", "overruns", "received", "commands", "oversized", "plant_steps", "held_ticks")

    def __init__(self, library: DriverLibrary, context, subscription, publisher, template: bytes,
                 offsets: dict[str, int], plant_step, schedule: DriverSchedule):
        """``template``, ``offsets``: a serialized JointState of the joints and where its stamp,
        position, velocity and effort are (JointStateWriter.template and .offsets); ``plant_step``: the
        plant's CompiledPlantStep; ``schedule``: the driver's period and limits, fixed for its life."""
        self.library = library
        self.context, self.subscription, self.publisher = context, subscription, publisher
        names = loop_constants(SOURCE, ("DRIVER",))
        self.io_index = {name[len("DRIVER_IO_"):].lower(): value for name, value in names.items()
                         if name.startswith("DRIVER_IO_") and name != "DRIVER_IO_SIZE"}
        # Each field of the plant array runs to the next one's offset (DRIVER_PLANT_SIZE ends the last).
        starts = sorted((value, name[len("DRIVER_PLANT_"):].lower()) for name, value in names.items()
                        if name.startswith("DRIVER_PLANT_"))
        self.plant_fields = {name: slice(start, stop) for (start, name), (stop, _) in zip(starts, starts[1:])}
        self.codes = {names[f"DRIVER_{reason.upper()}"]: reason for reason in self.REASONS}
        self.io = np.zeros(names["DRIVER_IO_SIZE"])
        self.plant = np.zeros(names["DRIVER_PLANT_SIZE"])
        self.message = np.frombuffer(bytearray(template), dtype=np.uint8)
        self.message_layout = np.array([offsets[name] for name in ("stamp", "position", "velocity", "effort")]
                                       + [len(template)], dtype=np.int64)
        outputs = plant_step.library.outputs
        if max(item.stop for item in outputs.values()) > names["DRIVER_STEP_OUT_SIZE"]:
            raise ValueError(f"the plant step writes more than {SOURCE.name}'s DRIVER_STEP_OUT_SIZE doubles")
        if outputs["state"].stop - outputs["state"].start < names["DRIVER_WARM_SIZE"]:
            raise ValueError(f"the plant step's warm start is shorter than {SOURCE.name}'s DRIVER_WARM_SIZE")
        self.out_layout = np.array([outputs[name].start for name in OUT_FIELDS], dtype=np.int64)
        self.step_address = ctypes.cast(plant_step.library.step, ctypes.c_void_p).value
        self._constants = (ctypes.c_void_p * 4)(*plant_step.constant_addresses)
        self.tick_entry, self.command_entry = names["DRIVER_TICK_ENTRY"], names["DRIVER_COMMAND_ENTRY"]
        self.tick_log = np.zeros(TICK_ENTRIES * self.tick_entry)
        self.command_log = np.zeros(COMMAND_ENTRIES * self.command_entry)
        self.pending = np.zeros(PENDING_BYTES, dtype=np.uint8)
        # What a hand-over while the loop runs copies into (hexapod_driver_drain).
        self._drained = tuple(np.zeros_like(array) for array in (self.io, self.plant, self.tick_log, self.command_log))
        self._outputs = [self.io_index[name] for name in (
            "ticks", "received", "commands", "plant_steps", "tick_log", "command_log", "pending_count", "taken",
            "steps_left", "oversized", "overruns", "held_ticks")]
        self._counts = [self.io_index[name] for name in self.COUNTS]
        self._handed = np.zeros(len(self.COUNTS))  # the counts at the last hand-over
        for name in ("period", "timeout", "force_max", "lower", "upper", "steps_per_tick"):
            self.io[self.io_index[name]] = getattr(schedule, name)
        self._finished: threading.Event | None = None  # set when a run ends; None: none under way
        self._result: int | Exception | None = None
        self._requested = threading.Event()  # a run is asked of the worker
        self._worker: threading.Thread | None = None  # started at the first run, ended by stop()
        self._closing = False

    def _set_plant(self, state: PlantState, held: Held | None) -> None:
        plant, fields = self.plant, self.plant_fields
        for name in PLANT_FIELDS:
            plant[fields[name]] = getattr(state, name)
        if held is not None:
            plant[fields["held"]] = held.forces

    @property
    def running(self) -> bool:
        """A run was started and not yet collected at its end."""
        return self._finished is not None

    def start(self, deadline: float, clock_offset: int, plant: PlantState, held: Held | None) -> None:
        """Run ticks in C from the one due at ``deadline`` (monotonic) in the worker thread, until
        Python is needed (module doc). ``clock_offset`` [ns]: ROS time - monotonic time, for the
        stamps. The worker, started at the first run, inherits this thread's scheduling (the node's
        realtime_priority)."""
        if self.running:
            raise RuntimeError("the driver's C loop is already running")
        io, index = self.io, self.io_index
        io[self._outputs] = 0.0
        self._handed[:] = 0.0
        seconds, nanoseconds = divmod(clock_offset, 1_000_000_000)
        for name, value in (("deadline", deadline), ("stop", 0.0), ("offset_seconds", seconds),
                            ("offset_nanoseconds", nanoseconds), ("held", held is not None),
                            ("held_arrival", held.arrival if held else 0.0)):
            io[index[name]] = value
        self._set_plant(plant, held)
        self._result = None
        self._finished = threading.Event()
        if self._worker is None:
            self._closing = False
            self._worker = threading.Thread(target=self._serve, name="hexapod_driver_ticks", daemon=True)
            self._worker.start()
        self._requested.set()

    def _serve(self) -> None:
        """The worker: each run asked of it, until stop() closes it."""
        while True:
            self._requested.wait()
            self._requested.clear()
            if self._closing:
                return
            finished = self._finished
            try:
                with self.context.handle, self.subscription.handle, self.publisher.handle:
                    self._result = self.library.loop(
                        self.context.handle.pointer, self.subscription.handle.pointer, self.publisher.handle.pointer,
                        self.message.ctypes.data, self.message_layout.ctypes.data, self.step_address,
                        ctypes.addressof(self._constants), self.out_layout.ctypes.data, self.plant.ctypes.data,
                        self.io.ctypes.data, self.tick_log.ctypes.data, TICK_ENTRIES, self.command_log.ctypes.data,
                        COMMAND_ENTRIES, self.pending.ctypes.data, PENDING_BYTES)
            except Exception as error:  # handed to collect(), in the node's thread
                self._result = error
            finally:
                finished.set()

    def collect(self, timeout: float, clock_offset: int) -> Ticked:
        """What the loop did since the last hand-over: at its end, if it ends within ``timeout`` [s];
        otherwise so far, reason RUNNING, while it goes on with ``clock_offset`` [ns] for its stamps."""
        if not self._finished.wait(max(timeout, 0.0)):
            seconds, nanoseconds = divmod(clock_offset, 1_000_000_000)
            self.library.set_offset(self.io.ctypes.data, seconds, nanoseconds)
            io, plant, ticks, commands = self._drained
            self.library.drain(self.io.ctypes.data, self.plant.ctypes.data, self.tick_log.ctypes.data,
                               self.command_log.ctypes.data, io.ctypes.data, plant.ctypes.data, ticks.ctypes.data,
                               commands.ctypes.data)
            return self._handed_over(RUNNING, io, plant, ticks, commands, [])
        return self._ended()

    def stop(self) -> Ticked | None:
        """Stop the run under way, if any, before its next tick, and end the worker: what the run did
        since the last hand-over (reason "stopped"), or None when none was under way or it did not
        end within STOP_WAIT_S."""
        ticked = None
        if self._finished is not None:
            self.library.stop(self.io.ctypes.data)
            if self._finished.wait(STOP_WAIT_S):
                ticked = self._ended()
            self._finished = None
        if self._worker is not None:
            self._closing = True
            self._requested.set()
            self._worker.join(STOP_WAIT_S)
            self._worker = None
        return ticked

    def _ended(self) -> Ticked:
        """What the loop did since the last hand-over, once its thread ended."""
        self._finished = None
        result = self._result
        if isinstance(result, Exception) or result not in self.codes:
            if not self.context.ok():  # shut down under it (Ctrl-C): nothing is left to serve
                result = next(code for code, reason in self.codes.items() if reason == "shutdown")
            elif isinstance(result, Exception):
                raise result
            else:
                raise RuntimeError(f"the driver's rcl loop failed (rcl error; status {result})")
        return self._handed_over(self.codes[result], self.io, self.plant, self.tick_log, self.command_log,
                                 self._pending())

    def _pending(self) -> list[tuple[bytes, float]]:
        pending, at = [], 0
        for _ in range(int(self.io[self.io_index["pending_count"]])):
            size = int(self.pending[at:at + 8].view(np.int64)[0])
            arrived = float(self.pending[at + 8:at + 16].view(np.float64)[0])
            pending.append((self.pending[at + 16:at + 16 + size].tobytes(), arrived))
            at += 16 + size
        return pending

    def _handed_over(self, reason: str, io: np.ndarray, plant: np.ndarray, tick_log: np.ndarray,
                     command_log: np.ndarray, pending: list) -> Ticked:
        index = self.io_index
        counts = io[self._counts]
        change = dict(zip(self.COUNTS, (counts - self._handed).astype(int).tolist()))
        self._handed = counts.copy()
        ticks = tick_log[: int(io[index["tick_log"]]) * self.tick_entry].reshape(-1, self.tick_entry)
        commands = command_log[: int(io[index["command_log"]]) * self.command_entry].reshape(-1, self.command_entry)
        held = None
        if io[index["held"]]:
            held = Held(plant[self.plant_fields["held"]].copy(), float(io[index["held_arrival"]]))
        return Ticked(
            reason, float(io[index["deadline"]]), change["ticks"], change["overruns"], change["received"],
            change["commands"], change["oversized"], change["plant_steps"], change["held_ticks"],
            PlantState(**{name: plant[self.plant_fields[name]].copy() for name in PLANT_FIELDS}), held,
            ticks[:, 0].copy(), ticks[:, 1].copy(), ticks[:, 2].copy(), ticks[:, 3].copy(), commands[:, 0].copy(),
            commands[:, 1].copy(), pending, float(io[index["taken"]]), int(io[index["steps_left"]]))
