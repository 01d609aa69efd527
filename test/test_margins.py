"""The margin tool (control/margins.py): its linearisation, and its predictions against simulations.

What it prints for the shipped parameters (hexapod_margins), and what the nonlinear plants do:

=================================  =======================  ==========================================
law                                largest stable delay     simulated (test/delay_runs.py, 4 s)
                                   bare / compensated
=================================  =======================  ==========================================
computed torque                    1 / > 20                 bare: 1 ok, 2 clamps in 77-91 % of steps
double loop, simulated_plant gains 2 / > 20                 bare: 2 ok, 3 clamps in 84 % of steps
double loop, robot gains           unstable at 0 (either)   the rigid plant has no rotor inertia
=================================  =======================  ==========================================

Steady tracking error of the 6.5 trajectory, predicted at home against MuJoCo over one full period
after the ramp: double loop compensated at 2 periods 4.5e-5 m / 1.5e-4 rad against 5.2e-5 m /
1.9e-4 rad; computed torque bare at 1 period 9.9e-9 m / 1.9e-8 rad against 1.2e-8 m / 2.7e-8 rad
(compensated, 1.2e-8 m against 5.5e-9 m: at that level the path's nonlinear terms dominate).
"""

import numpy as np
import pytest
from delay_runs import FAST_RAMP, compensation, track

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.control.controllers import make_controller
from hexapod_control.control.delay_compensation import DelayCompensatedController
from hexapod_control.control.margins import (
    central_difference,
    linearised_law,
    linearised_plant,
    main,
    margins,
)
from hexapod_control.control.trajectories import Reference, make_trajectory
from hexapod_control.model.parameters import default_parameters_path
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant

PARAMETERS = load_parameters()
MODEL = HexapodModel(PARAMETERS)
HOME = MODEL.home_q
MAX_DELAY = 6


@pytest.fixture(scope="module")
def rows():
    return {(row.name, row.gain_set): row for row in margins(HexapodModel(FAST_RAMP), max_delay=MAX_DELAY)}


# ------------------------------------------------------------------------------------------ linearisation
def gravity_stiffness():
    """d g_bar / d q at home, from the gravity term alone (the tool differentiates forward dynamics)."""
    step = 1e-6
    return np.array([(MODEL.gravity_term(HOME + step * e) - MODEL.gravity_term(HOME - step * e)) / (2 * step)
                     for e in np.eye(6)]).T


