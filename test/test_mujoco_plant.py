"""The MuJoCo plant against the parameters, the project's kinematics and the project's dynamics.

The MuJoCo model shares only the parameters with the project's model: MuJoCo derives the
dynamics of the 25 bodies itself. Agreement of the static forces, the accelerations and the
open-loop response along the thesis' validation trajectory (6.82) is therefore an independent
check of the reduced dynamics, as SolidWorks Motion was in the thesis (section 6.4).
"""

import math

import mujoco
import numpy as np
import pytest

from hexapod_control import HexapodModel, InvalidInputError
from hexapod_control.errors import SimulationDivergedError
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.simulation import mjcf
from hexapod_control.simulation.mujoco_plant import MujocoPlant, rot_x

HOME_Q = 0.1765
# Trajectory (6.82): q_d = q(0) + c_k (1 - exp(-kappa t^3)) sin(omega_k t).
AMPLITUDES = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05])  # c [m]
FREQUENCIES = np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])  # omega [rad/s]
RAMP_RATE = 1.0  # kappa [1/s^3]
DURATION = 1.0  # [s]
# Thesis figure (section 6.4): with L = 0.378 m and Table 6.1 masses, the static force at home.
THESIS_HOME_STATIC_FORCE = -4.3166  # [N], along +q on every actuator
THESIS_FORCE_DIGITS = 5e-5  # the figure is printed to 0.1 mN
THESIS_FORCE_ENVELOPE = 9.0  # [N]: forces along (6.82) stay within about +-9 N

# Bounds this plant is held to (see the module docstring of mujoco_plant for where they come from),
# about 3x the worst value measured over the tests' cases (in brackets).
RESET_TOLERANCE = 2e-15  # [m] closure and pose at reset: exact assembly up to round-off (5.6e-16)
RESET_VELOCITY_TOLERANCE = 2e-15  # [m/s, rad/s] closure rates and phi_dot = A_phi q_dot at reset (5.0e-16)
CLOSURE_IN_MOTION = 1.5e-7  # [m] loops during (6.82) and under the hold; soft closures (4.2e-8)
HOLD_DRIFT = 2e-6  # [m] drift over 1 s at home held by the model's gravity forces (6.0e-7)
# Residual / unheld acceleration. MuJoCo's closures are soft (impedance capped at 0.9999): 1e-4
# of the constraint accelerations leaks through, ~1e-3 of the unheld acceleration at home (8.4e-4).
HOLD_ACCELERATION_RATIO = 3e-3
TRACKING_ERROR = 1e-4  # [m] open-loop error after 1 s of (6.82) fed by the model's inverse dynamics
FORCE_MATCH = 2e-14  # [N] virtual-work static forces vs the model's gravity term (round-off, 6.2e-15)
ACCELERATION_FORCE_MATCH = 0.05  # [N] tau - inverse_dynamics(q, qd, MuJoCo's qdd), softness ~1e-2 N

OFF_HOME_Q = [
    HOME_Q + np.array([0.03, -0.02, 0.05, 0.01, -0.04, 0.02]),
    HOME_Q + np.array([-0.05, 0.06, -0.03, 0.04, 0.02, -0.06]),
    HOME_Q + np.array([0.07, 0.07, -0.05, -0.05, 0.0, 0.0]),
]


def trajectory(t):
    """(q, q_dot, q_ddot) of (6.82), differentiated analytically."""
    decay = math.exp(-RAMP_RATE * t**3)
    s, ds, dds = 1.0 - decay, 3.0 * RAMP_RATE * t**2 * decay, (6.0 * RAMP_RATE * t - 9.0 * RAMP_RATE**2 * t**4) * decay
    sine, cosine = np.sin(FREQUENCIES * t), np.cos(FREQUENCIES * t)
    return (
        HOME_Q + AMPLITUDES * s * sine,
        AMPLITUDES * (ds * sine + s * FREQUENCIES * cosine),
        AMPLITUDES * (dds * sine + 2.0 * ds * FREQUENCIES * cosine - s * FREQUENCIES**2 * sine),
    )


def experiments():
    return load_parameters(default_parameters_path("hexapod.yaml"))


def validation():
    return load_parameters(default_parameters_path("hexapod_validation.yaml"))


@pytest.fixture(scope="module", params=["experiments", "validation"])
def parameters(request):
    return experiments() if request.param == "experiments" else validation()


