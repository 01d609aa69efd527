"""Rigid-body dynamics: properties checked against computations independent of the derivation.

The reference here is a direct numeric model written from doc/model.md (the table of the 25
bodies): body poses (centres of mass and rotation matrices, S-joint angles by atan2) in numpy,
velocities by finite differences of those poses. Nothing in it shares code with the SymPy
derivation in hexapod_control/codegen.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import fsolve
from velocity_oracle import VelocityOracle

from hexapod_control import HexapodModel, InvalidInputError, load_parameters
from hexapod_control.model.dynamics import ReducedDynamics, pack_parameters
from hexapod_control.model.parameters import default_parameters_path

EXPERIMENTS = "hexapod.yaml"
VALIDATION = "hexapod_validation.yaml"
PARAMETER_FILES = (EXPERIMENTS, VALIDATION)
SIDE_ANGLES = np.radians([-90.0, 30.0, 150.0])
N_SWAP = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])  # N of (6.68)
RANDOM_SPREAD = 0.03  # [m] random actuator offsets from home: well inside the workspace


def parameters_of(name):
    return load_parameters(default_parameters_path(name))


@pytest.fixture(scope="module", params=PARAMETER_FILES)
def setup(request):
    parameters = parameters_of(request.param)
    model = HexapodModel(parameters)
    return parameters, model, ReducedDynamics(model.parameters)


# ----------------------------------------------------------------------------- reference model
def rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def ry(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def apexes(parameters, rho):
    g = parameters.geometry
    q, phi = rho[:6], rho[6:]
    result = []
    for i in range(3):
        qa, qb = q[2 * i], q[2 * i + 1]
        r = math.sqrt(4 * g.leg_length**2 - (qa + qb) ** 2) / 2
        local = [(qb - qa) / 2, g.side_offset + r * math.cos(phi[i]), r * math.sin(phi[i])]
        result.append(rz(SIDE_ANGLES[i]) @ np.array(local))
    return result


def platform_axes(parameters, points):
    lp = parameters.geometry.platform_side
    y = (points[2] - points[1]) / lp
    z = 2.0 / (math.sqrt(3.0) * lp**2) * np.cross(points[2] - points[1], points[0] - points[1])
    return np.column_stack((np.cross(y, z), y, z))


def closure(parameters, rho):
    points = apexes(parameters, rho)
    lp = parameters.geometry.platform_side
    return [0.5 * (np.dot(points[j] - points[i], points[j] - points[i]) - lp**2) for i, j in ((0, 1), (1, 2), (2, 0))]


def solve_phi(parameters, q, guess=(math.pi / 2,) * 3):
    """phi on the constraint manifold to machine precision (independent of HexapodModel)."""
    phi = fsolve(lambda f: closure(parameters, list(q) + list(f)), guess, xtol=1e-12)
    for _ in range(3):  # Newton polish to round-off, with a difference Jacobian
        jacobian = np.column_stack(
            [
                (np.array(closure(parameters, list(q) + list(phi + h))) - closure(parameters, list(q) + list(phi - h)))
                / 2e-7
                for h in np.eye(3) * 1e-7
            ]
        )
        phi = phi - np.linalg.solve(jacobian, closure(parameters, list(q) + list(phi)))
    assert max(abs(v) for v in closure(parameters, list(q) + list(phi))) < 1e-15
    return list(phi)


def bodies(parameters, rho):
    """[(mass, principal moments, centre of mass, rotation or None)] for the 25 bodies."""
    g, b = parameters.geometry, parameters.bodies
    q, phi = rho[:6], rho[6:]
    points = apexes(parameters, rho)
    frame = platform_axes(parameters, points)
    z_axis = frame[:, 2]
    result = [(b.platform.mass, b.platform.inertia, sum(points) / 3 + g.platform_com_offset * z_axis, frame)]
    for i in range(3):
        side = rz(SIDE_ANGLES[i])
        qa, qb = q[2 * i], q[2 * i + 1]
        qbar = qa + qb
        height = math.sqrt(4 * g.leg_length**2 - qbar**2) / 2
        alpha = math.atan2(qbar / 2, height)
        tilt = side @ rx(phi[i])
        sliders = (side @ np.array([-qa, g.side_offset, 0.0]), side @ np.array([qb, g.side_offset, 0.0]))
        result.append((b.leg.mass, b.leg.inertia, (sliders[0] + points[i]) / 2, tilt @ rz(-alpha)))
        result.append((b.leg.mass, b.leg.inertia, (sliders[1] + points[i]) / 2, tilt @ rz(alpha)))
        for slider in sliders:
            below = slider - np.array([0.0, 0.0, g.pu_part1_com_offset])
            result.append((b.pu_part1.mass, b.pu_part1.inertia, below, None))
            result.append((b.pu_part2.mass, b.pu_part2.inertia, slider, tilt))
        relative = N_SWAP.T @ tilt.T @ frame
        theta1 = math.atan2(-relative[1, 2], relative[2, 2])
        theta2 = math.atan2(relative[0, 2], math.hypot(relative[1, 2], relative[2, 2]))
        part1 = tilt @ N_SWAP @ rx(theta1)
        result.append((b.s_part1.mass, b.s_part1.inertia, points[i], part1))
        result.append((b.s_part2.mass, b.s_part2.inertia, points[i] + g.s_part2_com_offset * z_axis, part1 @ ry(theta2)))
    assert len(result) == 25
    return result


def potential_energy(parameters, rho):
    return sum(mass * parameters.gravity * com[2] for mass, _, com, _ in bodies(parameters, rho))


def fourth_order_derivative(f, step):
    """df/ds at s = 0 by the 5-point central difference (error O(step^4))."""
    return (-f(2 * step) + 8 * f(step) - 8 * f(-step) + f(-2 * step)) / (12 * step)


def body_velocities(parameters, path, step):
    """[(v, omega_body)] of every body along s -> path(s) at s = 0, by differences of poses."""
    samples = {k: bodies(parameters, path(k * step)) for k in (-2, -1, 1, 2)}
    centre = bodies(parameters, path(0.0))
    result = []
    for n, (_, _, _, rotation) in enumerate(centre):
        def sample(s, field):
            return samples[int(round(s / step))][n][field]

        velocity = fourth_order_derivative(lambda s: sample(s, 2), step)
        omega = None
        if rotation is not None:
            rate = fourth_order_derivative(lambda s: sample(s, 3), step)
            skew = rotation.T @ rate
            skew = 0.5 * (skew - skew.T)  # vee of the skew part of R^T R_dot
            omega = np.array([skew[2, 1], skew[0, 2], skew[1, 0]])
        result.append((velocity, omega))
    return result


def kinetic_energy(parameters, rho, velocities):
    total = 0.0
    for (mass, inertia, _, _), (velocity, omega) in zip(bodies(parameters, rho), velocities):
        total += 0.5 * mass * velocity @ velocity
        if omega is not None:
            total += 0.5 * omega @ (np.array(inertia) * omega)
    return total


def random_configuration(parameters, rng):
    q = parameters.home_actuator_position + rng.uniform(-RANDOM_SPREAD, RANDOM_SPREAD, 6)
    return list(q), solve_phi(parameters, q)


# ----------------------------------------------------------------------------- reference sanity
@pytest.mark.parametrize("name", PARAMETER_FILES)
def test_reference_frames_follow_the_model_conventions(name):
    """The reference bodies themselves: legs along D->P, S chain closing on R_F, home pose."""
    parameters = parameters_of(name)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, phi = random_configuration(parameters, rng)
        rho = q + phi
        states = bodies(parameters, rho)
        points = apexes(parameters, rho)
        frame = states[0][3]
        np.testing.assert_allclose(frame.T @ frame, np.eye(3), atol=1e-14)
        for i in range(3):
            first = 1 + 8 * i  # per side: 2 legs, 4 PU parts, 2 S parts in this layout
            for leg in (states[first], states[first + 1]):
                slider_to_apex = 2 * (points[i] - leg[2])
                np.testing.assert_allclose(slider_to_apex, parameters.geometry.leg_length * leg[3][:, 1], atol=1e-14)
            part2 = states[first + 7][3]
            residual = part2.T @ frame  # must be Rz(theta3): the third S rotation is about z
            np.testing.assert_allclose(residual[2], [0.0, 0.0, 1.0], atol=1e-14)
    home = parameters_of(EXPERIMENTS)
    q_home = [home.home_actuator_position] * 6
    phi_home = solve_phi(home, q_home)
    np.testing.assert_allclose(phi_home, [math.pi / 2] * 3, atol=1e-12)
    np.testing.assert_allclose(platform_axes(home, apexes(home, q_home + phi_home)), np.eye(3), atol=1e-12)


# ----------------------------------------------------------------------------- non-minimal model
def test_mass_matrix_matches_finite_differences_of_body_poses(setup):
    """M(rho) (all 9x9) against sum m J^T J + K^T I K with J, K from differences of the poses."""
    parameters, _, dynamics = setup
    rigid = dynamics.rigid_body
    rng = np.random.default_rng(2)
    step = 1e-5
    worst = 0.0
    for _ in range(4):
        q, phi = random_configuration(parameters, rng)
        rho = np.array(q + phi)
        columns = [body_velocities(parameters, lambda s, k=k: rho + s * np.eye(9)[k], step) for k in range(9)]
        reference = np.zeros((9, 9))
        for n, (mass, inertia, _, rotation) in enumerate(bodies(parameters, rho)):
            linear = np.column_stack([columns[k][n][0] for k in range(9)])
            reference += mass * linear.T @ linear
            if rotation is not None:
                angular = np.column_stack([columns[k][n][1] for k in range(9)])
                reference += angular.T @ np.diag(inertia) @ angular
        generated = rigid.mass_matrix(rho)
        error = np.abs(generated - reference).max() / np.abs(reference).max()
        worst = max(worst, error)
        np.testing.assert_allclose(generated, generated.T, rtol=0, atol=1e-15)
    print(f"M(rho) vs finite differences of body poses: max relative error {worst:.2e}")
    assert worst < 3e-11  # 7.7e-12 measured


def test_nonminimal_gravity_is_the_gradient_of_the_reference_potential(setup):
    parameters, _, dynamics = setup
    rng = np.random.default_rng(3)
    step = 1e-4
    for _ in range(3):
        q, phi = random_configuration(parameters, rng)
        rho = np.array(q + phi)
        reference = [
            fourth_order_derivative(lambda s, k=k: potential_energy(parameters, rho + s * np.eye(9)[k]), step)
            for k in range(9)
        ]
        # 5.0e-11 N measured (about 5 N forces).
        np.testing.assert_allclose(dynamics.rigid_body.gravity_term(rho), reference, rtol=0, atol=1.5e-10)
        _, potential = dynamics.rigid_body.energy(rho, np.zeros(9))
        assert potential == pytest.approx(potential_energy(parameters, rho), rel=2e-15)  # 4.4e-16 measured


def test_velocity_term_is_consistent_with_the_mass_matrix(setup):
    """rho_d^T h = 1/2 rho_d^T M_dot rho_d and K = 1/2 rho_d^T M rho_d, for any rho_d."""
    parameters, _, dynamics = setup
    rigid = dynamics.rigid_body
    rng = np.random.default_rng(4)
    step = 1e-5
    for _ in range(4):
        q, phi = random_configuration(parameters, rng)
        rho = np.array(q + phi)
        rate = rng.normal(size=9) * np.array([0.2] * 6 + [1.0] * 3)
        mass_rate = fourth_order_derivative(lambda s: rigid.mass_matrix(rho + s * rate), step)
        expected = 0.5 * rate @ mass_rate @ rate
        assert rate @ rigid.velocity_term(rho, rate) == pytest.approx(expected, rel=5e-9, abs=0)  # 1.6e-9 measured
        kinetic, _ = rigid.energy(rho, rate)
        assert kinetic == pytest.approx(0.5 * rate @ rigid.mass_matrix(rho) @ rate, rel=2e-15)  # 4.4e-16 measured
        acceleration = rng.normal(size=9)
        combined = rigid.generalized_forces(rho, rate, acceleration)
        parts = rigid.mass_matrix(rho) @ acceleration + rigid.velocity_term(rho, rate) + rigid.gravity_term(rho)
        np.testing.assert_allclose(combined, parts, rtol=0, atol=1e-14)  # 2.7e-15 N measured


# ----------------------------------------------------------------------------- reduced model
def test_passive_map_and_bias_agree_with_the_hand_written_oracle(setup):
    """A(q) and b computed in the generated code equal the test oracle's (written separately)."""
    parameters, model, dynamics = setup
    oracle = VelocityOracle(model.kinematics)
    rng = np.random.default_rng(5)
    for _ in range(5):
        q, phi = random_configuration(parameters, rng)
        qd = rng.uniform(-0.3, 0.3, 6)
        _, passive_map, bias = dynamics.passive_state(q, phi=phi, qd=qd)
        # Round-off of two derivations at the same (q, phi): 4.7e-16 and 1.7e-16 measured.
        np.testing.assert_allclose(passive_map, oracle.passive_map(q, phi), rtol=0, atol=2e-15)
        np.testing.assert_allclose(bias, oracle.passive_acceleration_bias(q, phi, qd), rtol=0, atol=1e-15)


