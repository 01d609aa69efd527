"""The drives of the sliders (reflected inertia, viscous and Coulomb friction) in the model and the plants.

Checked against computations written here: the drive forces J q_dd + b q_d + F_c tanh(q_d / v_s)
added to the rigid-body model by hand, the energy and power balance with the friction's
dissipation, MuJoCo's own armature/damping/frictionloss, the stick-slip rule's breakaway force,
and the sampled double loop linearised at home (exact zero-order hold) for the question of the
thesis gains. With all drive parameters zero, every result is the rigid-body model's bit for bit.
A lead screw's terms (Coulomb by direction, Stribeck hump, viscous ripple) are checked against
the law written out per direction here, in the model, both plants and computed torque.
"""

import math

import numpy as np
import pytest
from scipy.linalg import expm
from scipy.optimize import brentq

from hexapod_control import HexapodModel, ParameterError, load_parameters
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.safety import Action
from hexapod_control.control.trajectories import HoldTrajectory, home_pose, make_trajectory
from hexapod_control.model.parameters import default_parameters_path
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant
from hexapod_control.simulation.embedded import EmbeddedSimulator
from hexapod_control.simulation.lockstep import LockstepLoop
from hexapod_control.simulation.mjcf import build_mjcf

RIGID = load_parameters()
DRIVES = load_parameters(default_parameters_path("hexapod_actuators.yaml"))
# Drives that differ per slider, so that a mixed-up index shows.
UNEVEN = {
    "reflected_inertia": [3.5, 3.9, 4.2, 4.0, 3.7, 4.4],
    "viscous_friction": [30.0, 35.0, 40.0, 45.0, 50.0, 38.0],
    "coulomb_friction": [10.0, 12.0, 14.0, 16.0, 13.0, 11.0],
    "coulomb_smoothing_speed": [0.002, 0.003, 0.002, 0.004, 0.002, 0.005],
    "static_friction": 20.0,
}
# A lead screw on top (model/actuators.py): Coulomb by direction, a Stribeck hump, a viscous ripple.
LEAD_SCREW = dict(
    UNEVEN,
    coulomb_asymmetry=[1.5, -2.0, 0.0, 3.0, -1.0, 0.5],
    static_friction=[14.0, 15.0, 18.0, 20.0, 16.0, 13.0],
    stribeck_speed=[0.005, 0.008, 0.0, 0.004, 0.01, 0.006],
    viscous_ripple_cos=[4.0, -3.0, 5.0, 0.0, 2.0, -6.0],
    viscous_ripple_sin=[-2.0, 4.0, 0.0, 6.0, -5.0, 1.0],
)
THESIS_KP = 3000.0  # [N*s/m], the double loop's velocity gain on the robot


def lead_screw_friction(q, qd, drives=LEAD_SCREW):
    """The lead screw's friction written out per direction (the oracle of the tests below)."""
    coulomb, asymmetry = np.array(drives["coulomb_friction"]), np.array(drives["coulomb_asymmetry"])
    speed, static = np.array(drives["stribeck_speed"]), np.array(drives["static_friction"])
    level = np.where(qd >= 0.0, coulomb + asymmetry, coulomb - asymmetry)
    hump = np.where(speed > 0.0, (static - coulomb) * np.exp(-((qd / np.where(speed > 0.0, speed, 1.0)) ** 2)), 0.0)
    angle = 2.0 * np.pi * np.asarray(q) / RIGID.actuators.viscous_ripple_period
    viscous = (np.array(drives["viscous_friction"]) + np.array(drives["viscous_ripple_cos"]) * np.cos(angle)
               + np.array(drives["viscous_ripple_sin"]) * np.sin(angle))
    return viscous * qd + (level + hump) * np.tanh(qd / np.array(drives["coulomb_smoothing_speed"]))


