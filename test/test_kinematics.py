"""Kinematics checked against independent computations: geometry, round trips, finite differences."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from velocity_oracle import VelocityOracle

from hexapod_control import (
    AssemblyError,
    AssemblyModeJumpError,
    ConvergenceError,
    HexapodModel,
    InvalidInputError,
    UnreachablePoseError,
)
from hexapod_control.model import compiled
from hexapod_control.model.dynamics import ReducedDynamics
from hexapod_control.model.parameters import default_parameters_path

HOME_Q = 0.1765
# Trajectory (6.82) of the thesis: q_d = q(0) + c_k (1 - exp(-kappa t^3)) sin(omega_k t).
TRAJECTORY_AMPLITUDES = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05])
TRAJECTORY_FREQUENCIES = np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])
# Finite-difference bounds, absolute: about 3x the worst error measured with the seeds below (same
# on the Python and the C backend). The differences are of forward kinematics solved to a 1e-12
# closure residual, so their round-off, not the analytic terms, sets these figures.
JACOBIAN_TOLERANCE = 1e-10  # J_A vs differences of FK poses: 3.2e-11 (model), 5.1e-12 (generated)
PASSIVE_MAP_TOLERANCE = 5e-10  # A_phi vs differences of FK phi: 1.5e-10 (model), 3.6e-11 (generated)
CONVECTIVE_TOLERANCE = 2e-10  # J_A_dot q_dot vs differences of J_A q_dot: 6.8e-11 (model), 1.1e-11 (generated)
# J_A_dot q_dot vs the second difference of FK poses (h = 1e-3, round-off / h^2): 7.7e-10, 6.4e-10.
POSE_SECOND_DIFFERENCE_TOLERANCE = 2.5e-9
ORACLE_BIAS_TOLERANCE = 1e-9  # the oracle's A_dot q_dot vs differences of its A q_dot: 3.0e-10


def joint_trajectory(t):
    return HOME_Q + TRAJECTORY_AMPLITUDES * (1.0 - math.exp(-(t**3))) * np.sin(TRAJECTORY_FREQUENCIES * t)


@pytest.fixture(scope="module")
def model():
    return HexapodModel.from_yaml()


def fresh_model():
    return HexapodModel.from_yaml()


admissible_q = st.lists(st.floats(-0.07, 0.07), min_size=6, max_size=6).map(lambda d: HOME_Q + np.array(d))


def leg_geometry_errors(model, q, result):
    """Leg lengths and platform-triangle sides recomputed from the returned pose, independently."""
    geometry = model.parameters.geometry
    side = geometry.platform_side
    circumradius = side / math.sqrt(3.0)
    local = np.array(
        [[-circumradius, 0.0, 0.0], [circumradius / 2, -side / 2, 0.0], [circumradius / 2, side / 2, 0.0]]
    )
    rotation = result.rotation
    apexes = result.position - geometry.platform_offset * rotation[:, 2] + local @ rotation.T
    betas = np.radians([-90.0, 30.0, 150.0])
    half_gap = geometry.base_side / (2.0 * math.sqrt(3.0))
    errors = []
    for i, beta in enumerate(betas):
        axis = np.array([math.cos(beta), math.sin(beta), 0.0])
        midpoint = -half_gap * np.array([-math.sin(beta), math.cos(beta), 0.0])
        for slider in (midpoint - q[2 * i] * axis, midpoint + q[2 * i + 1] * axis):
            errors.append(abs(np.linalg.norm(apexes[i] - slider) - geometry.leg_length))
    return max(errors), np.linalg.norm(rotation.T @ rotation - np.eye(3))


def test_home_pose(model):
    result = model.forward_kinematics([HOME_Q] * 6)
    geometry = model.parameters.geometry
    expected_z = math.sqrt(geometry.leg_length**2 - HOME_Q**2) + geometry.platform_offset
    np.testing.assert_allclose(result.position, [0.0, 0.0, expected_z], atol=1e-14)
    assert round(result.position[2], 4) == 0.4243
    np.testing.assert_allclose(result.rotation, np.eye(3), atol=1e-14)
    np.testing.assert_allclose(result.phi, [math.pi / 2] * 3, atol=1e-14)
    assert result.residual <= 1e-12


def test_validation_leg_length_gives_the_printed_height():
    model = HexapodModel.from_yaml(default_parameters_path("hexapod_validation.yaml"))
    assert round(model.forward_kinematics([HOME_Q] * 6).position[2], 4) == 0.4139


@settings(max_examples=150, deadline=None)
@given(q=admissible_q)
def test_forward_kinematics_closes_every_leg(q):
    model = fresh_model()
    result = model.forward_kinematics(q)
    leg_error, orthogonality = leg_geometry_errors(model, q, result)
    assert result.residual <= 1e-12
    # Worst over 3000 random q and the 3^6 grid of {-0.07, 0, 0.07} offsets: 4.0e-13 m and 1.6e-11
    # (R_F is built from a triangle closed to 1e-12 m).
    assert leg_error <= 1.5e-12
    assert orthogonality <= 5e-11


@settings(max_examples=150, deadline=None)
@given(q=admissible_q)
def test_inverse_after_forward_returns_the_actuators(q):
    model = fresh_model()
    fk = model.forward_kinematics(q)
    ik = model.inverse_kinematics(fk.position, fk.euler_zyx, check_limits=False)
    np.testing.assert_allclose(ik.q, q, atol=1e-10)
    np.testing.assert_allclose(ik.phi, fk.phi, atol=1e-10)


@settings(max_examples=150, deadline=None)
@given(
    position=st.tuples(st.floats(-0.03, 0.03), st.floats(-0.03, 0.03), st.floats(0.38, 0.43)),
    euler=st.tuples(st.floats(-0.1, 0.1), st.floats(-0.1, 0.1), st.floats(-0.1, 0.1)),
)
def test_forward_after_inverse_returns_the_pose(position, euler):
    model = fresh_model()
    ik = model.inverse_kinematics(position, euler, check_limits=False)
    fk = model.forward_kinematics(ik.q)
    np.testing.assert_allclose(fk.position, position, atol=1e-10)
    np.testing.assert_allclose(fk.euler_zyx, euler, atol=1e-10)


def central_difference(function, x, direction, step):
    """Fourth-order central difference of function along direction at x."""
    f = [function(x + k * step * direction) for k in (-2, -1, 1, 2)]
    return (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * step)


def random_states(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield HOME_Q + rng.uniform(-0.07, 0.07, 6), rng.normal(0.0, 0.2, 6)


def test_analytic_jacobian_matches_finite_differences(model):
    step = 1e-4
    for q, _ in random_states(20, seed=1):
        jacobian = model.analytic_jacobian(q)
        for k in range(6):
            unit = np.eye(6)[k]
            pose_column = central_difference(lambda x: model.forward_kinematics(x).pose, q, unit, step)
            phi_column = central_difference(lambda x: model.forward_kinematics(x).phi, q, unit, step)
            np.testing.assert_allclose(jacobian.analytic[:, k], pose_column, rtol=0, atol=JACOBIAN_TOLERANCE)
            np.testing.assert_allclose(jacobian.passive_map[6:, k], phi_column, rtol=0, atol=PASSIVE_MAP_TOLERANCE)
        np.testing.assert_array_equal(jacobian.passive_map[:6], np.eye(6))


def test_convective_term_matches_finite_differences(model):
    step = 1e-4
    for q, qd in random_states(20, seed=2):
        jacobian = model.analytic_jacobian(q, qd=qd)
        expected = central_difference(lambda x: model.analytic_jacobian(x).analytic @ qd, q, qd, step)
        np.testing.assert_allclose(jacobian.convective, expected, rtol=0, atol=CONVECTIVE_TOLERANCE)
        # The same quantity as the second derivative of the pose along q(t) = q + t qd.
        pose = lambda t: model.forward_kinematics(q + t * qd).pose  # noqa: E731
        h = 1e-3
        second = (-pose(2 * h) + 16 * pose(h) - 30 * pose(0) + 16 * pose(-h) - pose(-2 * h)) / (12 * h * h)
        np.testing.assert_allclose(jacobian.convective, second, rtol=0, atol=POSE_SECOND_DIFFERENCE_TOLERANCE)


@pytest.mark.parametrize("backend", ["python", "c"])
def test_generated_jacobian_terms_match_finite_differences(model, backend):
    """ReducedDynamics.analytic_jacobian_terms on each backend against the forward kinematics."""
    try:
        terms = compiled.select_backend(backend)
    except compiled.CompilationError as error:
        pytest.skip(f"no C backend: {error}")
    reduced = ReducedDynamics(model.parameters, backend)
    assert reduced.terms is terms
    step, h = 1e-4, 1e-3
    for q, qd in random_states(8, seed=4):
        fk = model.forward_kinematics(q)
        generated = reduced.analytic_jacobian_terms(q, fk.phi, qd)
        for k in range(6):
            unit = np.eye(6)[k]
            pose_column = central_difference(lambda x: model.forward_kinematics(x).pose, q, unit, step)
            phi_column = central_difference(lambda x: model.forward_kinematics(x).phi, q, unit, step)
            np.testing.assert_allclose(generated.analytic[:, k], pose_column, rtol=0, atol=JACOBIAN_TOLERANCE)
            np.testing.assert_allclose(generated.passive_map[6:, k], phi_column, rtol=0, atol=PASSIVE_MAP_TOLERANCE)
        np.testing.assert_array_equal(generated.passive_map[:6], np.eye(6))
        poses = [model.forward_kinematics(q + k * h * qd).pose for k in (-2, -1, 0, 1, 2)]
        second = (-poses[0] + 16 * poses[1] - 30 * poses[2] + 16 * poses[3] - poses[4]) / (12 * h * h)
        np.testing.assert_allclose(generated.convective, second, rtol=0, atol=POSE_SECOND_DIFFERENCE_TOLERANCE)
        rate = qd
        expected = central_difference(lambda x: reduced.analytic_jacobian_terms(x).analytic @ rate, q, qd, step)  # noqa: B023
        np.testing.assert_allclose(generated.convective, expected, rtol=0, atol=CONVECTIVE_TOLERANCE)
        # Two evaluations of one formula at the same (q, phi): 3.3e-16 relative measured.
        assert generated.constraint_conditioning == pytest.approx(fk.constraint_conditioning, rel=1e-15)
        # cos(mu) from the generated z_F, |z_F| = 1 to the closure residual: 6.2e-13 relative measured.
        assert generated.cos_mu == pytest.approx(math.cos(fk.euler_zyx[1]), rel=2e-12)
        without_rates = reduced.analytic_jacobian_terms(q, fk.phi)
        assert without_rates.convective is None
        np.testing.assert_allclose(without_rates.analytic, generated.analytic, rtol=0, atol=1e-14)
    with pytest.raises(InvalidInputError, match="^qd"):
        reduced.analytic_jacobian_terms([HOME_Q] * 6, None, [0.0] * 5)


def test_oracle_passive_acceleration_bias_matches_finite_differences(model):
    """The test oracle's A_dot q_dot is the derivative of its A(q) along q_dot (it checks the generated b)."""
    oracle = VelocityOracle(model.kinematics)
    step = 1e-4
    for q, qd in random_states(20, seed=3):
        bias = oracle.passive_acceleration_bias(q, None, qd)
        expected = central_difference(lambda x: oracle.passive_map(x)[6:] @ qd, q, qd, step)
        np.testing.assert_allclose(bias, expected, rtol=0, atol=ORACLE_BIAS_TOLERANCE)


