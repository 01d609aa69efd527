"""The whole step per joint state in one compiled call: the Python loop as reference and fallback.

``generated/control_cycle.c`` (codegen/control_step.py) holds ``hexapod_step_intake`` (the
supervisor's intake of a joint state), ``hexapod_step_command`` (the supervisor's decision while
armed and tracking, around the delay-compensated control law), ``hexapod_step_safe`` (its ZERO or
HOLD while disarmed or faulted) and ``hexapod_step_published``. :class:`ControlLoop` (loop.py)
calls them through :class:`CompiledStep` while the supervisor is armed, tracking a reference and
past its start, and while it is disarmed or faulted (the action the step answers with is set by
the Python code, :meth:`CompiledStep.set_action`); everything else runs the Python objects, which
stay the reference: the supervisor (safety.py), the delay compensation (delay_compensation.py) and
the wrapped controller.

Ownership. The C functions keep their state in one array, ``memory``. While the loop runs them,
that array is the state of record of what they advance (the rate and period windows, the commands
in flight, the estimator, the warm starts, the integrator, the saturation and frozen windows); the
supervisor's simple fields (the feedback, the last stamp, the arrival times, the counts) are kept
current in Python at every step. :meth:`CompiledStep.release` writes the array back into the Python
objects before any Python code reads them (a deferred step, arming, a diagnostics status, a caller's
:meth:`ControlLoop.synchronize`); :meth:`CompiledStep.take` reads them in again before the next
compiled step. A step the C code does not finish (one that latches a fault, a rejected state, a
deferred numeric call, a frozen-feedback window to judge) leaves ``memory`` as it was, and the Python code
runs that step from the released state, so both paths give the same decisions and forces
(test_compiled_step.py holds them to 1e-12 on recorded sequences with every row of the rule table).

The choice follows the control cycle's (``HEXAPOD_CONTROL_CYCLE``): the step is compiled when the
control law and the delay compensation's core are (compiled_cycle.py, compiled_prediction.py).
"""

from __future__ import annotations

import collections
import ctypes
import math
import struct
import threading

import numpy as np

from hexapod_control.codegen import control_step
from hexapod_control.control import compiled_cycle, compiled_prediction, safety, stamp_period
from hexapod_control.control.controllers import ControlOutput, ControlStatus
from hexapod_control.control.delay_compensation import STAMP_TOLERANCE, DelayCompensatedController, DelayEstimator
from hexapod_control.control.trajectories import Reference
from hexapod_control.errors import CompilationError
from hexapod_control.model import compiled
from hexapod_control.model.kinematics import KinematicState

_LAW_STATUSES = (ControlStatus.OK, ControlStatus.SATURATED, ControlStatus.NEAR_SINGULAR)
_TAKEN, _REPEATED, _ANSWERED = 0, 1, 2  # the first step statuses (StepLibrary checks them)


class StepLibrary:
    """The step functions of a loaded library and the layouts of their arrays (read from it)."""

    def __init__(self, prediction: compiled_prediction.PredictionLibrary, library, path):
        layout = compiled_cycle.read_layout
        try:
            self.settings = layout(library, "hexapod_step_settings", path)
            self.memory = layout(library, "hexapod_step_memory", path)
            self.inputs = layout(library, "hexapod_step_inputs", path)
            self.outputs = layout(library, "hexapod_step_outputs", path)
            self.statuses = tuple(compiled.read_string(library, "hexapod_step_statuses").split())
            self.intake = library["hexapod_step_intake"]
            self.command = library["hexapod_step_command"]
            self.published = library["hexapod_step_published"]
            self.message = library["hexapod_step_message"]
            self.safe = library["hexapod_step_safe"]
        except (ValueError, AttributeError) as error:  # a symbol is missing
            raise CompilationError(f"{path} has no compiled step: {error}") from error
        if self.statuses[:3] != ("taken", "repeated", "answered"):
            raise CompilationError(f"{path}: step statuses {self.statuses} do not begin with taken, repeated, control")
        pointer = ctypes.c_void_p
        self.intake.argtypes = [pointer] * 3
        self.command.argtypes = [pointer] * 7
        self.safe.argtypes = [pointer] * 6
        self.published.argtypes = [pointer, pointer, ctypes.c_double, ctypes.c_double]
        self.message.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_long, ctypes.c_int]
        for function in (self.intake, self.command, self.published, self.message, self.safe):
            function.restype = ctypes.c_int
        self.prediction = prediction
        self.cycle = prediction.cycle
        self.path = path
        self._library = library  # keeps it loaded


