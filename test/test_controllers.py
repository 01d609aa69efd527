"""Closed-loop tests of the operational-space controllers against the rigid-body model.

The plant is the model's forward dynamics integrated at the controller rate (1 kHz) with
semi-implicit Euler and a zero-order hold on the forces, saturated at the plant's own force limit:
with the force held over the step, the velocity update is the exact sampled-data response for a
locally constant M_bar, so instabilities seen here are properties of the 1 kHz loop, not of the
integrator. Each plant has its own HexapodModel instance (its own FK warm start).

Tracking bounds are regression figures: a little above what the controllers achieve, measured
with both controller and plant on config/hexapod.yaml (nominal) and with the plant on
config/hexapod_validation.yaml (L = 0.3689 m, Table 6.1 masses: model mismatch).
"""

import math
from dataclasses import dataclass

import numpy as np
import pytest

from hexapod_control import HexapodModel, InvalidInputError
from hexapod_control.control.controllers import (
    ControlStatus,
    DoubleLoopController,
    make_controller,
)
from hexapod_control.control.trajectories import (
    HoldTrajectory,
    Reference,
    home_pose,
    make_trajectory,
)
from hexapod_control.model.parameters import default_parameters_path, load_parameters

# Thesis gains (6.5.1, 6.5.2), written out independently of the YAML they are checked against.
THESIS_K = [15, 15, 10, 15, 10, 10]
THESIS_KP, THESIS_KI = 3000.0, 4750.6
THESIS_KP_CT = [35e3, 35e3, 50e3, 80e3, 100e3, 90e3]
THESIS_KV_CT = [190, 250, 420, 550, 550, 500]
TRACKING_DURATION = 30.0  # [s], three periods of the 6.5 trajectory
MISMATCH_DURATION = 15.0  # [s], past the ramp (s > 0.99 at 8 s) and one full period


def nominal_parameters():
    return load_parameters(default_parameters_path("hexapod.yaml"))


def validation_parameters():
    return load_parameters(default_parameters_path("hexapod_validation.yaml"))


def with_force_limit(parameters, force_limit):
    return parameters.replace(limits={"actuator_force_max": force_limit})


def lightest_mass_at_home(model):
    fk = model.forward_kinematics(model.home_q)
    return float(np.linalg.eigvalsh(model.mass_matrix(model.home_q, phi=fk.phi))[0])


# The shipped gain set of the simulated plants: thesis gains with the inner-loop K_p lowered. The
# rigid-body model has no motor rotor inertia, so its lightest actuator-space mass is ~0.83 kg; the
# sampled PI velocity loop needs K_p < 2 m_min / dt (see the stability test), and the thesis
# K_p = 3000 N s/m exceeds it.
SIMULATED_PLANT = "simulated_plant"


def controller_for(name, parameters, **double_loop_changes):
    if double_loop_changes:
        parameters = parameters.replace(controllers={"double_loop": double_loop_changes})
    return make_controller(name, HexapodModel(parameters), gain_set=SIMULATED_PLANT)


@dataclass
class Run:
    position_error: np.ndarray  # as the controller sees it [m]
    orientation_error: np.ndarray  # [rad]
    true_position_error: np.ndarray  # plant FK pose vs reference [m]
    forces: np.ndarray
    integral: np.ndarray  # double loop only, else zeros
    statuses: list
    pose: np.ndarray  # plant FK pose

    @staticmethod
    def rms(values):
        return float(np.sqrt(np.mean(values**2)))


def simulate(controller, plant_parameters, trajectory, duration, q0=None):
    plant = HexapodModel(plant_parameters)
    force_limit = plant_parameters.limits.actuator_force_max
    dt = controller.period
    q = plant.home_q if q0 is None else np.array(q0, dtype=float)
    qd = np.zeros(6)
    controller.reset(0.0, q, qd)
    steps = round(duration / dt)
    log = Run(*(np.zeros(steps) for _ in range(3)), np.zeros((steps, 6)), np.zeros((steps, 6)), [], np.zeros((steps, 6)))
    for k in range(steps):
        t = k * dt
        reference = trajectory.sample(t)
        output = controller.update(t, q, qd, reference)
        assert np.all(np.isfinite(output.forces)), f"non-finite forces at t={t}"
        log.position_error[k] = output.position_error_norm
        log.orientation_error[k] = output.orientation_error_norm
        log.forces[k] = output.forces
        log.statuses.append(output.status)
        if isinstance(controller, DoubleLoopController):
            log.integral[k] = controller.integral
        fk = plant.forward_kinematics(q)
        log.pose[k] = fk.pose
        log.true_position_error[k] = np.linalg.norm(reference.pose[:3] - fk.position)
        forces = np.clip(output.forces, -force_limit, force_limit)
        acceleration = plant.forward_dynamics(q, qd, forces, phi=fk.phi)
        qd = qd + dt * acceleration  # semi-implicit Euler, forces held over the step
        q = q + dt * qd
    return log