@pytest.mark.slow
def test_selected_mode_is_continuous_along_the_thesis_trajectory():
    model = fresh_model()
    tracking = model.create_state()  # warm-started from each solution, as a 1 kHz loop runs
    previous = None
    largest_step = 0.0
    for k in range(20000):  # 20 s at 1 kHz
        q = joint_trajectory(k * 1e-3)
        phi = model.forward_kinematics(q, tracking).phi
        if previous is not None:
            largest_step = max(largest_step, np.max(np.abs(phi - previous)))
        previous = phi
        if k % 2000 == 0:  # without history (from home) the same mode: 9.3e-13 rad apart measured
            np.testing.assert_allclose(model.forward_kinematics(q).phi, phi, rtol=0, atol=3e-12)
    # The joints move at most ~0.24 m/s, so phi changes by well under a milliradian per step
    # (1.4e-4 rad measured).
    assert largest_step < 5e-4


def test_far_jump_between_calls_stays_on_the_physical_mode():
    model = fresh_model()
    state = model.create_state()
    far = np.array([0.25, 0.11, 0.24, 0.12, 0.23, 0.10])
    near_home = np.full(6, HOME_Q)
    for offset in (0.002, 0.004):  # a history moving away from home: the secant points elsewhere
        model.forward_kinematics(near_home + offset, state)
    jumped = model.forward_kinematics(far, state)
    cold = model.forward_kinematics(far)  # no history
    np.testing.assert_allclose(jumped.phi, cold.phi, rtol=0, atol=1e-14)  # 0 measured
    back = model.forward_kinematics(near_home, state)  # and back, from a history far away
    np.testing.assert_allclose(back.phi, [math.pi / 2] * 3, rtol=0, atol=5e-13)  # 1.6e-13 measured