def random_states(count, seed, spread=0.03, speed=0.3, acceleration=3.0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q = RIGID.home_actuator_position + rng.uniform(-spread, spread, 6)
        yield q, rng.uniform(-speed, speed, 6), rng.uniform(-acceleration, acceleration, 6)


# ------------------------------------------------------------------------------------------ the model
def test_zero_drives_are_the_rigid_bodies_bit_for_bit():
    """With all drive terms zero the model calls the generated functions alone, as before the drives."""
    model = HexapodModel(RIGID)
    terms, packed = model.dynamics.terms, model.dynamics._packed
    for q, qd, qdd in random_states(5, 1):
        phi = list(model.forward_kinematics(q).phi)
        q, qd, qdd = list(q), list(qd), list(qdd)
        tau = model.inverse_dynamics(q, qd, qdd, phi=phi)
        np.testing.assert_array_equal(tau, terms.reduced_inverse_dynamics(q, phi, qd, qdd, packed))
        np.testing.assert_array_equal(model.forward_dynamics(q, qd, tau, phi=phi),
                                      terms.reduced_forward_dynamics(q, phi, qd, list(tau), packed))
        raw = np.array(terms.reduced_mass_matrix(q, phi, packed)).reshape(6, 6)
        np.testing.assert_array_equal(model.mass_matrix(q, phi=phi), 0.5 * (raw + raw.T))
        assert model.energy(q, qd, phi=phi) == tuple(terms.reduced_energy(q, phi, qd, packed))
    # The MuJoCo model of the rigid set carries no drive attribute at all.
    text = build_mjcf(RIGID)
    assert not any(word in text for word in ("armature", "damping", "frictionloss"))


def test_drive_forces_add_to_the_rigid_bodies():
    rigid, driven = HexapodModel(RIGID), HexapodModel(RIGID.replace(actuators=UNEVEN))
    inertia, viscous, coulomb, smoothing = (np.array(UNEVEN[k]) for k in (
        "reflected_inertia", "viscous_friction", "coulomb_friction", "coulomb_smoothing_speed"))
    for q, qd, qdd in random_states(5, 2):
        phi = rigid.forward_kinematics(q).phi
        drive = inertia * qdd + viscous * qd + coulomb * np.tanh(qd / smoothing)
        # Measured: 0 to 3.6e-15 N (the sum's round-off).
        np.testing.assert_allclose(driven.inverse_dynamics(q, qd, qdd, phi=phi),
                                   rigid.inverse_dynamics(q, qd, qdd, phi=phi) + drive, rtol=0, atol=1e-13)
        np.testing.assert_allclose(driven.mass_matrix(q, phi=phi), rigid.mass_matrix(q, phi=phi) + np.diag(inertia),
                                   rtol=0, atol=1e-15)
        kinetic, potential = driven.energy(q, qd, phi=phi)
        rigid_kinetic, rigid_potential = rigid.energy(q, qd, phi=phi)
        assert kinetic == pytest.approx(rigid_kinetic + 0.5 * np.dot(inertia, qd * qd), rel=1e-15)
        assert potential == rigid_potential
        # Forward dynamics inverts inverse dynamics through the drives (2.7e-15 m/s^2 measured).
        tau = driven.inverse_dynamics(q, qd, qdd, phi=phi)
        np.testing.assert_allclose(driven.forward_dynamics(q, qd, tau, phi=phi), qdd, rtol=0, atol=1e-13)


def test_lead_screw_terms_in_the_model():
    """Per direction, hump and ripple as written here; through inverse and forward dynamics; dissipative."""
    rigid, driven = HexapodModel(RIGID), HexapodModel(RIGID.replace(actuators=LEAD_SCREW))
    drives = driven.dynamics.actuators
    assert not drives.symmetric and HexapodModel(RIGID.replace(actuators=UNEVEN)).dynamics.actuators.symmetric
    hump_alone = RIGID.replace(actuators={"static_friction": 5.0, "stribeck_speed": 0.005}).actuators
    assert not hump_alone.rigid and not hump_alone.symmetric  # a hump without Coulomb friction is still friction
    inertia = np.array(LEAD_SCREW["reflected_inertia"])
    for q, qd, qdd in random_states(5, 4, speed=0.02):  # slow: the hump shows
        phi = rigid.forward_kinematics(q).phi
        np.testing.assert_allclose(drives.friction(qd, q), lead_screw_friction(q, qd), rtol=0, atol=1e-12)
        np.testing.assert_allclose(driven.inverse_dynamics(q, qd, qdd, phi=phi),
                                   rigid.inverse_dynamics(q, qd, qdd, phi=phi) + inertia * qdd + lead_screw_friction(q, qd),
                                   rtol=0, atol=1e-12)
        tau = driven.inverse_dynamics(q, qd, qdd, phi=phi)
        np.testing.assert_allclose(driven.forward_dynamics(q, qd, tau, phi=phi), qdd, rtol=0, atol=1e-12)
        # Without the position the ripple is left out (its mean over a lead).
        flat = dict(LEAD_SCREW, viscous_ripple_cos=[0.0] * 6, viscous_ripple_sin=[0.0] * 6)
        np.testing.assert_allclose(drives.friction(qd), lead_screw_friction(q, qd, flat), rtol=0, atol=1e-12)
    rng = np.random.default_rng(5)
    q = RIGID.home_actuator_position + rng.uniform(-0.03, 0.03, (2000, 6))
    qd = rng.normal(0.0, 0.01, (2000, 6))
    assert np.all(np.array([drives.friction(v, p) for p, v in zip(q, qd)]) * qd >= 0.0)  # friction opposes motion


def test_lead_screw_slope_is_the_derivative_of_the_dry_friction():
    drives = HexapodModel(RIGID.replace(actuators=LEAD_SCREW)).dynamics.actuators
    step = 1e-7  # [m/s]
    for qd in np.random.default_rng(6).normal(0.0, 0.006, (50, 6)):
        def dry(v):
            return drives.friction(v) - drives.viscous * v

        numeric = (dry(qd + step) - dry(qd - step)) / (2.0 * step)
        np.testing.assert_allclose(drives.coulomb_slope(qd), numeric, rtol=1e-5, atol=1e-3)


@pytest.mark.slow
def test_power_balance_with_friction():
    """Along (6.82): work of the forces = change of K + U (rotors included) + heat of the friction.

    The energies come from the rigid model plus 1/2 J q_d^2, the heat from b q_d^2 + F_c q_d
    tanh(q_d / v_s), both written here; Gauss-Legendre quadrature as in test_dynamics.py.
    """
    parameters = RIGID.replace(actuators=UNEVEN)
    driven, rigid = HexapodModel(parameters), HexapodModel(RIGID)
    inertia, viscous, coulomb, smoothing = (np.array(UNEVEN[k]) for k in (
        "reflected_inertia", "viscous_friction", "coulomb_friction", "coulomb_smoothing_speed"))
    amplitude, omega = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05]), np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])

    def motion(t):
        e = math.exp(-(t**3))
        s, s1, s2 = 1 - e, 3 * t**2 * e, (6 * t - 9 * t**4) * e
        sin, cos = np.sin(omega * t), np.cos(omega * t)
        return (RIGID.home_actuator_position + amplitude * s * sin, amplitude * (s1 * sin + s * omega * cos),
                amplitude * (s2 * sin + 2 * s1 * omega * cos - s * omega**2 * sin))

    def energy(t):
        q, qd, _ = motion(t)
        return sum(rigid.energy(q, qd)) + 0.5 * np.dot(inertia, qd * qd)

    nodes, weights = np.polynomial.legendre.leggauss(10)
    duration, panels = 4.0, 400  # the Coulomb term turns within v_s: fine panels resolve it
    work = heat = magnitude = 0.0
    for p in range(panels):
        for x, w in zip(nodes, weights):
            t = (p + 0.5 * (x + 1)) * duration / panels
            q, qd, qdd = motion(t)
            power = driven.inverse_dynamics(q, qd, qdd) @ qd
            scale = 0.5 * w * duration / panels
            work += scale * power
            heat += scale * np.dot(viscous * qd + coulomb * np.tanh(qd / smoothing), qd)
            magnitude += scale * abs(power)
    error = abs(work - (energy(duration) - energy(0.0)) - heat) / magnitude
    print(f"work {work:.9f} J, energy change {energy(duration) - energy(0.0):.9f} J, heat {heat:.9f} J, "
          f"relative error {error:.2e}")
    assert heat > 0.3 * work  # the friction matters here
    assert error < 1e-13  # 2.0e-15 measured