@pytest.fixture(scope="module")
def nominal_runs():
    return {}


def tracking_run(cache, name, plant_parameters, duration):
    key = (name, plant_parameters.source, duration)
    if key not in cache:
        controller = controller_for(name, nominal_parameters())
        trajectory = make_trajectory("operational_space", controller.model)
        cache[key] = simulate(controller, plant_parameters, trajectory, duration)
    return cache[key]


# ------------------------------------------------------------------------------------ settings
@pytest.mark.parametrize("file", ["hexapod.yaml", "hexapod_validation.yaml"])
def test_settings_hold_the_thesis_gains(file):
    settings = load_parameters(default_parameters_path(file)).controllers
    assert settings.rate == 1000.0
    np.testing.assert_array_equal(settings.double_loop.kinematic_gain, THESIS_K)
    np.testing.assert_array_equal(settings.double_loop.velocity_proportional_gain, [THESIS_KP] * 6)
    np.testing.assert_array_equal(settings.double_loop.velocity_integral_gain, [THESIS_KI] * 6)
    np.testing.assert_array_equal(settings.computed_torque.position_gain, THESIS_KP_CT)
    np.testing.assert_array_equal(settings.computed_torque.velocity_gain, THESIS_KV_CT)
    rule = settings.singularity
    assert 0.0 <= rule.stop_threshold < rule.damping_threshold < 1.0


def test_make_controller_rejects_unknown_names():
    with pytest.raises(InvalidInputError):
        make_controller("pid", HexapodModel(nominal_parameters()))
    with pytest.raises(InvalidInputError, match="gain set"):
        make_controller("computed_torque", HexapodModel(nominal_parameters()), gain_set="simulated")


# ------------------------------------------------------------------------------------ stability at 1 kHz
def linearised_spectral_radius(model, name, settings, gain_set="robot"):
    """Spectral radius of the sampled closed loop linearised at home (rest, exact model).

    State x = (e, v[, I]) with e = q - q_home. xi - xi_d ~ J_A e, so the outer loops act through
    J_A^-1 K J_A; the plant is v+ = v + dt M_bar^-1 (tau - g_bar), e+ = e + dt v+ (force held).
    """
    q = model.home_q
    fk = model.forward_kinematics(q)
    jacobian = model.analytic_jacobian(q, phi=fk.phi).analytic
    inverse_mass = np.linalg.inv(model.mass_matrix(q, phi=fk.phi))
    dt, eye, zero = settings.period, np.eye(6), np.zeros((6, 6))

    def through_jacobian(gain):
        return np.linalg.solve(jacobian, np.diag(gain) @ jacobian)

    if name == "computed_torque":
        kp_q = through_jacobian(settings.computed_torque.position_gain)
        kv_q = through_jacobian(settings.computed_torque.velocity_gain)
        velocity = np.hstack((-dt * kp_q, eye - dt * kv_q))  # M_bar cancels: v+ = v + dt a
        position = np.hstack((eye, zero)) + dt * velocity
        closed = np.vstack((position, velocity))
    else:
        velocity_gains = settings.double_loop.velocity_gains(gain_set)
        k_q = through_jacobian(settings.double_loop.kinematic_gain)
        kp, ki = np.diag(velocity_gains.velocity_proportional_gain), np.diag(velocity_gains.velocity_integral_gain)
        force = np.hstack((-kp @ k_q, -kp, ki))  # tau - g_bar, g_bar cancelled at equilibrium
        velocity = np.hstack((zero, eye, zero)) + dt * inverse_mass @ force
        position = np.hstack((eye, zero, zero)) + dt * velocity
        integral = np.hstack((-dt * k_q, -dt * eye, eye))
        closed = np.vstack((position, velocity, integral))
    return float(np.max(np.abs(np.linalg.eigvals(closed))))


