"""All assembly modes, checked against independent computations.

The independent references: the apexes and the platform frame recomputed here from the thesis
geometry (not from kinematics.py), a brute-force multi-start root search with scipy's fsolve,
and the model's own forward kinematics for the physical mode.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import fsolve

from hexapod_control import (
    AssemblyError,
    ConvergenceError,
    HexapodModel,
    InvalidInputError,
)
from hexapod_control.model.assembly_modes import (
    AssemblyModes,
    _trig_coefficients,
    assembly_modes,
)
from hexapod_control.model.kinematics import SIDE_PAIRS
from hexapod_control.model.parameters import default_parameters_path

HOME_Q = 0.1765
BETAS = np.radians([-90.0, 30.0, 150.0])


@pytest.fixture(scope="module")
def model():
    return HexapodModel.from_yaml()


def rz(beta):
    c, s = math.cos(beta), math.sin(beta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def reference_apexes(model, q, phi):
    """P_i = Rz(beta_i) [(q_b - q_a)/2, -L_B/(2 sqrt 3) + r cos phi, r sin phi] (thesis 6.6)."""
    g = model.parameters.geometry
    d = -g.base_side / (2.0 * math.sqrt(3.0))
    rows = []
    for i in range(3):
        r = math.sqrt(4.0 * g.leg_length**2 - (q[2 * i] + q[2 * i + 1]) ** 2) / 2.0
        local = [(q[2 * i + 1] - q[2 * i]) / 2.0, d + r * math.cos(phi[i]), r * math.sin(phi[i])]
        rows.append(rz(BETAS[i]) @ local)
    return np.array(rows)


def edge_errors(model, q, phi):
    """| |P_j - P_i| - L_P | for the three platform edges [m]."""
    apexes = reference_apexes(model, q, phi)
    side = model.parameters.geometry.base_side / 2.0
    return np.array([abs(np.linalg.norm(apexes[j] - apexes[i]) - side) for i, j in SIDE_PAIRS])


def reference_constraint_conditioning(model, q, phi):
    """|det dgamma/dphi| / prod(row norms) with dgamma_k/dphi_i = (P_i - P_j) . dP_i/dphi_i."""
    g = model.parameters.geometry
    apexes = reference_apexes(model, q, phi)
    rows = np.zeros((3, 3))
    for k, (i, j) in enumerate(SIDE_PAIRS):
        for a, b in ((i, j), (j, i)):
            r = math.sqrt(4.0 * g.leg_length**2 - (q[2 * a] + q[2 * a + 1]) ** 2) / 2.0
            slope = rz(BETAS[a]) @ [0.0, -r * math.sin(phi[a]), r * math.cos(phi[a])]
            rows[k, a] = (apexes[a] - apexes[b]) @ slope
    return abs(np.linalg.det(rows)) / np.prod(np.linalg.norm(rows, axis=1))


def reference_frame(model, q, phi):
    """(R_F, r_F) from the apexes: y_F along P3 - P2, z_F the upward normal of P1P2P3."""
    p1, p2, p3 = reference_apexes(model, q, phi)
    y = (p3 - p2) / np.linalg.norm(p3 - p2)
    z = np.cross(p3 - p2, p1 - p2)
    z /= np.linalg.norm(z)
    rotation = np.column_stack((np.cross(y, z), y, z))
    return rotation, (p1 + p2 + p3) / 3.0 + model.parameters.geometry.platform_offset * z


def angle_distance(u, v):
    return float(np.max(np.abs(np.mod(np.asarray(u) - np.asarray(v) + math.pi, 2.0 * math.pi) - math.pi)))


def brute_force_modes(model, q, starts_per_angle=5):
    """Every real solution fsolve reaches from a grid of starts, deduplicated."""
    grid = np.linspace(-math.pi, math.pi, starts_per_angle, endpoint=False) + 0.3
    side = model.parameters.geometry.base_side / 2.0

    def gamma(phi):  # (|P_j - P_i|^2 - L_P^2) / 2, from the reference apexes
        apexes = reference_apexes(model, q, phi)
        return [0.5 * (np.dot(apexes[j] - apexes[i], apexes[j] - apexes[i]) - side**2) for i, j in SIDE_PAIRS]

    found = []
    for start in np.array(np.meshgrid(grid, grid, grid)).reshape(3, -1).T:
        phi, _, status, _ = fsolve(gamma, start, full_output=True, xtol=1e-13)
        if status != 1 or np.max(edge_errors(model, q, phi)) > 1e-10:
            continue
        if not any(angle_distance(phi, other) < 1e-6 for other in found):
            found.append(phi)
    return found


def check_modes(model, q, expected_count=8):
    """The properties every result near home must have; returns the result."""
    result = assembly_modes(model.kinematics, q)
    assert isinstance(result, AssemblyModes)
    assert len(result.modes) == expected_count
    for mode in result.modes:
        assert mode.residual <= 1e-12
        assert np.max(edge_errors(model, q, mode.phi)) <= 1e-12
        assert np.all(mode.phi > -math.pi) and np.all(mode.phi <= math.pi)
        rotation, position = reference_frame(model, q, mode.phi)
        np.testing.assert_allclose(mode.rotation, rotation, atol=1e-12)
        np.testing.assert_allclose(mode.position, position, atol=1e-12)
        lam, mu, nu = mode.euler_zyx
        np.testing.assert_allclose(
            rz(lam) @ _ry(mu) @ _rx(nu), mode.rotation, atol=1e-12, err_msg="euler_zyx does not give the rotation"
        )
        # 1.4e-15 relative measured (all modes near home): round-off of two derivations at one (q, phi).
        reference = reference_constraint_conditioning(model, q, mode.phi)
        assert mode.constraint_conditioning == pytest.approx(reference, rel=5e-15, abs=0)
    # Mirror pairs phi -> -phi (the platform reflected through the base plane).
    for mode in result.modes:
        assert sum(angle_distance(other.phi, -mode.phi) < 1e-9 for other in result.modes) == 1
    # Distinct modes.
    for a in range(len(result.modes)):
        for b in range(a):
            assert angle_distance(result.modes[a].phi, result.modes[b].phi) > 1e-6
    return result


def _ry(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rx(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def check_physical(result, q):
    """Exactly one physical mode, and it is what a fresh forward kinematics returns."""
    assert sum(mode.physical for mode in result.modes) == 1
    physical = result.modes[result.physical_index]
    assert physical.physical and result.physical is physical
    assert np.all(physical.phi > 0.0) and np.all(physical.phi < math.pi)
    fk = HexapodModel.from_yaml().forward_kinematics(q)
    np.testing.assert_allclose(physical.phi, fk.phi, atol=1e-10)
    np.testing.assert_allclose(physical.position, fk.position, atol=1e-10)
    np.testing.assert_allclose(physical.rotation, fk.rotation, atol=1e-10)
    np.testing.assert_allclose(physical.euler_zyx, fk.euler_zyx, atol=1e-10)


# --------------------------------------------------------------------------- home
def test_home_has_eight_modes_and_the_physical_one_is_the_home_pose(model):
    q = np.full(6, HOME_Q)
    result = check_modes(model, q)
    check_physical(result, q)
    physical = result.physical
    np.testing.assert_allclose(physical.phi, [math.pi / 2] * 3, atol=1e-12)
    np.testing.assert_allclose(physical.rotation, np.eye(3), atol=1e-12)
    assert physical.position[2] == pytest.approx(0.4243, abs=1e-4)
    # At home three modes share phi_1 = pi/2 (a triple root of the eliminant): all are found.
    assert sum(abs(mode.phi[0] - math.pi / 2) < 1e-9 for mode in result.modes) == 3


def test_validation_parameter_set(model):
    other = HexapodModel.from_yaml(default_parameters_path("hexapod_validation.yaml"))
    q = np.full(6, HOME_Q) + np.array([0.01, -0.02, 0.015, 0.0, -0.01, 0.02])
    result = check_modes(other, q)
    assert sum(mode.physical for mode in result.modes) == 1
    fk = other.forward_kinematics(q)
    np.testing.assert_allclose(result.physical.phi, fk.phi, atol=1e-10)


# --------------------------------------------------------------------------- random q
@pytest.mark.slow
def test_random_admissible_q(model):
    rng = np.random.default_rng(20240611)
    for _ in range(25):
        q = HOME_Q + rng.uniform(-0.06, 0.06, 6)
        check_physical(check_modes(model, q), q)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-0.06, 0.06), min_size=6, max_size=6))
def test_random_admissible_q_property(offsets):
    model = HexapodModel.from_yaml()
    q = HOME_Q + np.array(offsets)
    check_physical(check_modes(model, q), q)


@pytest.mark.parametrize(
    "q",
    [
        np.full(6, HOME_Q),
        HOME_Q + np.array([0.05, -0.03, 0.02, 0.04, -0.05, 0.01]),
        HOME_Q + np.array([-0.06, 0.06, 0.06, -0.06, 0.03, -0.045]),
    ],
)
def test_brute_force_search_finds_the_same_set(model, q):
    result = assembly_modes(model.kinematics, q)
    reference = brute_force_modes(model, q)
    assert len(reference) == len(result.modes) == 8
    for phi in reference:
        assert min(angle_distance(phi, mode.phi) for mode in result.modes) < 1e-9


# --------------------------------------------------------------------------- special cases
def q_with_flat_side(model, side, tilt=0.6, height=0.25):
    """Actuators for which side ``side`` has an assembly mode with phi = pi (apex in the base plane).

    The platform triangle is placed with vertex ``side`` at Rz(beta) [0, d - height, 0] and tilted
    about that side's axis; the other actuators follow from the inverse kinematics of each side.
    """
    g = model.parameters.geometry
    d = -g.base_side / (2.0 * math.sqrt(3.0))
    circumradius = g.base_side / 2.0 / math.sqrt(3.0)
    vertices = np.array([rz(BETAS[i]) @ [0.0, -circumradius, 0.0] for i in range(3)])
    tilt_matrix = rz(BETAS[side]) @ _rx(-tilt) @ rz(BETAS[side]).T
    apexes = (tilt_matrix @ (vertices - vertices[side]).T).T + rz(BETAS[side]) @ [0.0, d - height, 0.0]
    q, phi = np.zeros(6), np.zeros(3)
    for i in range(3):
        along, across, up = rz(BETAS[i]).T @ apexes[i]
        across -= d
        half_qbar = math.sqrt(g.leg_length**2 - across**2 - up**2)
        q[2 * i], q[2 * i + 1] = half_qbar - along, half_qbar + along
        phi[i] = math.atan2(up, across)
    return q, phi


@pytest.mark.parametrize("side", [0, 1, 2])
def test_a_mode_with_phi_equal_to_pi_is_found(model, side):
    q, phi = q_with_flat_side(model, side)
    assert abs(abs(phi[side]) - math.pi) < 1e-12 and np.max(edge_errors(model, q, phi)) < 1e-12
    result = assembly_modes(model.kinematics, q)
    for target in (phi, -phi):
        assert min(angle_distance(target, mode.phi) for mode in result.modes) < 1e-9
    reference = brute_force_modes(model, q)
    assert len(reference) == len(result.modes)
    for mode in result.modes:
        assert mode.residual <= 1e-12


def test_trig_form_of_the_closure_matches_the_kinematics(model):
    """gamma_k = a cos phi_i + b cos phi_j + c cos cos + d sin sin + e at arbitrary angles."""
    rng = np.random.default_rng(7)
    chains = model.kinematics.chains
    for _ in range(20):
        q = tuple(HOME_Q + rng.uniform(-0.1, 0.1, 6))
        phi = rng.uniform(-math.pi, math.pi, 3)
        coefficients = _trig_coefficients(chains, q)
        gamma = chains.closure_residual_and_slopes(q, tuple(phi))[0]
        for k, (i, j) in enumerate(SIDE_PAIRS):
            a, b, c, d, e = coefficients[k]
            predicted = (
                a * math.cos(phi[i])
                + b * math.cos(phi[j])
                + c * math.cos(phi[i]) * math.cos(phi[j])
                + d * math.sin(phi[i]) * math.sin(phi[j])
                + e
            )
            assert predicted == pytest.approx(gamma[k], abs=1e-15)


def test_result_is_sorted_and_repeatable(model):
    q = HOME_Q + np.array([0.02, -0.01, 0.03, 0.0, -0.02, 0.01])
    first, second = assembly_modes(model.kinematics, q), assembly_modes(model.kinematics, q)
    assert first.physical_index == second.physical_index
    for a, b in zip(first.modes, second.modes):
        np.testing.assert_array_equal(a.phi, b.phi)
    keys = [tuple(mode.phi) for mode in first.modes]
    assert keys == sorted(keys)
    np.testing.assert_array_equal(first.q, q)


def test_beyond_the_fold_of_the_physical_mode_it_is_absent(model):
    """Past a forward-kinematics singularity two mirror pairs (one with the physical mode) merge
    and vanish: 4 modes remain, none physical, and the forward kinematics cannot converge."""
    q = np.array([0.387, 0.289, 0.101, 0.227, 0.288, 0.04])
    result = assembly_modes(model.kinematics, q)
    assert len(result.modes) == 4 and len(brute_force_modes(model, q)) == 4
    assert result.physical_index is None and result.physical is None
    assert not any(mode.physical for mode in result.modes)
    for mode in result.modes:
        assert np.max(edge_errors(model, q, mode.phi)) <= 1e-12
    with pytest.raises(ConvergenceError):
        HexapodModel.from_yaml().forward_kinematics(q)


@pytest.mark.parametrize(
    "q, error",
    [
        ([HOME_Q] * 5, InvalidInputError),
        (np.full((2, 3), HOME_Q), InvalidInputError),
        ([HOME_Q] * 5 + [float("nan")], InvalidInputError),
        ([HOME_Q] * 5 + [float("inf")], InvalidInputError),
        ("abcdef", InvalidInputError),
        (None, InvalidInputError),
        ([0.378, 0.378] + [HOME_Q] * 4, AssemblyError),  # q_bar = 2L exactly
        ([HOME_Q] * 4 + [0.5, 0.3], AssemblyError),
    ],
)
def test_invalid_inputs_raise(model, q, error):
    with pytest.raises(error):
        assembly_modes(model.kinematics, q)