@pytest.mark.slow
def test_simulated_energy_balance_with_friction():
    """The embedded plant (RK4) under constant forces: K + U - tau.q + heat stays constant."""
    drives = dict(UNEVEN, coulomb_smoothing_speed=0.05)  # smooth enough for an explicit RK4 at 0.25 ms
    parameters = RIGID.replace(actuators=drives, simulation={"embedded": {"integrator": "rk4", "substeps": 4}})
    plant = EmbeddedSimulator(parameters)
    model = HexapodModel(RIGID)  # energies of the rigid bodies, the rotors added here
    inertia, viscous, coulomb = (np.array(drives[k]) for k in ("reflected_inertia", "viscous_friction", "coulomb_friction"))
    home = np.full(6, RIGID.home_actuator_position)
    tau = model.gravity_term(home) + np.array([30.0, -20.0, 10.0, 5.0, -15.0, 20.0])
    plant.reset(home, np.array([0.05, -0.02, 0.03, 0.0, 0.01, -0.04]))
    plant.apply_forces(tau)

    def state():
        q, qd = plant.true_state
        stored = sum(model.energy(q, qd)) + 0.5 * np.dot(inertia, qd * qd) - tau @ q
        return stored, np.dot(viscous * qd + coulomb * np.tanh(qd / 0.05), qd)

    start, power = state()
    heat, worst, scale = 0.0, 0.0, 0.0
    for _ in range(300):
        plant.step()
        stored, new_power = state()
        heat += 0.5 * plant.dt * (power + new_power)  # trapezoid over the 1 ms step
        power = new_power
        worst = max(worst, abs(stored + heat - start))
        scale = max(scale, heat)
    print(f"heat {heat:.6f} J, largest drift of K + U - tau.q + heat {worst:.2e} J")
    assert heat > 0.01  # the friction did work
    assert worst < 1e-5 * scale  # 2.4e-6 relative measured (1.1e-5 J of 4.45 J): the trapezoid's error on the heat


