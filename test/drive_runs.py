"""An independent simulator of lead-screw drives that writes the bags hexapod_identify reads.

Not the package's plants: its own friction formulas, integrator, controller and loop timing, so
that the identification is judged on data its own model did not make. Only the rigid bodies come
from the package's generated model (M_bar and the bias forces of config/hexapod.yaml, which has no
drives), as a robot's would come from physics.

Drive of slider i, with its own law (not the package's tanh):

    f_i = J_i q_dd + b_i (1 + r_i sin(2 pi q / p + psi_i)) q_d
          + (F_c,i^dir + (F_s,i^dir - F_c,i^dir) exp(-(q_d / v_st,i)^2)) s(q_d)

s(v) = v / sqrt(v^2 + eps^2) a smooth sign, F^+ / F^- per direction (F_s^dir = ratio_i F_c,i^dir).
The loop: the command answering the joint state of step n acts over steps n + 1 + delay - 1 ...
i.e. ``delay`` periods late, held by the drive; the joint state of step n carries the quantised,
noisy position, a noisy velocity and (optionally) the force that acted over the step before it,
as ros2_control reads it back. The controller: joint-space PD around a multi-sine plus the rigid
model's inverse dynamics and a rough drive guess as feed-forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.bags import BagWriter
from hexapod_control.bags.messages import effort_cdr, joint_state_cdr, nanoseconds
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS

RIGID = load_parameters()
PERIOD = 1.0 / RIGID.controllers.rate  # [s]
SMOOTH_SIGN_SPEED = 2e-4  # [m/s] eps of s(v): sharper than the package's v_s, a different shape
LEAD = 0.01  # [m] the screw lead: the period of the viscous ripple
# The controller's rough idea of the drives (feed-forward), and its joint-space gains.
GUESS_INERTIA, GUESS_VISCOUS, GUESS_COULOMB = 3.0, 30.0, 10.0  # [kg, N*s/m, N]
STIFFNESS, DAMPING = 4.0e4, 6.0e2  # [N/m, N*s/m] per slider
FREQUENCY_BAND = (0.3, 3.0)  # [Hz] of the multi-sine components
COMPONENTS = 6  # sines per slider
RAMP = 1.0  # [s] of the cosine ramp on the excitation's amplitude


@dataclass
class Drives:
    """The true drives of one run, per slider."""

    inertia: np.ndarray  # J [kg]
    viscous: np.ndarray  # b [N*s/m]
    coulomb_positive: np.ndarray  # F_c for q_d > 0 [N]
    coulomb_negative: np.ndarray  # F_c for q_d < 0 [N] (a magnitude)
    static_ratio: np.ndarray  # F_s / F_c (1 = no Stribeck hump)
    stribeck_speed: np.ndarray  # v_st [m/s]
    ripple: np.ndarray  # r: relative amplitude of the viscous ripple
    ripple_phase: np.ndarray  # psi [rad]

    def friction(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        coulomb = np.where(qd >= 0.0, self.coulomb_positive, self.coulomb_negative)
        level = coulomb * (1.0 + (self.static_ratio - 1.0) * np.exp(-((qd / self.stribeck_speed) ** 2)))
        viscous = self.viscous * (1.0 + self.ripple * np.sin(2.0 * np.pi * q / LEAD + self.ripple_phase))
        return viscous * qd + level * qd / np.sqrt(qd * qd + SMOOTH_SIGN_SPEED**2)

    def along_motion(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The friction force (N, 6) on a motion (N, 6) (for judging identified models)."""
        return self.friction(q, qd)


@dataclass
class Sensor:
    encoder_resolution: float = 1e-6  # [m]
    position_noise: float = 1e-6  # [m]
    velocity_noise: float = 2e-4  # [m/s]


def random_drives(seed: int, asymmetry=(0.05, 0.30), static=(1.2, 1.6), stribeck=(0.002, 0.010),
                  ripple=0.15) -> Drives:
    """Drives of the issue's kind: Coulomb +-5-30 % by direction, F_s 1.2-1.6 F_c over 2-10 mm/s, ripple +-15 %."""
    rng = np.random.default_rng(seed)
    coulomb = rng.uniform(10.0, 18.0, 6)
    split = rng.uniform(*asymmetry, 6) * rng.choice([-1.0, 1.0], 6)
    return Drives(
        inertia=rng.uniform(3.5, 4.5, 6), viscous=rng.uniform(30.0, 50.0, 6),
        coulomb_positive=coulomb * (1.0 + 0.5 * split), coulomb_negative=coulomb * (1.0 - 0.5 * split),
        static_ratio=rng.uniform(*static, 6), stribeck_speed=rng.uniform(*stribeck, 6),
        ripple=np.full(6, ripple), ripple_phase=rng.uniform(0.0, 2.0 * np.pi, 6),
    )