def test_reduced_mass_matrix_is_a_t_m_a_symmetric_positive_definite(setup):
    """M_bar = A^T M(rho) A with A = [I; dphi/dq] from differences of the reference closure solution.

    The symmetry is that of the generated entries, before ReducedDynamics symmetrises them.
    """
    parameters, _, dynamics = setup
    packed = pack_parameters(parameters)
    rng = np.random.default_rng(6)
    step = 3e-4  # 1e-3: truncation 1.3e-11, 1e-4: round-off 1e-12 (relative to M_bar)
    for _ in range(10):
        q, phi = random_configuration(parameters, rng)
        generated = np.array(dynamics.terms.reduced_mass_matrix(q, phi, packed)).reshape(6, 6)
        scale = np.abs(generated).max()
        assert np.abs(generated - generated.T).max() <= 3e-16 * scale  # 8.1e-17 measured, both backends
        mass = dynamics.mass_matrix(q, phi=phi)
        assert np.linalg.eigvalsh(mass).min() > 0.0
        phi_rates = [
            fourth_order_derivative(lambda s, k=k: np.array(solve_phi(parameters, np.array(q) + s * np.eye(6)[k], phi)), step)
            for k in range(6)
        ]
        passive_map = np.vstack((np.eye(6), np.column_stack(phi_rates)))
        reference = passive_map.T @ dynamics.rigid_body.mass_matrix(q + phi) @ passive_map
        np.testing.assert_allclose(mass, reference, rtol=0, atol=1e-12 * scale)  # 3.3e-13 relative measured


