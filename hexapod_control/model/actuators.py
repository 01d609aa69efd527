"""The drives of the six sliders, as forces on the sliders: reflected inertia and friction.

Each slider k is driven by a motor through a lead screw. Seen on the slider, the drive adds

    f_k = J_k q_dd_k + b_k q_d_k + F_c,k tanh(q_d_k / v_s,k)

to the force the rigid bodies need (``parameters.actuators``): J the rotor and screw inertia
through the lead [kg], b viscous friction [N*s/m], F_c Coulomb friction [N] with the smooth
approximation of sign(q_d) over the speed v_s [m/s]. The actuator-space dynamics becomes

    tau = (M_bar + diag(J)) q_dd + C_bar q_d + g_bar + b q_d + F_c tanh(q_d / v_s),

linear in (J, b, F_c) for a known motion, which is what the identification fits
(:mod:`hexapod_control.identification`). The rotors store 1/2 J q_d^2 of kinetic energy.

A lead screw adds three terms, each zero unless set (then the law above is exact, bit for bit):

    + A |tanh(q_d / v_s)|                                   Coulomb by direction: F_c + A up, F_c - A down
    + (F_s - F_c) exp(-(q_d / v_st)^2) tanh(q_d / v_s)      Stribeck hump, where v_st > 0
    + (b_c cos(2 pi q / p) + b_s sin(2 pi q / p)) q_d       viscous ripple with the screw position

still linear in every coefficient for a known motion and v_st. The ripple needs the position: the
methods take it as an optional ``q``; without it the ripple is left out (its mean over a lead is
zero). With |A| <= F_c and F_s >= F_c (the schema's checks) the friction opposes the motion.
Static friction as stick-slip is a plant option (``actuators.plant_friction: stick_slip``,
simulation/embedded.py), not part of this smooth model.
"""

from __future__ import annotations

import numpy as np

from hexapod_control.model.parameters import ActuatorSettings


def coulomb_shape(qd, smoothing_speed) -> np.ndarray:
    """tanh(q_d / v_s): the smooth sign(q_d) the Coulomb force is F_c times (any shape, broadcast)."""
    return np.tanh(np.asarray(qd, dtype=float) / np.asarray(smoothing_speed, dtype=float))


class ActuatorModel:
    """The drive terms of one parameter set; ``rigid`` when they all vanish, ``symmetric`` without the screw's terms."""

    def __init__(self, settings: ActuatorSettings):
        self.settings = settings
        self.inertia = np.array(settings.reflected_inertia)  # J [kg]
        self.viscous = np.array(settings.viscous_friction)  # b [N*s/m]
        self.coulomb = np.array(settings.coulomb_friction)  # F_c [N]
        self.smoothing_speed = np.array(settings.coulomb_smoothing_speed)  # v_s [m/s]
        self.rigid = settings.rigid
        self.symmetric = settings.symmetric
        self.asymmetry = np.array(settings.coulomb_asymmetry)  # A [N]
        self.stribeck_speed = np.array(settings.stribeck_speed)  # v_st [m/s], 0 = no hump
        self._has_hump = self.stribeck_speed > 0.0
        # F_s - F_c where the hump is on; the division by v_st is guarded where it is off.
        self.stribeck_level = np.where(self._has_hump, np.array(settings.static_friction) - self.coulomb, 0.0)
        self._hump_speed = np.where(self._has_hump, self.stribeck_speed, 1.0)
        self.ripple = np.array((settings.viscous_ripple_cos, settings.viscous_ripple_sin))  # (2, 6) [N*s/m]
        self.ripple_wavenumber = 2.0 * np.pi / settings.viscous_ripple_period  # [rad/m]

    def viscous_at(self, q=None) -> np.ndarray:
        """b + b_c cos(2 pi q / p) + b_s sin(2 pi q / p) (6,) [N*s/m]; b without ``q`` or ripple."""
        if q is None or self.symmetric:
            return self.viscous
        angle = self.ripple_wavenumber * np.asarray(q, dtype=float)
        return self.viscous + self.ripple[0] * np.cos(angle) + self.ripple[1] * np.sin(angle)

    def friction(self, qd, q=None) -> np.ndarray:
        """The force the drive loses to friction (6,) [N] (module doc); ``q`` for the ripple."""
        qd = np.asarray(qd, dtype=float)
        shape = coulomb_shape(qd, self.smoothing_speed)
        if self.symmetric:
            return self.viscous * qd + self.coulomb * shape
        return self.viscous * qd + self.coulomb * shape + self.lead_screw_friction(qd, q)

    def lead_screw_friction(self, qd, q=None) -> np.ndarray:
        """The lead screw's terms of :meth:`friction` alone (6,) [N]: asymmetry, Stribeck hump, ripple."""
        qd = np.asarray(qd, dtype=float)
        shape = coulomb_shape(qd, self.smoothing_speed)
        hump = np.exp(-((qd / self._hump_speed) ** 2))
        terms = self.asymmetry * np.abs(shape) + self.stribeck_level * hump * shape
        return terms if q is None else terms + (self.viscous_at(q) - self.viscous) * qd

    def coulomb_slope(self, qd, q=None) -> np.ndarray:
        """d (friction - viscous part) / d q_d (6,) [N*s/m]: the stiff slope of the dry friction near rest.

        Negative where the Stribeck hump falls faster than the smooth sign rises; ``q`` is unused
        (the ripple is viscous) and accepted for symmetry with :meth:`friction`.
        """
        shape = coulomb_shape(qd, self.smoothing_speed)
        if self.symmetric:
            return self.coulomb / self.smoothing_speed * (1.0 - shape * shape)
        rise = (1.0 - shape * shape) / self.smoothing_speed  # d tanh(q_d / v_s) / d q_d
        qd = np.asarray(qd, dtype=float)
        hump = np.exp(-((qd / self._hump_speed) ** 2))
        hump_slope = -2.0 * qd / self._hump_speed**2 * hump
        return ((self.coulomb + self.asymmetry * np.sign(shape)) * rise
                + self.stribeck_level * (hump * rise + hump_slope * shape))

    def forces(self, qd, qdd, q=None) -> np.ndarray:
        """J q_dd + friction(q_d, q) (6,) [N]: what the drives need on top of the rigid bodies."""
        return self.inertia * np.asarray(qdd, dtype=float) + self.friction(qd, q)

    def kinetic_energy(self, qd) -> float:
        """1/2 sum J q_d^2 [J] stored in the rotors."""
        qd = np.asarray(qd, dtype=float)
        return 0.5 * float(np.dot(self.inertia, qd * qd))