def excitation(seed: int):
    """q_ref(t) per slider: COMPONENTS sines in FREQUENCY_BAND, peak 3-20 mm, with a ramp in amplitude."""
    rng = np.random.default_rng(seed + 1000)
    frequencies = rng.uniform(*FREQUENCY_BAND, (6, COMPONENTS))
    phases = rng.uniform(0.0, 2.0 * np.pi, (6, COMPONENTS))
    peaks = rng.uniform(0.003, 0.020, 6)
    weights = rng.uniform(0.5, 1.0, (6, COMPONENTS))
    weights *= (peaks / weights.sum(axis=1))[:, None]
    omega = 2.0 * np.pi * frequencies
    home = RIGID.home_actuator_position

    def reference(t: float):
        ramp, ramp_rate = (0.5 - 0.5 * np.cos(np.pi * t / RAMP), 0.5 * np.pi / RAMP * np.sin(np.pi * t / RAMP)) \
            if t < RAMP else (1.0, 0.0)
        angle = omega * t + phases
        shape = np.sum(weights * np.sin(angle), axis=1)
        rate = np.sum(weights * omega * np.cos(angle), axis=1)
        curvature = -np.sum(weights * omega**2 * np.sin(angle), axis=1)
        return home + ramp * shape, ramp * rate + ramp_rate * shape, ramp * curvature + 2.0 * ramp_rate * rate

    return reference


def simulate(path: Path, drives: Drives, seed: int, duration: float, delay: int = 1, with_effort: bool = True,
             sensor: Sensor = Sensor()) -> dict:
    """Run the loop for ``duration`` s and write joint states and commands to the bag ``path``."""
    model = HexapodModel(RIGID)
    dynamics, state = model.dynamics, model.create_state()
    reference = excitation(seed)
    rng = np.random.default_rng(seed + 2000)
    q = np.full(6, RIGID.home_actuator_position)
    qd = np.zeros(6)
    pending = [np.zeros(6)] * delay  # commands on their way to the drives
    acting = np.zeros(6)
    limit = RIGID.limits.actuator_force_max
    writer = BagWriter(Path(path), "mcap")
    writer.add_topic(TOPICS["joint_states"], MESSAGE_TYPES["joint_states"])
    writer.add_topic(TOPICS["effort_commands"], MESSAGE_TYPES["effort_commands"])
    names = RIGID.ros.joint_names
    true_q, true_qd = [], []
    try:
        for n in range(int(round(duration / PERIOD))):
            t = n * PERIOD
            measured_q = np.round((q + rng.normal(0.0, sensor.position_noise, 6)) / sensor.encoder_resolution) \
                * sensor.encoder_resolution
            measured_qd = qd + rng.normal(0.0, sensor.velocity_noise, 6)
            efforts = acting if with_effort else ()
            writer.write(TOPICS["joint_states"], nanoseconds(t),
                         joint_state_cdr(t, names, measured_q, measured_qd, efforts))
            true_q.append(q.copy()), true_qd.append(qd.copy())
            q_ref, qd_ref, qdd_ref = reference(t)
            phi = model.kinematics.solve_passive(measured_q, state).phi
            feedforward = dynamics.inverse_dynamics(q_ref, qd_ref, qdd_ref, phi=phi) + GUESS_INERTIA * qdd_ref \
                + GUESS_VISCOUS * qd_ref + GUESS_COULOMB * np.tanh(qd_ref / 0.005)
            command = np.clip(feedforward + STIFFNESS * (q_ref - measured_q) + DAMPING * (qd_ref - measured_qd),
                              -limit, limit)
            writer.write(TOPICS["effort_commands"], nanoseconds(t) + 1, effort_cdr(command))
            pending.append(command)
            acting = pending.pop(0)
            q, qd = _step(dynamics, model, state, drives, q, qd, acting)
    finally:
        writer.close()
    return {"q": np.array(true_q), "qd": np.array(true_qd)}


def _step(dynamics, model, state, drives: Drives, q, qd, force):
    """Semi-implicit Euler over one period, friction linearised implicitly (its slope by central difference)."""
    phi = model.kinematics.solve_passive(q, state).phi
    mass = dynamics.mass_matrix(q, phi) + np.diag(drives.inertia)
    bias = dynamics.inverse_dynamics(q, qd, np.zeros(6), phi=phi)
    step = 1e-6  # [m/s] of the central difference
    slope = (drives.friction(q, qd + step) - drives.friction(q, qd - step)) / (2.0 * step)
    acceleration = np.linalg.solve(mass + PERIOD * np.diag(slope), force - bias - drives.friction(q, qd))
    qd = qd + PERIOD * acceleration
    return q + PERIOD * qd, qd