def test_thesis_gains_at_1khz_computed_torque_stable_double_loop_not():
    model = HexapodModel(nominal_parameters())
    settings = model.parameters.controllers
    assert settings.period == pytest.approx(1e-3)
    # Computed torque cancels M_bar: per axis v+ = (1 - K_V dt) v - K_P dt e, stable for all six.
    assert linearised_spectral_radius(model, "computed_torque", settings) < 0.95
    # Double loop: the PI velocity loop on the lightest mode m_min has the pole 1 - K_p dt / m_min,
    # inside the unit circle only for K_p < 2 m_min / dt; the thesis K_p is above that here.
    bound = 2.0 * lightest_mass_at_home(model) / settings.period
    assert THESIS_KP > bound
    assert linearised_spectral_radius(model, "double_loop", settings) > 2.0
    assert linearised_spectral_radius(model, "double_loop", settings, SIMULATED_PLANT) < 1.0
    # The shipped K_p = m_min / (2 dt) puts the lightest mode's velocity pole near 1/2, a gain margin
    # of 2 against forces the prediction misplaces (test_stack_when_late.py); K_i keeps the thesis
    # integral time.
    gains = settings.double_loop.velocity_gains(SIMULATED_PLANT)
    assert gains.velocity_proportional_gain[0] == pytest.approx(bound / 4.0, rel=0.02)
    assert gains.velocity_integral_gain[0] / gains.velocity_proportional_gain[0] == pytest.approx(4750.6 / THESIS_KP, rel=1e-3)
    just_below, just_above = (
        model.parameters.replace(controllers={"double_loop": {"velocity_proportional_gain": factor * bound}}).controllers
        for factor in (0.97, 1.03)
    )
    assert linearised_spectral_radius(model, "double_loop", just_below) < 1.0
    assert linearised_spectral_radius(model, "double_loop", just_above) > 1.0


def test_thesis_double_loop_gains_oscillate_in_simulation():
    """The instability the linearisation predicts shows up in the nonlinear 1 kHz simulation."""
    model = HexapodModel(nominal_parameters())
    controller = make_controller("double_loop", model)  # the YAML (thesis) gains
    run = simulate(controller, nominal_parameters(), HoldTrajectory(home_pose(model)), 0.3)
    # Within 0.3 s the velocity loop has grown from the gravity sag to bang-bang at the force limit.
    assert np.max(np.abs(run.forces[-50:])) == pytest.approx(nominal_parameters().limits.actuator_force_max)
    assert np.mean(np.abs(np.diff(np.sign(run.forces[-50:, 0])))) > 1.0  # sign flips nearly every step


# ------------------------------------------------------------------------------------ tracking
# Regression figures, about 1.5x what was achieved (in brackets) with the rigid-body plant at 1 kHz.
# The computed-torque controller with the exact model is limited only by the sampling (force held
# over 1 ms); the double loop's errors come from the lag of its velocity loop.
TRACKING_BOUNDS = {
    # name: (position RMS [m], position max [m], orientation RMS [rad], orientation max [rad])
    "double_loop": (7.5e-5, 1.2e-4, 2.5e-4, 4.3e-4),  # (5.0e-5, 8.2e-5, 1.7e-4, 2.9e-4)
    "computed_torque": (5.0e-8, 8.0e-8, 1.1e-7, 1.4e-7),  # (3.4e-8, 5.1e-8, 7.5e-8, 9.4e-8)
}
MISMATCH_BOUNDS = {
    "double_loop": (8.0e-5, 1.4e-4, 2.5e-4, 4.6e-4),  # (5.3e-5, 9.6e-5, 1.6e-4, 3.0e-4)
    "computed_torque": (1.4e-5, 2.0e-5, 6.0e-6, 1.1e-5),  # (9.1e-6, 1.3e-5, 4.1e-6, 7.2e-6)
}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["double_loop", "computed_torque"])
def test_tracks_the_experiments_trajectory_from_home(nominal_runs, name):
    run = tracking_run(nominal_runs, name, nominal_parameters(), TRACKING_DURATION)
    position_rms, position_max, orientation_rms, orientation_max = TRACKING_BOUNDS[name]
    print(
        f"{name} nominal: position RMS {Run.rms(run.position_error):.3e} max {run.position_error.max():.3e} m, "
        f"orientation RMS {Run.rms(run.orientation_error):.3e} max {run.orientation_error.max():.3e} rad, "
        f"|force| max {np.abs(run.forces).max():.2f} N"
    )
    assert Run.rms(run.position_error) < position_rms and run.position_error.max() < position_max
    assert Run.rms(run.orientation_error) < orientation_rms and run.orientation_error.max() < orientation_max
    # Same plant as model: the controller's error is the true error.
    np.testing.assert_allclose(run.true_position_error, run.position_error, rtol=0, atol=1.5e-12)  # 4.1e-13 m measured
    # The thesis: forces stay small along this slow trajectory, far from saturation.
    assert np.abs(run.forces).max() < 0.2 * nominal_parameters().limits.actuator_force_max
    assert all(status == ControlStatus.OK for status in run.statuses)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["double_loop", "computed_torque"])