_libraries: dict[str, StepLibrary | None] = {}
_libraries_lock = threading.Lock()


def step_library(choice: str | None = None) -> StepLibrary | None:
    """The library for ``choice`` or ``$HEXAPOD_CONTROL_CYCLE`` (auto|python|c), None for Python."""
    return compiled.memoised_choice(
        choice, compiled_cycle.CYCLE_VARIABLE, compiled_cycle.CHOICES, _libraries, _libraries_lock, _load
    )


def _load(choice: str) -> StepLibrary | None:
    prediction = compiled_prediction.prediction_library(choice)
    if prediction is None:
        return None
    terms = compiled.select_backend("c" if choice == "c" else "auto")
    return StepLibrary(prediction, terms.LIBRARY, terms.LIBRARY_PATH)


def attach(loop, choice: str | None = None) -> CompiledStep | None:
    """The compiled step of ``loop`` (a ControlLoop), or None when its steps are to run in Python.

    Compiled when the controller is delay-compensated with its numeric core and its law in C, and
    its windows fit the C code's capacities."""
    controller = loop.controller
    if not isinstance(controller, DelayCompensatedController) or controller.core is None:
        return None
    law = controller.controller
    if law.cycle is None:
        return None
    if (controller.flight.sent.maxlen > control_step.FLIGHT_CAPACITY or safety.RATE_WINDOW != control_step.RATE_WINDOW
            or stamp_period.WINDOW != control_step.PERIOD_WINDOW):
        return None
    library = step_library(choice)
    return None if library is None else CompiledStep(library, loop)


