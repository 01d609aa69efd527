"""A Quanser HIL board through the Quanser SDK's Python API (``quanser.hardware``).

NOT RUN ON HARDWARE. Written from Quanser's HIL documentation and examples; tested only against a
stand-in of ``quanser.hardware`` that records every call (test/test_quanser_board.py). Follow
doc/quanser_driver.md before it drives a robot.

``quanser.hardware`` ships inside Quanser's SDK, not on PyPI; it is imported when this board is
built, so the rest of the package works without it. Calls, in the order the core makes them:

- open: ``HIL().open(board_type, board_identifier)``; the digital lines' directions
  (``set_digital_directions``: fault lines in, direction, enable and brake lines out); PWM in
  duty-cycle mode at ``pwm_frequency`` (``set_pwm_mode``, ``set_pwm_frequency``); then the safe
  outputs: zero duty, amplifiers disabled, brakes applied.
- expiration states: ``watchdog_set_pwm_expiration_state`` (zero duty) and
  ``watchdog_set_digital_expiration_state`` (every output line TRISTATE: on Q8-series boards the
  outputs reach their safe state on expiry only so; the amplifiers' enable and the brakes must then
  be wired so that a floating line means disabled and applied), before ``watchdog_start``.
- sampling: ``task_create_reader`` over the encoders, the fault lines and the encoder velocities
  ("other" channels), started on ``Clock.HARDWARE_CLOCK_0`` at ``sample_rate``; each ``read`` is a
  blocking ``task_read`` of one sample, which paces the loop by the board's clock.
- every sample: ``watchdog_reload``, then one ``write`` of the PWM amplitudes and direction lines;
  enable and brake lines by ``write_digital`` when they change.
- close: safe outputs, ``task_stop``, ``task_delete``, ``watchdog_stop``, ``watchdog_clear``, ``close``.
"""

from __future__ import annotations

import importlib

import numpy as np

from hexapod_control.drive.board import Board, BoardSample
from hexapod_control.drive.core import SLIDERS
from hexapod_control.errors import BoardError, ParameterError
from hexapod_control.model.board_parameters import BoardParameters

HIL_MODULE = "quanser.hardware"
SAMPLES_IN_BUFFER = 2  # one sample read per tick; one more lets a late read find it waiting
SAMPLES_PER_READ = 1


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
        HIL = self.hardware.HIL
        self.card = HIL()
        try:
            self.card.open(self.parameters.board_type, self.parameters.board_identifier)
        except self.hardware.HILError as error:
            raise BoardError(f"open {self.parameters.board_type} {self.parameters.board_identifier}: "
                             f"{error.get_error_message()}") from error
        self._call("set_digital_directions", self._faults, len(self._faults), self._outputs, len(self._outputs))
        modes = np.full(SLIDERS, self.hardware.PWMMode.DUTY_CYCLE, dtype=np.int32)
        self._call("set_pwm_mode", self._pwm, SLIDERS, modes)
        frequencies = np.full(SLIDERS, self.parameters.scaling.pwm_frequency, dtype=np.float64)
        self._call("set_pwm_frequency", self._pwm, SLIDERS, frequencies)
        self.write_duty(np.zeros(SLIDERS))
        self.set_amplifiers(False)
        self.set_brakes(False)

    def set_expiration_states(self) -> None:
        self._call("watchdog_set_pwm_expiration_state", self._pwm, SLIDERS, np.zeros(SLIDERS, dtype=np.float64))
        tristate = np.full(len(self._outputs), self.hardware.DigitalState.TRISTATE, dtype=np.int32)
        self._call("watchdog_set_digital_expiration_state", self._outputs, len(self._outputs), tristate)

    def start_watchdog(self, timeout: float) -> None:
        self._call("watchdog_start", timeout)

    def start_sampling(self, rate: float) -> None:
        self.task = self._call("task_create_reader", SAMPLES_IN_BUFFER, None, 0, self._encoders, SLIDERS,
                               self._faults, SLIDERS, self._velocities, SLIDERS)
        self._call("task_start", self.task, self.hardware.Clock.HARDWARE_CLOCK_0, rate, self.hardware.HIL.INFINITE)

    def read(self) -> BoardSample:
        self._call("task_read", self.task, SAMPLES_PER_READ, None, self._counts, self._fault_lines, self._count_rates)
        faults = self._fault_lines.astype(bool) == self._levels.fault_active_high
        return BoardSample(counts=self._counts.astype(float), count_rates=self._count_rates.copy(),
                           amplifier_faults=faults, watchdog_expired=bool(self._call("watchdog_is_expired")))

    def reload_watchdog(self) -> None:
        self._call("watchdog_reload")

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

    def close(self) -> None:
        if self.card is None:
            return
        errors = []
        steps = [lambda: self.write_duty(np.zeros(SLIDERS)), lambda: self.set_amplifiers(False),
                 lambda: self.set_brakes(False)]
        if self.task is not None:
            steps += [lambda: self._call("task_stop", self.task), lambda: self._call("task_delete", self.task)]
        steps += [lambda: self._call("watchdog_stop"), lambda: self._call("watchdog_clear"),
                  lambda: self._call("close")]
        for step in steps:  # each tried: the board is released whatever refused before
            try:
                step()
            except BoardError as error:
                errors.append(str(error))
        self.card = self.task = None
        if errors:
            raise BoardError("closing the board: " + "; ".join(errors))