# ---------------------------------------------------------------------- the compiled model
def test_masses_and_inertias_equal_the_parameters(parameters):
    plant = MujocoPlant(parameters)
    model = plant.model
    bodies = parameters.bodies
    expected_total = bodies.platform.mass + sum(
        len(mjcf.BODY_GROUPS[name]) * getattr(bodies, name).mass for name in mjcf.BODY_GROUPS if name != "platform"
    )
    assert mujoco.mj_getTotalmass(model) == pytest.approx(expected_total, rel=1e-12)
    for name, members in mjcf.BODY_GROUPS.items():
        ids = [model.body(member).id for member in members]
        body = getattr(bodies, name)
        # Principal axes must be the body frame's axes: the table gives diagonal inertias there.
        for i in ids:
            np.testing.assert_allclose(np.abs(model.body_iquat[i]), [1.0, 0.0, 0.0, 0.0], atol=1e-12)
        if name == "platform":  # three equal shards with a common centre of mass and axes
            assert sum(model.body_mass[i] for i in ids) == pytest.approx(body.mass, rel=1e-12)
            np.testing.assert_allclose(sum(model.body_inertia[i] for i in ids), body.inertia, rtol=1e-12)
        else:
            for i in ids:
                assert model.body_mass[i] == pytest.approx(body.mass, rel=1e-12)
                np.testing.assert_allclose(model.body_inertia[i], body.inertia, rtol=1e-12)
    assert model.nv - 21 == 6  # 27 joints, 21 independent closure rows: six degrees of freedom
    assert model.opt.gravity[2] == -parameters.gravity
    np.testing.assert_allclose(model.actuator_ctrlrange, [[-parameters.limits.actuator_force_max,
                                                           parameters.limits.actuator_force_max]] * 6)


@pytest.mark.parametrize("q", [np.full(6, HOME_Q)] + OFF_HOME_Q, ids=["home", "a", "b", "c"])
def test_bodies_sit_in_the_frames_of_the_25_body_table(q):
    """Frames and centres of mass in MuJoCo equal those of doc/model.md, from the kinematics."""
    parameters = experiments()
    g = parameters.geometry
    plant = MujocoPlant(parameters)
    plant.reset(q)
    model, data = plant.model, plant.data
    kinematics = HexapodModel(parameters)
    fk = kinematics.forward_kinematics(q)
    apexes = kinematics.platform_vertices(q, fk.phi)
    sliders = kinematics.slider_positions(q)
    z_f = fk.rotation[:, 2]

    def frame(body):
        return data.xmat[model.body(body).id].reshape(3, 3)

    def com(body):
        return data.xipos[model.body(body).id]

    for side in range(3):
        plane = mjcf.side_rotation(side) @ rot_x(fk.phi[side])  # R_Ti Rx(phi_i)
        alpha = math.asin((q[2 * side] + q[2 * side + 1]) / (2.0 * g.leg_length))
        for j, sign in ((0, -1.0), (1, 1.0)):
            k = 2 * side + j
            np.testing.assert_allclose(com(f"slider_{k}"), sliders[k] - [0.0, 0.0, g.pu_part1_com_offset], atol=1e-12)
            np.testing.assert_allclose(frame(f"slider_{k}"), mjcf.side_rotation(side), atol=1e-12)
            np.testing.assert_allclose(com(f"pu2_{k}"), sliders[k], atol=1e-12)
            np.testing.assert_allclose(frame(f"pu2_{k}"), plane, atol=1e-12)
            np.testing.assert_allclose(com(f"leg_{k}"), 0.5 * (sliders[k] + apexes[side]), atol=1e-12)
            np.testing.assert_allclose(frame(f"leg_{k}"), plane @ mjcf.rot_z(sign * alpha), atol=1e-12)
        s1, s2 = frame(f"s1_{side}"), frame(f"s2_{side}")
        np.testing.assert_allclose(com(f"s1_{side}"), apexes[side], atol=1e-12)
        np.testing.assert_allclose(com(f"s2_{side}"), apexes[side] + g.s_part2_com_offset * z_f, atol=1e-12)
        # theta1 turns about the leg-plane normal, theta3 about z_F, theta2 about their common normal.
        np.testing.assert_allclose(s1[:, 0], plane[:, 2], atol=1e-12)
        np.testing.assert_allclose(s2[:, 2], z_f, atol=1e-12)
        np.testing.assert_allclose(s1[:, 1], s2[:, 1], atol=1e-12)
        np.testing.assert_allclose(frame(f"platform_{side}"), fk.rotation, atol=1e-12)
        np.testing.assert_allclose(
            com(f"platform_{side}"), apexes.mean(axis=0) + g.platform_com_offset * z_f, atol=1e-12
        )


