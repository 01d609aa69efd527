"""The compiled numeric core of the delay compensation: pure C functions, the NumPy code as reference.

``generated/control_cycle.c`` (codegen/delay_prediction.py, in the library of
:mod:`hexapod_control.model.compiled`) holds three functions that :class:`DelayCompensatedController`
(control/delay_compensation.py) calls where it would run its NumPy code:

* :meth:`CompiledPrediction.measure`: the measured forward kinematics of ``update``, warm-started
  from the controller's KinematicState, which goes in as an array and is written back from the
  array the call returns;
* :meth:`CompiledPrediction.applied_force`: the force that acted over the last period (``_estimate``);
* :meth:`CompiledPrediction.predict`: the d semi-implicit Euler steps of ``_predict`` under the
  forces in flight the caller gives.

:class:`RowKinematics` runs the measured forward kinematics along the rows of a recording
(``hexapod_measure_rows``) for evaluation/batch.py.

Each is a pure function of its arguments: no state is kept between calls, so the C and the NumPy
paths can alternate call by call. A call the C code does not finish (where the NumPy code raises,
or needs the continuation of the forward kinematics) returns None, and the caller runs its NumPy
code for that call, which raises or answers as the reference does. The tests hold both paths to
1e-12 (test_delay_compensation_compiled.py).

The choice follows the control cycle's (``HEXAPOD_CONTROL_CYCLE``, compiled_cycle.py): ``auto``
takes C when the library is available, ``python`` always the NumPy code, ``c`` the C code or a
CompilationError.
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import math
import struct
import threading
from typing import NamedTuple

import numpy as np

from hexapod_control.control import compiled_cycle
from hexapod_control.errors import CompilationError
from hexapod_control.model import compiled
from hexapod_control.model.dynamics import pack_parameters

# The warm start of a KinematicState, in the order of the control cycle's state array.
WARM_START = ("last_q", "last_phi", "previous_q", "previous_phi")
_STATUS_OK = 0
_VECTOR = 6


class MeasuredKinematics(NamedTuple):
    """What ``update`` takes from the forward kinematics of the measured q."""

    phi: np.ndarray  # passive angles [rad] (3,)
    pose: np.ndarray  # xi = (x, y, z, lambda, mu, nu) (6,)


class PredictionLibrary:
    """The delay compensation's functions of a loaded library and the layouts of their arrays."""

    def __init__(self, cycle: compiled_cycle.CycleLibrary, library, path):
        try:
            self.drives = compiled_cycle.read_layout(library, "hexapod_prediction_drives", path)
            self.outputs = compiled_cycle.read_layout(library, "hexapod_prediction_outputs", path)
            self.measurement = compiled_cycle.read_layout(library, "hexapod_measurement_outputs", path)
            self.measure = library["hexapod_measure"]
            self.measure_rows = library["hexapod_measure_rows"]
            self.applied_force = library["hexapod_applied_force"]
            self.predict = library["hexapod_predict"]
        except (ValueError, AttributeError) as error:  # a symbol is missing
            raise CompilationError(f"{path} has no delay compensation core: {error}") from error
        self.cycle = cycle  # the settings and state layouts and the statuses
        pointer = ctypes.c_void_p
        # q, state, settings, out
        self.measure.argtypes = [pointer] * 4
        # q, count, state, settings, out, status
        self.measure_rows.argtypes = [pointer, ctypes.c_int] + [pointer] * 4
        self.measure_rows.restype = ctypes.c_int
        # q0, qd0, phi0, qd, dt, drives, settings, parameters, out
        self.applied_force.argtypes = [pointer] * 4 + [ctypes.c_double] + [pointer] * 4
        # q, qd, phi, forces, steps, period, drives, settings, parameters, out
        self.predict.argtypes = [pointer] * 4 + [ctypes.c_int, ctypes.c_double] + [pointer] * 4
        for function in (self.measure, self.applied_force, self.predict):
            function.restype = ctypes.c_int
        self.path = path
        self._library = library  # keeps it loaded


_libraries: dict[str, PredictionLibrary | None] = {}
_libraries_lock = threading.Lock()


def prediction_library(choice: str | None = None) -> PredictionLibrary | None:
    """The library for ``choice`` or ``$HEXAPOD_CONTROL_CYCLE`` (auto|python|c), None for the NumPy code."""
    return compiled.memoised_choice(
        choice, compiled_cycle.CYCLE_VARIABLE, compiled_cycle.CHOICES, _libraries, _libraries_lock, _load
    )


