"""The embedded simulator against properties of mechanics, not against its own outputs."""

import math

import numpy as np
import pytest

from hexapod_control import HexapodModel, InvalidInputError, load_parameters
from hexapod_control.errors import SimulationDivergedError
from hexapod_control.model.parameters import default_parameters_path
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.embedded import EmbeddedSimulator

HOME = np.full(6, 0.1765)
AMPLITUDES = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05])
FREQUENCIES = np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])


def thesis_joint_trajectory(t):
    """(6.82) and its analytic derivatives: q = q0 + c s(t) sin(w t), s = 1 - exp(-t^3)."""
    s, ds, dds = 1 - math.exp(-(t**3)), 3 * t**2 * math.exp(-(t**3)), (6 * t - 9 * t**4) * math.exp(-(t**3))
    sin, cos = np.sin(FREQUENCIES * t), np.cos(FREQUENCIES * t)
    q = HOME + AMPLITUDES * s * sin
    qd = AMPLITUDES * (ds * sin + s * FREQUENCIES * cos)
    qdd = AMPLITUDES * (dds * sin + 2 * ds * FREQUENCIES * cos - s * FREQUENCIES**2 * sin)
    return q, qd, qdd


def simulator(integrator="semi_implicit_euler", substeps=1, sensor=None, parameters=None):
    parameters = parameters or load_parameters()
    changes = {"embedded": {"integrator": integrator, "substeps": substeps}, "sensor": sensor or {}}
    return EmbeddedSimulator(parameters.replace(simulation=changes))


def test_static_forces_hold_the_robot_at_home():
    plant = simulator()
    plant.apply_forces(plant.model.gravity_term(HOME))
    plant.step(1000)
    q, qd = plant.true_state
    # Measured after 1 s: q unchanged to the last bit, |q_dot| 4.5e-16 m/s (round-off of M_bar^-1 (tau - g)).
    assert np.max(np.abs(q - HOME)) < 1e-15
    assert np.max(np.abs(qd)) < 2e-15


def test_work_of_the_forces_equals_the_energy_change():
    """Constant forces are conservative: K + U - tau.q stays constant along the motion (RK4)."""
    plant = simulator(integrator="rk4", substeps=2)
    model = HexapodModel(plant.parameters)
    tau = model.gravity_term(HOME) + np.array([3.0, -2.0, 1.0, 0.5, -1.5, 2.0])
    plant.reset(HOME, np.array([0.05, -0.02, 0.03, 0.0, 0.01, -0.04]))
    plant.apply_forces(tau)

    def total_energy():
        q, qd = plant.true_state
        kinetic, potential = model.energy(q, qd)
        return kinetic + potential - tau @ q

    start = total_energy()
    largest_drift = 0.0
    for _ in range(40):
        plant.step(5)
        largest_drift = max(largest_drift, abs(total_energy() - start))
    q, _ = plant.true_state
    assert np.max(np.abs(q - HOME)) > 1e-3  # it really moved
    kinetic_scale = model.energy(HOME, [0.05] * 6)[0]  # 6.5e-3 J
    assert largest_drift < 3e-9 * kinetic_scale  # 6.3e-12 J (9.7e-10 of the scale) measured


@pytest.mark.slow
def test_open_loop_inverse_dynamics_reproduces_the_thesis_trajectory():
    plant = simulator(integrator="rk4")
    model = HexapodModel(plant.parameters)
    plant.reset(HOME)
    worst = 0.0
    for k in range(1000):  # 1 s at 1 kHz, force held over each step at its mid-step value
        t_mid = (k + 0.5) * plant.dt
        plant.apply_forces(model.inverse_dynamics(*thesis_joint_trajectory(t_mid)))
        plant.step()
        worst = max(worst, np.max(np.abs(plant.true_state[0] - thesis_joint_trajectory((k + 1) * plant.dt)[0])))
    # Mid-step forces make the zero-order hold error third order in dt: 3.2e-8 m over 1 s measured
    # (RK4, 1 kHz). Forces sampled at the step start instead give 6.9e-5 m.
    assert worst < 1e-7


def test_forces_saturate_at_the_plants_own_limit():
    plant = simulator()
    plant.apply_forces([1000.0, -1000.0, 10.0, 0.0, 0.0, 0.0])
    limit = plant.parameters.limits.actuator_force_max
    np.testing.assert_array_equal(plant.applied_forces, [limit, -limit, 10.0, 0.0, 0.0, 0.0])


def test_sensor_model_delays_quantises_and_adds_seeded_noise():
    delayed = simulator(sensor={"delay_steps": 3})
    delayed.reset(HOME, np.full(6, 0.01))
    delayed.apply_forces(delayed.model.gravity_term(HOME))
    truth = [delayed.true_state[0]]
    for _ in range(5):
        delayed.step()
        truth.append(delayed.true_state[0])
    np.testing.assert_array_equal(delayed.joint_positions(), truth[-4])

    coarse = simulator(sensor={"encoder_resolution": 1e-4})
    coarse.reset(HOME + 3.3e-5)
    np.testing.assert_allclose(coarse.joint_positions(), np.round((HOME + 3.3e-5) / 1e-4) * 1e-4, atol=1e-15)

    noisy = [simulator(sensor={"noise_std": 1e-5}) for _ in range(2)]
    readings = [plant.joint_positions() for plant in noisy]
    np.testing.assert_array_equal(readings[0], readings[1])  # same seed, same noise
    assert 0.0 < np.max(np.abs(readings[0] - HOME)) < 1e-4
    np.testing.assert_array_equal(noisy[0].joint_positions(), readings[0])  # one sample per step


def test_mismatched_parameter_set_is_its_own_plant():
    validation = load_parameters(default_parameters_path("hexapod_validation.yaml"))
    plant = make_plant("embedded", validation)
    assert plant.model.parameters.geometry.leg_length == 0.3689


def test_a_runaway_stops_with_a_clear_error_and_finite_state():
    plant = simulator()
    limit = plant.parameters.limits.actuator_force_max
    plant.apply_forces([limit, limit, -limit, -limit, limit, -limit])
    with pytest.raises(SimulationDivergedError, match="t = "):
        plant.step(20000)
    q, qd = plant.true_state
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(qd))


def test_bad_commands_are_rejected():
    plant = simulator()
    with pytest.raises(InvalidInputError, match="q2"):
        plant.apply_forces([0.0, 0.0, float("nan"), 0.0, 0.0, 0.0])
    with pytest.raises(InvalidInputError):
        plant.apply_forces([0.0] * 5)
    with pytest.raises(Exception, match="backend"):
        make_plant("gazebo", plant.parameters)