@pytest.mark.parametrize("q", [np.full(6, HOME_Q)] + OFF_HOME_Q, ids=["home", "a", "b", "c"])
def test_reset_pose_equals_forward_kinematics(parameters, q):
    plant = MujocoPlant(parameters)
    plant.reset(q)
    fk = HexapodModel(parameters).forward_kinematics(q)
    pose = plant.platform_pose()
    assert plant.closure_error() < RESET_TOLERANCE
    np.testing.assert_allclose(plant.joint_positions(), q, atol=0.0)
    np.testing.assert_allclose(pose.position, fk.position, atol=RESET_TOLERANCE)
    np.testing.assert_allclose(pose.rotation, fk.rotation, atol=RESET_TOLERANCE)
    np.testing.assert_allclose(pose.euler_zyx, fk.euler_zyx, atol=RESET_TOLERANCE)
    assert plant.time == 0.0


def test_reset_velocity_follows_the_closures_and_the_passive_map():
    """MuJoCo's null space of the closures reproduces the thesis' A(q): phi_dot = A_phi q_dot."""
    parameters = experiments()
    plant = MujocoPlant(parameters)
    kinematics = HexapodModel(parameters)
    qd = np.array([0.1, -0.2, 0.05, 0.15, -0.1, 0.3])
    for q in OFF_HOME_Q:
        plant.reset(q, qd)
        np.testing.assert_allclose(plant.joint_velocities(), qd, atol=1e-15)
        assert np.abs(plant.constraint_jacobian() @ plant.data.qvel).max() < RESET_VELOCITY_TOLERANCE
        passive_rows = kinematics.analytic_jacobian(q).passive_map[6:]
        for side in range(3):
            for k in (2 * side, 2 * side + 1):
                phi_rate = plant.data.qvel[plant.model.joint(mjcf.phi_joint(k)).dofadr[0]]
                assert phi_rate == pytest.approx(passive_rows[side] @ qd, rel=0, abs=RESET_VELOCITY_TOLERANCE)


# ---------------------------------------------------------------------- statics
def test_static_force_at_home_by_virtual_work_matches_the_thesis():
    parameters = validation().with_geometry(leg_length=0.378)
    plant = MujocoPlant(parameters)
    np.testing.assert_allclose(plant.holding_forces(), THESIS_HOME_STATIC_FORCE, atol=THESIS_FORCE_DIGITS)


@pytest.mark.parametrize("q", [np.full(6, HOME_Q)] + OFF_HOME_Q, ids=["home", "a", "b", "c"])
def test_static_forces_equal_the_model_gravity_term(parameters, q):
    model = HexapodModel(parameters)
    plant = MujocoPlant(parameters)
    plant.reset(q)
    np.testing.assert_allclose(plant.holding_forces(), model.gravity_term(q), atol=FORCE_MATCH)


def test_model_gravity_forces_hold_the_mujoco_robot_at_home(parameters):
    model = HexapodModel(parameters)
    plant = MujocoPlant(parameters)
    unheld = np.abs(plant.joint_accelerations()).max()  # zero forces: the robot starts to fall
    plant.apply_forces(model.gravity_term(model.home_q))
    residual = np.abs(plant.joint_accelerations()).max()
    plant.step(round(DURATION / plant.dt))
    drift = np.abs(plant.joint_positions() - model.home_q).max()
    final = np.abs(plant.joint_accelerations()).max()
    assert residual < HOLD_ACCELERATION_RATIO * unheld, (residual, unheld)
    assert final < HOLD_ACCELERATION_RATIO * unheld, (final, unheld)
    assert drift < HOLD_DRIFT, drift
    assert plant.max_closure_error < CLOSURE_IN_MOTION


# ---------------------------------------------------------------------- dynamics
def test_accelerations_agree_with_the_model_inverse_dynamics():
    parameters = validation()
    model = HexapodModel(parameters)
    plant = MujocoPlant(parameters)
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = HOME_Q + rng.uniform(-0.05, 0.05, 6)
        qd = rng.uniform(-0.3, 0.3, 6)
        tau = rng.uniform(-20.0, 20.0, 6)
        plant.reset(q, qd)
        plant.apply_forces(tau)
        np.testing.assert_allclose(
            model.inverse_dynamics(q, qd, plant.joint_accelerations()), tau, atol=ACCELERATION_FORCE_MATCH
        )


