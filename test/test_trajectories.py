"""Reference trajectories checked against the thesis formulas, finite differences and IK."""

import math

import numpy as np
import pytest

from hexapod_control import (
    HexapodModel,
    InvalidInputError,
    ParameterError,
    UnreachablePoseError,
)
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectories import (
    CheckedTrajectory,
    ExcitationTrajectory,
    HoldTrajectory,
    JointSpaceTrajectory,
    JointTrajectoryImage,
    OperationalSpaceTrajectory,
    SmoothMove,
    common_period,
    cubic_exponential_ramp,
    home_pose,
    make_trajectory,
)
from hexapod_control.control.trajectory_player import TrajectoryPlayer
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.lockstep import LockstepLoop

# Thesis 6.5 and (6.82), written out independently of the YAML files they are checked against.
EXPERIMENT_KAPPA, EXPERIMENT_OMEGA = 0.01, 0.2 * math.pi
EXPERIMENT_C, EXPERIMENT_Z0, EXPERIMENT_ANGLE_C = 0.02, 0.02, math.pi / 60.0
VALIDATION_C = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05])
VALIDATION_OMEGA = np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])
HOME_Q = 0.1765
FD_STEP = 1e-5  # [s] central differences: truncation ~ h^2 f''' , round-off ~ eps f / h
SAMPLE_TIMES = (0.3, 1.0, 2.7, 5.0, 9.1, 17.3, 31.4)


@pytest.fixture(scope="module")
def model():
    return HexapodModel.from_yaml()


def thesis_experiment_pose(t, z_home):
    s = 1.0 - math.exp(-EXPERIMENT_KAPPA * t**3)
    wt = EXPERIMENT_OMEGA * t
    return np.array(
        [
            EXPERIMENT_C * s * math.cos(wt),
            EXPERIMENT_C * s * math.sin(wt),
            EXPERIMENT_C * s * (math.sin(wt) - EXPERIMENT_Z0 / EXPERIMENT_C) + z_home,
            EXPERIMENT_ANGLE_C * s * math.cos(wt),
            EXPERIMENT_ANGLE_C * s * math.sin(wt),
            EXPERIMENT_ANGLE_C * s * math.sin(wt),
        ]
    )


def central_difference(function, t, h=FD_STEP):
    return (function(t + h) - function(t - h)) / (2.0 * h)


def assert_derivatives_match(trajectory, times, velocity_tolerance, acceleration_tolerance):
    """Velocity and acceleration against central differences; absolute bounds (each caller states
    its measured errors, the bounds are a few times those)."""
    for t in times:
        ref = trajectory.sample(t)
        velocity = central_difference(lambda s: trajectory.sample(s).pose, t)
        acceleration = central_difference(lambda s: trajectory.sample(s).velocity, t)
        np.testing.assert_allclose(ref.velocity, velocity, rtol=0, atol=velocity_tolerance, err_msg=f"velocity at t={t}")
        np.testing.assert_allclose(
            ref.acceleration, acceleration, rtol=0, atol=acceleration_tolerance, err_msg=f"acceleration at t={t}"
        )


@pytest.mark.parametrize("name", ["hexapod.yaml", "hexapod_validation.yaml"])
def test_settings_hold_the_thesis_values(name):
    settings = load_parameters(default_parameters_path(name)).trajectories
    op = settings.operational_space
    assert op.ramp_rate == EXPERIMENT_KAPPA and op.angular_frequency == pytest.approx(EXPERIMENT_OMEGA, rel=1e-15)
    np.testing.assert_allclose(op.amplitudes, [EXPERIMENT_C] * 3 + [EXPERIMENT_ANGLE_C] * 3, rtol=1e-15)
    assert op.waveforms == ("cos", "sin", "sin", "cos", "sin", "sin")
    np.testing.assert_allclose(op.offsets, [0, 0, EXPERIMENT_Z0, 0, 0, 0])
    js = settings.joint_space
    assert js.ramp_rate == 1.0
    np.testing.assert_array_equal(js.amplitudes, VALIDATION_C)
    np.testing.assert_array_equal(js.angular_frequencies, VALIDATION_OMEGA)
    assert 0.0 < settings.move.speed_fraction <= 1.0