@pytest.mark.parametrize(
    "q, match",
    [
        ([HOME_Q] * 5, "shape|values"),
        ([HOME_Q] * 5 + [float("nan")], "q5"),
        ([float("inf")] + [HOME_Q] * 5, "q0"),
        ([[HOME_Q] * 6], "shape"),
        (["a"] * 6, "real numbers"),
    ],
)
def test_invalid_joint_vectors_are_rejected(model, q, match):
    with pytest.raises(InvalidInputError, match=match):
        model.forward_kinematics(q)
    with pytest.raises(InvalidInputError):
        model.analytic_jacobian(q)


def test_legs_too_short_for_the_slider_spread(model):
    leg = model.parameters.geometry.leg_length
    with pytest.raises(AssemblyError, match="side 2: q2 \\+ q3"):
        model.forward_kinematics([HOME_Q, HOME_Q, leg, leg + 0.01, HOME_Q, HOME_Q])


def test_configuration_that_cannot_close(model):
    # Each side can assemble, but side 1's apex is pulled far from the other two.
    with pytest.raises((ConvergenceError, AssemblyModeJumpError)):
        fresh_model().forward_kinematics([0.37, 0.37, 0.02, 0.02, 0.02, 0.02])


def test_explicit_guess_on_another_branch_raises(model):
    with pytest.raises(AssemblyModeJumpError):
        fresh_model().forward_kinematics([HOME_Q] * 6, phi_guess=[-1.6, -1.6, -1.6])


