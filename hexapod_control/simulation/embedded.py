"""The embedded simulator: the reduced six-actuator model integrated at a fixed step.

Its parameters file may differ from the controller's (a deliberate model mismatch). Settings come
from the ``simulation`` section: ``rate`` (plant step), ``seed``, ``sensor`` (encoder
quantisation, position noise, delay) and ``embedded`` (integrator, substeps, divergence guard).

Integrators: ``semi_implicit_euler`` (one forward-dynamics evaluation per substep, symplectic, the
default for speed) and ``rk4`` (four evaluations, for accuracy studies). The forward kinematics
inside each evaluation is warm-started from the previous one, so it costs one or two Newton steps.

Sensor model: measured q = quantise(true q delayed by ``delay_steps`` + white noise); measured
q_dot = the delayed true q_dot (the drives' velocity estimate is not modelled).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from hexapod_control.errors import HexapodError, SimulationDivergedError
from hexapod_control.model import JOINT_NAMES, HexapodModel, as_vector
from hexapod_control.parameters import HexapodParameters
from hexapod_control.simulation.plant import Plant

INTEGRATORS = ("semi_implicit_euler", "rk4")


@dataclass(frozen=True)
class SensorSettings:
    encoder_resolution: float  # [m], 0 = exact
    noise_std: float  # [m], 0 = none
    delay_steps: int  # plant steps


@dataclass(frozen=True)
class EmbeddedSettings:
    rate: float  # plant steps per second [Hz]
    seed: int
    sensor: SensorSettings
    integrator: str
    substeps: int
    max_actuator_speed: float  # [m/s] beyond this the run has diverged

    @property
    def dt(self) -> float:
        return 1.0 / self.rate


def load_embedded_settings(parameters: HexapodParameters) -> EmbeddedSettings:
    section = parameters.section("simulation")
    sensor = section.subsection("sensor")
    sensor.reject_unknown({"encoder_resolution", "noise_std", "delay_steps"})
    embedded = section.subsection("embedded")
    embedded.reject_unknown({"integrator", "substeps", "max_actuator_speed"})
    return EmbeddedSettings(
        rate=section.positive("rate"),
        seed=section.integer("seed"),
        sensor=SensorSettings(
            encoder_resolution=sensor.non_negative("encoder_resolution"),
            noise_std=sensor.non_negative("noise_std"),
            delay_steps=sensor.integer("delay_steps"),
        ),
        integrator=embedded.text("integrator", INTEGRATORS),
        substeps=embedded.integer("substeps", minimum=1),
        max_actuator_speed=embedded.positive("max_actuator_speed"),
    )


class EmbeddedSimulator(Plant):
    """Forward dynamics of :class:`HexapodModel` at a fixed step, with force saturation."""

    def __init__(self, parameters: HexapodParameters, settings: EmbeddedSettings | None = None):
        self.parameters = parameters
        self.settings = settings or load_embedded_settings(parameters)
        self.dt = self.settings.dt
        self.model = HexapodModel(parameters)
        self._force_limit = parameters.limits.actuator_force_max
        self.reset(np.full(6, parameters.home_actuator_position))

    @property
    def time(self) -> float:
        return self._steps * self.dt

    def reset(self, q, qd=None) -> None:
        q = np.array(as_vector(q, 6, "q", JOINT_NAMES))
        qd = np.zeros(6) if qd is None else np.array(as_vector(qd, 6, "qd", JOINT_NAMES))
        self.model.reset_warm_start()
        self._phi = self.model.forward_kinematics(q).phi  # raises if q cannot assemble
        self._q, self._qd = q, qd
        self._forces = np.zeros(6)
        self._steps = 0
        self._rng = np.random.default_rng(self.settings.seed)
        self._history: deque[tuple[np.ndarray, np.ndarray]] = deque(
            [(q.copy(), qd.copy())] * (self.settings.sensor.delay_steps + 1),
            maxlen=self.settings.sensor.delay_steps + 1,
        )
        self._measure()

    def apply_forces(self, forces) -> None:
        forces = np.array(as_vector(forces, 6, "forces", JOINT_NAMES))
        self._forces = np.clip(forces, -self._force_limit, self._force_limit)

    @property
    def applied_forces(self) -> np.ndarray:
        """The saturated forces acting on the robot [N]."""
        return self._forces.copy()

    def _acceleration(self, q, qd) -> np.ndarray:
        # phi only (no pose): the model's own secant warm start tracks the motion step by step.
        self._phi = self.model.solve_passive(q)[0]
        return self.model.forward_dynamics(q, qd, self._forces, phi=self._phi)

    def step(self, steps: int = 1) -> None:
        h = self.dt / self.settings.substeps
        for _ in range(steps):
            q, qd = self._q, self._qd
            try:
                for _ in range(self.settings.substeps):
                    if self.settings.integrator == "rk4":
                        q, qd = self._rk4(q, qd, h)
                    else:
                        qd = qd + h * self._acceleration(q, qd)
                        q = q + h * qd
            except HexapodError as error:
                raise SimulationDivergedError(
                    f"embedded simulation failed at t = {self.time:.4f} s, q = {q.tolist()}: {error}"
                ) from error
            speed = float(np.max(np.abs(qd)))
            if not np.all(np.isfinite(q)) or not speed <= self.settings.max_actuator_speed:
                raise SimulationDivergedError(
                    f"embedded simulation diverged at t = {self.time:.4f} s: actuator speed {speed} m/s "
                    f"exceeds {self.settings.max_actuator_speed} m/s (q = {q.tolist()})"
                )
            self._q, self._qd = q, qd
            self._steps += 1
            self._history.append((q.copy(), qd.copy()))
            self._measure()

    def _rk4(self, q, qd, h):
        k1v = self._acceleration(q, qd)
        k2q, k2v = qd + 0.5 * h * k1v, self._acceleration(q + 0.5 * h * qd, qd + 0.5 * h * k1v)
        k3q, k3v = qd + 0.5 * h * k2v, self._acceleration(q + 0.5 * h * k2q, qd + 0.5 * h * k2v)
        k4q, k4v = qd + h * k3v, self._acceleration(q + h * k3q, qd + h * k3v)
        q_next = q + h / 6.0 * (qd + 2 * k2q + 2 * k3q + k4q)
        qd_next = qd + h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        self._phi = self.model.solve_passive(q_next)[0]  # warm start at the new state
        return q_next, qd_next

    def _measure(self) -> None:
        """Sample the sensors once per step, so repeated reads agree and runs are reproducible."""
        sensor = self.settings.sensor
        q, qd = self._history[0]
        q = q.copy()
        if sensor.noise_std > 0.0:
            q += self._rng.normal(0.0, sensor.noise_std, 6)
        if sensor.encoder_resolution > 0.0:
            q = np.round(q / sensor.encoder_resolution) * sensor.encoder_resolution
        self._measured = (q, qd.copy())

    def joint_positions(self) -> np.ndarray:
        return self._measured[0].copy()

    def joint_velocities(self) -> np.ndarray:
        return self._measured[1].copy()

    @property
    def true_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(q, q_dot) without the sensor model, for tests and evaluation."""
        return self._q.copy(), self._qd.copy()

    @property
    def passive_angles(self) -> np.ndarray:
        return np.array(self._phi)