def test_reduced_mass_matrix_from_the_reference_kinetic_energy(setup):
    """Polarisation: M_bar_jk = K(e_j + e_k) - K(e_j) - K(e_k), K from differences of the poses."""
    parameters, _, dynamics = setup
    rng = np.random.default_rng(7)
    step = 1e-3
    q, phi = random_configuration(parameters, rng)
    rho0 = np.array(q + phi)

    def reference_kinetic(rate):
        def path(s):
            q_s = np.array(q) + s * rate
            return np.concatenate((q_s, solve_phi(parameters, q_s, phi)))

        return kinetic_energy(parameters, rho0, body_velocities(parameters, path, step))

    unit = np.eye(6)
    diagonal = [reference_kinetic(unit[j]) for j in range(6)]
    reference = np.zeros((6, 6))
    for j in range(6):
        reference[j, j] = 2 * diagonal[j]
        for k in range(j + 1, 6):
            reference[j, k] = reference[k, j] = reference_kinetic(unit[j] + unit[k]) - diagonal[j] - diagonal[k]
    generated = dynamics.mass_matrix(q, phi=phi)
    error = np.abs(generated - reference).max() / np.abs(reference).max()
    print(f"M_bar vs reference kinetic energy: max relative error {error:.2e}")
    assert error < 4e-10  # 1.25e-10 measured
    rate = rng.normal(size=6) * 0.2
    kinetic, _ = dynamics.energy(q, rate, phi=phi)
    assert kinetic == pytest.approx(0.5 * rate @ generated @ rate, rel=2e-15)  # 6.7e-16 measured


