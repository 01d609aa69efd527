"""The embedded simulator: the reduced six-actuator model integrated at a fixed step.

Its parameters file may differ from the controller's (a deliberate model mismatch). Settings come
from the ``simulation`` section: ``rate`` (plant step), ``seed``, ``sensor`` (encoder
quantisation, position noise, delay) and ``embedded`` (integrator, substeps, divergence guard).

Integrators: ``semi_implicit_euler`` (one forward-dynamics evaluation per substep, symplectic, the
default for speed) and ``rk4`` (four evaluations, for accuracy studies). The forward kinematics
inside each evaluation is warm-started from the previous one, so it costs one or two Newton steps.

Sensor model: measured q = quantise(true q delayed by ``delay_steps`` + white noise); measured
q_dot = the delayed true q_dot (the drives' velocity estimate is not modelled).

Drives (``actuators``, model/actuators.py): their inertia and friction come with the model's
dynamics. ``semi_implicit_euler`` takes the friction implicitly over the step h, linearised:

    (M_bar + h diag(b / 2 + dF_c tanh(q_d / v_s) / dq_d)) q_dd = tau - C_bar q_d - g_bar - f(q_d).

The viscous part acts at the mid-step velocity (trapezoidal: the sampled response of a linear
damper, stable for any b), as the continuous friction of the robot does on average over the step;
the Coulomb part, stiff near rest (slope F_c / v_s, 7500 N*s/m for 15 N over 2 mm/s, far beyond
what an explicit 1 ms step holds on a few kg), at the end-of-step velocity, which damps it for
any slope (a lead screw's Stribeck hump, whose slope falls below zero past the breakaway, keeps
that falling part explicit: implicitly it would lower the mass matrix). ``rk4`` evaluates the model's forward dynamics explicitly (a small
``coulomb_smoothing_speed`` then needs substeps). With ``plant_friction: stick_slip``
(semi-implicit Euler only) a slider slower than v_s sticks: it is brought to rest within the
step, as long as the force that holds it stays within its ``static_friction``; the slider that
needs the most beyond it breaks away first, then the others are checked again (the sliders are
coupled through M_bar).

A step with ``semi_implicit_euler`` and the smooth law, rigid or not, runs in C on a model of the C
dynamics (:mod:`.compiled_plant`); this module's Python step is its reference and runs the rest.

External forces (:meth:`EmbeddedSimulator.set_external_forces`: a push, a collision, a fault) act
on the sliders besides the drive forces and are not saturated.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from hexapod_control.errors import HexapodError, ParameterError, SimulationDivergedError
from hexapod_control.model.hexapod import JOINT_NAMES, HexapodModel
from hexapod_control.model.parameters import HexapodParameters, SimulationSettings
from hexapod_control.model.validation import as_vector
from hexapod_control.simulation import compiled_plant
from hexapod_control.simulation.plant import Plant

_ZERO6 = (0.0,) * 6  # q_dd of the bias forces C_bar q_d + g_bar + f(q_d)


class EmbeddedSimulator(Plant):
    """Forward dynamics of :class:`HexapodModel` at a fixed step, with force saturation; ``compiled``
    False keeps this plant on the Python step, the C step's reference."""

    def __init__(self, parameters: HexapodParameters, settings: SimulationSettings | None = None,
                 model: HexapodModel | None = None, compiled: bool = True):
        self.parameters = parameters
        self.settings = settings or parameters.simulation
        self.dt = self.settings.dt
        self.model = model if model is not None else HexapodModel(parameters)
        self.kinematic_state = self.model.create_state()  # the plant's own FK warm start
        self._force_limit = parameters.limits.actuator_force_max
        self._drives = self.model.dynamics.actuators
        self._stick_slip = parameters.actuators.plant_friction == "stick_slip"
        if self._stick_slip and self.settings.embedded.integrator != "semi_implicit_euler":
            raise ParameterError(
                f"{parameters.source}: hexapod.actuators.plant_friction: stick_slip needs "
                f"simulation.embedded.integrator semi_implicit_euler, got {self.settings.embedded.integrator}"
            )
        self._static_friction = np.array(parameters.actuators.static_friction)
        # The C step where it has this plant (simulation/compiled_plant.py); None: the Python one.
        self.compiled = compiled_plant.attach(self.model, self.settings, self._stick_slip) if compiled else None
        self.reset(np.full(6, parameters.home_actuator_position))

    @property
    def time(self) -> float:
        return self._steps * self.dt

    def reset(self, q, qd=None) -> None:
        q = as_vector(q, 6, "q", JOINT_NAMES)
        qd = (0.0,) * 6 if qd is None else as_vector(qd, 6, "qd", JOINT_NAMES)
        self.kinematic_state.reset()
        self._phi = tuple(self.model.forward_kinematics(q, self.kinematic_state).phi)  # raises if q cannot assemble
        # The state is six floats: plain tuples cost less than numpy arrays at this size.
        self._q, self._qd = q, qd
        self._forces = (0.0,) * 6
        self._external = None  # external forces (6,) [N], None when there are none
        self._steps = 0
        self._rng = np.random.default_rng(self.settings.seed)
        self._history: deque[tuple[tuple[float, ...], tuple[float, ...]]] = deque(
            [(q, qd)] * (self.settings.sensor.delay_steps + 1), maxlen=self.settings.sensor.delay_steps + 1
        )
        self._measure()

    def reseat(self, q, qd) -> None:
        """Put the state just stepped to (q, qd), as an end stop does within a step: time, forces,
        the sensor's noise sequence and its delayed samples go on (the newest sample becomes the new
        state). Raises when q does not assemble."""
        q = as_vector(q, 6, "q", JOINT_NAMES)
        qd = as_vector(qd, 6, "qd", JOINT_NAMES)
        try:
            phi = self.model.forward_kinematics(q, self.kinematic_state).phi  # warm: q is near the state
        except HexapodError:
            self.kinematic_state.reset()  # from home, as reset does (the warm start may be a failed step's)
            phi = self.model.forward_kinematics(q, self.kinematic_state).phi
        self._phi = tuple(phi)
        self._q, self._qd = q, qd
        self._history[-1] = (q, qd)
        self._measure()

    def apply_forces(self, forces) -> None:
        limit = self._force_limit
        self._forces = tuple(min(max(f, -limit), limit) for f in as_vector(forces, 6, "forces", JOINT_NAMES))

    @property
    def applied_forces(self) -> np.ndarray:
        """The saturated forces acting on the robot [N]."""
        return np.array(self._forces)

    def set_external_forces(self, forces) -> None:
        """Forces on the sliders from outside the drives (6,) [N], held until changed; zero at reset."""
        forces = as_vector(forces, 6, "external forces", JOINT_NAMES)
        self._external = forces if any(forces) else None

    def _acting_forces(self):
        """The drives' saturated forces plus the external ones [N]."""
        return self._forces if self._external is None else [f + e for f, e in zip(self._forces, self._external)]

    def _acceleration(self, q, qd, implicit_step: float = 0.0) -> list[float]:
        """q_dd at (q, qd); with drives, their friction taken implicitly over ``implicit_step``."""
        # phi only (no pose): the plant's secant warm start tracks the motion step by step.
        self._phi = self.model.kinematics.solve_passive(q, self.kinematic_state).phi
        forces = self._acting_forces()
        if implicit_step == 0.0 or (self._drives.rigid and not self._stick_slip):
            return self.model.forward_dynamics(q, qd, forces, phi=self._phi).tolist()
        return self._implicit_friction_acceleration(q, np.asarray(qd), np.asarray(forces), implicit_step).tolist()

    def _implicit_friction_acceleration(self, q, qd: np.ndarray, forces: np.ndarray, h: float) -> np.ndarray:
        """The linearised implicit step of the module doc, with the stick-slip rule when it is on."""
        dynamics, drives = self.model.dynamics, self._drives
        matrix = dynamics.mass_matrix(q, self._phi)
        net = forces - dynamics.inverse_dynamics(q, qd, _ZERO6, self._phi)  # bias: C_bar q_d + g_bar + f(q_d)
        slope = drives.coulomb_slope(qd)
        if not drives.symmetric:
            # A Stribeck hump's falling slope is left explicit: taken implicitly it would lower M_bar.
            slope = np.maximum(slope, 0.0)
        damping = h * (0.5 * drives.viscous_at(q) + slope)
        stuck = np.abs(qd) < drives.smoothing_speed if self._stick_slip else np.zeros(6, dtype=bool)
        if not stuck.any():
            matrix[np.diag_indices(6)] += damping
            return np.linalg.solve(matrix, net)
        # A stuck slider's friction is whatever holds it (a constraint force), not the smooth law.
        net = net + np.where(stuck, drives.friction(qd, q), 0.0)
        matrix[np.diag_indices(6)] += np.where(stuck, 0.0, damping)
        while True:
            free = ~stuck
            acceleration = np.where(stuck, -qd / h, 0.0)  # the stuck sliders come to rest within the step
            if free.any():
                acceleration[free] = np.linalg.solve(
                    matrix[np.ix_(free, free)], net[free] - matrix[np.ix_(free, stuck)] @ acceleration[stuck]
                )
            holding = matrix[stuck] @ acceleration - net[stuck]  # M q_dd = net + holding force
            excess = np.abs(holding) - self._static_friction[stuck]
            if not np.any(excess > 0.0):
                return acceleration
            slider = np.flatnonzero(stuck)[int(np.argmax(excess))]  # breaks away: the smooth law again
            stuck[slider] = False
            net[slider] -= drives.friction(qd, q)[slider]
            matrix[slider, slider] += damping[slider]

    def step(self, steps: int = 1) -> None:
        h = self.dt / self.settings.embedded.substeps
        rk4 = self.settings.embedded.integrator == "rk4"
        for _ in range(steps):
            q, qd = self._q, self._qd
            if self.compiled is not None:
                stepped = self.compiled.step(q, qd, self._acting_forces(), self.kinematic_state)
                if stepped is not None:
                    self._q, self._qd, self._phi = stepped
                    self._finish_step()
                    continue
            try:
                for _ in range(self.settings.embedded.substeps):
                    if rk4:
                        q, qd = self._rk4(q, qd, h)
                    else:
                        acceleration = self._acceleration(q, qd, h)
                        qd = tuple(v + h * a for v, a in zip(qd, acceleration))
                        q = tuple(p + h * v for p, v in zip(q, qd))
            except HexapodError as error:
                raise SimulationDivergedError(
                    f"embedded simulation failed at t = {self.time:.4f} s, q = {list(q)}: {error}"
                ) from error
            speed = max(abs(v) for v in qd)
            # A NaN or inf anywhere makes the sum non-finite; finite values here cannot overflow it.
            if not math.isfinite(sum(q)) or not speed <= self.settings.embedded.max_actuator_speed:
                raise SimulationDivergedError(
                    f"embedded simulation diverged at t = {self.time:.4f} s: actuator speed {speed} m/s "
                    f"exceeds {self.settings.embedded.max_actuator_speed} m/s (q = {list(q)})"
                )
            self._q, self._qd = q, qd
            self._finish_step()

    @property
    def ideal_sensor(self) -> bool:
        """A C step and a sensor that measures the state itself (no noise, quantisation or delay):
        the plants the compiled lockstep loop steps (compiled_lockstep.py)."""
        sensor = self.settings.sensor
        return (self.compiled is not None and sensor.noise_std == 0.0 and sensor.encoder_resolution == 0.0
                and sensor.delay_steps == 0)

    def lockstep_state(self):
        """(q, q_d, the drives' saturated forces, phi, the warm start (18,)) for the compiled lockstep
        loop; None while external forces act, or without :attr:`ideal_sensor`."""
        if self._external is not None or not self.ideal_sensor:
            return None
        state = self.kinematic_state
        return (self._q, self._qd, self._forces, self._phi,
                (*state.last_q, *state.last_phi, *state.previous_q, *state.previous_phi))

    def lockstep_resume(self, q, qd, forces, phi, warm, steps: int) -> None:
        """Take the state the compiled lockstep loop reached after ``steps`` steps of this plant (the
        forces it holds may have changed without a step)."""
        self._forces = tuple(forces)
        if steps == 0:
            return
        state = self.kinematic_state
        state.last_q, state.last_phi, state.previous_q, state.previous_phi = (
            tuple(warm[0:6]), tuple(warm[6:9]), tuple(warm[9:15]), tuple(warm[15:18]))
        self._q, self._qd, self._phi = tuple(q), tuple(qd), tuple(phi)
        self._steps += steps - 1
        self._finish_step()

    def _finish_step(self) -> None:
        self._steps += 1
        self._history.append((self._q, self._qd))
        self._measure()

    def _rk4(self, q, qd, h):
        q, qd = np.array(q), np.array(qd)
        k1v = np.array(self._acceleration(q, qd))
        k2q, k2v = qd + 0.5 * h * k1v, np.array(self._acceleration(q + 0.5 * h * qd, qd + 0.5 * h * k1v))
        k3q, k3v = qd + 0.5 * h * k2v, np.array(self._acceleration(q + 0.5 * h * k2q, qd + 0.5 * h * k2v))
        k4q, k4v = qd + h * k3v, np.array(self._acceleration(q + h * k3q, qd + h * k3v))
        q_next = q + h / 6.0 * (qd + 2 * k2q + 2 * k3q + k4q)
        qd_next = qd + h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        self._phi = self.model.kinematics.solve_passive(q_next, self.kinematic_state).phi  # warm start at the new state
        return tuple(q_next.tolist()), tuple(qd_next.tolist())

    def _measure(self) -> None:
        """Sample the sensors once per step, so repeated reads agree and runs are reproducible."""
        sensor = self.settings.sensor
        q, qd = self._history[0]
        if sensor.noise_std > 0.0 or sensor.encoder_resolution > 0.0:
            q = np.array(q)
            if sensor.noise_std > 0.0:
                q += self._rng.normal(0.0, sensor.noise_std, 6)
            if sensor.encoder_resolution > 0.0:
                q = np.round(q / sensor.encoder_resolution) * sensor.encoder_resolution
            q = tuple(q.tolist())
        self._measured = (q, qd)

    def joint_positions(self) -> np.ndarray:
        return np.array(self._measured[0])

    def joint_velocities(self) -> np.ndarray:
        return np.array(self._measured[1])

    @property
    def true_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(q, q_dot) without the sensor model, for tests and evaluation."""
        return np.array(self._q), np.array(self._qd)

    @property
    def passive_angles(self) -> np.ndarray:
        return np.array(self._phi)