class CompiledStep:
    """One loop's compiled step: its memory, its packed constants and the counts of its steps.

    ``finished`` counts the calls the C code finished by status, ``deferred`` the others by status.
    """

    def __init__(self, library: StepLibrary, loop):
        self.library = library
        self.supervisor = loop.supervisor
        self.controller: DelayCompensatedController = loop.controller
        self.law = self.controller.controller
        self._pose_state = loop.pose_state  # the warm start of the poses the Python loop solves itself
        self._double_loop = self.law.name == "double_loop"
        size = compiled_cycle.CycleLibrary.size
        self.memory = np.zeros(size(library.memory))
        self._inputs = np.zeros(size(library.inputs))
        self._out = np.zeros(size(library.outputs))
        self._settings = self._pack_settings()
        prediction = self.controller.core  # its packed drives, kinematic settings and parameters
        self._cycle_settings = self.law.cycle.settings()
        constants = (self._settings, self._cycle_settings, *prediction.constant_arrays())
        self._constants = constants  # kept alive: the C code reads them through these addresses
        inputs = library.inputs
        # The inputs in two packs, each one struct call: the joint state (intake), then what the
        # command adds (the effort and the reference), laid out as the library says.
        order = list(inputs)
        if order != ["now", "stamp", "q", "qd", "effort_given", "effort", "reference", "reference_received"]:
            raise CompilationError(f"{library.path}: step inputs {order} are not in the order packed here")
        self._pack_state = struct.Struct(f"{inputs['qd'].stop}d").pack_into
        self._pack_command = struct.Struct(f"{inputs['reference_received'].stop - inputs['effort_given'].start}d").pack_into
        self._command_offset = 8 * inputs["effort_given"].start
        outputs = library.outputs
        self._output_slices = [outputs[name] for name in ("forces", "saturated", "pose", "pose_error")]
        self._output_scalars = [outputs[name].start for name in (
            "position_error_norm", "orientation_error_norm", "law_status", "jacobian_conditioning",
            "constraint_conditioning", "fk_iterations", "fk_residual")]
        # Pointers made once: each call then passes them without converting its arguments.
        inputs_at, memory_at, settings_at = (ctypes.c_void_p(buffer.ctypes.data)
                                             for buffer in (self._inputs, self.memory, self._settings))
        self._command = _unconverted(library.command)
        self._intake = _unconverted(library.intake)
        self._command_arguments = (inputs_at, memory_at, settings_at,
                                   *(ctypes.c_void_p(buffer.ctypes.data) for buffer in constants[1:]),
                                   ctypes.c_void_p(self._out.ctypes.data))
        self._intake_arguments = (inputs_at, memory_at, settings_at)
        cycle_settings_at, _, parameters_at, out_at = self._command_arguments[3:]
        self._safe = _unconverted(library.safe)
        self._safe_arguments = (inputs_at, memory_at, settings_at, cycle_settings_at, parameters_at, out_at)
        self._action_at = library.memory["action"].start
        self.action = safety.Action.CONTROL  # what the step answers a taken state with (set_action)
        self._published = library.published
        self._published_arguments = (memory_at, settings_at)
        self._loop_slices = (outputs["joint_command"], outputs["velocity_error"])
        self._phi_slice = outputs["phi"]
        self.last_phi: np.ndarray | None = None  # passive angles of the last state a finished step measured
        self._cycle_status_at = outputs["cycle_status"].start
        self.owned = False  # True while `memory` is the state of record
        self._message = library.message
        self._message_arrays = None  # set by serve_messages
        self._stamp_at, self._effort_given_at = inputs["stamp"].start, inputs["effort_given"].start
        self._state_slices = (inputs["q"], inputs["qd"], inputs["effort"])
        self._reference_slice = inputs["reference"]
        self._intake_at, self._law_status_at = outputs["intake"].start, outputs["law_status"].start
        self.finished: collections.Counter[str] = collections.Counter()
        self.deferred: collections.Counter[str] = collections.Counter()
        self._controlled = False  # a command finished since the memory was packed

    # -------------------------------------------------------------- constants
    def _pack_settings(self) -> np.ndarray:
        supervisor, controller, law = self.supervisor, self.controller, self.controller.controller
        settings, limits = supervisor.settings, supervisor.limits
        estimator = controller.estimator
        values = {
            "max_future_stamp": settings.max_future_stamp,
            "max_feedback_age": settings.max_feedback_age,
            "plausible_position_margin": settings.plausible_position_margin,
            "plausible_speed_factor": settings.plausible_speed_factor,
            "plausible_step_margin": settings.plausible_step_margin,
            "reference_timeout": settings.reference_timeout,
            "max_saturation_time": settings.max_saturation_time,
            "frozen_feedback_time": settings.frozen_feedback_time,
            "position_min": limits.actuator_position_min,
            "position_max": limits.actuator_position_max,
            "min_slider_separation": limits.min_slider_separation,
            "speed_max": limits.actuator_speed_max,
            "force_limit": limits.actuator_force_max,
            "rate_min": supervisor.valid_rates.min,
            "rate_max": supervisor.valid_rates.max,
            "rate_tolerance": safety.RATE_TOLERANCE,
            "rate_known_spacings": safety.RATE_KNOWN_SPACINGS,
            "rate_window": safety.RATE_WINDOW,
            "rate_drop_span": safety.RATE_DROP_SPAN_S,
            "period_window": stamp_period.WINDOW,
            "nominal_period": controller.nominal_period,
            "flight_length": controller.flight.sent.maxlen,
            "stamp_tolerance": STAMP_TOLERANCE,
            "estimate": float(estimator is not None),
            "max_delay_periods": estimator.max_periods if estimator is not None else 0,
            "longest_delay": controller.flight.longest,
            "estimator_time_constant": estimator.time_constant if estimator is not None else math.nan,
            "switch_ratio": DelayEstimator.SWITCH_RATIO,
            "double_loop": float(self._double_loop),
            "law_period": law.period,
            "longest_period": law.valid_rates.longest_period,
            "max_reference_position_step": settings.max_reference_position_step,
            "max_reference_angle_step": settings.max_reference_angle_step,
            "hold_damping": settings.hold_damping,
            "hold_force_limit": min(settings.hold_force_max, limits.actuator_force_max),
        }
        layout = self.library.settings
        packed = np.full(compiled_cycle.CycleLibrary.size(layout), math.nan)
        for name, value in values.items():
            packed[layout[name]] = value
        if list(values) != list(layout):
            raise CompilationError(f"{self.library.path}: step settings {list(layout)} differ from {list(values)}")
        return packed

    # -------------------------------------------------------------- ownership
    def take(self) -> None:
        """Read the Python objects' state into ``memory``, which becomes the state of record."""
        supervisor, controller, law = self.supervisor, self.controller, self.law
        view = self._view
        view("last_stamp")[...] = supervisor.last_stamp
        last_valid = supervisor.last_valid
        view("last_valid")[...] = last_valid is not None
        if last_valid is not None:
            view("last_valid_stamp")[...] = last_valid.stamp
            view("last_valid_q")[...] = last_valid.q
            view("last_valid_qd")[...] = last_valid.qd
        _pack_window(view("rate"), supervisor.joint_state_period, control_step.RATE_WINDOW)
        view("saturated_since")[...] = _nan_for_none(supervisor.saturated_since)
        view("frozen_since")[...] = _nan_for_none(supervisor.frozen_since)
        view("frozen_force_sum")[...] = supervisor.frozen_force_sum
        view("frozen_commands")[...] = supervisor.frozen_commands
        _pack_window(view("period"), controller.flight.stamps, control_step.PERIOD_WINDOW)
        sent = view("sent")
        sent[:] = 0.0
        length = controller.flight.sent.maxlen
        for slot, (stamp, forces, lateness) in enumerate(controller.flight.sent):
            entry = sent[2 + control_step.SENT_ENTRY * slot: 2 + control_step.SENT_ENTRY * (slot + 1)]
            entry[0], entry[1], entry[2:] = stamp, lateness, forces
        sent[0], sent[1] = len(controller.flight.sent), len(controller.flight.sent) % length
        effort = controller.flight.effort
        view("effort_stamp")[...] = math.nan if effort is None else effort[0]
        if effort is not None:
            view("effort")[...] = effort[1]
        measurement = controller.flight.last_measurement
        view("measurement")[...] = measurement is not None
        if measurement is not None:
            for name, value in zip(("measurement_t", "measurement_q", "measurement_qd", "measurement_phi"), measurement):
                view(name)[...] = value
        estimator = controller.estimator
        misfits = view("misfits")
        misfits[:] = 0.0
        if estimator is not None:
            misfits[: len(estimator.misfits)] = estimator.misfits
            view("estimate_changes")[...] = estimator.changes
        view("delay_periods")[...] = controller.delay_periods
        prediction = controller.prediction
        view("prediction")[...] = prediction is not None
        if prediction is not None:
            view("prediction_q")[...], view("prediction_qd")[...] = prediction
        _pack_warm_start(view("measured_state"), controller.measured_state)
        _pack_warm_start(view("safe_state"), self._pose_state)
        law_state = view("law_state")
        _pack_warm_start(law_state, law.kinematic_state)
        if self._double_loop:
            law_state[18:24] = law.integral
        view("updated_at")[...] = _nan_for_none(law.updated_at)
        ramp = supervisor.ramp
        view("ramp")[...] = ramp is not None
        if ramp is not None:
            view("ramp_start")[...], view("ramp_duration")[...] = ramp.start_time, ramp.duration
            view("ramp_start_pose")[...], view("ramp_displacement")[...] = ramp.start_pose, ramp.displacement
            view("ramp_target")[...] = ramp.target_pose
        self._controlled = False
        self._pack_reference()
        self.owned = True

    def _pack_reference(self) -> None:
        """The supervisor's reference into ``memory``: the last one, which the next message's steps from."""
        view, received = self._view, self.supervisor.reference
        view("reference_taken")[...] = 0.0
        if received is not None:
            reference = received.reference
            view("reference_t")[...], view("reference_received")[...] = reference.t, received.received
            view("reference")[...] = np.concatenate((reference.pose, reference.velocity, reference.acceleration))
        else:  # none: NaN steps compare false, so the step is not checked, as the supervisor does not check it
            view("reference")[...] = math.nan

    def _unpack_reference(self) -> None:
        """The reference a message step took last, if any since the last packing, to the supervisor."""
        view = self._view
        if view("reference_taken")[0]:
            values = view("reference").copy()
            reference = Reference(float(view("reference_t")[0]), values[:6], values[6:12], values[12:])
            self.supervisor.reference = safety.ReceivedReference(reference, float(view("reference_received")[0]))
            view("reference_taken")[...] = 0.0

    def release_reference(self) -> None:
        """Bring the supervisor's reference up to date (before Python code takes or reads one)."""
        if self.owned:
            self._unpack_reference()

    def take_reference(self) -> None:
        """The supervisor's reference, just taken by the Python code, into ``memory``."""
        if self.owned:
            self._pack_reference()

    def joint_state_rate(self) -> float:
        """The supervisor's ``joint_state_rate``, read from ``memory`` while the step owns the state,
        so that a diagnostics status does not cost a release and a retake of all of it."""
        if not self.owned:
            return self.supervisor.joint_state_rate
        period = stamp_period.StampPeriod(self.supervisor.joint_state_period.window)
        _unpack_window(self._view("rate"), period, control_step.RATE_WINDOW)
        return 1.0 / period.median(math.nan)

    def release(self) -> None:
        """Write ``memory`` back into the Python objects, which become the state of record again."""
        if not self.owned:
            return
        self.owned = False
        supervisor, controller, law = self.supervisor, self.controller, self.law
        view = self._view
        supervisor.last_stamp = float(view("last_stamp")[0])
        _unpack_window(view("rate"), supervisor.joint_state_period, control_step.RATE_WINDOW)
        supervisor.saturated_since = _none_for_nan(view("saturated_since")[0])
        supervisor.frozen_since = _none_for_nan(view("frozen_since")[0])
        supervisor.frozen_force_sum = view("frozen_force_sum").copy()
        supervisor.frozen_commands = int(view("frozen_commands")[0])
        if not view("ramp")[0]:
            supervisor.ramp = None  # reached in a message step (SafetySupervisor.tracked_reference)
        _unpack_window(view("period"), controller.flight.stamps, control_step.PERIOD_WINDOW)
        sent = view("sent")
        count, next_slot = int(sent[0]), int(sent[1])
        length = controller.flight.sent.maxlen
        controller.flight.sent.clear()
        for back in range(count - 1, -1, -1):
            slot = (next_slot - 1 - back) % length
            entry = sent[2 + control_step.SENT_ENTRY * slot: 2 + control_step.SENT_ENTRY * (slot + 1)]
            controller.flight.sent.append((float(entry[0]), entry[2:].copy(), int(entry[1])))
        effort_stamp = view("effort_stamp")[0]
        controller.flight.effort = None if math.isnan(effort_stamp) else (float(effort_stamp), view("effort").copy())
        if view("measurement")[0]:
            controller.flight.last_measurement = (float(view("measurement_t")[0]), view("measurement_q").copy(),
                                                  view("measurement_qd").copy(), view("measurement_phi").copy())
        else:
            controller.flight.last_measurement = None
        estimator = controller.estimator
        delay = int(view("delay_periods")[0])
        controller.delay_periods = delay
        if estimator is not None:
            estimator.misfits = view("misfits")[: len(estimator.misfits)].copy()
            estimator.periods = delay
            estimator.changes = int(view("estimate_changes")[0])
        if view("prediction")[0]:
            controller.prediction = (view("prediction_q").copy(), view("prediction_qd").copy())
        _unpack_warm_start(view("measured_state"), controller.measured_state)
        _unpack_warm_start(view("safe_state"), self._pose_state)
        law_state = view("law_state")
        _unpack_warm_start(law_state, law.kinematic_state)
        law.updated_at = _none_for_nan(view("updated_at")[0])
        self._unpack_reference()
        if self._double_loop:
            law.integral = law_state[18:24].copy()
            if self._controlled:  # the law's outputs of the last command the C code finished
                law.desired_joint_velocity, law.velocity_error = (self._out[at].copy() for at in self._loop_slices)

    def _view(self, name: str) -> np.ndarray:
        return self.memory[self.library.memory[name]]

    # -------------------------------------------------------------- the step
    def intake(self, now: float, stamp: float, q: np.ndarray, qd: np.ndarray) -> str:
        """Take a joint state (arrays in joint order): "taken", "repeated", or the status that defers it."""
        if not self.owned:
            self.take()
        self._pack_state(self._inputs, 0, now, stamp, *q, *qd)
        code = self._intake(*self._intake_arguments)
        status = self.library.statuses[code]
        if code > _REPEATED:
            self._defer(status)
        else:
            self.finished[status] += 1
        return status

    def command(self, stamp: float, effort: np.ndarray | None, reference, received: float):
        """The ControlOutput of a CONTROL decision for the state just taken by ``intake`` (its clock,
        stamp and arrays are still in the inputs), or None when the step is left to the Python code."""
        self._pack_command(self._inputs, self._command_offset, *((0.0,) * 7 if effort is None else (1.0, *effort)),
                           *reference.pose, *reference.velocity, *reference.acceleration, received)
        code = self._command(*self._command_arguments)
        if code != _ANSWERED:
            self._defer(self.library.statuses[code])
            return None
        self.finished["answered"] += 1
        self._controlled = True
        return self.output(stamp)

    def set_action(self, action: safety.Action) -> None:
        """What the next taken states are answered with: CONTROL (the command step, against the grid's
        reference for a message), or the ZERO or HOLD of a disarmed or faulted supervisor
        (hexapod_step_safe). Not state the Python objects hold: set whenever the step is handed over."""
        self.action = action
        self.memory[self._action_at] = control_step.ACTIONS.index(action.value)

    def safe(self, effort: np.ndarray | None) -> bool:
        """Answer the state just taken by ``intake`` with the memory's ZERO or HOLD (hexapod_step_safe);
        False when the step is left to the Python code (its pose or hold force not computable)."""
        inputs = self._inputs
        inputs[self._effort_given_at] = effort is not None
        inputs[self._state_slices[2]] = 0.0 if effort is None else effort
        code = self._safe(*self._safe_arguments)
        if code != _ANSWERED:
            self._defer(self.library.statuses[code])
            return False
        self.finished["answered"] += 1
        return True

    def safe_answer(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(forces, saturated flags, pose, phi) of the last answer of hexapod_step_safe."""
        out = self._out.copy()
        forces, saturated, pose, _ = (out[at] for at in self._output_slices)
        return forces, saturated != 0.0, pose, out[self._phi_slice]

    def output(self, stamp: float) -> ControlOutput:
        """The ControlOutput of the last finished command (a command call's or a message's answer),
        which answered the state stamped ``stamp``."""
        out = self._out.copy()  # the output's arrays are views of this step's own copy
        forces, saturated, pose, pose_error = (out[at] for at in self._output_slices)
        self.last_phi = out[self._phi_slice]
        position_norm, orientation_norm, law_status, conditioning, constraint, iterations, residual = (
            out[self._output_scalars].tolist())
        status = _LAW_STATUSES[int(law_status)]
        message = ""
        if status == ControlStatus.SATURATED:
            message = f"forces clamped at +-{self.law.force_limit} N"
        elif status == ControlStatus.NEAR_SINGULAR:
            message = (f"J_A conditioning {conditioning:.3g} below "
                       f"{self.law.settings.singularity.damping_threshold}: damped least squares")
        return ControlOutput(
            t=stamp, forces=forces, status=status, message=message, pose=pose, pose_error=pose_error,
            position_error_norm=position_norm, orientation_error_norm=orientation_norm,
            saturated=saturated != 0.0, jacobian_conditioning=conditioning,
            constraint_conditioning=constraint, fk_iterations=int(iterations), fk_residual=residual,
        )

    # -------------------------------------------------------------- serialized messages
    def serve_messages(self, wire: np.ndarray, learned: bytes, grid: np.ndarray, command: bytes) -> None:
        """Take joint states as their bytes (:meth:`message`). ``wire``: their layout, as
        control_step.WIRE_FIELDS says; ``learned``: the message it was learned from; ``grid``: the
        reference grid's array (reference_grid.py), read at each stamp; ``command``: a serialized
        command, whose forces each answer writes in a copy (:attr:`command_bytes`)."""
        self._wire = np.ascontiguousarray(wire, dtype=np.int64)
        self._learned = np.frombuffer(bytes(learned), dtype=np.uint8)
        self._grid = grid
        self._command_buffer = ctypes.create_string_buffer(bytes(command), len(command))
        buffers = (self._inputs, self.memory, *self._constants, self._out, self._wire, self._learned, grid)
        self._message_arrays = (ctypes.c_void_p * 11)(*(buffer.ctypes.data for buffer in buffers),
                                                      ctypes.addressof(self._command_buffer))

    def grid_arrays(self, grid: np.ndarray):
        """The arrays of :meth:`serve_messages` around ``grid`` alone, for a caller that fills the
        inputs itself (the compiled lockstep loop, codegen/lockstep.py): no message is read."""
        buffers = (self._inputs, self.memory, *self._constants, self._out)
        return (ctypes.c_void_p * 11)(*(buffer.ctypes.data for buffer in buffers), None, None, grid.ctypes.data, None)

    @property
    def serving(self) -> bool:
        return self._message_arrays is not None

    def message(self, now: float, data: bytes, answer: bool) -> str:
        """Take (``answer``: and answer) a serialized joint state: the status of hexapod_step_message."""
        if not self.owned:
            self.take()
        self._inputs[0] = now
        status = self.library.statuses[self._message(self._message_arrays, data, len(data), answer)]
        if status in ("taken", "repeated", "answered"):
            self.finished[status] += 1
            self._controlled |= status == "answered" and self.action == safety.Action.CONTROL
        elif status not in ("layout", "grid"):
            self._defer(status)
        return status

    # What an rcl loop in C needs to run the message step itself (ros/native_loop.py).
    @property
    def message_arrays(self):
        return self._message_arrays

    @property
    def message_address(self) -> int:
        return ctypes.cast(self._message, ctypes.c_void_p).value

    @property
    def published_address(self) -> int:
        return ctypes.cast(self._published, ctypes.c_void_p).value

    @property
    def command_length(self) -> int:
        return len(self._command_buffer)

    def served(self, answers: int, taken: int, repeated: int) -> None:
        """Count the steps an rcl loop in C ran on ``memory`` (which it owned meanwhile)."""
        self.finished["answered"] += answers
        self.finished["taken"] += taken
        self.finished["repeated"] += repeated
        self._controlled |= answers > 0 and self.action == safety.Action.CONTROL

    def last_valid(self) -> tuple[float, np.ndarray, np.ndarray]:
        """(stamp, q, qd) of the last valid state the C code took."""
        view = self._view
        return float(view("last_valid_stamp")[0]), view("last_valid_q").copy(), view("last_valid_qd").copy()

    @property
    def command_bytes(self) -> bytes:
        """The serialized command of the last answer."""
        return self._command_buffer.raw

    def message_intake(self) -> str:
        """The intake's status of the last message (which a status other than control left to Python)."""
        return self.library.statuses[int(self._out[self._intake_at])]

    def message_state(self) -> tuple[float, np.ndarray, np.ndarray, tuple]:
        """(stamp, q, qd, efforts) of the last message read: efforts () when it had no effort field."""
        inputs = self._inputs
        q, qd, effort = (inputs[at].copy() for at in self._state_slices)
        return float(inputs[self._stamp_at]), q, qd, tuple(effort.tolist()) if inputs[self._effort_given_at] else ()

    def message_reference(self) -> Reference:
        """The reference the last message was answered against (read off the grid at its stamp)."""
        values = self._inputs[self._reference_slice].copy()
        return Reference(float(self._inputs[self._stamp_at]), values[:6], values[6:12], values[12:])

    def law_ok(self) -> bool:
        """The last finished command's law status was ok (not saturated, not near singular)."""
        return self._out[self._law_status_at] == 0.0

    def published(self, stamp: float, when: float) -> None:
        """DelayCompensatedController.published on ``memory``."""
        self._published(*self._published_arguments, stamp, when)

    def _defer(self, status: str) -> None:
        """Count a call the C code left to Python, by its reason (and the numeric core's status)."""
        reason = status
        if status in ("measure", "applied_force", "predict", "law"):
            reason = f"{status}: {self.library.cycle.statuses[int(self._out[self._cycle_status_at])]}"
            self._out[self._cycle_status_at] = 0.0
        self.deferred[reason] += 1


def _unconverted(function):
    """The same C function, called with ready ctypes arguments (no per-call conversion)."""
    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.cast(function, ctypes.c_void_p).value)