def test_reduced_gravity_is_the_gradient_of_the_reference_potential(setup):
    parameters, _, dynamics = setup
    rng = np.random.default_rng(8)
    step = 1e-4
    for _ in range(3):
        q, phi = random_configuration(parameters, rng)

        def potential(s, k):
            q_s = np.array(q) + s * np.eye(6)[k]
            return potential_energy(parameters, list(q_s) + solve_phi(parameters, q_s, phi))

        reference = [fourth_order_derivative(lambda s, k=k: potential(s, k), step) for k in range(6)]
        # 4.8e-11 N measured (about 5 N forces).
        np.testing.assert_allclose(dynamics.gravity_term(q, phi=phi), reference, rtol=0, atol=1.5e-10)


def test_static_force_at_home_matches_the_thesis():
    """Table 6.1 masses with L = 0.378: -4.3166 N on every actuator (doc/model.md, "How the model is verified")."""
    parameters = parameters_of(VALIDATION).with_geometry(leg_length=0.378)
    dynamics = ReducedDynamics(parameters)
    home = [parameters.home_actuator_position] * 6
    tau = dynamics.inverse_dynamics(home, np.zeros(6), np.zeros(6))
    print(f"static force at home: {tau}")
    np.testing.assert_array_equal(np.round(tau, 4), [-4.3166] * 6)
    np.testing.assert_allclose(dynamics.gravity_term(home), tau, rtol=1e-15, atol=0)