def test_model_mismatch_stays_stable_and_bounded(nominal_runs, name):
    """Controller on hexapod.yaml, plant on hexapod_validation.yaml (other L, masses, inertias)."""
    run = tracking_run(nominal_runs, name, validation_parameters(), MISMATCH_DURATION)
    position_rms, position_max, orientation_rms, orientation_max = MISMATCH_BOUNDS[name]
    print(
        f"{name} mismatch: position RMS {Run.rms(run.position_error):.3e} max {run.position_error.max():.3e} m, "
        f"orientation RMS {Run.rms(run.orientation_error):.3e} max {run.orientation_error.max():.3e} rad; "
        f"true position error (plant FK) RMS {Run.rms(run.true_position_error):.3e} m"
    )
    assert Run.rms(run.position_error) < position_rms and run.position_error.max() < position_max
    assert Run.rms(run.orientation_error) < orientation_rms and run.orientation_error.max() < orientation_max
    assert all(status == ControlStatus.OK for status in run.statuses)
    # The true pose differs by what the controller cannot see: its model's home is 0.4243 m high,
    # the plant's (L = 0.3689 m) 0.4139 m, so the plant tracks about 1.04 cm below the reference.
    z_offset = home_pose(HexapodModel(nominal_parameters()))[2] - home_pose(HexapodModel(validation_parameters()))[2]
    assert Run.rms(run.true_position_error) == pytest.approx(z_offset, rel=0.1)


@pytest.mark.slow
def test_computed_torque_tracks_the_image_of_the_joint_trajectory():
    """The validation trajectory (6.82), mapped to xi through FK and J_A, is trackable too."""
    parameters = nominal_parameters()
    controller = controller_for("computed_torque", parameters)
    image = make_trajectory("joint_space", controller.model)
    run = simulate(controller, parameters, image, 3.0)
    # Faster than 6.5 (omega up to 3 rad/s): still at the sampling-error level of this controller.
    print(f"joint-space image: position max {run.position_error.max():.2e} m, orientation max {run.orientation_error.max():.2e} rad")
    assert run.position_error.max() < 1.5e-6 and run.orientation_error.max() < 6e-6  # (7.9e-7, 3.8e-6)


@pytest.mark.parametrize("name", ["double_loop", "computed_torque"])
def test_initial_pose_offset_converges(name):
    parameters = nominal_parameters()
    controller = controller_for(name, parameters)
    home = home_pose(controller.model)
    offset = home + np.array([0.005, -0.004, -0.003, 0.01, -0.01, 0.015])
    q0 = HexapodModel(parameters).inverse_kinematics(offset[:3], offset[3:]).q
    run = simulate(controller, parameters, HoldTrajectory(home), 2.0, q0=q0)
    initial = run.position_error[0]
    # The IK -> FK round trip of the offset: 2.2e-16 and 5.8e-15 relative measured.
    assert initial == pytest.approx(np.linalg.norm([0.005, 0.004, 0.003]), rel=1e-15)
    assert run.orientation_error[0] == pytest.approx(np.linalg.norm([0.01, 0.01, 0.015]), rel=2e-14)
    print(f"{name}: offset {initial:.2e} m -> {run.position_error[-1]:.2e} m after 2 s")
    # Outer-loop time constants are 1/K <= 0.1 s (double loop) and ~10 ms (computed torque); the
    # double loop's last part is the gravity sag its integrator removes with K_p/K_i = 0.63 s.
    # After 2 s both are well below 1 % of the offset and still shrinking.
    assert run.position_error[-1] < 1e-2 * initial
    assert run.orientation_error[-1] < 1e-2 * run.orientation_error[0]
    assert run.position_error[-1] <= run.position_error[-1000]
    assert run.position_error.max() <= initial * 1.05  # no large overshoot


