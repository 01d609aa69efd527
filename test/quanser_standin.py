"""A stand-in of ``quanser.hardware`` that records every call, over six sliders of its own.

Written from Quanser's HIL documentation (the names and argument orders of HIL's methods), not from
the package's binding. Behind it six independent sliders: a mass pushed by its motor and a constant
load towards the upper stop, with viscous friction and end stops; the PWM amplitudes, direction,
enable and brake lines act on them with the polarities and scaling of the board section; the
encoders count from power-on. ``calls`` is the list of (method name, arguments) in call order.
"""

from types import SimpleNamespace

import numpy as np

SLIDER_MASS = 1.0  # [kg]
LOAD = 5.0  # [N] towards the upper stop, as the platform's weight spreads the sliders
VISCOUS = 10.0  # [N*s/m]


# Quanser's error codes that the tests use (quanser.common.ErrorCode), and their messages.
PWM_EXPIRATION_NOT_SUPPORTED = 593
COMMUNICATION_LOST = 1
WATCHDOG_PROTECTED = 2
MESSAGES = {
    PWM_EXPIRATION_NOT_SUPPORTED: "the hil_watchdog_set_pwm_expiration_state function is not supported by this card",
    COMMUNICATION_LOST: "the board stopped answering",
    WATCHDOG_PROTECTED: "the watchdog expired: outputs protected",
}


class HILError(Exception):
    """As Quanser's: made from a negative error code, its text from ``get_error_message``."""

    def __init__(self, error_code):
        super().__init__(error_code)
        self.error_code = error_code

    def get_error_message(self, locale=None, buffer_size=-1):
        return MESSAGES.get(-self.error_code, f"HIL error {self.error_code}")


class StandInPlant:
    """Six sliders between ``lower`` and ``upper`` stops, starting at ``start`` [m]."""

    def __init__(self, board, lower, upper, start, period):
        self.board, self.lower, self.upper, self.period = board, lower, upper, period
        self.q = np.full(6, start)
        self.qd = np.zeros(6)
        self.origin = self.q.copy()
        self.amplitude = np.zeros(6)
        self.reverse = np.zeros(6, dtype=bool)
        self.enabled = np.zeros(6, dtype=bool)
        self.brakes_released = False
        self.fault_lines = np.zeros(6, dtype=np.int8)
        self.count_jumps = np.zeros(6)
        self.watchdog_expired = False

    def motor_forces(self):
        scaling = self.board.scaling
        newtons_per_duty = (np.array(scaling.amplifier_gain) * np.array(scaling.torque_constant)
                            / np.array(scaling.lead_radius))
        signed = np.where(self.reverse, -self.amplitude, self.amplitude) * np.array(scaling.motor_polarity)
        return np.where(self.enabled, signed * newtons_per_duty, 0.0)

    def step(self):
        if not self.brakes_released:
            self.qd[:] = 0.0
            return
        acceleration = (self.motor_forces() + LOAD - VISCOUS * self.qd) / SLIDER_MASS
        self.qd += acceleration * self.period
        self.q += self.qd * self.period
        below, above = self.q < self.lower, self.q > self.upper
        self.q = np.clip(self.q, self.lower, self.upper)
        self.qd = np.where(below | above, 0.0, self.qd)

    def counts(self):
        cpm = np.array(self.board.scaling.counts_per_metre) * np.array(self.board.scaling.encoder_polarity)
        return np.round((self.q - self.origin) * cpm) + self.count_jumps, self.qd * cpm


def hardware_module(board, plant):
    """A module object standing for ``quanser.hardware``, whose HIL drives ``plant``."""
    calls = []
    channels, levels = board.channels, board.levels

    class HIL:
        INFINITE = -1

        def __init__(self, *arguments):
            calls.append(("HIL", arguments))

        def __getattr__(self, name):
            if name.startswith("_"):
                raise AttributeError(name)

            def record(*arguments):
                calls.append((name, tuple(np.array(a).tolist() if isinstance(a, np.ndarray) else a
                                          for a in arguments)))
                handler = getattr(self, "_" + name, None)
                return handler(*arguments) if handler else None

            return record

        def _guard(self):
            if plant.watchdog_expired:
                raise HILError(-WATCHDOG_PROTECTED)

        def _write_pwm(self, pwm_channels, count, duty):
            self._guard()
            for index, channel in enumerate(list(pwm_channels)):
                plant.amplitude[channels.pwm_channels.index(channel)] = duty[index]

        def _write_digital(self, lines, count, values):
            self._guard()
            for line, value in zip(list(lines), list(values)):
                if line in channels.direction_channels:
                    plant.reverse[channels.direction_channels.index(line)] = bool(value) == levels.reverse_direction_high
                elif line in channels.enable_channels:
                    plant.enabled[channels.enable_channels.index(line)] = bool(value) == levels.enable_active_high
                elif line in channels.brake_channels:
                    plant.brakes_released = bool(value) == levels.brake_release_high

        def _write(self, analog_channels, analog_count, pwm_channels, pwm_count, digital_channels, digital_count,
                   other_channels, other_count, analog, pwm, digital, other):
            if pwm_count:
                self._write_pwm(pwm_channels, pwm_count, pwm)
            if digital_count:
                self._write_digital(digital_channels, digital_count, digital)

        def _task_create_reader(self, *arguments):
            return f"reader task {sum(name == 'task_create_reader' for name, _ in calls)}"

        def _task_read(self, task, samples, analog, encoder, digital, other):
            plant.step()
            counts, rates = plant.counts()
            encoder[:] = counts
            other[:] = rates
            digital[:] = np.where(plant.fault_lines != 0, levels.fault_active_high, not levels.fault_active_high)
            return samples

        def _watchdog_reload(self):
            return not plant.watchdog_expired  # False: it had expired

        def _watchdog_clear(self):
            plant.watchdog_expired = False

    module = SimpleNamespace(
        HIL=HIL, HILError=HILError,
        Clock=SimpleNamespace(HARDWARE_CLOCK_0=0),
        DigitalState=SimpleNamespace(LOW=0, HIGH=1, TRISTATE=2, NO_CHANGE=3),
        PWMMode=SimpleNamespace(DUTY_CYCLE=0),
    )
    return module, calls