# ------------------------------------------------------------------------------------------ MuJoCo
@pytest.mark.parametrize("drives", [UNEVEN, LEAD_SCREW], ids=["symmetric", "lead_screw"])
def test_mujoco_drives_agree_with_the_model_where_comparable(drives):
    """MuJoCo's armature, damping and frictionloss against the model at speeds beyond the smoothing.

    MuJoCo's dry friction is a constraint (F_c in magnitude once sliding), the model's tanh is the
    same there: |q_d| >= 0.05 m/s is 25 v_s. The loop closures are soft, which costs ~1e-4 of the
    accelerations (test_mujoco_plant.py); the drives change them by ~3 orders more.
    """
    from hexapod_control.simulation.mujoco_plant import MujocoPlant

    parameters = DRIVES.replace(actuators=drives)
    plant, driven, rigid = MujocoPlant(parameters), HexapodModel(parameters), HexapodModel(RIGID)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = RIGID.home_actuator_position + rng.uniform(-0.03, 0.03, 6)
        qd = rng.choice([-1.0, 1.0], 6) * rng.uniform(0.05, 0.2, 6)
        tau = rng.uniform(-50.0, 50.0, 6)
        plant.reset(q, qd)
        plant.apply_forces(tau)
        model, mujoco_acceleration = driven.forward_dynamics(q, qd, tau), plant.joint_accelerations()
        difference = np.max(np.abs(mujoco_acceleration - model))
        effect = np.max(np.abs(model - rigid.forward_dynamics(q, qd, tau)))
        print(f"|MuJoCo - model| {difference:.2e} m/s^2, drives' effect {effect:.1f} m/s^2")
        assert difference < 5e-3  # 1.9e-3 worst measured
        assert effect > 1e3 * difference