# ------------------------------------------------------------------------------------ saturation
def anti_windup_step(anti_windup):
    """A 5 cm step in x under an 8 N force limit (2x the 3.9 N gravity load per actuator)."""
    parameters = with_force_limit(nominal_parameters(), 8.0)
    controller = controller_for("double_loop", parameters, anti_windup=anti_windup)
    target = home_pose(controller.model) + np.array([0.05, 0.0, 0.0, 0.0, 0.0, 0.0])
    run = simulate(controller, parameters, HoldTrajectory(target), 3.0)
    overshoot = float(np.max(run.pose[:, 0] - target[0]))
    return run, overshoot, target


@pytest.mark.slow
def test_anti_windup_keeps_the_integrator_bounded_and_limits_overshoot():
    windup, windup_overshoot, _ = anti_windup_step("none")
    run, overshoot, target = anti_windup_step("conditional_integration")
    print(
        f"conditional integration: overshoot {overshoot * 1e3:.2f} mm, max |I| {np.abs(run.integral).max():.4f} m; "
        f"none: overshoot {windup_overshoot * 1e3:.2f} mm, max |I| {np.abs(windup.integral).max():.4f} m"
    )
    assert sum(status == ControlStatus.SATURATED for status in run.statuses) > 100  # saturated > 0.1 s
    # Achieved: |I| 0.0036 m vs 0.076 m, overshoot 1.7 mm vs 7.7 mm, settled within 2 um.
    assert np.abs(run.integral).max() < 0.1 * np.abs(windup.integral).max()
    assert overshoot < 0.3 * windup_overshoot
    assert abs(run.pose[-1, 0] - target[0]) < 2e-5  # it recovers and settles on the target
    assert abs(windup.pose[-1, 0] - target[0]) > abs(run.pose[-1, 0] - target[0])


def test_computed_torque_clamps_and_reports_saturation():
    parameters = nominal_parameters()
    controller = controller_for("computed_torque", parameters)
    q = controller.model.home_q
    controller.reset(0.0, q, np.zeros(6))
    target = home_pose(controller.model) + np.array([0.02, 0, 0, 0, 0, 0])  # K_P 2 cm: ~700 m/s^2
    output = controller.update(0.0, q, np.zeros(6), HoldTrajectory(target).sample(0.0))
    limit = parameters.limits.actuator_force_max
    assert output.status == ControlStatus.SATURATED and output.saturated.any()
    assert np.all(np.abs(output.forces) <= limit)
    np.testing.assert_allclose(np.abs(output.forces[output.saturated]), limit)


# ------------------------------------------------------------------------------------ failures
@pytest.mark.parametrize("name", ["double_loop", "computed_torque"])
def test_invalid_state_gives_the_safe_output_never_nan(name):
    controller = controller_for(name, nominal_parameters())
    q, qd = controller.model.home_q, np.zeros(6)
    controller.reset(0.0, q, qd)
    reference = make_trajectory("operational_space", controller.model).sample(1.0)
    controller.update(0.0, q, qd, reference)
    integral = controller.integral if name == "double_loop" else None
    bad_inputs = [
        (np.array([np.nan, *q[1:]]), qd, reference, ControlStatus.INVALID_INPUT),
        (q, np.array([0, 0, np.inf, 0, 0, 0]), reference, ControlStatus.INVALID_INPUT),
        (q[:5], qd, reference, ControlStatus.INVALID_INPUT),
        (q, qd, Reference(1.0, np.full(6, np.nan), np.zeros(6), np.zeros(6)), ControlStatus.INVALID_INPUT),
        (q, qd, None, ControlStatus.INVALID_INPUT),
        # q0 + q1 beyond 2L: the legs of side 1 cannot assemble.
        (np.array([0.39, 0.39, *q[2:]]), qd, reference, ControlStatus.KINEMATICS_FAILURE),
    ]
    for bad_q, bad_qd, bad_reference, status in bad_inputs:
        output = controller.update(0.001, bad_q, bad_qd, bad_reference)
        assert output.status == status and output.safe_output, output.message
        np.testing.assert_array_equal(output.forces, np.zeros(6))
        assert not output.saturated.any()
    if integral is not None:
        np.testing.assert_array_equal(controller.integral, integral)  # the integrator was frozen
    good = controller.update(0.002, q, qd, reference)
    assert not good.safe_output and np.all(np.isfinite(good.forces))
    with pytest.raises(InvalidInputError):
        controller.reset(0.0, np.full(6, np.nan), qd)


