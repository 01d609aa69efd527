"""The inverse-dynamics model live, without ROS: predicted forces, the force residual, the feed-forward.

:class:`ForceResidualMonitor` is what the inverse-dynamics node runs (ros/inverse_dynamics_node.py),
the live twin of the evaluator's model check (evaluation/model_check.py). For each joint state k:

* q_dd by a causal backward difference of the measured q_d, (q_d,k - q_d,k-1) / dt_k;
* q, q_d, q_dd, the forces and the drives' friction f(q_d) through one causal filter H
  (``inverse_dynamics.filter_cutoff``, a 2nd-order Butterworth low-pass), so that both sides of
  the model lag alike;
* predicted forces = tau(H q, H q_d, H q_dd) - f(H q_d) + H f(q_d): the model's inverse dynamics
  (drives included) with the friction filtered after the nonlinearity, as the force is (a
  Coulomb force flips at a reversal; the filtered force flips smoothly, and so must the model's);
* residual = H F - predicted, where F is the command acting over [t_k-1, t_k), the interval the
  backward difference spans: the one answering joint state k - 1 - d, with d the loop's delay
  ``simulation.loop_delay.periods`` (the same on the robot: see simulation/delay.py).

On the plant of the same model the residual is the filter's and the sampling's, far below the
band; a payload, a collision, a drive fault or wrong drive parameters move it. A slider whose
|residual| stays beyond ``residual_band`` for ``band_duration`` makes the status WARN (checked
once the filter has settled, ``SETTLING_PERIODS`` filter time constants after the first state).

:meth:`ForceResidualMonitor.feedforward` gives the forces the model needs along a reference
(inverse kinematics, J_A, and the inverse dynamics at the reference's joint motion).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from scipy.signal import butter

from hexapod_control.control.loop import Level
from hexapod_control.control.trajectories import Reference
from hexapod_control.errors import HexapodError
from hexapod_control.model.hexapod import HexapodModel

FILTER_ORDER = 2
SETTLING_PERIODS = 5.0  # filter time constants 1 / (2 pi f_c) before the band is checked


class CausalLowPass:
    """A Butterworth low-pass on a vector signal (transposed direct form II), started at rest."""

    def __init__(self, cutoff: float, rate: float, width: int):
        b, a = butter(FILTER_ORDER, cutoff, fs=rate)
        self._b, self._a = b / a[0], a / a[0]
        self._state = np.zeros((FILTER_ORDER, width))

    def start(self, value: np.ndarray) -> None:
        """Steady state at ``value``: the output starts there, without a transient from zero."""
        value = np.asarray(value, dtype=float)
        # In steady state y = x; the delay line then holds s_1 = (b_1 + b_2 - a_1 - a_2) x, s_2 = (b_2 - a_2) x.
        self._state[1] = (self._b[2] - self._a[2]) * value
        self._state[0] = (self._b[1] - self._a[1]) * value + self._state[1]

    def __call__(self, value: np.ndarray) -> np.ndarray:
        x = np.asarray(value, dtype=float)
        y = self._b[0] * x + self._state[0]
        self._state[0] = self._b[1] * x - self._a[1] * y + self._state[1]
        self._state[1] = self._b[2] * x - self._a[2] * y
        return y


@dataclass(frozen=True)
class ResidualSample:
    """One joint state's outputs (each (6,) [N] unless stated)."""

    t: float  # the joint state's stamp [s]
    position: np.ndarray  # H q [m]
    velocity: np.ndarray  # H q_d [m/s]
    acceleration: np.ndarray  # H q_dd [m/s^2]
    predicted: np.ndarray  # tau(H q, H q_d, H q_dd)
    commanded: np.ndarray  # H F
    residual: np.ndarray  # commanded - predicted
    out_of_band: np.ndarray  # (6,) bool, beyond residual_band now
    checked: bool  # the filter had settled, the band applies


