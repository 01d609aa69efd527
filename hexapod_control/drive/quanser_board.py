"""A Quanser HIL board through the Quanser SDK's Python API (``quanser.hardware``).

NOT RUN ON HARDWARE. Written from Quanser's HIL documentation and examples; tested only against a
stand-in of ``quanser.hardware`` that records every call (test/test_quanser_board.py). Follow
doc/quanser_driver.md before it drives a robot.

``quanser.hardware`` ships inside Quanser's SDK, not on PyPI; it is imported when this board is
built, so the rest of the package works without it. Calls, in the order the core makes them:

- open: ``HIL().open(board_type, board_identifier)``; the digital lines' directions
  (``set_digital_directions``: fault lines in, direction, enable and brake lines out); PWM in
  duty-cycle mode at ``pwm_frequency`` (``set_pwm_mode``, ``set_pwm_frequency``); then the safe
  outputs: zero duty, amplifiers disabled, brakes applied. A step that fails closes the board again.
- expiration states, before ``watchdog_start``: ``watchdog_set_analog_expiration_state`` (0 V on
  every analog output of ``channels.analog_outputs``), ``watchdog_set_digital_expiration_state``
  (every line of ``channels.digital_lines`` TRISTATE) and ``watchdog_set_pwm_expiration_state``
  (zero duty). A Q8-series board accepts an expiry only as 0 V and TRISTATE, and only on all its
  outputs at once (read here as every line, input or output, which either reading accepts), so the
  amplifiers' enable and the brakes must be wired so that a floating line means disabled and
  applied. Quanser documents the PWM expiration state as not configurable on current boards: a
  board that answers "not supported" leaves its PWM duty as it was on expiry, and the tristated
  enable lines alone stop the motors (``pwm_expiration_set`` says which; the driver's /diagnostics
  carry it as ``pwm_zeroed_on_watchdog_expiry``).
- sampling: ``task_create_reader`` over the encoders, the fault lines and the encoder velocities
  ("other" channels), started on ``Clock.HARDWARE_CLOCK_0`` at ``sample_rate``, its buffer as long
  as the watchdog's timeout; each ``read`` is a blocking ``task_read`` of one sample, which paces
  the loop by the board's clock. A read that returns no sample (the task stopped, as an overflowing
  buffer stops it) is a board error; starting the sampling again after a reset makes a new task.
- every sample: ``watchdog_reload``, whose answer says whether the watchdog had expired, then one
  ``write`` of the PWM amplitudes and direction lines; enable and brake lines by
  ``write_digital`` when they change.
- clearing an expiry (the operator's reset): ``watchdog_stop``, ``watchdog_clear`` (which restores
  the outputs as they were before the expiry, where the board can), then at once the safe outputs.
- close: safe outputs (refused while the watchdog is expired), ``watchdog_stop``,
  ``watchdog_clear``, safe outputs again, ``task_stop``, ``task_delete``, ``close``.
"""

from __future__ import annotations

import importlib
import math

import numpy as np

from hexapod_control.drive.board import Board, BoardSample
from hexapod_control.drive.core import SLIDERS
from hexapod_control.errors import BoardError, ParameterError
from hexapod_control.model.board_parameters import BoardParameters

HIL_MODULE = "quanser.hardware"
SAMPLES_PER_READ = 1
# HIL.INFINITE (hil.h's HIL_INFINITE), for the Python APIs whose HIL class does not define it.
HIL_INFINITE = 0x7FFFFFFF
# quanser.common.ErrorCode.HIL_WATCHDOG_SET_PWM_EXPIRATION_STATE_NOT_SUPPORTED; HILError carries it negated.
PWM_EXPIRATION_NOT_SUPPORTED = 593


def load_hil():
    """The ``quanser.hardware`` module; ParameterError naming the SDK when it is not installed."""
    try:
        return importlib.import_module(HIL_MODULE)
    except ImportError as error:
        raise ParameterError(
            f"the quanser board needs {HIL_MODULE} from Quanser's SDK (its Python wheels ship with the SDK, not on "
            f"PyPI): {error}"
        ) from error