# ------------------------------------------------------------------------------------------ stick-slip
def stick_slip_plant():
    return EmbeddedSimulator(DRIVES.replace(actuators={"plant_friction": "stick_slip"}))


@pytest.mark.parametrize("extra, moves", [(0.0, False), (19.0, False), (21.0, True), (40.0, True)])
def test_a_sticking_slider_breaks_away_above_its_static_friction(extra, moves):
    """20 N static friction: 19 N beyond the holding force leaves the robot where it is, 21 N does not."""
    plant = stick_slip_plant()
    home = np.full(6, RIGID.home_actuator_position)
    forces = plant.model.gravity_term(home)
    forces[0] += extra
    plant.apply_forces(forces)
    plant.step(200)
    q, qd = plant.true_state
    if moves:
        assert qd[0] > 0.01 and q[0] > home[0]
        # Once sliding, the Coulomb (15 N) and viscous forces act: a smooth plant gets there too.
        smooth = EmbeddedSimulator(DRIVES)
        smooth.apply_forces(forces)
        smooth.step(200)
        assert q[0] == pytest.approx(smooth.true_state[0][0], rel=0.05)
    else:
        np.testing.assert_array_equal(q, home)
        np.testing.assert_array_equal(qd, np.zeros(6))


def test_the_smooth_law_creeps_where_stick_slip_holds():
    plant = EmbeddedSimulator(DRIVES)
    home = np.full(6, RIGID.home_actuator_position)
    forces = plant.model.gravity_term(home)
    forces[0] += 10.0  # below F_c = 15 N: the tanh law lets the slider creep at ~v_s
    plant.apply_forces(forces)
    plant.step(200)
    assert 0.0 < plant.true_state[1][0] < DRIVES.actuators.coulomb_smoothing_speed[0]


def test_stick_slip_needs_the_semi_implicit_integrator():
    parameters = DRIVES.replace(actuators={"plant_friction": "stick_slip"}, simulation={"embedded": {"integrator": "rk4"}})
    with pytest.raises(ParameterError, match=r"hexapod_actuators.yaml: hexapod.actuators.plant_friction"):
        EmbeddedSimulator(parameters)


# ------------------------------------------------------------------------------------------ controllers
def lockstep_errors(plant_parameters, model_parameters, controller, gain_set, duration, trajectory="joint_space"):
    model = HexapodModel(model_parameters)
    plant = DelayedPlant.from_settings(make_plant("embedded", plant_parameters), plant_parameters.simulation)
    control = ControlLoop(model, controller, gain_set=gain_set, arm_on_start=True)
    loop = LockstepLoop(plant, control, make_trajectory(trajectory, model))
    errors = np.array([r.step.decision.control.position_error_norm for r in loop.run(duration)
                       if r.step.decision.control is not None])
    assert loop.failure == ""
    return float(np.sqrt(np.mean(errors**2))), float(errors.max())


TRACKING_DURATION = 2.0  # [s] of (6.82): the ramp (s = 0.9997 at 2 s) and a period of its fastest sliders


