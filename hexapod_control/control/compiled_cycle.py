"""The compiled control cycle: one C call per controller update, the Python controller as reference.

``generated/control_cycle.c`` (written by ``python -m hexapod_control.codegen``, built into the
library of :mod:`hexapod_control.model.compiled`) holds one function per controller that does a
whole regular cycle of :meth:`OperationalSpaceController.update`: forward kinematics warm-started
from the controller's KinematicState, J_A and J_A_dot q_dot, the conditioning checks, J_A^-1 or its
damped least squares, the control law and the clamping. :class:`CompiledCycle` packs the inputs,
makes that one call and builds the same :class:`ControlOutput` as the Python code.

The Python controller stays the reference (the tests hold both to 1e-12) and the fallback:

* a cycle the C code does not finish (invalid input, a forward kinematics that needs the
  continuation of Kinematics.solve_passive, a singular configuration: every safe output) is
  *deferred*: :meth:`CompiledCycle.update` returns None and the controller runs its Python code
  for that cycle, which gives the reference output and message;
* without the library (no compiler, ``HEXAPOD_DYNAMICS_BACKEND=python``) every cycle is Python.

The controller's KinematicState and integrator stay the state of record, advanced after each
compiled cycle as the Python code does, so that the two paths can alternate cycle by cycle. The C
code advances its copy of them too; it is written again from the Python objects whenever they are
not the very objects the last compiled cycle left (a reset, a deferred cycle, anything else). The
time a double-loop cycle integrates over is the controller's ``integration_step`` (the actual
period since its last update), passed with each call, as is its ``feedback_scale``.

Environment: ``HEXAPOD_CONTROL_CYCLE`` = ``auto`` (default: C when the library is available, one
warning otherwise, as the dynamics backend), ``python`` (always the Python code) or ``c`` (the C
cycle or a CompilationError).
"""

from __future__ import annotations

import collections
import ctypes
import math
import re
import struct
import threading

import numpy as np

from hexapod_control.errors import CompilationError
from hexapod_control.model import compiled, dynamics, kinematics
from hexapod_control.model.dynamics import pack_parameters

CYCLE_VARIABLE = "HEXAPOD_CONTROL_CYCLE"
CHOICES = ("auto", "python", "c")
# Statuses the C cycle finishes, in the order of its status codes; every later code defers.
FINISHED_STATUSES = ("ok", "saturated", "near_singular")
_ITEM = re.compile(r"^(\w+)\[(\d+)\]$")
_VECTOR = (6,)
_SCALAR_OUTPUTS = (
    "jacobian_conditioning",
    "constraint_conditioning",
    "fk_iterations",
    "fk_residual",
    "position_error_norm",
    "orientation_error_norm",
)


def read_layout(library, symbol: str, path) -> dict[str, slice]:
    """{name: slice} of a 'name[size] ...' layout string of the library, in order."""
    slices, offset = {}, 0
    for item in compiled.read_string(library, symbol).split():
        match = _ITEM.match(item)
        if match is None:
            raise CompilationError(f"unreadable layout entry {item!r} of {symbol} in {path}")
        size = int(match.group(2))
        slices[match.group(1)] = slice(offset, offset + size)
        offset += size
    return slices


class CycleLibrary:
    """The cycle functions of a loaded library and the layouts of their arrays (read from it)."""

    def __init__(self, library, path):
        try:
            self.settings = read_layout(library, "hexapod_cycle_settings", path)
            self.state = read_layout(library, "hexapod_cycle_state", path)
            self.reference = read_layout(library, "hexapod_cycle_reference", path)
            self.outputs = read_layout(library, "hexapod_cycle_outputs", path)
            self.statuses = tuple(compiled.read_string(library, "hexapod_cycle_statuses").split())
            controllers = compiled.read_string(library, "hexapod_cycle_controllers").split()
        except ValueError as error:  # a symbol is missing
            raise CompilationError(f"{path} has no control cycle: {error}") from error
        if self.statuses[: len(FINISHED_STATUSES)] != FINISHED_STATUSES:
            raise CompilationError(f"{path}: cycle statuses {self.statuses} do not begin with {FINISHED_STATUSES}")
        self.functions = {}
        for name in controllers:
            function = library[f"hexapod_cycle_{name}"]
            function.restype = ctypes.c_int
            # q, qd, reference, the period this cycle integrates over, the feedback scale, state,
            # settings, parameters, out
            function.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_double] * 2 + [ctypes.c_void_p] * 4
            self.functions[name] = function
        self.path = path
        self._library = library  # keeps it loaded

    @staticmethod
    def size(layout: dict[str, slice]) -> int:
        return max(item.stop for item in layout.values())