def _load(choice: str) -> PredictionLibrary | None:
    cycle = compiled_cycle.cycle_library(choice)
    if cycle is None:
        return None  # python, or no library (the dynamics backend already warned)
    terms = compiled.select_backend("c" if choice == "c" else "auto")  # the library the cycle was read from
    return PredictionLibrary(cycle, terms.LIBRARY, terms.LIBRARY_PATH)


def attach(model, steps: int, choice: str | None = None) -> CompiledPrediction | None:
    """The compiled core for ``model`` with room for ``steps`` forces in flight, or None for NumPy.

    The C code has the drives' symmetric law (inertia, viscous and smooth Coulomb friction); drives
    with the lead screw's terms (direction, Stribeck, ripple) run the NumPy code."""
    if not model.dynamics.actuators.symmetric or not compiled_cycle.follows_model(choice, model):
        return None
    library = prediction_library(choice)
    return None if library is None else CompiledPrediction(library, model, steps)


def row_kinematics(kinematics, choice: str | None = None) -> RowKinematics | None:
    """The compiled forward kinematics along rows for ``kinematics``, or None for the NumPy code
    (``choice`` or ``$HEXAPOD_CONTROL_CYCLE`` python, or no library)."""
    library = prediction_library(choice)
    return None if library is None else RowKinematics(library, kinematics)


class RowKinematics:
    """``hexapod_measure_rows`` for one Kinematics: rows of q solved in C in turn, each warm-started from
    the rows before it as ``Kinematics.solve_passive`` warm-starts from a KinematicState."""

    def __init__(self, library: PredictionLibrary, kinematics):
        cycle = library.cycle
        self.library = library
        self.width = cycle.size(library.measurement)
        self.phi, self.pose = library.measurement["phi"], library.measurement["pose"]
        self._settings = kinematic_settings(cycle, kinematics)
        self._state = np.zeros(cycle.size(cycle.state))
        self._warm_start = [cycle.state[name] for name in WARM_START]
        self._status = ctypes.c_int(_STATUS_OK)  # of the row it stopped at: the caller solves that row anyway

    def solve(self, q: np.ndarray, out: np.ndarray, state) -> int:
        """Solve the rows of ``q`` (n, 6), C-ordered, into ``out`` (n, width) from the KinematicState
        ``state``, which follows the rows solved; the rows solved before the first it did not finish."""
        for entry, name in zip(self._warm_start, WARM_START):
            self._state[entry] = getattr(state, name)
        solved = self.library.measure_rows(q.ctypes.data, len(q), self._state.ctypes.data, self._settings.ctypes.data,
                                           out.ctypes.data, ctypes.byref(self._status))
        if solved:
            for entry, name in zip(self._warm_start, WARM_START):
                setattr(state, name, tuple(self._state[entry].tolist()))
        return solved


def kinematic_settings(cycle: compiled_cycle.CycleLibrary, kinematics) -> np.ndarray:
    """The cycle's settings vector with the forward kinematics' entries of ``kinematics``; the others
    NaN, unused by the functions here."""
    settings = np.full(cycle.size(cycle.settings), math.nan)
    for name, value in compiled_cycle.kinematic_settings(kinematics).items():
        settings[cycle.settings[name]] = value
    return settings


