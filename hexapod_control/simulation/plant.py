"""The plant interface: what a controller loop needs from a robot, simulated or real."""

from __future__ import annotations

import abc

import numpy as np


class Plant(abc.ABC):
    """A robot driven by six actuator forces at a fixed step.

    Forces are held constant (zero-order hold) between calls to :meth:`apply_forces` and saturated
    at the actuator force limit of the plant's own parameters. Measurements go through the plant's
    sensor model, if it has one.
    """

    dt: float  # fixed integration step [s]

    @property
    @abc.abstractmethod
    def time(self) -> float:
        """Simulated time since the last reset [s]."""

    @abc.abstractmethod
    def reset(self, q, qd=None) -> None:
        """Start at actuator positions q [m] (and velocities qd [m/s], default rest), time 0."""

    @abc.abstractmethod
    def apply_forces(self, forces) -> None:
        """Command the six actuator forces [N]; NaN or wrong shape raises InvalidInputError."""

    @property
    @abc.abstractmethod
    def applied_forces(self) -> np.ndarray:
        """The forces acting on the robot now (6,) [N]: the last command after saturation."""

    @abc.abstractmethod
    def step(self, steps: int = 1) -> None:
        """Advance by ``steps`` fixed steps; raises SimulationDivergedError rather than go NaN."""

    @abc.abstractmethod
    def joint_positions(self) -> np.ndarray:
        """Measured actuator positions q (6,) [m]."""

    @abc.abstractmethod
    def joint_velocities(self) -> np.ndarray:
        """Measured actuator velocities q_dot (6,) [m/s]."""