_libraries: dict[str, CycleLibrary | None] = {}
_libraries_lock = threading.Lock()


def cycle_library(choice: str | None = None) -> CycleLibrary | None:
    """The cycle library for ``choice`` or ``$HEXAPOD_CONTROL_CYCLE`` (auto|python|c), None for Python.

    ``auto`` loads the library as the dynamics backend does (compiled.select_backend: the installed
    library, the developer fallback, or the Python code with one warning); it is asked for only by
    controllers of a model built on the C dynamics (:func:`follows_model`). ``c`` requires the
    library. Memoised per choice.
    """
    return compiled.memoised_choice(choice, CYCLE_VARIABLE, CHOICES, _libraries, _libraries_lock, _load)


def _load(choice: str) -> CycleLibrary | None:
    if choice == "python":
        return None
    terms = compiled.select_backend("c" if choice == "c" else "auto")
    if compiled.backend_name(terms) != "c":
        return None  # the dynamics backend already warned
    return CycleLibrary(terms.LIBRARY, terms.LIBRARY_PATH)


def follows_model(choice: str | None, model) -> bool:
    """False when ``choice`` (or ``$HEXAPOD_CONTROL_CYCLE``) is "auto" for a model built on the Python
    dynamics: its controllers then run in Python too. "c" and "python" are taken as they are."""
    return compiled.resolved_choice(choice, CYCLE_VARIABLE, CHOICES) != "auto" or model.backend == "c"


def attach(controller, choice: str | None, output_type: type, status_type: type) -> CompiledCycle | None:
    """The compiled cycle of ``controller``, or None when its updates are to run in Python.

    ``output_type`` and ``status_type`` are the controllers' ControlOutput and ControlStatus (given,
    as controllers.py imports this module).
    """
    if controller.name == "computed_torque" and not controller.model.dynamics.actuators.rigid:
        return None  # the C law has the rigid bodies only; the drives' inertia and friction are Python's
    if not follows_model(choice, controller.model):
        return None
    library = cycle_library(choice)
    if library is None:
        return None
    if controller.name not in library.functions:
        raise CompilationError(f"{library.path} has no cycle for the {controller.name} controller")
    return CompiledCycle(controller, library, output_type, status_type)


def kinematic_settings(model_kinematics: kinematics.Kinematics) -> dict[str, object]:
    """The forward kinematics' entries of the settings vector: Kinematics' constants and the closure's."""
    chains = model_kinematics.chains  # the closure's constants, as the Python code has them
    return {
        "fk_tolerance": kinematics.FK_TOLERANCE,
        "max_newton_iterations": kinematics.MAX_NEWTON_ITERATIONS,
        "max_newton_step": kinematics.MAX_NEWTON_STEP,
        "max_branch_jump": kinematics.MAX_BRANCH_JUMP,
        "cyclic_singularity_ratio": kinematics.CYCLIC_SINGULARITY_RATIO,
        "two_leg_lengths": model_kinematics.two_leg_lengths,
        "side_cos": chains.side_cos,
        "side_sin": chains.side_sin,
        "side_offset": chains.side_offset,
        "four_leg_length_squared": chains.four_leg_length_squared,
        "half_platform_side_squared": chains.half_platform_side_squared,
        "platform_side": chains.platform_side,
        "normal_scale": chains.normal_scale,
        "platform_offset": chains.platform_offset,
    }