def test_unreachable_poses(model):
    with pytest.raises(UnreachablePoseError, match="beyond the leg length"):
        model.inverse_kinematics([0.0, 0.0, 0.6], [0.0, 0.0, 0.0])
    with pytest.raises(UnreachablePoseError, match="travel|separation"):
        model.inverse_kinematics([0.15, 0.0, 0.3], [0.0, 0.0, 0.0])  # q3 = q4 = 0.435 m
    with pytest.raises(InvalidInputError, match="nu"):
        model.inverse_kinematics([0.0, 0.0, 0.42], [0.0, 0.0, float("nan")])


def reference_constraint_conditioning(model, q, phi):
    """|det dgamma/dphi| / prod(row norms), the rows derived here from the apexes (thesis 6.6).

    P_i = Rz(beta_i) [(q_b - q_a)/2, -L_B/(2 sqrt 3) + r cos phi_i, r sin phi_i] and
    gamma_k = (|P_j - P_i|^2 - L_P^2) / 2, so dgamma_k/dphi_i = (P_i - P_j) . dP_i/dphi_i.
    """
    geometry = model.parameters.geometry
    offset = -geometry.base_side / (2.0 * math.sqrt(3.0))
    apexes, slopes = [], []
    for i, beta in enumerate(np.radians([-90.0, 30.0, 150.0])):
        c, s = math.cos(beta), math.sin(beta)
        side = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        r = math.sqrt(4.0 * geometry.leg_length**2 - (q[2 * i] + q[2 * i + 1]) ** 2) / 2.0
        apexes.append(side @ [(q[2 * i + 1] - q[2 * i]) / 2.0, offset + r * math.cos(phi[i]), r * math.sin(phi[i])])
        slopes.append(side @ [0.0, -r * math.sin(phi[i]), r * math.cos(phi[i])])
    rows = np.zeros((3, 3))
    for k, (i, j) in enumerate(((0, 1), (1, 2), (2, 0))):
        rows[k, i] = (apexes[i] - apexes[j]) @ slopes[i]
        rows[k, j] = (apexes[j] - apexes[i]) @ slopes[j]
    return abs(np.linalg.det(rows)) / np.prod(np.linalg.norm(rows, axis=1))


