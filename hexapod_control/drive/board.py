"""What the driver core asks of a board, in the robot's units of counts, duty cycles and lines.

A board reads the six encoders, their velocities and the six amplifier fault lines in one
sample, and drives six PWM amplitudes with their direction lines, the amplifier enable lines and
the brake lines. Its watchdog sets the outputs to their expiration states (zero duty, amplifiers
disabled, brakes applied) when the loop stops reloading it. The core calls nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class BoardSample:
    """One sample of the board's inputs."""

    counts: np.ndarray  # (6,) encoder counts
    count_rates: np.ndarray  # (6,) encoder velocities [counts/s]
    amplifier_faults: np.ndarray  # (6,) bool, True: that amplifier reports a fault


class Board:
    """The operations of a board, in the order the core uses them (see drive/core.py); a refused one
    raises :class:`hexapod_control.errors.BoardError`."""

    # Whether the watchdog zeroes the PWM duty on expiry (None until the expiration states are set):
    # a board that cannot leaves stopping the motors to the amplifiers' enable lines.
    pwm_expiration_set: bool | None = None

    def open(self) -> None:
        """Connect; every output in its safe state (zero duty, amplifiers disabled, brakes applied)."""
        raise NotImplementedError

    def set_expiration_states(self) -> None:
        """The states the watchdog sets on expiry: zero duty, amplifiers disabled, brakes applied."""
        raise NotImplementedError

    def start_watchdog(self, timeout: float) -> None:
        raise NotImplementedError

    def start_sampling(self, rate: float) -> None:
        """Start sampling the inputs on the board's clock at ``rate`` [Hz], afresh if it sampled already."""
        raise NotImplementedError

    def read(self) -> BoardSample:
        """The next sample (a board paced by its clock blocks until it is taken)."""
        raise NotImplementedError

    def reload_watchdog(self) -> bool:
        """Reload the watchdog; True if it had expired already (an expired one stays expired)."""
        raise NotImplementedError

    def write_duty(self, duty: np.ndarray) -> None:
        """Signed duty cycles in [-1, 1] per amplifier: PWM amplitude and direction line."""
        raise NotImplementedError

    def set_amplifiers(self, enabled: bool) -> None:
        raise NotImplementedError

    def set_brakes(self, released: bool) -> None:
        raise NotImplementedError

    def clear_watchdog(self) -> None:
        """Leave the protected state after an expiry (stops the watchdog too)."""
        raise NotImplementedError

    def close(self) -> None:
        """Outputs safe, sampling stopped, watchdog stopped, board released."""
        raise NotImplementedError