class CompiledCycle:
    """One controller's compiled update: its buffers, its packed settings and the counts of its cycles.

    ``finished`` counts the cycles it answered, ``deferred`` the others by reason (a status name
    of the C code), and ``last_status`` is the status of the latest call.
    """

    def __init__(self, controller, library: CycleLibrary, output_type: type, status_type: type):
        self.controller = controller
        self.library = library
        self._output_type = output_type
        self._finished_statuses = tuple(status_type(name) for name in FINISHED_STATUSES)
        self._function = library.functions[controller.name]
        self._double_loop = controller.name == "double_loop"
        self._q, self._qd = np.zeros(6), np.zeros(6)
        self._reference = np.zeros(CycleLibrary.size(library.reference))
        self._state = np.zeros(CycleLibrary.size(library.state))
        self._settings = np.full(CycleLibrary.size(library.settings), math.nan)
        self._parameters = np.array(pack_parameters(controller.model.parameters))
        self._out = np.zeros(CycleLibrary.size(library.outputs))
        inputs = (self._q, self._qd, self._reference)
        self._inputs = tuple(buffer.ctypes.data for buffer in inputs)
        self._buffers = tuple(buffer.ctypes.data for buffer in (self._state, self._settings, self._parameters, self._out))
        self._settings_packed = False
        # Filled per cycle through views and struct packers (measured the cheapest ways to copy).
        reference = library.reference
        self._reference_views = [self._reference[reference[name]] for name in ("pose", "velocity", "acceleration")]
        state = library.state
        self._integral_view = self._state[state["integral"]]
        self._warm_start_packers = [
            (struct.Struct(f"{state[name].stop - state[name].start}d").pack_into, 8 * state[name].start)
            for name in ("last_q", "last_phi", "previous_q", "previous_phi")
        ]
        # The warm start (last_q, last_phi, previous_q, previous_phi) and the integrator that the
        # state buffer holds, as the Python objects the last compiled cycle left behind.
        self._held = (None, None, None, None, None)
        layout = library.outputs
        self._slices = [layout[name] for name in ("forces", "pose", "pose_error", "saturated", "phi")]
        self._scalars = slice(layout[_SCALAR_OUTPUTS[0]].start, layout[_SCALAR_OUTPUTS[-1]].stop)
        if [layout[name].start - self._scalars.start for name in _SCALAR_OUTPUTS] != list(range(len(_SCALAR_OUTPUTS))):
            raise CompilationError(f"{library.path}: the scalar outputs {_SCALAR_OUTPUTS} are not consecutive")
        self._loop_slices = [layout[name] for name in ("joint_command", "velocity_error", "integral")]
        self.finished = 0
        self.deferred: collections.Counter[str] = collections.Counter()
        self.last_status = ""

    def _pack_settings(self) -> None:
        """The settings vector, from the controller's attributes (set by its subclass) and the model."""
        controller = self.controller
        rule = controller.settings.singularity
        values = {
            **kinematic_settings(controller.model.kinematics),
            "euler_singularity_cos": dynamics.EULER_SINGULARITY_COS,
            "damping_threshold": rule.damping_threshold,
            "stop_threshold": rule.stop_threshold,
            "max_damping": rule.max_damping,
            "constraint_stop_threshold": rule.constraint_stop_threshold,
            "force_limit": controller.force_limit,
        }
        if self._double_loop:
            values.update(
                conditional_integration=float(controller.anti_windup == "conditional_integration"),
                kinematic_gain=controller.kinematic_gain,
                velocity_proportional_gain=controller.kp,
                velocity_integral_gain=controller.ki,
            )
        else:  # computed torque; the double loop's entries stay NaN, so that no use of them goes unnoticed
            values.update(position_gain=controller.position_gain, velocity_gain=controller.velocity_gain)
        for name, value in values.items():
            self._settings[self.library.settings[name]] = value
        self._settings_packed = True

    def settings(self) -> np.ndarray:
        """The settings vector the C cycle reads (packed at first use), which the compiled step passes on."""
        if not self._settings_packed:
            self._pack_settings()
        return self._settings

    def _defer(self, reason: str) -> None:
        self.deferred[reason] += 1
        self.last_status = reason

    def update(self, t, q, qd, reference):
        """The ControlOutput of one compiled cycle, or None to leave this cycle to the Python code."""
        try:
            t = float(t)
            q = np.asarray(q, dtype=float)
            qd = np.asarray(qd, dtype=float)
            pose = np.asarray(reference.pose, dtype=float)
            velocity = np.asarray(reference.velocity, dtype=float)
            acceleration = np.asarray(reference.acceleration, dtype=float)
            float(reference.t)
        except Exception:  # noqa: BLE001 - whatever it is, the Python code reports it from its own validation
            return self._defer("invalid_input")
        if not (
            q.shape == _VECTOR
            and qd.shape == _VECTOR
            and pose.shape == _VECTOR
            and velocity.shape == _VECTOR
            and acceleration.shape == _VECTOR
            and math.isfinite(t)
        ):
            return self._defer("invalid_input")
        if not self._settings_packed:
            self._pack_settings()
        controller = self.controller
        self._q[...] = q
        self._qd[...] = qd
        pose_view, velocity_view, acceleration_view = self._reference_views
        pose_view[...] = pose
        velocity_view[...] = velocity
        acceleration_view[...] = acceleration
        warm_start = controller.kinematic_state
        held_last_q, held_last_phi, held_previous_q, held_previous_phi, held_integral = self._held
        if not (
            warm_start.last_q is held_last_q
            and warm_start.last_phi is held_last_phi
            and warm_start.previous_q is held_previous_q
            and warm_start.previous_phi is held_previous_phi
        ):
            state = self._state
            for (pack, offset), values in zip(
                self._warm_start_packers,
                (warm_start.last_q, warm_start.last_phi, warm_start.previous_q, warm_start.previous_phi),
            ):
                pack(state, offset, *values)
        if self._double_loop and controller.integral is not held_integral:
            self._integral_view[...] = controller.integral

        # The double loop integrates over the time since its last update (controllers.py); computed
        # torque has no integrator and ignores the period. Both scale their feedback over the hold.
        period = controller.integration_step(t) if self._double_loop else controller.period
        code = self._function(*self._inputs, period, controller.feedback_scale(t), *self._buffers)
        if code >= len(FINISHED_STATUSES):
            return self._defer(self.library.statuses[code])

        out = self._out.copy()  # the output's arrays are views of this cycle's own copy
        forces_at, pose_at, pose_error_at, saturated_at, phi_at = self._slices
        phi = out[phi_at]
        warm_start.advance(tuple(q.tolist()), tuple(phi.tolist()))  # as the C code advanced its state
        conditioning, constraint_conditioning, iterations, residual, position_norm, orientation_norm = out[
            self._scalars
        ].tolist()
        status = self._finished_statuses[code]
        if code == 0:
            message = ""
        elif code == 1:
            message = f"forces clamped at +-{controller.force_limit} N"
        else:
            message = (
                f"J_A conditioning {conditioning:.3g} below "
                f"{controller.settings.singularity.damping_threshold}: damped least squares"
            )
        if self._double_loop:
            command_at, velocity_error_at, integral_at = self._loop_slices
            controller.desired_joint_velocity = out[command_at]
            controller.velocity_error = out[velocity_error_at]
            controller.integral = out[integral_at]
        controller._updated(t)
        self._held = (
            warm_start.last_q,
            warm_start.last_phi,
            warm_start.previous_q,
            warm_start.previous_phi,
            controller.integral if self._double_loop else None,
        )
        self.finished += 1
        self.last_status = status.value
        return self._output_type(
            t=t,
            forces=out[forces_at],
            status=status,
            message=message,
            pose=out[pose_at],
            pose_error=out[pose_error_at],
            position_error_norm=position_norm,
            orientation_error_norm=orientation_norm,
            saturated=out[saturated_at].astype(bool),
            jacobian_conditioning=conditioning,
            constraint_conditioning=constraint_conditioning,
            fk_iterations=int(iterations),
            fk_residual=residual,
        )