def packed_constants(library: PredictionLibrary, model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of ``model`` the C functions read: the cycle's settings (:func:`kinematic_settings`),
    the drives (the symmetric law) and the model parameters."""
    cycle = library.cycle
    settings = kinematic_settings(cycle, model.kinematics)
    drives = model.dynamics.actuators
    packed_drives = np.zeros(cycle.size(library.drives))
    for name, values in (
        ("reflected_inertia", drives.inertia),
        ("viscous_friction", drives.viscous),
        ("coulomb_friction", drives.coulomb),
        ("coulomb_smoothing_speed", drives.smoothing_speed),
        ("rigid", float(drives.rigid)),
    ):
        packed_drives[library.drives[name]] = values
    return settings, packed_drives, np.array(pack_parameters(model.parameters))


class CompiledPrediction:
    """One controller's buffers and packed constants for the three calls, and the counts of the calls.

    ``finished`` counts the calls answered in C by function, ``deferred`` the others by
    (function, status of the C code).
    """

    def __init__(self, library: PredictionLibrary, model, steps: int):
        self.library = library
        cycle = library.cycle
        self._settings, self._drives, self._parameters = packed_constants(library, model)
        constants = tuple(buffer.ctypes.data for buffer in (self._drives, self._settings, self._parameters))

        offsets = [cycle.state[name] for name in WARM_START]
        if offsets[0].start != 0 or any(a.stop != b.start for a, b in itertools.pairwise(offsets)):
            raise CompilationError(f"{library.path}: the state does not begin with {WARM_START} in this order")
        self._warm_start_slices = [slice(item.start, item.stop) for item in offsets]
        warm_start = struct.Struct(f"{offsets[-1].stop}d")
        self._pack_warm_start, self._unpack_warm_start = warm_start.pack_into, warm_start.unpack_from
        self._state = np.zeros(cycle.size(cycle.state))
        self._measured_q = np.zeros(_VECTOR)
        self._measured = np.zeros(cycle.size(library.measurement))
        self._measure_arguments = (
            self._measured_q.ctypes.data, self._state.ctypes.data, self._settings.ctypes.data, self._measured.ctypes.data
        )
        self._measured_slices = (library.measurement["phi"], library.measurement["pose"])

        self._start = [np.zeros(_VECTOR), np.zeros(_VECTOR), np.zeros(3), np.zeros(_VECTOR)]  # q0, qd0, phi0, qd
        self._applied = np.zeros(_VECTOR)
        self._applied_inputs = tuple(buffer.ctypes.data for buffer in self._start)
        self._applied_outputs = (*constants, self._applied.ctypes.data)

        self._q, self._qd, self._phi = np.zeros(_VECTOR), np.zeros(_VECTOR), np.zeros(3)
        self._predicted = np.zeros(cycle.size(library.outputs))
        self._predicted_slices = (library.outputs["q"], library.outputs["qd"])
        self._state_inputs = tuple(buffer.ctypes.data for buffer in (self._q, self._qd, self._phi))
        self._predict_outputs = (*constants, self._predicted.ctypes.data)
        self._reserve(steps)

        self.finished: collections.Counter[str] = collections.Counter()
        self.deferred: collections.Counter[tuple[str, str]] = collections.Counter()

    def constant_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The packed drives and model parameters the C functions read (the compiled step passes them on)."""
        return self._drives, self._parameters

    def _reserve(self, steps: int) -> None:
        """Room for the forces of ``steps`` periods."""
        self._forces = np.zeros((max(steps, 1), _VECTOR))
        self._forces_address = self._forces.ctypes.data

    def _answer(self, function: str, code: int) -> bool:
        if code == _STATUS_OK:
            self.finished[function] += 1
            return True
        self.deferred[function, self.library.cycle.statuses[code]] += 1
        return False

    def measure(self, q: np.ndarray, state) -> MeasuredKinematics | None:
        """phi and the pose of the measured ``q`` (6,), warm-started from the KinematicState ``state``.

        A finished call writes ``state`` back as Kinematics.solve_passive advances it; None leaves it
        as it was (the caller's forward kinematics then continues from it).
        """
        self._measured_q[...] = q
        self._pack_warm_start(self._state, 0, *state.last_q, *state.last_phi, *state.previous_q, *state.previous_phi)
        if not self._answer("measure", self.library.measure(*self._measure_arguments)):
            return None
        values = self._unpack_warm_start(self._state)
        last_q, last_phi, previous_q, previous_phi = self._warm_start_slices
        state.last_q, state.last_phi = values[last_q], values[last_phi]
        state.previous_q, state.previous_phi = values[previous_q], values[previous_phi]
        out = self._measured.copy()
        phi_at, pose_at = self._measured_slices
        return MeasuredKinematics(out[phi_at], out[pose_at])

    def applied_force(self, q0, qd0, phi0, qd, dt: float) -> np.ndarray | None:
        """The force that moved (q0, qd0, phi0) to the velocity ``qd`` over ``dt`` [s] (6,) [N]."""
        for buffer, values in zip(self._start, (q0, qd0, phi0, qd)):
            buffer[...] = values
        if not self._answer("applied_force", self.library.applied_force(*self._applied_inputs, dt, *self._applied_outputs)):
            return None
        return self._applied.copy()

    def predict(self, q, qd, phi, forces, period: float) -> tuple[np.ndarray, np.ndarray] | None:
        """(q, q_d) after one period per entry of ``forces`` (each (6,) [N], acting over its period)."""
        steps = len(forces)
        if steps > self._forces.shape[0]:
            self._reserve(steps)
        try:
            for row, force in zip(self._forces, forces):
                if len(force) != _VECTOR:
                    raise ValueError(f"a force of {len(force)} entries")
                row[...] = force
            self._q[...] = q
            self._qd[...] = qd
            self._phi[...] = phi
        except (TypeError, ValueError):
            self.deferred["predict", "invalid_input"] += 1  # the NumPy code names the problem
            return None
        code = self.library.predict(*self._state_inputs, self._forces_address, steps, period, *self._predict_outputs)
        if not self._answer("predict", code):
            return None
        out = self._predicted.copy()
        q_at, qd_at = self._predicted_slices
        return out[q_at], out[qd_at]