@pytest.mark.slow
@pytest.mark.parametrize("lead_screw", [False, True], ids=["symmetric", "lead_screw"])
def test_computed_torque_compensates_the_drives(lead_screw):
    """On the plant with drives, computed torque with the drives in its model tracks as on the rigid plant."""
    drives = DRIVES.replace(actuators=LEAD_SCREW) if lead_screw else DRIVES
    rigid = lockstep_errors(RIGID, RIGID, "computed_torque", "simulated_plant", TRACKING_DURATION)
    driven = lockstep_errors(drives, drives, "computed_torque", "simulated_plant", TRACKING_DURATION)
    blind = lockstep_errors(drives, RIGID, "computed_torque", "simulated_plant", TRACKING_DURATION)
    print(f"computed torque RMS/max position error: rigid {rigid}, drives compensated {driven}, not compensated {blind} m")
    # The largest error with drives is a slider's velocity reversal through the Coulomb law's
    # smoothing speed (a 2 um bump, 3.3x the rigid run's largest), sensitive to the exact state
    # there (measured: RMS 1.19x, largest 3.3x the rigid run's).
    assert driven[0] < 1.5 * rigid[0] and driven[1] < 5.0 * rigid[1]
    assert blind[0] > 100.0 * driven[0]  # the compensation is what does it


# ------------------------------------------------------------------------------------------ thesis gains
def double_loop_spectral_radius(reflected_inertia, delay_periods, viscous=0.0):
    """Spectral radius of the double loop with the thesis gains on the model at home, sampled at 1 kHz.

    Plant linearised at rest: M e_dd = tau - G e - B e_d (M with diag(J), G = dg_bar/dq by central
    differences, B = viscous friction; the Coulomb force is left out, which leaves the least
    damping), discretised exactly for a force held over the period; the controller reads the state
    ``delay_periods`` periods old. x = (e, e_d), tau = K_p (nu_d - e_d) + K_i I, nu_d = -J_A^-1 K J_A e.
    """
    parameters = RIGID.replace(actuators={"reflected_inertia": reflected_inertia, "viscous_friction": viscous})
    model = HexapodModel(parameters)
    q = model.home_q
    phi = model.forward_kinematics(q).phi
    jacobian = model.analytic_jacobian(q, phi=phi).analytic
    mass = model.mass_matrix(q, phi=phi)
    step = 1e-6
    stiffness = np.column_stack([(model.gravity_term(q + step * e) - model.gravity_term(q - step * e)) / (2 * step)
                                 for e in np.eye(6)])
    settings = parameters.controllers
    dt, loop = settings.period, settings.double_loop
    kp, ki = np.diag(loop.velocity_proportional_gain), np.diag(loop.velocity_integral_gain)
    outer = np.linalg.solve(jacobian, np.diag(loop.kinematic_gain) @ jacobian)
    inverse_mass = np.linalg.inv(mass)
    continuous = np.block([[np.zeros((6, 6)), np.eye(6)],
                           [-inverse_mass @ stiffness, -inverse_mass @ np.diag(parameters.actuators.viscous_friction)]])
    augmented = np.zeros((18, 18))
    augmented[:12, :12], augmented[6:12, 12:] = continuous, inverse_mass
    exact = expm(augmented * dt)
    a, b = exact[:12, :12], exact[:12, 12:]
    n = 12 + 6 + 12 * delay_periods  # x, I, the delayed copies of x
    closed = np.zeros((n, n))
    measured = slice(n - 12, n) if delay_periods else slice(0, 12)
    closed[:12, :12] = a
    closed[:12, measured] += b @ np.hstack((-kp @ outer, -kp))
    closed[:12, 12:18] += b @ ki
    closed[12:18, 12:18] = np.eye(6)
    closed[12:18, measured] += dt * np.hstack((-outer, -np.eye(6)))
    for d in range(delay_periods):
        source = slice(0, 12) if d == 0 else slice(18 + 12 * (d - 1), 18 + 12 * d)
        closed[18 + 12 * d : 30 + 12 * d, source] = np.eye(12)
    return float(np.max(np.abs(np.linalg.eigvals(closed))))