def test_conditioning_matches_independent_computations(model):
    """Constraint conditioning from hand-derived closure rows; J_A conditioning from an FK-difference J_A."""
    # At home the rows are cyclic with two equal entries a: 2 a^3 / (sqrt(2) a)^3 = 1 / sqrt(2).
    assert model.analytic_jacobian([HOME_Q] * 6).constraint_conditioning == pytest.approx(1 / math.sqrt(2), rel=1e-15)
    states = [np.full(6, HOME_Q)] + [q for q, _ in random_states(5, seed=5)]
    for q in states:
        jacobian = model.analytic_jacobian(q)
        phi = model.forward_kinematics(q).phi
        # 1.1e-15 relative measured: round-off of two evaluations at the same (q, phi).
        assert jacobian.constraint_conditioning == pytest.approx(reference_constraint_conditioning(model, q, phi), rel=3e-15)
        difference_jacobian = np.column_stack(
            [central_difference(lambda x: model.forward_kinematics(x).pose, q, unit, 1e-4) for unit in np.eye(6)]
        )
        singular_values = np.linalg.svd(difference_jacobian, compute_uv=False)
        # 6.2e-12 relative measured (the differences' error, see JACOBIAN_TOLERANCE).
        assert jacobian.jacobian_conditioning == pytest.approx(singular_values[-1] / singular_values[0], rel=2e-11)


def test_forward_kinematics_flags_actuators_outside_their_travel():
    """Issue 16: FK solves a q the sliders cannot reach (IK refuses such poses); it says which."""
    model = HexapodModel.from_yaml()
    limits = model.parameters.limits
    inside = model.forward_kinematics(model.home_q)
    assert inside.outside_travel == ()
    q = np.array(model.home_q)
    q[2] = limits.actuator_position_max + 0.01  # past the upper stop; the legs still assemble
    q[3] = limits.actuator_position_min - 0.005
    assert model.forward_kinematics(q).outside_travel == (3, 4)  # numbered from 1, as the thesis does
    with pytest.raises(UnreachablePoseError):
        model.inverse_kinematics(model.forward_kinematics(q).position, model.forward_kinematics(q).euler_zyx)