def validation_trajectory(parameters, t):
    """(6.82): q = q0 + c (1 - exp(-kappa t^3)) sin(omega t), with analytic derivatives."""
    c = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05])
    omega = np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])
    kappa = 1.0
    e = math.exp(-kappa * t**3)
    s, s1, s2 = 1 - e, 3 * kappa * t**2 * e, (6 * kappa * t - 9 * kappa**2 * t**4) * e
    sin, cos = np.sin(omega * t), np.cos(omega * t)
    q = parameters.home_actuator_position + c * s * sin
    qd = c * (s1 * sin + s * omega * cos)
    qdd = c * (s2 * sin + 2 * s1 * omega * cos - s * omega**2 * sin)
    return q, qd, qdd


def random_trajectory(parameters, seed):
    rng = np.random.default_rng(seed)
    amplitude = rng.uniform(-0.015, 0.015, (2, 6))
    frequency = rng.uniform(0.5, 4.0, (2, 6))
    shift = rng.uniform(0, 2 * math.pi, (2, 6))

    def at(t):
        angle = frequency * t + shift
        q = parameters.home_actuator_position + (amplitude * np.sin(angle)).sum(0)
        qd = (amplitude * frequency * np.cos(angle)).sum(0)
        qdd = -(amplitude * frequency**2 * np.sin(angle)).sum(0)
        return q, qd, qdd

    return at


def power_balance(dynamics, trajectory, duration, panels=40, order=10):
    """(integral of tau . q_d, change of K + U, integral of |tau . q_d|) by Gauss-Legendre."""
    nodes, weights = np.polynomial.legendre.leggauss(order)
    width = duration / panels
    work = magnitude = 0.0
    for p in range(panels):
        for x, w in zip(nodes, weights):
            t = (p + 0.5 * (x + 1)) * width
            q, qd, qdd = trajectory(t)
            power = dynamics.inverse_dynamics(q, qd, qdd) @ qd
            work += 0.5 * width * w * power
            magnitude += 0.5 * width * w * abs(power)
    energies = [sum(dynamics.energy(*trajectory(t)[:2])) for t in (0.0, duration)]
    return work, energies[1] - energies[0], magnitude