def test_euler_error_is_wrapped():
    controller = controller_for("computed_torque", nominal_parameters())
    q = controller.model.home_q
    controller.reset(0.0, q, np.zeros(6))
    target = home_pose(controller.model) + np.array([0, 0, 0, 2.0 * math.pi - 1e-3, -2.0 * math.pi + 2e-3, 0])
    output = controller.update(0.0, q, np.zeros(6), HoldTrajectory(target).sample(0.0))
    np.testing.assert_allclose(output.pose_error[3:], [-1e-3, 2e-3, 0.0], atol=1e-12)


@pytest.mark.parametrize("name", ["double_loop", "computed_torque"])
def test_near_a_singularity_damped_then_stopped(name):
    parameters = nominal_parameters()
    controller = controller_for(name, parameters)
    rule = controller.settings.singularity
    model = HexapodModel(parameters)
    # Legs almost stretched (q -> 0 when z -> its maximum): J_A loses rank.
    # It lies beyond min_slider_separation: inside the travel limits the conditioning stays above
    # the damping threshold, which is a safety net for a robot that leaves its nominal workspace.
    pose = np.array([0.0, 0.0, 0.4672, 0.0, 0.0, 0.0])
    q = model.inverse_kinematics(pose[:3], pose[3:], check_limits=False).q
    conditioning = model.analytic_jacobian(q).jacobian_conditioning
    assert rule.stop_threshold < conditioning < rule.damping_threshold
    controller.reset(0.0, q, np.zeros(6))
    reference = HoldTrajectory(pose - [0.0, 0.0, 0.002, 0.0, 0.0, 0.0]).sample(0.0)
    output = controller.update(0.0, q, np.zeros(6), reference)
    assert output.status == ControlStatus.NEAR_SINGULAR and not output.safe_output
    assert np.all(np.isfinite(output.forces)) and output.jacobian_conditioning == pytest.approx(conditioning)
    # Raising the stop threshold above this conditioning turns the same step into the safe output.
    stopping = parameters.replace(
        controllers={"singularity": {"stop_threshold": 1.01 * conditioning, "damping_threshold": 0.5}}
    ).controllers
    stopped = make_controller(name, HexapodModel(parameters), stopping, gain_set=SIMULATED_PLANT)
    stopped.reset(0.0, q, np.zeros(6))
    output = stopped.update(0.0, q, np.zeros(6), reference)
    assert output.status == ControlStatus.SINGULAR and output.safe_output
    np.testing.assert_array_equal(output.forces, np.zeros(6))


def test_damped_inverse_is_continuous_at_the_threshold():
    """At conditioning == damping_threshold the damping is zero: same forces as the plain inverse."""
    parameters = nominal_parameters()
    model = HexapodModel(parameters)
    q = model.home_q + np.array([0.01, -0.02, 0.015, 0.0, -0.01, 0.02])
    conditioning = model.analytic_jacobian(q).jacobian_conditioning
    plain = controller_for("computed_torque", parameters)
    at_threshold = parameters.replace(
        controllers={"singularity": {"damping_threshold": conditioning * (1 + 1e-12)}}
    ).controllers
    damped = make_controller("computed_torque", HexapodModel(parameters), at_threshold)
    # 0.1 mm / 0.1 mrad from the measured pose, so no actuator saturates and all six forces count
    # (toward home, 2 cm away, five of the six sit at the force limit whatever the inverse).
    offset = np.array([1e-4, -1e-4, 5e-5, 1e-4, 0.0, -1e-4])
    reference = HoldTrajectory(model.forward_kinematics(q).pose + offset).sample(0.0)
    outputs = []
    for controller in (plain, damped):
        controller.reset(0.0, q, np.zeros(6))
        outputs.append(controller.update(0.0, q, np.full(6, 0.01), reference))
    assert outputs[1].status == ControlStatus.NEAR_SINGULAR and not outputs[0].saturated.any()
    # 2.5e-12 N apart measured; a threshold 1e-6 higher already moves the forces by 2.5e-6 N.
    np.testing.assert_allclose(outputs[1].forces, outputs[0].forces, rtol=0, atol=1e-11)


