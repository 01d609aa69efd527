"""The drives of the six sliders, as forces on the sliders: reflected inertia and friction.

Each slider k is driven by a motor through a lead screw. Seen on the slider, the drive adds

    f_k = J_k q_dd_k + b_k q_d_k + F_c,k tanh(q_d_k / v_s,k)

to the force the rigid bodies need (``parameters.actuators``): J the rotor and screw inertia
through the lead [kg], b viscous friction [N*s/m], F_c Coulomb friction [N] with the smooth
approximation of sign(q_d) over the speed v_s [m/s]. The actuator-space dynamics becomes

    tau = (M_bar + diag(J)) q_dd + C_bar q_d + g_bar + b q_d + F_c tanh(q_d / v_s),

linear in (J, b, F_c) for a known motion, which is what the identification fits
(:mod:`hexapod_control.identification`). The friction dissipates b q_d^2 + F_c q_d tanh(q_d / v_s) >= 0,
and the rotors store 1/2 J q_d^2 of kinetic energy. Static friction (stick-slip) is a plant option
(``actuators.plant_friction: stick_slip``, simulation/embedded.py), not part of this smooth model.
"""

from __future__ import annotations

import numpy as np

from hexapod_control.model.parameters import ActuatorSettings


def coulomb_shape(qd, smoothing_speed) -> np.ndarray:
    """tanh(q_d / v_s): the smooth sign(q_d) the Coulomb force is F_c times (any shape, broadcast)."""
    return np.tanh(np.asarray(qd, dtype=float) / np.asarray(smoothing_speed, dtype=float))


class ActuatorModel:
    """The drive terms of one parameter set; ``rigid`` when they all vanish."""

    def __init__(self, settings: ActuatorSettings):
        self.settings = settings
        self.inertia = np.array(settings.reflected_inertia)  # J [kg]
        self.viscous = np.array(settings.viscous_friction)  # b [N*s/m]
        self.coulomb = np.array(settings.coulomb_friction)  # F_c [N]
        self.smoothing_speed = np.array(settings.coulomb_smoothing_speed)  # v_s [m/s]
        self.rigid = settings.rigid

    def friction(self, qd) -> np.ndarray:
        """b q_d + F_c tanh(q_d / v_s) (6,) [N], the force the drive loses to friction."""
        qd = np.asarray(qd, dtype=float)
        return self.viscous * qd + self.coulomb * coulomb_shape(qd, self.smoothing_speed)

    def coulomb_slope(self, qd) -> np.ndarray:
        """d (F_c tanh(q_d / v_s)) / d q_d (6,) [N*s/m]: the stiff damping of the smooth law near rest."""
        shape = coulomb_shape(qd, self.smoothing_speed)
        return self.coulomb / self.smoothing_speed * (1.0 - shape * shape)

    def forces(self, qd, qdd) -> np.ndarray:
        """J q_dd + friction(q_d) (6,) [N]: what the drives need on top of the rigid bodies."""
        return self.inertia * np.asarray(qdd, dtype=float) + self.friction(qd)

    def kinetic_energy(self, qd) -> float:
        """1/2 sum J q_d^2 [J] stored in the rotors."""
        qd = np.asarray(qd, dtype=float)
        return 0.5 * float(np.dot(self.inertia, qd * qd))