@pytest.mark.parametrize("name", PARAMETER_FILES)
def test_power_balance_along_the_validation_trajectory(name):
    """tau . q_d = d(K + U)/dt along (6.82), integrated: work equals the energy change."""
    parameters = parameters_of(name)
    model = HexapodModel(parameters)
    dynamics = ReducedDynamics(model.parameters)
    work, change, magnitude = power_balance(dynamics, lambda t: validation_trajectory(parameters, t), 4.0)
    error = abs(work - change) / magnitude
    print(f"{name}: work {work:.12f} J, energy change {change:.12f} J, relative error {error:.2e}")
    assert error < 4e-15  # 1.1e-15 measured: the quadrature resolves this smooth trajectory fully


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("name", PARAMETER_FILES)
def test_power_balance_along_random_smooth_motions(name, seed):
    parameters = parameters_of(name)
    dynamics = ReducedDynamics(parameters)
    work, change, magnitude = power_balance(dynamics, random_trajectory(parameters, seed), 2.0, panels=20)
    error = abs(work - change) / magnitude
    print(f"{name} seed {seed}: relative error {error:.2e}")
    assert error < 3e-11  # 7.9e-12 worst measured (quadrature of the faster random motions)


def test_forward_dynamics_inverts_inverse_dynamics(setup):
    parameters, _, dynamics = setup
    rng = np.random.default_rng(9)
    for _ in range(10):
        q, phi = random_configuration(parameters, rng)
        qd = rng.uniform(-0.3, 0.3, 6)
        qdd = rng.uniform(-3.0, 3.0, 6)
        tau = dynamics.inverse_dynamics(q, qd, qdd, phi=phi)
        # Round-off of separate generated functions: 3.6e-15 (m/s^2 and N) measured for both.
        np.testing.assert_allclose(dynamics.forward_dynamics(q, qd, tau, phi=phi), qdd, rtol=0, atol=1.5e-14)
        parts = (
            dynamics.mass_matrix(q, phi=phi) @ qdd
            + dynamics.velocity_term(q, qd, phi=phi)
            + dynamics.gravity_term(q, phi=phi)
        )
        np.testing.assert_allclose(tau, parts, rtol=0, atol=1.5e-14)


def test_forward_kinematics_path_equals_explicit_phi(setup):
    parameters, _, dynamics = setup
    rng = np.random.default_rng(10)
    q, phi = random_configuration(parameters, rng)
    qd, qdd = rng.uniform(-0.3, 0.3, 6), rng.uniform(-2, 2, 6)
    # The forward kinematics' phi is the reference closure solution: 1.3e-15 N apart measured.
    np.testing.assert_allclose(
        dynamics.inverse_dynamics(q, qd, qdd), dynamics.inverse_dynamics(q, qd, qdd, phi=phi), rtol=0, atol=5e-15
    )


# ----------------------------------------------------------------------------- inputs and outputs
@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda d, good: d.inverse_dynamics([math.nan] + good[1:], good, good), "q"),
        (lambda d, good: d.inverse_dynamics(good, good[:5], good), "qd"),
        (lambda d, good: d.inverse_dynamics(good, good, [math.inf] * 6), "qdd"),
        (lambda d, good: d.forward_dynamics(good, good, [0.0] * 6 + [1.0]), "tau"),
        (lambda d, good: d.mass_matrix(good, phi=[1.0, 2.0]), "phi"),
        (lambda d, good: d.energy(good, np.zeros((6, 1))), "qd"),
        (lambda d, good: d.gravity_term("abcdef"), "q"),
        (lambda d, good: d.rigid_body.mass_matrix(good), "rho"),
        (lambda d, good: d.rigid_body.velocity_term(good + [1.0] * 3, [math.nan] * 9), "rho_dot"),
    ],
)
def test_invalid_inputs_are_rejected_by_name(setup, call, argument):
    parameters, _, dynamics = setup
    good = [parameters.home_actuator_position] * 6
    with pytest.raises(InvalidInputError, match=rf"^{argument}\b"):
        call(dynamics, good)