def test_double_loop_starts_bumplessly_from_the_hold_force():
    """Issue 16: an empty integrator made the double loop's first command zero and the platform
    dropped until it had learnt the load. The integrator now starts at the hold force: at rest on
    the reference the first command is the static force, which for the Table 6.1 masses and
    inertias at L = 0.378 m is the thesis's -4.3166 N on every actuator."""
    thesis = load_parameters(default_parameters_path("hexapod_validation.yaml")).with_geometry(leg_length=0.378)
    model = HexapodModel(thesis)
    controller = make_controller("double_loop", model, gain_set=SIMULATED_PLANT)
    controller.reset(0.0, model.home_q, np.zeros(6))
    reference = HoldTrajectory(model.forward_kinematics(model.home_q).pose).sample(0.0)
    output = controller.update(0.001, model.home_q, np.zeros(6), reference)
    np.testing.assert_array_equal(np.round(output.forces, 4), [-4.3166] * 6)
    # Elsewhere on the travel too, the first force is the gravity load there (not zero).
    q = model.home_q + np.array([0.02, -0.01, 0.015, 0.0, -0.02, 0.01])
    controller.reset(0.0, q, np.zeros(6))
    output = controller.update(0.001, q, np.zeros(6), HoldTrajectory(model.forward_kinematics(q).pose).sample(0.0))
    np.testing.assert_allclose(output.forces, model.gravity_term(q), rtol=0, atol=1e-9)



@pytest.mark.parametrize("name", ["computed_torque", "double_loop"])
def test_a_force_held_for_several_periods_carries_the_feedback_of_one(name):
    """Feedback over the hold: an update n periods after the last one scales the feedback by 1/n and
    nothing else. The part that is not feedback: for computed torque, (6.89) with its gains zero (the
    feed-forward and the model terms) from the model; for the double loop, K_i times the
    integral it held (the integral force). The force is affine in the feedback, so at a hold of n
    periods it is that part plus 1/n of the one-period force's feedback."""
    parameters = nominal_parameters()
    model = HexapodModel(parameters)
    q = model.home_q + np.array([1e-4, -2e-4, 1e-4, 0.0, -1e-4, 2e-4])
    qd = np.array([0.004, -0.003, 0.002, 0.0, 0.001, -0.002])
    pose = model.forward_kinematics(model.home_q).pose
    reference = Reference(0.0, pose, np.array([0.002, 0.0, -0.001, 0.0, 0.005, 0.0]),
                          np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.2]))
    period = parameters.controllers.period

    def second_update(controller, hold_periods):
        """The forces of an update ``hold_periods`` after the first one, and the force that is not feedback."""
        controller.reset(0.0, q, qd)
        controller.update(period, q, qd, reference)  # the update the hold counts from
        held_integral_force = controller.ki * controller.integral if name == "double_loop" else None
        output = controller.update(period * (1 + hold_periods), q, qd, reference)
        assert not output.saturated.any()
        return output.forces, held_integral_force

    one, integral_force = second_update(controller_for(name, parameters), 1)
    if name == "computed_torque":  # (6.89) without its gains, from the model's own terms
        phi = model.forward_kinematics(q).phi
        jacobian = model.analytic_jacobian(q, qd, phi=phi)
        acceleration = np.linalg.solve(jacobian.analytic, reference.acceleration - jacobian.convective)
        baseline = model.inverse_dynamics(q, qd, acceleration, phi=phi)
    else:
        baseline = integral_force
    assert np.max(np.abs(one - baseline)) > 1.0  # the feedback is a real part of the force [N]
    for hold in (2, 3, 5):
        controller = controller_for(name, parameters)
        forces, _ = second_update(controller, hold)
        np.testing.assert_allclose(forces, baseline + (one - baseline) / hold, rtol=0, atol=1e-9)