# ------------------------------------------------------------------------------------------ packing
def _nan_for_none(value: float | None) -> float:
    return math.nan if value is None else value


def _none_for_nan(value) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def _pack_window(block: np.ndarray, period: stamp_period.StampPeriod, window: int) -> None:
    """A StampPeriod into its C block: count, next slot, last stamp, the ring and the sorted spacings."""
    spacings, last = period.snapshot()
    header = control_step.WINDOW_HEADER
    block[:] = 0.0
    block[0], block[1] = len(spacings), len(spacings) % window
    block[2] = _nan_for_none(last)
    block[header: header + len(spacings)] = spacings
    block[header + window: header + window + len(spacings)] = sorted(spacings)


def _unpack_window(block: np.ndarray, period: stamp_period.StampPeriod, window: int) -> None:
    count, next_slot = int(block[0]), int(block[1])
    ring = block[control_step.WINDOW_HEADER: control_step.WINDOW_HEADER + window]
    period.restore((ring[(next_slot - count + k) % window] for k in range(count)), _none_for_nan(block[2]))


def _pack_warm_start(block: np.ndarray, state: KinematicState) -> None:
    block[0:6], block[6:9], block[9:15], block[15:18] = (getattr(state, name) for name in compiled_prediction.WARM_START)


def _unpack_warm_start(block: np.ndarray, state: KinematicState) -> None:
    values = block[:18].tolist()
    state.last_q, state.last_phi = tuple(values[0:6]), tuple(values[6:9])
    state.previous_q, state.previous_phi = tuple(values[9:15]), tuple(values[15:18])