def test_the_plant_is_the_inverse_mass_matrix_and_the_gravity_stiffness():
    plant = linearised_plant(MODEL)
    inverse_mass = np.linalg.inv(MODEL.mass_matrix(HOME))
    np.testing.assert_allclose(plant.b, inverse_mass, rtol=0, atol=1e-9 * np.abs(inverse_mass).max())
    np.testing.assert_allclose(plant.a_q, -inverse_mass @ gravity_stiffness(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(plant.a_v, 0.0, atol=1e-9)  # no velocity terms at rest


def test_the_laws_are_their_gains_through_the_jacobian():
    """Computed torque: du/dq = -M J^-1 K_P J + dg/dq, du/dq_d = -M J^-1 K_V J; double loop:
    e = -J^-1 K J q - q_d, u = K_p e (written out here from the gains, not from the tool)."""
    jacobian = MODEL.analytic_jacobian(HOME).analytic
    inverse = np.linalg.inv(jacobian)
    mass = MODEL.mass_matrix(HOME)
    gains = PARAMETERS.controllers
    law = linearised_law(MODEL, "computed_torque", "robot")
    position = mass @ inverse @ np.diag(gains.computed_torque.position_gain) @ jacobian - gravity_stiffness()
    velocity = mass @ inverse @ np.diag(gains.computed_torque.velocity_gain) @ jacobian
    np.testing.assert_allclose(law.gain, np.hstack((position, velocity)), rtol=0, atol=1e-5 * np.abs(position).max())
    loop = linearised_law(MODEL, "double_loop", "simulated_plant")
    error = np.hstack((inverse @ np.diag(gains.double_loop.kinematic_gain) @ jacobian, np.eye(6)))
    kp = np.diag(gains.double_loop.simulated_plant.velocity_proportional_gain)
    np.testing.assert_allclose(loop.velocity_error, error, rtol=0, atol=1e-7)
    np.testing.assert_allclose(loop.gain, kp @ error, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(loop.integral_gain, gains.double_loop.simulated_plant.velocity_integral_gain)


def test_the_predictor_step_is_the_delay_compensation_s_own_with_the_drives():
    """Phi_p, Gamma_p against central differences of one period of DelayCompensatedController's
    prediction on the model with drives, where it takes the friction implicitly: at rest the
    Coulomb slope F_c / v_s (7500 N*s/m) makes an explicit step unstable below ~770 Hz."""
    parameters = load_parameters(default_parameters_path("hexapod_actuators.yaml"))
    model = HexapodModel(parameters)
    period, static = parameters.controllers.period, model.gravity_term(HOME)
    reference = Reference(0.0, model.forward_kinematics(HOME).pose, np.zeros(6), np.zeros(6))

    def predicted(deviation):
        """(q, q_d) one period ahead of home + (dq, dq_d), the force g_bar + du in flight."""
        wrapper = DelayCompensatedController(make_controller("computed_torque", model), model, delay_periods=1)
        wrapper.commanded(-period, static + deviation[12:])
        wrapper.update(0.0, HOME + deviation[:6], deviation[6:12], reference)
        return np.concatenate(wrapper.prediction) - np.concatenate((HOME, np.zeros(6)))

    steps = [1e-6] * 6 + [1e-6] * 6 + [1e-3] * 6  # [m], [m/s] (well below v_s = 2 mm/s), [N]
    jacobian = central_difference(predicted, steps)
    phi, gamma = linearised_plant(model).semi_implicit_euler(period)
    # The tool's own velocity step (1e-5 m/s, tanh over v_s = 2 mm/s) bounds the agreement: 4.9e-6 measured.
    np.testing.assert_allclose(jacobian[:, :12], phi, rtol=0, atol=2e-5 * np.abs(phi).max())
    np.testing.assert_allclose(jacobian[:, 12:], gamma, rtol=0, atol=2e-5 * np.abs(gamma).max())
    # The friction's slope matters here: an explicit step would have been far off.
    assert np.abs(phi[6:, 6:] - (np.eye(6) + period * linearised_plant(model).a_v)).max() > 0.1


# ------------------------------------------------------------------------------------------ predictions
def test_the_stability_boundaries_agree_with_the_simulations(rows):
    computed, loop = rows[("computed_torque", "robot")], rows[("double_loop", "simulated_plant")]
    assert computed.largest == {False: 1, True: None} and loop.largest == {False: 2, True: None}
    assert rows[("double_loop", "robot")].largest == {False: -1, True: -1}
    # At the boundary on the embedded plant: the last stable delay runs clean, the next clamps.
    assert track("embedded", "computed_torque", 1, compensated=False).ok
    assert track("embedded", "computed_torque", 2, compensated=False).saturated > 0.5
    assert track("embedded", "double_loop", 2, compensated=False).ok
    assert track("embedded", "double_loop", 3, compensated=False).saturated > 0.5
    # "> MAX_DELAY" compensated: the simulations hold at 3 (test_delay_compensation.py) and here at 6.
    assert track("embedded", "computed_torque", MAX_DELAY, compensated=compensation(MAX_DELAY), duration=1.0).ok


def steady_error(controller_name, delay, compensated, settle=2.0, period=10.0):
    """RMS (position, orientation) on MuJoCo over one full period of the 6.5 trajectory after the ramp."""
    model = HexapodModel(FAST_RAMP)
    plant = DelayedPlant(make_plant("mujoco", FAST_RAMP), delay)
    controller = make_controller(controller_name, model, gain_set="simulated_plant",
                                 delay_compensation=compensation(delay) if compensated else None)
    trajectory = make_trajectory("operational_space", model)
    controller.reset(0.0, plant.joint_positions(), plant.joint_velocities())
    errors = []
    for _ in range(round((settle + period) / plant.dt)):
        t = plant.time
        reference = trajectory.sample(t)
        if t >= settle:
            error = reference.pose - plant.platform_pose().pose
            errors.append((np.linalg.norm(error[:3]), np.linalg.norm(wrap_angle(error[3:]))))
        plant.apply_forces(controller.update(t, plant.joint_positions(), plant.joint_velocities(), reference).forces)
        plant.step()
    return np.sqrt(np.mean(np.array(errors) ** 2, axis=0))


@pytest.mark.parametrize("controller_name, gain_set, delay, compensated", [
    ("double_loop", "simulated_plant", 2, True),
    ("computed_torque", "robot", 1, False),
])
def test_the_predicted_tracking_error_is_the_simulated_one(rows, controller_name, gain_set, delay, compensated):
    pytest.importorskip("mujoco")
    predicted = np.array(rows[(controller_name, gain_set)].errors[(delay, compensated)])
    simulated = steady_error(controller_name, delay, compensated)
    np.testing.assert_allclose(predicted, simulated, rtol=0.4)  # 14-30 % apart measured


def test_the_command_prints_the_table(capsys):
    assert main(["--max-delay", "3"]) == 0
    out = capsys.readouterr().out
    assert "| computed_torque | robot | 1 / > 3 |" in out
    assert "| double_loop | simulated_plant | 2 / > 3 |" in out
    assert "| double_loop | robot | unstable at 0 / unstable at 0 |" in out