def test_ramp_derivatives_and_start():
    assert cubic_exponential_ramp(0.0, 0.5) == (0.0, 0.0, 0.0)
    assert cubic_exponential_ramp(-3.0, 0.5) == (0.0, 0.0, 0.0)
    for t in (0.1, 0.4, 1.3, 4.0):
        s, ds, dds = cubic_exponential_ramp(t, 0.5)
        assert s == pytest.approx(1.0 - math.exp(-0.5 * t**3), rel=1e-14)
        # 5.1e-11 and 1.7e-10 measured.
        assert ds == pytest.approx(central_difference(lambda x: cubic_exponential_ramp(x, 0.5)[0], t), rel=0, abs=2e-10)
        assert dds == pytest.approx(central_difference(lambda x: cubic_exponential_ramp(x, 0.5)[1], t), rel=0, abs=5e-10)


def test_operational_trajectory_is_the_thesis_formula_about_the_fk_home(model):
    trajectory = make_trajectory("operational_space", model)
    z_home = model.forward_kinematics(model.home_q).position[2]
    # The model's home height (L = 0.378), not the printed 0.424 m.
    assert z_home == pytest.approx(0.4243, abs=5e-5)
    start = trajectory.sample(0.0)
    np.testing.assert_allclose(start.pose, [0, 0, z_home, 0, 0, 0], atol=1e-15)
    np.testing.assert_array_equal(start.velocity, np.zeros(6))
    np.testing.assert_array_equal(start.acceleration, np.zeros(6))
    for t in SAMPLE_TIMES:
        np.testing.assert_allclose(trajectory.sample(t).pose, thesis_experiment_pose(t, z_home), atol=1e-15)
    # Before the start it holds the start.
    np.testing.assert_allclose(trajectory.sample(-1.0).pose, start.pose, atol=0)


def test_operational_trajectory_derivatives(model):
    trajectory = make_trajectory("operational_space", model)
    assert_derivatives_match(trajectory, SAMPLE_TIMES + (0.05,), 1e-11, 3e-12)  # 2.3e-12, 7.0e-13 measured


def test_joint_trajectory_formula_derivatives_and_start(model):
    joints = JointSpaceTrajectory.from_model(model)
    start = joints.sample_joints(0.0)
    np.testing.assert_array_equal(start.position, np.full(6, HOME_Q))
    np.testing.assert_array_equal(start.velocity, np.zeros(6))
    np.testing.assert_array_equal(start.acceleration, np.zeros(6))
    for t in SAMPLE_TIMES:
        expected = HOME_Q + VALIDATION_C * (1.0 - math.exp(-(t**3))) * np.sin(VALIDATION_OMEGA * t)
        ref = joints.sample_joints(t)
        np.testing.assert_allclose(ref.position, expected, atol=1e-15)
        # 3.4e-11 and 3.0e-10 measured.
        np.testing.assert_allclose(
            ref.velocity, central_difference(lambda s: joints.sample_joints(s).position, t), rtol=0, atol=1e-10
        )
        np.testing.assert_allclose(
            ref.acceleration, central_difference(lambda s: joints.sample_joints(s).velocity, t), rtol=0, atol=1e-9
        )


def test_joint_trajectory_image_is_fk_and_its_derivatives(model):
    image = JointTrajectoryImage.from_model(model)
    joints = JointSpaceTrajectory.from_model(model)
    independent = HexapodModel(model.parameters)
    start = image.sample(0.0)
    np.testing.assert_allclose(start.pose, home_pose(model), atol=1e-15)
    np.testing.assert_allclose(start.velocity, 0.0, atol=0)
    np.testing.assert_allclose(start.acceleration, 0.0, atol=0)
    for t in (0.5, 1.2, 2.0, 3.3, 6.0):
        ref = image.sample(t)
        np.testing.assert_allclose(ref.pose, independent.forward_kinematics(joints.sample_joints(t).position).pose, atol=1e-12)
    # The poses are FK solutions (1e-12 closure), whose round-off over the 2e-5 s difference sets
    # the velocity error: 1.3e-8 measured; 4.1e-10 for the acceleration.
    assert_derivatives_match(image, (0.5, 1.2, 2.0, 3.3, 6.0), 4e-8, 1.5e-9)


