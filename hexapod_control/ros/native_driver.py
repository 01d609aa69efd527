"""The fake driver's ticks served by an rcl loop in C while a controller commands it (driver_loop.c).

Why. Most of a Python tick (publish the state, take the commands, step the plant) goes to the
objects around the plant's C step and the message; at the higher rates the driver overran its
ticks, so the driver, not the stack under test, set the benchmark's limits (doc/benchmarks.md).
While a valid command is held and the plant moves freely, this loop runs the ticks in C, in the
Python tick's order, with the same plant step (hexapod_plant_step of the generated library).
Everything else stays the Python tick's: no command yet or a timed-out one, a command other than
six finite values with an empty layout, an end stop, a plant step the C step does not finish
(also in the ticks a late tick skipped), and the driver's boards and injected faults, which never
run here. The executor's poll and the diagnostics run between the ticks when due, right after
one (:meth:`DriverLoop.run`).

driver_loop.c is compiled at first use against this environment's rcl, as rcl_loop.c is
(:func:`hexapod_control.ros.native_loop.compile_library`); without it the driver runs its Python
ticks. Its io layout is read from the C file's ``#define DRIVER_*`` lines, its one source.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hexapod_control.ros.native_loop import compiled_function, loop_constants

SOURCE = Path(__file__).with_name("driver_loop.c")
TICK_ENTRIES = 256  # ticks logged between two returns at most (the loop returns when full)
COMMAND_ENTRIES = 1024  # commands logged between two returns at most
PENDING_BYTES = 1 << 20  # commands handed to Python at one return (a six-force command: 68 B)
OUT_FIELDS = ("q", "qd", "phi", "state")  # the plant step's outputs the loop reads, DRIVER_OUT_* order
PLANT_FIELDS = ("q", "qd", "phi", "warm", "applied", "last_start")  # PlantState's, in the plant array


def build(cache: Path | None = None):
    """The C loop's function, compiled and loaded; or why not (a str)."""
    if sys.byteorder != "little":
        return "the C loop writes the little-endian CDR of this host's doubles"
    return compiled_function(SOURCE, "hexapod_driver_loop", [ctypes.c_void_p] * 10 + [
        ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t], cache)


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
    """What one run of the C loop did and left to Python."""

    reason: str  # "shutdown", "due", "late", "rest", "log_full"
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
    """The C loop over the driver's command subscription and joint-state publisher."""

    REASONS = ("shutdown", "due", "late", "rest", "log_full")

    def __init__(self, function, context, subscription, publisher, template: bytes, offsets: dict[str, int],
                 plant_step, schedule: DriverSchedule):
        """``template``, ``offsets``: a serialized JointState of the joints and where its stamp,
        position, velocity and effort are (JointStateWriter.template and .offsets); ``plant_step``: the
        plant's CompiledPlantStep; ``schedule``: the driver's period and limits, fixed for its life."""
        self.function = function
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
        self._outputs = [self.io_index[name] for name in (
            "ticks", "received", "commands", "plant_steps", "tick_log", "command_log", "pending_count", "taken",
            "steps_left", "oversized", "overruns", "held_ticks")]
        for name in ("period", "timeout", "force_max", "lower", "upper", "steps_per_tick"):
            self.io[self.io_index[name]] = getattr(schedule, name)

    def _set_plant(self, state: PlantState, held: Held | None) -> None:
        plant, fields = self.plant, self.plant_fields
        for name in PLANT_FIELDS:
            plant[fields[name]] = getattr(state, name)
        if held is not None:
            plant[fields["held"]] = held.forces

    def _plant_state(self) -> PlantState:
        return PlantState(**{name: self.plant[self.plant_fields[name]].copy() for name in PLANT_FIELDS})

    def run(self, deadline: float, return_at: float, clock_offset: int, plant: PlantState,
            held: Held | None) -> Ticked:
        """Run ticks from the one due at ``deadline`` (monotonic) until Python is needed (module doc),
        at the latest after the first tick that ends at or after ``return_at`` (monotonic).
        ``clock_offset`` [ns]: ROS time - monotonic time, for the stamps."""
        io, index = self.io, self.io_index
        io[self._outputs] = 0.0
        seconds, nanoseconds = divmod(clock_offset, 1_000_000_000)
        for name, value in (("deadline", deadline), ("return_at", return_at), ("offset_seconds", seconds),
                            ("offset_nanoseconds", nanoseconds), ("held", held is not None),
                            ("held_arrival", held.arrival if held else 0.0)):
            io[index[name]] = value
        self._set_plant(plant, held)
        with self.context.handle, self.subscription.handle, self.publisher.handle:
            code = self.function(self.context.handle.pointer, self.subscription.handle.pointer,
                                 self.publisher.handle.pointer, self.message.ctypes.data,
                                 self.message_layout.ctypes.data, self.step_address, ctypes.addressof(self._constants),
                                 self.out_layout.ctypes.data, self.plant.ctypes.data, io.ctypes.data,
                                 self.tick_log.ctypes.data, TICK_ENTRIES, self.command_log.ctypes.data,
                                 COMMAND_ENTRIES, self.pending.ctypes.data, PENDING_BYTES)
        if code not in self.codes:
            if not self.context.ok():  # shut down under it (Ctrl-C): nothing is left to serve
                code = next(code for code, reason in self.codes.items() if reason == "shutdown")
            else:
                raise RuntimeError(f"the driver's rcl loop failed (rcl error; status {code})")
        ticks = self.tick_log[: int(io[index["tick_log"]]) * self.tick_entry].reshape(-1, self.tick_entry)
        commands = self.command_log[: int(io[index["command_log"]]) * self.command_entry].reshape(-1, self.command_entry)
        pending, at = [], 0
        for _ in range(int(io[index["pending_count"]])):
            size = int(self.pending[at:at + 8].view(np.int64)[0])
            arrived = float(self.pending[at + 8:at + 16].view(np.float64)[0])
            pending.append((self.pending[at + 16:at + 16 + size].tobytes(), arrived))
            at += 16 + size
        held_out = None
        if io[index["held"]]:
            held_out = Held(self.plant[self.plant_fields["held"]].copy(), float(io[index["held_arrival"]]))
        return Ticked(
            self.codes[code], float(io[index["deadline"]]), int(io[index["ticks"]]), int(io[index["overruns"]]),
            int(io[index["received"]]),
            int(io[index["commands"]]), int(io[index["oversized"]]), int(io[index["plant_steps"]]),
            int(io[index["held_ticks"]]),
            self._plant_state(), held_out, ticks[:, 0].copy(), ticks[:, 1].copy(), ticks[:, 2].copy(),
            ticks[:, 3].copy(), commands[:, 0].copy(), commands[:, 1].copy(), pending, float(io[index["taken"]]),
            int(io[index["steps_left"]]))