def test_outputs_are_finite_arrays_of_the_documented_shapes(setup):
    parameters, _, dynamics = setup
    q = [parameters.home_actuator_position] * 6
    qd = [0.1] * 6
    shapes = {
        "mass_matrix": (dynamics.mass_matrix(q), (6, 6)),
        "velocity_term": (dynamics.velocity_term(q, qd), (6,)),
        "gravity_term": (dynamics.gravity_term(q), (6,)),
        "inverse_dynamics": (dynamics.inverse_dynamics(q, qd, qd), (6,)),
        "forward_dynamics": (dynamics.forward_dynamics(q, qd, qd), (6,)),
    }
    for name, (value, shape) in shapes.items():
        assert value.shape == shape, name
        assert np.isfinite(value).all(), name
    assert all(math.isfinite(v) for v in dynamics.energy(q, qd))


def test_parameters_are_runtime_inputs():
    """Editing masses or lengths changes the result without regeneration (linear in the masses)."""
    parameters = parameters_of(EXPERIMENTS)
    home = [parameters.home_actuator_position] * 6
    base = ReducedDynamics(parameters).gravity_term(home)
    doubled_bodies = type(parameters.bodies)(
        **{
            name: type(body)(mass=2 * body.mass, inertia=body.inertia)
            for name, body in vars(parameters.bodies).items()
        }
    )
    doubled = ReducedDynamics(parameters.replace(bodies=doubled_bodies)).gravity_term(home)
    np.testing.assert_allclose(doubled, 2 * base, rtol=1e-14)
    taller = ReducedDynamics(parameters.with_geometry(leg_length=0.39)).gravity_term(home)
    assert np.abs(taller - base).max() > 1e-3


@pytest.mark.slow
def test_generated_code_is_up_to_date(generation_sympy):
    """Regenerating the dynamics changes neither dynamics_terms.py nor its C twin dynamics_terms.c.

    About 15-40 s: SymPy derivation and CSE (done once for both files). With another SymPy version
    the ``generation_sympy`` fixture skips, or fails in CI (see conftest.py).
    """
    from hexapod_control.codegen import derive_dynamics

    assert derive_dynamics.is_up_to_date(), "run `python -m hexapod_control.codegen` (writes the .py and the .c)"


def test_model_dynamics_run_on_the_physical_mode_of_its_forward_kinematics():
    """HexapodModel's dynamics without phi (its forward kinematics, warm-started from a state)
    against facts found without it: the thesis' static force, the reference closure solution,
    the inverse/forward round trip and K = 1/2 q_d^T M_bar q_d."""
    thesis = parameters_of(VALIDATION).with_geometry(leg_length=0.378)
    home = [thesis.home_actuator_position] * 6
    np.testing.assert_array_equal(np.round(HexapodModel(thesis).gravity_term(home), 4), [-4.3166] * 6)
    parameters = parameters_of(EXPERIMENTS)
    model = HexapodModel(parameters)
    state = model.create_state()
    rng = np.random.default_rng(14)
    q, phi = random_configuration(parameters, rng)
    qd, qdd = rng.uniform(-0.2, 0.2, 6), rng.uniform(-1, 1, 6)
    tau = model.inverse_dynamics(q, qd, qdd, state=state)
    # Measured: 1.8e-15 N (FK's phi vs the reference one), 2.1e-15 m/s^2 (round trip), 0 (energy).
    np.testing.assert_allclose(tau, model.inverse_dynamics(q, qd, qdd, phi=phi), rtol=0, atol=6e-15)
    np.testing.assert_allclose(model.forward_dynamics(q, qd, tau, state=state), qdd, rtol=0, atol=6e-15)
    kinetic, _ = model.energy(q, qd, state=state)
    assert kinetic == pytest.approx(0.5 * qd @ model.mass_matrix(q, state=state) @ qd, rel=1e-15)