def test_hold_is_constant_with_zero_rates():
    hold = HoldTrajectory([0.01, 0, 0.43, 0.1, 0, 0])
    for t in (0.0, 1.0, 100.0):
        ref = hold.sample(t)
        np.testing.assert_array_equal(ref.pose, [0.01, 0, 0.43, 0.1, 0, 0])
        assert not ref.velocity.any() and not ref.acceleration.any()


def peak_actuator_speed(model, move, samples=801):
    """Largest |q_dot| along the move, by IK of the sampled poses and finite differences."""
    times = np.linspace(move.start_time, move.start_time + move.duration, samples)
    q = np.array([model.inverse_kinematics(ref.pose[:3], ref.pose[3:]).q for ref in map(move.sample, times)])
    return np.max(np.abs(np.diff(q, axis=0)) / np.diff(times)[:, None])


@pytest.mark.parametrize(
    "displacement",
    [
        [0.04, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, -0.03, -0.02, 0.0, 0.05, 0.0],
        [0.02, 0.02, -0.03, 0.3, -0.05, 0.08],
    ],
)
def test_smooth_move_respects_the_speed_limit_and_ends_at_rest(model, displacement):
    start = home_pose(model)
    target = start + np.array(displacement)
    move = SmoothMove(model, start, target, start_time=2.0)
    first, last = move.sample(2.0), move.sample(2.0 + move.duration)
    np.testing.assert_allclose(first.pose, start, atol=1e-15)
    np.testing.assert_allclose(last.pose, target, atol=1e-15)
    for ref in (first, last, move.sample(0.0), move.sample(2.0 + 2 * move.duration)):
        np.testing.assert_allclose(ref.velocity, 0.0, atol=1e-15)
        np.testing.assert_allclose(ref.acceleration, 0.0, atol=1e-14)  # 2.1e-15 measured
    # 2.0e-10 and 3.8e-9 worst measured over the three moves.
    assert_derivatives_match(move, 2.0 + move.duration * np.array([0.1, 0.37, 0.5, 0.81]), 6e-10, 1.2e-8)
    settings = model.parameters.trajectories.move
    bound = settings.speed_fraction * model.parameters.limits.actuator_speed_max
    peak = peak_actuator_speed(model, move)
    assert peak <= bound * 1.01  # the bound is enforced at path samples, the peak is sampled finely
    if move.duration > settings.minimum_duration:
        assert peak >= 0.9 * bound  # and not needlessly slow


def test_smooth_move_takes_the_short_way_round_in_angle(model):
    start = home_pose(model)
    target = start.copy()
    target[3] = 2.0 * math.pi - 0.1  # the same orientation as lambda = -0.1
    move = SmoothMove(model, start, target)
    assert move.displacement[3] == pytest.approx(-0.1, abs=1e-12)
    assert move.sample(move.duration).pose[3] == pytest.approx(-0.1, abs=1e-12)


def test_smooth_move_rejects_unreachable_and_invalid_targets(model):
    start = home_pose(model)
    with pytest.raises(UnreachablePoseError):
        SmoothMove(model, start, start + [0.0, 0.0, 0.2, 0.0, 0.0, 0.0])  # legs cannot reach
    with pytest.raises(UnreachablePoseError):
        SmoothMove(model, start, start + [0.3, 0.0, 0.0, 0.0, 0.0, 0.0])  # beyond the actuator travel
    with pytest.raises(InvalidInputError):
        SmoothMove(model, start, start + [math.nan, 0, 0, 0, 0, 0])
    with pytest.raises(InvalidInputError):
        SmoothMove(model, start, start[:5])


