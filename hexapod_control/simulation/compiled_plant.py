"""The embedded plant's step in C: ``hexapod_plant_step`` of the generated library.

``generated/control_cycle.c`` (codegen/plant_step.py, in the library of
:mod:`hexapod_control.model.compiled`) holds one step of :class:`EmbeddedSimulator` with the
``semi_implicit_euler`` integrator and the drives' smooth law, rigid or not. The simulator calls
:meth:`CompiledPlantStep.step` where it would run its Python substeps; the Python code stays the
reference and runs:

* the plants the C code does not have: ``rk4``, ``actuators.plant_friction: stick_slip``, drives
  with the lead screw's terms (direction, Stribeck hump, ripple);
* a model on the Python dynamics (``HEXAPOD_DYNAMICS_BACKEND=python``): the plant follows its
  model's backend;
* every step the C code does not finish (where the Python code raises, as on a divergence, or
  continues the forward kinematics): the Python step then runs from the same state, and raises or
  answers as the reference does.

The call is a pure function of the state, the forces and the plant's KinematicState, which goes in
as an array and is written back from the one the call returns. The tests hold both paths to 1e-12
(test_compiled_plant.py).
"""

from __future__ import annotations

import collections
import ctypes
import struct
import threading

import numpy as np

from hexapod_control.control import compiled_cycle, compiled_prediction
from hexapod_control.errors import CompilationError
from hexapod_control.model import compiled
from hexapod_control.model.kinematics import KinematicState
from hexapod_control.model.parameters import SimulationSettings

_STATUS_OK = 0
SUPPORTED_INTEGRATOR = "semi_implicit_euler"


class PlantLibrary:
    """``hexapod_plant_step`` of a loaded library and the layouts of its arrays (read from it)."""

    def __init__(self, prediction: compiled_prediction.PredictionLibrary, library, path):
        try:
            self.settings = compiled_cycle.read_layout(library, "hexapod_plant_settings", path)
            self.outputs = compiled_cycle.read_layout(library, "hexapod_plant_outputs", path)
            self.step = library["hexapod_plant_step"]
        except (ValueError, AttributeError) as error:  # a symbol is missing
            raise CompilationError(f"{path} has no plant step: {error}") from error
        # q, qd, forces, state, plant settings, drives, settings, parameters, out
        self.step.argtypes = [ctypes.c_void_p] * 9
        self.step.restype = ctypes.c_int
        self.prediction = prediction
        self.statuses = prediction.cycle.statuses
        self.path = path
        self._library = library  # keeps it loaded


_library: list[PlantLibrary] = []
_library_lock = threading.Lock()


def plant_library() -> PlantLibrary:
    """The plant step of the C dynamics library (loaded already by a model on the C backend)."""
    with _library_lock:
        if not _library:
            prediction = compiled_prediction.prediction_library("c")
            terms = compiled.select_backend("c")
            _library.append(PlantLibrary(prediction, terms.LIBRARY, terms.LIBRARY_PATH))
        return _library[0]


def attach(model, settings: SimulationSettings, stick_slip: bool) -> CompiledPlantStep | None:
    """The compiled step for a plant of ``model`` with ``settings``, or None for the Python step
    (the plants the module doc lists)."""
    drives = model.dynamics.actuators
    if (settings.embedded.integrator != SUPPORTED_INTEGRATOR or stick_slip or not drives.symmetric
            or model.backend != "c"):
        return None
    return CompiledPlantStep(plant_library(), model, settings)


class CompiledPlantStep:
    """One plant's buffers and packed constants; ``finished`` counts the steps done in C, ``deferred``
    the others by the C code's status."""

    def __init__(self, library: PlantLibrary, model, settings: SimulationSettings):
        self.library = library
        cycle = library.prediction.cycle
        self._constants = compiled_prediction.packed_constants(library.prediction, model)
        self._plant_settings = np.zeros(cycle.size(library.settings))
        for name, value in (
            ("substep", settings.dt / settings.embedded.substeps),
            ("substeps", settings.embedded.substeps),
            ("max_actuator_speed", settings.embedded.max_actuator_speed),
        ):
            self._plant_settings[library.settings[name]] = value
        warm_start = [cycle.state[name] for name in compiled_prediction.WARM_START]
        if [item.start for item in warm_start] != [0, 6, 9, 15] or warm_start[-1].stop != 18:
            raise CompilationError(f"{library.path}: the state does not begin with {compiled_prediction.WARM_START}")
        self._inputs = np.zeros(6 + 6 + 6 + cycle.size(cycle.state))  # q, qd, forces, state
        self._out = np.zeros(cycle.size(library.outputs))
        base = self._inputs.ctypes.data
        double = self._inputs.itemsize
        settings_array, drives, parameters = self._constants
        self._arguments = (
            base, base + 6 * double, base + 12 * double, base + 18 * double, self._plant_settings.ctypes.data,
            drives.ctypes.data, settings_array.ctypes.data, parameters.ctypes.data, self._out.ctypes.data,
        )
        self._pack_inputs = struct.Struct(f"{18 + warm_start[-1].stop}d").pack_into
        out = library.outputs
        self._q, self._qd, self._phi = out["q"], out["qd"], out["phi"]
        self._state = slice(out["state"].start, out["state"].start + warm_start[-1].stop)
        self.finished = 0
        self.deferred: collections.Counter[str] = collections.Counter()

    @property
    def constant_addresses(self) -> tuple[int, int, int, int]:
        """Addresses of the plant settings, drives, settings and parameters the step reads."""
        return self._arguments[4:8]

    def step(self, q, qd, forces, state: KinematicState):
        """(q, q_d, phi) as tuples after one plant step from (``q``, ``qd``) under ``forces`` (6,) [N],
        with ``state`` advanced; None, with ``state`` unchanged, where the Python step is to run."""
        self._pack_inputs(self._inputs, 0, *q, *qd, *forces, *state.last_q, *state.last_phi, *state.previous_q,
                          *state.previous_phi)
        code = self.library.step(*self._arguments)
        if code != _STATUS_OK:
            self.deferred[self.library.statuses[code]] += 1
            return None
        self.finished += 1
        out = self._out.tolist()
        warm = out[self._state]
        state.last_q, state.last_phi, state.previous_q, state.previous_phi = (
            tuple(warm[0:6]), tuple(warm[6:9]), tuple(warm[9:15]), tuple(warm[15:18]))
        return tuple(out[self._q]), tuple(out[self._qd]), tuple(out[self._phi])