class QuanserBoard(Board):
    """The board of ``parameters`` (its ``board:`` section) through ``quanser.hardware.HIL``."""

    def __init__(self, parameters: BoardParameters, hil_module=None):
        self.hardware = hil_module if hil_module is not None else load_hil()
        self.parameters = parameters
        channels, levels = parameters.channels, parameters.levels
        self._encoders = np.array(channels.encoder_channels, dtype=np.uint32)
        self._velocities = np.array(channels.velocity_channels, dtype=np.uint32)
        self._pwm = np.array(channels.pwm_channels, dtype=np.uint32)
        self._directions = np.array(channels.direction_channels, dtype=np.uint32)
        self._enables = np.array(channels.enable_channels, dtype=np.uint32)
        self._brakes = np.array(channels.brake_channels, dtype=np.uint32)
        self._faults = np.array(channels.fault_channels, dtype=np.uint32)
        self._outputs = np.concatenate([self._directions, self._enables, self._brakes])
        self._levels = levels
        self._counts = np.zeros(SLIDERS, dtype=np.int32)
        self._fault_lines = np.zeros(SLIDERS, dtype=np.int8)
        self._count_rates = np.zeros(SLIDERS, dtype=np.float64)
        self._amplitudes = np.zeros(SLIDERS, dtype=np.float64)
        self._direction_lines = np.zeros(SLIDERS, dtype=np.int8)
        self._analog_outputs = np.array(channels.analog_outputs, dtype=np.uint32)
        self._digital_lines = np.array(channels.digital_lines, dtype=np.uint32)
        limits = parameters.limits
        # A loop late by less than the watchdog's timeout finds its samples waiting; later, the
        # watchdog expires anyway.
        self.samples_in_buffer = max(2, math.ceil(limits.watchdog_timeout * limits.sample_rate))
        self.card = None
        self.task = None

    def _call(self, name: str, *arguments):
        """``card.name(*arguments)``, a HILError turned into a BoardError naming the call."""
        try:
            return getattr(self.card, name)(*arguments)
        except self.hardware.HILError as error:
            raise BoardError(f"{name}: {error.get_error_message()}") from error

    @staticmethod
    def _lines(value: bool, count: int) -> np.ndarray:
        return np.full(count, int(value), dtype=np.int8)

    # ---------------------------------------------------------------- Board
    def open(self) -> None:
        card = self.hardware.HIL()
        try:
            card.open(self.parameters.board_type, self.parameters.board_identifier)
        except self.hardware.HILError as error:
            raise BoardError(f"open {self.parameters.board_type} {self.parameters.board_identifier}: "
                             f"{error.get_error_message()}") from error
        self.card = card
        try:
            self._configure()
        except BoardError:
            self._release()
            raise

    def _configure(self) -> None:
        self._call("set_digital_directions", self._faults, len(self._faults), self._outputs, len(self._outputs))
        modes = np.full(SLIDERS, self.hardware.PWMMode.DUTY_CYCLE, dtype=np.int32)
        self._call("set_pwm_mode", self._pwm, SLIDERS, modes)
        frequencies = np.full(SLIDERS, self.parameters.scaling.pwm_frequency, dtype=np.float64)
        self._call("set_pwm_frequency", self._pwm, SLIDERS, frequencies)
        self.write_duty(np.zeros(SLIDERS))
        self.set_amplifiers(False)
        self.set_brakes(False)

    def set_expiration_states(self) -> None:
        if len(self._analog_outputs):
            zero_volts = np.zeros(len(self._analog_outputs), dtype=np.float64)
            self._call("watchdog_set_analog_expiration_state", self._analog_outputs, len(self._analog_outputs), zero_volts)
        tristate = np.full(len(self._digital_lines), self.hardware.DigitalState.TRISTATE, dtype=np.int32)
        self._call("watchdog_set_digital_expiration_state", self._digital_lines, len(self._digital_lines), tristate)
        try:
            self.card.watchdog_set_pwm_expiration_state(self._pwm, SLIDERS, np.zeros(SLIDERS, dtype=np.float64))
            self.pwm_expiration_set = True
        except self.hardware.HILError as error:
            if abs(getattr(error, "error_code", 0)) != PWM_EXPIRATION_NOT_SUPPORTED:
                raise BoardError(f"watchdog_set_pwm_expiration_state: {error.get_error_message()}") from error
            self.pwm_expiration_set = False

    def start_watchdog(self, timeout: float) -> None:
        self._call("watchdog_start", timeout)

    def start_sampling(self, rate: float) -> None:
        self._stop_sampling()
        self.task = self._call("task_create_reader", self.samples_in_buffer, None, 0, self._encoders, SLIDERS,
                               self._faults, SLIDERS, self._velocities, SLIDERS)
        samples = getattr(self.hardware.HIL, "INFINITE", HIL_INFINITE)
        self._call("task_start", self.task, self.hardware.Clock.HARDWARE_CLOCK_0, rate, samples)

    def _stop_sampling(self) -> None:
        if self.task is not None:
            task, self.task = self.task, None
            self._call("task_stop", task)
            self._call("task_delete", task)

    def read(self) -> BoardSample:
        read = self._call("task_read", self.task, SAMPLES_PER_READ, None, self._counts, self._fault_lines,
                          self._count_rates)
        # Quanser's task_read returns the samples it read; a stand-in of the API that returns
        # nothing is taken to have filled the buffers.
        if read is not None and read < SAMPLES_PER_READ:
            raise BoardError("task_read: no sample, the board's sampling task has stopped (a buffer overflow stops it)")
        faults = self._fault_lines.astype(bool) == self._levels.fault_active_high
        return BoardSample(counts=self._counts.astype(float), count_rates=self._count_rates.copy(), amplifier_faults=faults)

    def reload_watchdog(self) -> bool:
        reloaded = self._call("watchdog_reload")  # False: it had expired (None from a stand-in that says nothing)
        return reloaded is not None and not reloaded

    def write_duty(self, duty: np.ndarray) -> None:
        duty = np.clip(np.asarray(duty, dtype=float), -1.0, 1.0)
        self._amplitudes[:] = np.abs(duty)
        self._direction_lines[:] = (duty < 0.0) == self._levels.reverse_direction_high
        # One write for amplitudes and directions: one transaction with the board per sample.
        self._call("write", None, 0, self._pwm, SLIDERS, self._directions, SLIDERS, None, 0,
                   None, self._amplitudes, self._direction_lines, None)

    def set_amplifiers(self, enabled: bool) -> None:
        lines = self._lines(enabled == self._levels.enable_active_high, SLIDERS)
        self._call("write_digital", self._enables, SLIDERS, lines)

    def set_brakes(self, released: bool) -> None:
        lines = self._lines(released == self._levels.brake_release_high, len(self._brakes))
        self._call("write_digital", self._brakes, len(self._brakes), lines)

    def clear_watchdog(self) -> None:
        self._call("watchdog_stop")
        self._call("watchdog_clear")
        self._safe_outputs()  # the clear may have restored the outputs from before the expiry

    def _safe_outputs(self) -> None:
        self.write_duty(np.zeros(SLIDERS))
        self.set_amplifiers(False)
        self.set_brakes(False)

    def close(self) -> None:
        if self.card is None:
            return
        try:
            self._safe_outputs()
        except BoardError:
            pass  # refused while the watchdog is expired: written again once it is cleared
        errors = []
        steps = [lambda: self._call("watchdog_stop"), lambda: self._call("watchdog_clear"), self._safe_outputs,
                 self._stop_sampling, lambda: self._call("close")]
        for step in steps:  # each tried: the board is released whatever refused before
            try:
                step()
            except BoardError as error:
                errors.append(str(error))
        self.card = self.task = None
        if errors:
            raise BoardError("closing the board: " + "; ".join(errors))

    def _release(self) -> None:
        """Close a card whose configuration failed; the error that made it fail is the one reported."""
        card, self.card = self.card, None
        try:
            card.close()
        except self.hardware.HILError:
            pass