def test_invalid_time_is_rejected(model):
    with pytest.raises(InvalidInputError):
        make_trajectory("operational_space", model).sample(math.nan)
    with pytest.raises(InvalidInputError):
        make_trajectory("circle", model)


def test_the_player_holds_the_measured_pose_and_follows_it_only_when_told(model):
    """Until something starts, the hold is the measured pose; ``follow`` (the robot not armed) moves
    it with the platform; a started motion is never replaced by a measurement."""
    player = TrajectoryPlayer(model, "operational_space")
    home = home_pose(model)
    sunk, lower = home.copy(), home.copy()
    sunk[2] -= 0.01
    lower[2] -= 0.02
    player.measured(home, 0.0)
    assert player.changes == 1
    player.measured(sunk, 0.1, follow=True)
    np.testing.assert_array_equal(player.sample(0.1)[0].pose, sunk)
    player.measured(lower, 0.2)  # armed: the hold stays
    np.testing.assert_array_equal(player.sample(0.2)[0].pose, sunk)
    assert player.changes == 1  # one hold, moved, not replaced
    player.start(0.3)
    started = player.active
    player.measured(lower, 0.4, follow=True)
    assert player.active is started and player.changes == 2
    np.testing.assert_array_equal(player.sample(0.3)[0].pose, sunk)  # the move starts at the hold


# ------------------------------------------------------------------------------------------ checked when built
def model_with(tmp_path, sections: str) -> HexapodModel:
    """The shipped parameters with ``sections`` (YAML under ``hexapod:``, indented two spaces) laid over."""
    path = tmp_path / "lab.yaml"
    path.write_text(f"extends: {default_parameters_path()}\nhexapod:\n{sections}")
    return HexapodModel(load_parameters(path))


def peak_slider_speed_by_ik(model, trajectory, times):
    """max |dq/dt| over ``times`` by central differences of IK along the sampled poses (no J_A)."""
    def joints(t):
        pose = trajectory.sample(t).pose
        return model.inverse_kinematics(pose[:3], pose[3:], check_limits=False).q
    return max(float(np.max(np.abs(central_difference(joints, t)))) for t in times)


@pytest.mark.slow
@pytest.mark.parametrize("name, unchecked", [
    ("operational_space", OperationalSpaceTrajectory.from_model),
    ("joint_space", JointTrajectoryImage.from_model),
    ("excitation", lambda model: JointTrajectoryImage(ExcitationTrajectory.from_model(model), model)),
])
def test_the_shipped_trajectories_pass_their_check_and_sample_as_if_never_checked(model, name, unchecked):
    """The check samples a path of its own: what make_trajectory returns gives, bit for bit, what
    the same trajectory built without a check gives (an image's FK warm start starts from home)."""
    checked, plain = make_trajectory(name, model), unchecked(model)
    assert isinstance(checked, CheckedTrajectory)
    for t in SAMPLE_TIMES:
        sample, expected = checked.sample(t), plain.sample(t)
        np.testing.assert_array_equal(sample.pose, expected.pose)
        np.testing.assert_array_equal(sample.velocity, expected.velocity)
        np.testing.assert_array_equal(sample.acceleration, expected.acceleration)