# The smallest reflected inertia per slider for which the thesis gains are stable at 1 kHz.
SMALLEST_STABLE_INERTIA = {0: 0.6731, 1: 2.1895, 2: 4.0794}  # [kg] by loop delay [periods]


# The velocity loop alone on a mass m, per axis: e_k+1 = e_k - a e_k-d with a = K_p dt / m is stable
# for a below 2 (d = 0), 1 (d = 1), (sqrt 5 - 1) / 2 (d = 2): the bound on the lightest mode.
SCALAR_POLE_BOUND = {0: 2.0, 1: 1.0, 2: (math.sqrt(5.0) - 1.0) / 2.0}


@pytest.mark.parametrize("delay", [0, 1, 2])
def test_smallest_reflected_inertia_for_the_thesis_gains(delay):
    """Without rotor inertia the thesis K_p is unstable (lightest mode 0.83 kg); with enough J it is not."""
    assert RIGID.controllers.double_loop.velocity_proportional_gain[0] == THESIS_KP
    smallest = brentq(lambda j: double_loop_spectral_radius(j, delay) - 1.0, 0.0, 8.0, xtol=1e-6)
    print(f"loop delay {delay} period(s): thesis gains stable from J = {smallest:.4f} kg")
    assert smallest == pytest.approx(SMALLEST_STABLE_INERTIA[delay], abs=2e-4)
    # The full loop (outer loop, integrator, gravity, coupled modes) lands within 2 % of the scalar bound.
    home = np.full(6, RIGID.home_actuator_position)
    lightest = float(np.linalg.eigvalsh(HexapodModel(RIGID).mass_matrix(home))[0])
    assert lightest + smallest == pytest.approx(THESIS_KP * RIGID.controllers.period / SCALAR_POLE_BOUND[delay], rel=0.02)
    # The motor-data estimate (3.948 kg) makes them stable with up to one period of loop delay.
    assert (DRIVES.actuators.reflected_inertia[0] > smallest) == (delay <= 1)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0, 1])
def test_thesis_gains_in_simulation_either_side_of_the_smallest_inertia(delay):
    """The nonlinear 1 kHz loop on the embedded plant: 10 % below the bound the forces ring, 10 %
    above they settle smoothly on the gravity force (measured by their second difference)."""
    for factor, stable in ((0.9, False), (1.1, True)):
        inertia = factor * SMALLEST_STABLE_INERTIA[delay]
        # The bare law, as the thesis ran it and the linearisation has it: no delay compensation.
        parameters = RIGID.replace(actuators={"reflected_inertia": inertia},
                                   simulation={"loop_delay": {"periods": delay}},
                                   controllers={"delay_compensation": {"predictor": "none"}})
        model = HexapodModel(parameters)
        plant = DelayedPlant.from_settings(make_plant("embedded", parameters), parameters.simulation)
        control = ControlLoop(model, "double_loop", gain_set="robot", arm_on_start=True)
        # The double loop starts bumplessly at the gravity force, an exact equilibrium: a reference
        # 1 um above home gives the unstable mode something to grow from.
        loop = LockstepLoop(plant, control, HoldTrajectory(home_pose(model) + np.array([0.0, 0.0, 1e-6, 0.0, 0.0, 0.0])))
        forces = np.array([r.step.forces for r in loop.run(1.0)])
        ringing = np.max(np.abs(np.diff(forces[-100:], 2, axis=0)))
        print(f"delay {delay}, J = {inertia:.3f} kg: largest second difference of the forces over the last 0.1 s {ringing:.3g} N")
        if stable:
            assert ringing < 1e-3
        else:  # the forces ring, or the supervisor holds the loop pinned at the force limit
            reason = control.supervisor.reason
            assert ringing > 1.0 or (control.supervisor.fault_action == Action.HOLD and "at the limit" in reason)
