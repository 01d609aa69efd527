"""The lockstep loop's steps in one C call at a time: the fast path of :meth:`LockstepLoop.run_blocks`.

``hexapod_lockstep`` (codegen/lockstep.py, in the generated control_cycle.c) runs the steps the
compiled step answers, from the plant's measurement to its next state, and writes one row of
``LOCKSTEP_ROW`` per step: the stamp, the measured state, the forces acting, the answer, the pose and
the reference. :class:`CompiledLockstep` packs the plant's and the transport's state into its array,
calls it, and hands the state back to the Python objects (the plant, the transport, the control
loop's supervisor fields), which stay the state of record between calls. Everything else runs
the Python lockstep step: the first steps (arming, the rate not yet known), every step the compiled
step leaves to Python, the diagnostics statuses, and a plant step the C plant refuses.

The reference of a compiled run comes from a :class:`ReferenceGrid` of the trajectory (the
``trajectories.sample_period`` grid the robot stack's player reads), in C and in the Python steps
alike; the Python lockstep samples the trajectory itself. The two differ by the grid's
interpolation error and rounding (test_compiled_lockstep.py bounds the difference).

Supported: the embedded plant with its C step and an ideal sensor, alone or behind the loop's
transport delay (:class:`DelayedPlant`, whose draws are passed in); any other plant runs in Python.
"""

from __future__ import annotations

import ctypes
import math
import threading

import numpy as np

from hexapod_control.codegen import lockstep as layout_source
from hexapod_control.control import compiled_cycle
from hexapod_control.control.reference_grid import ReferenceGrid
from hexapod_control.errors import CompilationError
from hexapod_control.model import compiled
from hexapod_control.simulation.delay import DelayedPlant
from hexapod_control.simulation.embedded import EmbeddedSimulator

BLOCK_STEPS = 1000  # steps per call at most (rows and grid knots are sized for it)


class LockstepLibrary:
    """``hexapod_lockstep`` of the loaded C library and the layouts of its arrays (read from it)."""

    def __init__(self, library, path):
        try:
            self.state = compiled_cycle.read_layout(library, "hexapod_lockstep_state", path)
            self.row = compiled_cycle.read_layout(library, "hexapod_lockstep_row", path)
            self.reasons = tuple(compiled.read_string(library, "hexapod_lockstep_reasons").split())
            self.function = library["hexapod_lockstep"]
        except (ValueError, AttributeError) as error:  # a symbol is missing
            raise CompilationError(f"{path} has no lockstep loop: {error}") from error
        for name, found, expected in (("reasons", self.reasons, layout_source.LOCKSTEP_REASONS),
                                      ("state", _sizes(self.state), layout_source.LOCKSTEP_STATE),
                                      ("row", _sizes(self.row), layout_source.LOCKSTEP_ROW)):
            if tuple(found) != tuple(expected):
                raise CompilationError(f"{path}: the lockstep {name} {found} differs from {expected}")
        self.function.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_long]
        self.function.restype = ctypes.c_int
        self.path = path
        self._library = library  # keeps it loaded


def _sizes(layout: dict[str, slice]) -> tuple[tuple[str, int], ...]:
    return tuple((name, at.stop - at.start) for name, at in layout.items())


_library: list[LockstepLibrary] = []
_library_lock = threading.Lock()


def lockstep_library() -> LockstepLibrary:
    """The lockstep loop of the C dynamics library."""
    with _library_lock:
        if not _library:
            terms = compiled.select_backend("c")
            _library.append(LockstepLibrary(terms.LIBRARY, terms.LIBRARY_PATH))
        return _library[0]


def attach(plant, control, trajectory) -> CompiledLockstep | None:
    """The compiled lockstep of ``plant`` under ``control`` (a ControlLoop), or None when every step
    is to run in Python (a plant or a transport the module doc does not list, or no compiled step)."""
    transport = plant if isinstance(plant, DelayedPlant) else None
    inner = plant.plant if transport is not None else plant
    if control.compiled_step is None or not isinstance(inner, EmbeddedSimulator) or not inner.ideal_sensor:
        return None
    if transport is not None and (transport.delay_periods + math.ceil(transport.jitter_periods) + 2
                                  > layout_source.FLIGHT_CAPACITY):
        return None
    return CompiledLockstep(lockstep_library(), control, inner, transport, trajectory)