class ForceResidualMonitor:
    """Predicted forces and the residual of one robot's joint states and commands (see the module doc)."""

    def __init__(self, model: HexapodModel):
        parameters = model.parameters
        self.model = model
        self._drives = model.dynamics.actuators
        self.joint_names = parameters.ros.joint_names
        self.settings = parameters.inverse_dynamics
        rate = parameters.controllers.rate
        width = 6 * 5  # q, q_d, q_dd, the forces and the friction, filtered together
        self._filter = CausalLowPass(self.settings.filter_cutoff, rate, width)
        self._band = np.array(self.settings.residual_band)
        self._settling = SETTLING_PERIODS / (2.0 * math.pi * self.settings.filter_cutoff)
        self._kinematic_state = model.create_state()
        self._reference_state = model.create_state()
        self._commands: deque[np.ndarray] = deque(maxlen=parameters.simulation.loop_delay.periods + 1)
        self._previous: tuple[float, np.ndarray] | None = None  # (stamp, q_d)
        self._started: float | None = None
        self._out_since = np.full(6, math.nan)  # stamp since which each slider is out of band
        self.last: ResidualSample | None = None
        self.failures = 0

    def command(self, forces) -> None:
        """An effort command (6,) [N], answering the latest joint state."""
        self._commands.append(np.asarray(forces, dtype=float))

    def joint_state(self, t: float, q, qd) -> ResidualSample | None:
        """The outputs for a joint state; None until the force acting since the last one is known."""
        q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
        previous, self._previous = self._previous, (t, qd)
        # The command acting over [t_k-1, t_k) answered joint state k - 1 - delay: the oldest kept.
        acting = self._commands[0] if len(self._commands) == self._commands.maxlen else None
        if previous is None or not t > previous[0] or acting is None:
            return None
        acceleration = (qd - previous[1]) / (t - previous[0])
        friction = self._drives.friction(qd)
        if self._started is None:
            self._started = t
            self._filter.start(np.concatenate((q, qd, np.zeros(6), acting, friction)))
        filtered = self._filter(np.concatenate((q, qd, acceleration, acting, friction)))
        position, velocity, acceleration, commanded, friction = np.split(filtered, 5)
        try:
            predicted = self.model.inverse_dynamics(position, velocity, acceleration, state=self._kinematic_state)
            if not self._drives.rigid:
                predicted += friction - self._drives.friction(velocity)
        except HexapodError:
            self.failures += 1
            self._kinematic_state.reset()
            return None
        residual = commanded - predicted
        checked = t - self._started >= self._settling
        out = checked & (np.abs(residual) > self._band)
        self._out_since = np.where(out, np.where(np.isnan(self._out_since), t, self._out_since), math.nan)
        self.last = ResidualSample(t, position, velocity, acceleration, predicted, commanded, residual, out, checked)
        return self.last

    def grade(self) -> tuple[Level, str]:
        """WARN while a slider has been out of band for band_duration, else OK (also before settling)."""
        sample = self.last
        if sample is None:
            return Level.OK, "waiting for joint states and commands"
        if not sample.checked:
            return Level.OK, "filter settling"
        lasting = sample.t - self._out_since >= self.settings.band_duration  # NaN (in band) compares False
        if lasting.any():
            names = [self.joint_names[i] for i in np.flatnonzero(lasting)]
            return Level.WARN, f"force residual out of band on {', '.join(names)}"
        return Level.OK, "force residual within band"

    def status_values(self) -> dict:
        sample = self.last
        values = {"failures": self.failures, "residual_band": self._band}
        if sample is not None:
            values.update(stamp=sample.t, residual=sample.residual, predicted=sample.predicted,
                          commanded=sample.commanded)
        return values

    def feedforward(self, reference: Reference) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(q_d, q_d_dot, q_d_ddot, forces) the model gives along ``reference``; raises HexapodError
        (UnreachablePoseError, SingularityError) where the reference has no joint motion."""
        ik = self.model.inverse_kinematics(reference.pose[:3], reference.pose[3:])
        jacobian = self.model.analytic_jacobian(ik.q, phi=ik.phi)
        qd = np.linalg.solve(jacobian.analytic, reference.velocity)
        convective = self.model.analytic_jacobian(ik.q, qd, phi=ik.phi).convective
        qdd = np.linalg.solve(jacobian.analytic, reference.acceleration - convective)
        return ik.q, qd, qdd, self.model.inverse_dynamics(ik.q, qd, qdd, phi=ik.phi)