@pytest.mark.slow
def test_the_check_refuses_a_feed_forward_speed_over_the_limit_as_a_dense_grid_finds_it(tmp_path):
    """6.5 sped up by a factor a (omega a, kappa a^3: the pose at t is the original's at a t, so every
    speed scales by a) until its peak slider speed, found by differences of IK every 0.1 ms, is 5 %
    under or 5 % over the speed limit: the check (a sample every 200th of a period, through J_A)
    accepts the first and refuses the second, naming the key and the file."""
    acceleration_free = "  safety: {max_reference_acceleration: 100000.0}\n"

    def sped_up(factor):
        return model_with(tmp_path, acceleration_free + "  trajectories:\n    operational_space: "
                          f"{{ramp_rate: {0.125 * factor**3!r}, angular_frequency: {factor!r}}}\n")

    def dense_peak(model):
        trajectory = OperationalSpaceTrajectory.from_model(model)
        return peak_slider_speed_by_ik(model, trajectory, np.arange(0.0, trajectory.check_times()[-1], 1e-4))

    probe = sped_up(20.0)
    limit = probe.parameters.limits.actuator_speed_max
    factor = 20.0 * limit / dense_peak(probe)
    under, over = sped_up(factor * 0.95), sped_up(factor * 1.05)
    assert dense_peak(under) < limit < dense_peak(over)
    make_trajectory("operational_space", under)
    with pytest.raises(ParameterError, match=r"lab\.yaml: hexapod\.trajectories\.operational_space: at t = .* "
                                             r"feed-forward speed .* exceeds the speed limit"):
        make_trajectory("operational_space", over)


@pytest.mark.slow
def test_the_check_refuses_a_joint_path_out_of_the_travel_and_the_player_at_construction(tmp_path):
    """(6.82) with slider 1's amplitude c: q swings over home -/+ c, so the travel's lower end
    0.02 m allows c up to 0.1565 m. The player builds its trajectory once, so it refuses at once."""
    def with_amplitude(c):
        return model_with(tmp_path, f"  trajectories:\n    joint_space: {{amplitudes: [{c}, 0.08, 0.08, 0.05, 0.08, 0.05]}}\n")

    inside, outside = with_amplitude(0.15), with_amplitude(0.16)
    assert HOME_Q - 0.16 < inside.parameters.limits.actuator_position_min < HOME_Q - 0.15
    make_trajectory("joint_space", inside)
    with pytest.raises(ParameterError, match=r"lab\.yaml: hexapod\.trajectories\.joint_space: at t = "):
        make_trajectory("joint_space", outside)
    with pytest.raises(ParameterError, match=r"hexapod\.trajectories\.joint_space"):
        TrajectoryPlayer(outside, "joint_space")
    TrajectoryPlayer(outside, "operational_space")  # another selection does not need it


def test_joint_frequencies_must_repeat_for_the_path_to_be_checked(tmp_path):
    """sin(2t) and sin(3t) repeat together every 2 pi; (6.82)'s 3, 1.5, 0.75 rad/s every 2 pi / 0.75;
    sqrt(2) against 1 never."""
    assert common_period([2.0, 3.0, 0.0], "here") == pytest.approx(2.0 * math.pi, rel=1e-12)
    assert common_period(VALIDATION_OMEGA, "here") == pytest.approx(2.0 * math.pi / 0.75, rel=1e-12)
    assert common_period([0.0] * 6, "here") == 0.0
    model = model_with(tmp_path, "  trajectories:\n    joint_space: {angular_frequencies: [1.0, 1.414213562373095, 1, 1, 1, 1]}\n")
    with pytest.raises(ParameterError, match=r"hexapod\.trajectories\.joint_space\.angular_frequencies: .* never repeats"):
        make_trajectory("joint_space", model)


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_lockstep_answers_a_checked_trajectory_as_it_answers_the_same_samples_checked_one_by_one(model, controller):
    """A checked trajectory's samples skip the reference row's per-sample checks; on a valid path
    that changes no force, no decision and no pose, bit for bit."""
    def records(trajectory):
        plant = make_plant("embedded", model.parameters)
        plant.reset(np.full(6, model.parameters.home_actuator_position))
        control = ControlLoop(model, controller, gain_set="simulated_plant", arm_on_start=True)
        return list(LockstepLoop(plant, control, trajectory).run(0.4))

    checked = make_trajectory("operational_space", model)
    one_by_one = records(checked.trajectory)
    assert len(one_by_one) == 400
    for fast, slow in zip(records(checked), one_by_one):
        np.testing.assert_array_equal(fast.step.forces, slow.step.forces)
        assert fast.step.decision.action == slow.step.decision.action
        np.testing.assert_array_equal(fast.step.pose, slow.step.pose)