class CompiledLockstep:
    """One lockstep loop's C calls: its state array, its rows and its reference grid."""

    def __init__(self, library: LockstepLibrary, control, plant: EmbeddedSimulator, transport: DelayedPlant | None,
                 trajectory):
        self.library = library
        self.control = control
        self.plant = plant
        self.transport = transport
        self.trajectory = trajectory
        size = compiled_cycle.CycleLibrary.size
        self.lock = np.zeros(size(library.state))
        self.rows = np.zeros((BLOCK_STEPS, size(library.row)))
        period = plant.parameters.trajectories.sample_period
        self.grid = ReferenceGrid(period, math.ceil(BLOCK_STEPS * plant.dt / period) + 4)
        self._step_arrays = control.compiled_step.grid_arrays(self.grid.array)
        self._plant_arrays = (ctypes.c_void_p * 4)(*plant.compiled.constant_addresses)
        self._view = {name: self.lock[at] for name, at in library.state.items()}
        self._view["force_limit"][...] = plant.parameters.limits.actuator_force_max
        if transport is not None:
            self._view["delayed"][...] = 1.0
            self._view["periods"][...] = transport.delay_periods
            self._view["jitter"][...] = transport.jitter_periods
            self._view["drop"][...] = transport.drop_probability
        self.finished = 0  # steps run in C

    def start(self, origin: float) -> None:
        """The trajectory's t = 0 is at the stamp ``origin``."""
        self.grid.reset(self.trajectory, origin)

    def advance(self, stamps: np.ndarray, diagnostic_due: float) -> tuple[int, str, int] | None:
        """Run the steps stamped ``stamps`` (at most BLOCK_STEPS) in C from the plant's state: (rows
        written in :attr:`rows`, the reason it returned, the step status behind ``pending``); None
        when the plant cannot be stepped in C now (external forces act on it)."""
        state = self.plant.lockstep_state()
        if state is None:
            return None
        view, count = self._view, len(stamps)
        q, qd, forces, phi, warm = state
        view["q"][:], view["qd"][:], view["forces"][:], view["phi"][:] = q, qd, forces, phi
        view["warm"][:] = 0.0
        view["warm"][:len(warm)] = warm
        view["diagnostic_due"][...] = diagnostic_due
        draws = np.zeros(2 * count)
        if self.transport is not None:
            step, last_arrival, sent, lost, flight = self.transport.transport_state()
            view["transport_step"][...], view["last_arrival"][...] = step, last_arrival
            view["sent"][...], view["lost"][...] = sent, lost
            view["flight_count"][...], view["flight_head"][...] = len(flight), 0
            entries = view["flight"].reshape(layout_source.FLIGHT_CAPACITY, layout_source.FLIGHT_ENTRY)
            for slot, (arrival, flying) in enumerate(flight):
                entries[slot, 0], entries[slot, 1:] = arrival, flying
            draws = self.transport.upcoming_draws(count)
        self.grid.hold(float(stamps[0]), float(stamps[-1]))
        stamps = np.ascontiguousarray(stamps, dtype=float)
        code = self.library.function(self._step_arrays, self._plant_arrays, self.lock.ctypes.data,
                                     stamps.ctypes.data, draws.ctypes.data, self.rows.ctypes.data, count)
        reason = self.library.reasons[code]
        steps = int(view["done"][0])
        answers = steps + (reason == "plant")
        self.plant.lockstep_resume(*(view[name].tolist() for name in ("q", "qd", "forces", "phi", "warm")), steps)
        if self.transport is not None:
            head, flying = int(view["flight_head"][0]), int(view["flight_count"][0])
            entries = view["flight"].reshape(layout_source.FLIGHT_CAPACITY, layout_source.FLIGHT_ENTRY)
            flight = [(int(entries[(head + k) % layout_source.FLIGHT_CAPACITY, 0]),
                       entries[(head + k) % layout_source.FLIGHT_CAPACITY, 1:].tolist()) for k in range(flying)]
            self.transport.restore_transport(int(view["transport_step"][0]), int(view["last_arrival"][0]),
                                             int(view["sent"][0]), int(view["lost"][0]), flight)
        if answers:
            last = float(stamps[answers - 1])
            self.control.served_in_c(answers, 0, 0, last, last, None, last)
        self.finished += steps
        return answers, reason, int(view["status"][0])