@pytest.mark.slow
def test_open_loop_inverse_dynamics_follows_trajectory_682():
    """Fed the model's forces for (6.82) (zero-order hold), MuJoCo follows it without feedback."""
    parameters = validation()
    model = HexapodModel(parameters)
    plant = MujocoPlant(parameters)
    steps = round(DURATION / plant.dt)
    error, largest_force = 0.0, 0.0
    for n in range(steps):
        forces = model.inverse_dynamics(*trajectory(n * plant.dt))
        largest_force = max(largest_force, np.abs(forces).max())
        plant.apply_forces(forces)
        plant.step()
        error = max(error, np.abs(plant.joint_positions() - trajectory((n + 1) * plant.dt)[0]).max())
    assert largest_force < THESIS_FORCE_ENVELOPE
    assert error < TRACKING_ERROR, error
    assert plant.max_closure_error < CLOSURE_IN_MOTION


def test_loops_stay_closed_and_pose_follows_kinematics_in_motion():
    """A feedback-driven run of (6.82), independent of the project's dynamics."""
    parameters = validation()
    plant = MujocoPlant(parameters)
    kinematics = HexapodModel(parameters)
    hold = plant.holding_forces()
    stiffness, damping = 5000.0, 150.0  # [N/m], [N s/m]: a joint PD that tracks (6.82) to ~0.4 mm
    for n in range(round(DURATION / plant.dt)):
        q_d, qd_d, _ = trajectory(n * plant.dt)
        plant.apply_forces(
            hold + stiffness * (q_d - plant.joint_positions()) + damping * (qd_d - plant.joint_velocities())
        )
        plant.step()
        assert plant.closure_error() < CLOSURE_IN_MOTION
    q = plant.joint_positions()
    assert np.abs(q - trajectory(DURATION)[0]).max() < 1e-3  # it did move along (6.82)
    fk = kinematics.forward_kinematics(q)
    np.testing.assert_allclose(plant.platform_pose().position, fk.position, atol=CLOSURE_IN_MOTION)
    np.testing.assert_allclose(plant.platform_pose().rotation, fk.rotation, atol=CLOSURE_IN_MOTION / parameters.geometry.platform_side)


# ---------------------------------------------------------------------- interface and guard
def test_forces_are_saturated_and_bad_commands_rejected():
    parameters = experiments()
    plant = MujocoPlant(parameters)
    limit = parameters.limits.actuator_force_max
    plant.apply_forces([10 * limit, -10 * limit, 1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(plant.data.ctrl[:2], [limit, -limit])
    for bad in ([math.nan] * 6, [0.0] * 5, [math.inf, 0, 0, 0, 0, 0]):
        with pytest.raises(InvalidInputError):
            plant.apply_forces(bad)
    np.testing.assert_allclose(plant.data.ctrl[:2], [limit, -limit])  # a rejected command changes nothing
    assert plant.dt == pytest.approx(1.0 / parameters.simulation.rate)
    plant.step(3)
    assert plant.time == pytest.approx(3 * plant.dt)


def test_divergence_is_an_error_never_a_nan_state(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo logs a bad state to MUJOCO_LOG.TXT in the working directory
    parameters = validation()
    plant = MujocoPlant(parameters)
    # Full force outwards drives the sliders apart until the legs straighten: the loops cannot close.
    plant.apply_forces(np.full(6, parameters.limits.actuator_force_max))
    with pytest.raises(SimulationDivergedError, match="closure|speed|non-finite"):
        plant.step(round(DURATION / plant.dt))
    assert np.all(np.isfinite(plant.joint_positions())) and np.all(np.isfinite(plant.joint_velocities()))
    with pytest.raises(SimulationDivergedError, match="reset"):
        plant.step()
    plant.reset(np.full(6, HOME_Q))
    plant.step()  # a reset plant runs again
    # A state MuJoCo cannot integrate (here: poisoned) is caught, and the last good state kept.
    good = plant.joint_positions()
    plant.data.qvel[3] = math.nan
    with pytest.raises(SimulationDivergedError):
        plant.step()
    np.testing.assert_array_equal(plant.joint_positions(), good)
