"""Every assembly mode of the Hexapod: all real solutions phi of gamma(q, phi) = 0 for one q.

The forward kinematics (:meth:`Kinematics.forward_kinematics`) follows the physical mode with
Newton; this module finds *all* real solutions, without a starting guess, for analysis, for
checking the physical-mode choice and for recovering from a lost track.

Method (an elimination of our own, not the printed Bezout polynomial, erratum 3 in
doc/model.md):

1. Every closure equation has the form (thesis 6.16)
   gamma_k = a cos(phi_i) + b cos(phi_j) + c cos(phi_i) cos(phi_j) + d sin(phi_i) sin(phi_j) + e,
   because the apex P_i moves on a circle about its base side. The five coefficients are read
   off the package's own closure function at six corner angles (phi in {0, pi/2, pi}), so the
   geometry keeps one source of truth (:mod:`hexapod_control.model.kinematics`).
2. With phi_1 = theta fixed, the tangent half-angles x_2 = tan(phi_2/2), x_3 = tan(phi_3/2)
   turn gamma_1 into a quadratic in x_2, gamma_3 into a quadratic in x_3 and gamma_2 into a
   biquadratic. The resultant in x_3 of gamma_2 and gamma_3 is a quartic in x_2; its Sylvester
   resultant with gamma_1 is F(theta), a trigonometric polynomial of degree 8 in theta. The
   formal-degree (homogeneous) resultants also catch solutions with phi_2 or phi_3 = pi.
3. gamma(q, -phi) = gamma(q, phi) exactly (mirror through the base plane), so F is even:
   F = sum_n f_n T_n(cos theta), a degree-8 Chebyshev series in t = cos(phi_1) (the thesis's
   "degree 8 in zeta = x_1^2"). F is sampled at 9 Chebyshev nodes, its coefficients follow
   exactly (discrete cosine transform) and its roots are the eigenvalues of the colleague
   matrix. Working in t = cos(phi_1) rather than tan(phi_1/2) leaves no point at infinity:
   phi_1 = pi is t = -1.
4. Each real root t in [-1, 1] gives phi_1 = acos(t); gamma_1 and gamma_3 then give two
   candidates each for phi_2 and phi_3 (a cos + b sin + c = 0); the pairings that nearly close
   gamma_2 are polished by Newton on the full 3x3 system to the forward kinematics' tolerance,
   deduplicated, and completed by their mirror images -phi.

Near home there are 8 real modes (4 mirror pairs, erratum 4). At home two modes share phi_1
(the three-fold symmetry), which makes t a double root; the root finder then returns a nearly
real complex pair, which is why roots within ROOT_IMAG_TOLERANCE of the real axis are kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hexapod_control.model.kinematics import FK_TOLERANCE, SIDE_PAIRS, closure_conditioning, is_physical_mode, newton_update
from hexapod_control.model.rotations import euler_zyx_from_axes

# Number of Chebyshev nodes: F(cos phi_1) has degree 8, so 9 nodes determine it exactly.
CHEBYSHEV_DEGREE = 8
# Roots of F with |Im t| below this are tried as real: a k-fold root splits by ~eps^(1/k) (the
# triple root at symmetric q by ~5e-6), and Newton discards the ones that are not real solutions.
ROOT_IMAG_TOLERANCE = 1e-3
# Pairings (phi_2, phi_3) whose |gamma_2| / L_P^2 exceeds this are not polished.
PAIRING_TOLERANCE = 1e-3
# Newton on the full system: iterations and largest step [rad] from an already close candidate.
POLISH_ITERATIONS = 40
POLISH_MAX_STEP = 0.1
# Two solutions closer than this in every angle [rad] are the same mode.
DUPLICATE_TOLERANCE = 1e-7


@dataclass(frozen=True)
class AssemblyMode:
    """One real solution of the closure equations and the platform pose it gives."""

    phi: np.ndarray  # passive angles [rad] in (-pi, pi], (3,)
    position: np.ndarray  # r_F [m], (3,)
    rotation: np.ndarray  # 0R_F, (3, 3)
    euler_zyx: np.ndarray  # (lambda, mu, nu) [rad], R = Rz(lambda) Ry(mu) Rx(nu)
    residual: float  # largest edge-length error of P1P2P3 [m] (max |gamma| / L_P)
    constraint_conditioning: float  # |det dgamma/dphi| / prod(row norms), 0 = singular
    physical: bool  # the one mode with 0 < phi_i < pi and det dgamma/dphi > 0 (see below)

    @property
    def pose(self) -> np.ndarray:
        """xi = (x, y, z, lambda, mu, nu)."""
        return np.concatenate((self.position, self.euler_zyx))


@dataclass(frozen=True)
class AssemblyModes:
    """All real assembly modes for one actuator vector q, sorted by phi (lexicographic).

    The physical mode is the one that passes :func:`hexapod_control.model.kinematics.is_physical_mode`, the test the
    forward kinematics applies (all phi_i in (0, pi), det dgamma/dphi > 0); ``physical_index``
    is None when no mode passes it (or, never observed, more than one does). Far from home the
    test is necessary, not sufficient: a mode can pass it and still not be reachable from home
    without crossing a singularity (the forward kinematics then raises ConvergenceError).
    """

    q: np.ndarray  # the actuator positions [m], (6,)
    modes: tuple[AssemblyMode, ...]
    physical_index: int | None  # index of the physical mode in ``modes``, or None

    def __len__(self) -> int:
        return len(self.modes)

    @property
    def physical(self) -> AssemblyMode | None:
        return None if self.physical_index is None else self.modes[self.physical_index]


# --------------------------------------------------------------------------- coefficients
def _trig_coefficients(chains, q) -> np.ndarray:
    """(3, 5) array of (a, b, c, d, e) of gamma_k in phi_i, phi_j for (i, j) = SIDE_PAIRS[k].

    With gamma_k(phi_i, phi_j) evaluated at the corners: gamma(0, 0) = a + b + c + e,
    gamma(pi, 0) = -a + b - c + e, gamma(0, pi) = a - b - c + e, gamma(pi, pi) = -a - b + c + e
    and gamma(pi/2, pi/2) = d + e. Six calls of the closure function cover all three equations.
    """
    closure = chains.closure_residual_and_slopes
    pi, half = math.pi, 0.5 * math.pi
    g00 = closure(q, (0.0, 0.0, 0.0))[0]
    gpp = closure(q, (pi, pi, pi))[0]
    ghh = closure(q, (half, half, half))[0]
    flipped = (closure(q, (pi, 0.0, 0.0))[0], closure(q, (0.0, pi, 0.0))[0], closure(q, (0.0, 0.0, pi))[0])
    rows = []
    for k, (i, j) in enumerate(SIDE_PAIRS):
        k00, kpp = g00[k], gpp[k]
        kp0 = flipped[i][k]  # phi_i = pi, phi_j = 0
        k0p = flipped[j][k]  # phi_i = 0, phi_j = pi
        a = 0.25 * (k00 - kp0 + k0p - kpp)
        b = 0.25 * (k00 + kp0 - k0p - kpp)
        c = 0.25 * (k00 - kp0 - k0p + kpp)
        e = 0.25 * (k00 + kp0 + k0p + kpp)
        rows.append((a, b, c, ghh[k] - e, e))
    return np.array(rows)


def _eliminant(coefficients: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """F(theta): the resultant of the closure equations with phi_1 = theta, for a vector of theta.

    gamma_1 * (1 + x2^2) = e1(x2) (quadratic), gamma_3 * (1 + x3^2) = e3(x3) (quadratic),
    gamma_2 * (1 + x2^2)(1 + x3^2) = biquadratic in (x2, x3). Polynomials are stored with
    ascending powers along the last axis.
    """
    (a0, b0, c0, d0, e0), (a1, b1, c1, d1, e1), (a2, b2, c2, d2, e2) = coefficients
    ct, st = np.cos(theta), np.sin(theta)
    n = theta.shape[0]
    # gamma_1 = alpha cos(phi2) + beta sin(phi2) + kappa  ->  (kappa + alpha) + 2 beta x + (kappa - alpha) x^2
    alpha, beta, kappa = b0 + c0 * ct, d0 * st, a0 * ct + e0
    first = np.stack((kappa + alpha, 2.0 * beta, kappa - alpha), axis=-1)
    # gamma_3 (pair (2, 0)): in phi3 with phi1 = theta.
    alpha, beta, kappa = a2 + c2 * ct, d2 * st, b2 * ct + e2
    third = np.stack((kappa + alpha, 2.0 * beta, kappa - alpha), axis=-1)  # coefficients of x3^0..2
    # gamma_2 (pair (1, 2)) as a quadratic in x3 with coefficients polynomial in x2:
    # x3^0: k + h x2^2, x3^1: 4 d x2, x3^2: g + f x2^2 (k, h, g, f = gamma_2 at the corners).
    k = a1 + b1 + c1 + e1
    h = -a1 + b1 - c1 + e1
    g = a1 - b1 - c1 + e1
    f = -a1 - b1 + c1 + e1
    A1 = np.array((g, 0.0, f))
    B1 = np.array((0.0, 4.0 * d1, 0.0))
    C1 = np.array((k, 0.0, h))
    C2, B2, A2 = third[:, 0:1], third[:, 1:2], third[:, 2:3]
    # Res_x3(A1 x3^2 + B1 x3 + C1, A2 x3^2 + B2 x3 + C2) = (A1 C2 - A2 C1)^2 - (A1 B2 - A2 B1)(B1 C2 - B2 C1)
    p = A1 * C2 - A2 * C1
    r = A1 * B2 - A2 * B1
    s = B1 * C2 - B2 * C1
    quartic = _polymul2(p, p) - _polymul2(r, s)  # (n, 5) in x2
    # Sylvester matrix of first (degree 2) and quartic (degree 4) in x2, highest power first.
    sylvester = np.zeros((n, 6, 6))
    high_first = first[:, ::-1]
    high_quartic = quartic[:, ::-1]
    for row in range(4):
        sylvester[:, row, row : row + 3] = high_first
    for row in range(2):
        sylvester[:, 4 + row, row : row + 5] = high_quartic
    return np.linalg.det(sylvester)


def _polymul2(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Products of quadratics (ascending, shape (n, 3)) -> quartics (n, 5)."""
    out = np.zeros((u.shape[0], 5))
    for i in range(3):
        out[:, i : i + 3] += u[:, i : i + 1] * v
    return out


def _cos_phi1_roots(coefficients: np.ndarray) -> list[float]:
    """Real roots t = cos(phi_1) in [-1, 1] of the degree-8 Chebyshev series of F."""
    count = CHEBYSHEV_DEGREE + 1
    nodes = (np.arange(count) + 0.5) * (math.pi / count)  # theta_m, t_m = cos(theta_m)
    values = _eliminant(coefficients, nodes)
    # Discrete cosine transform: F(cos theta) = sum_n c_n cos(n theta) exactly for n <= 8.
    series = (2.0 / count) * (np.cos(np.outer(np.arange(count), nodes)) @ values)
    series[0] *= 0.5
    scale = np.max(np.abs(series))
    if not np.isfinite(scale) or scale == 0.0:
        return []
    series = series / scale
    while len(series) > 1 and abs(series[-1]) < 1e-13:
        series = series[:-1]
    if len(series) < 2:
        return []
    roots = np.polynomial.chebyshev.chebroots(series)
    keep = []
    for t in roots:
        if abs(t.imag) <= ROOT_IMAG_TOLERANCE and abs(t.real) <= 1.0 + ROOT_IMAG_TOLERANCE:
            keep.append(min(1.0, max(-1.0, float(t.real))))
    return keep


def _angle_candidates(alpha: float, beta: float, kappa: float) -> tuple[float, ...]:
    """Solutions of alpha cos(x) + beta sin(x) + kappa = 0 (the nearest ones if none is real)."""
    rho = math.hypot(alpha, beta)
    if rho == 0.0:
        return ()
    base = math.atan2(beta, alpha)
    spread = math.acos(min(1.0, max(-1.0, -kappa / rho)))
    return (base + spread, base - spread)


def _wrap(angle: float) -> float:
    """Angle in (-pi, pi]."""
    wrapped = math.remainder(angle, 2.0 * math.pi)
    return math.pi if wrapped == -math.pi else wrapped


# --------------------------------------------------------------------------- polishing
def _polish(chains, q, phi):
    """Newton on gamma(q, phi) = 0 to FK_TOLERANCE; (phi, residual, rows) or None."""
    phi = list(phi)
    lp = chains.platform_side
    converged = False
    for _ in range(POLISH_ITERATIONS + 1):
        gamma, rows, _ = chains.closure_residual_and_slopes(q, phi)
        residual = max(abs(gamma[0]), abs(gamma[1]), abs(gamma[2])) / lp
        if residual <= FK_TOLERANCE and (converged or residual <= 1e-15):
            return tuple(_wrap(v) for v in phi), residual, rows
        converged = residual <= FK_TOLERANCE  # one more step takes phi to round-off
        phi = newton_update(chains, rows, gamma, phi, POLISH_MAX_STEP)
        if phi is None:
            return None
    return None


def _same_mode(u, v) -> bool:
    return all(abs(_wrap(a - b)) <= DUPLICATE_TOLERANCE for a, b in zip(u, v))


def _real_solutions(chains, q) -> list[tuple[tuple[float, float, float], float, tuple]]:
    coefficients = _trig_coefficients(chains, q)
    (a0, b0, c0, d0, e0), (a1, b1, c1, d1, e1), (a2, b2, c2, d2, e2) = coefficients.tolist()
    lp2 = chains.platform_side**2
    found: list = []

    def add(solution):
        if not any(_same_mode(solution[0], other[0]) for other in found):
            found.append(solution)

    for t in _cos_phi1_roots(coefficients):
        phi1 = math.acos(t)
        c, s = t, math.sin(phi1)
        seconds = _angle_candidates(b0 + c0 * c, d0 * s, a0 * c + e0)
        thirds = _angle_candidates(a2 + c2 * c, d2 * s, b2 * c + e2)
        pairings = []
        for phi2 in seconds:
            c2_, s2_ = math.cos(phi2), math.sin(phi2)
            for phi3 in thirds:
                c3_, s3_ = math.cos(phi3), math.sin(phi3)
                closure = a1 * c2_ + b1 * c3_ + c1 * c2_ * c3_ + d1 * s2_ * s3_ + e1
                pairings.append((abs(closure) / lp2, phi2, phi3))
        pairings.sort()
        for rank, (error, phi2, phi3) in enumerate(pairings):
            if rank > 0 and error > PAIRING_TOLERANCE:
                break
            polished = _polish(chains, q, (phi1, phi2, phi3))
            if polished is None:
                continue
            add(polished)
            # The mirror image -phi closes exactly as well (gamma is even in phi).
            mirror = tuple(_wrap(-v) for v in polished[0])
            gamma, rows, _ = chains.closure_residual_and_slopes(q, mirror)
            add((mirror, max(abs(v) for v in gamma) / chains.platform_side, rows))
    return found


# --------------------------------------------------------------------------- public
def assembly_modes(kinematics, q) -> AssemblyModes:
    """All real assembly modes of a :class:`Kinematics` for the actuator positions ``q`` [m].

    Raises InvalidInputError (NaN, wrong shape) or AssemblyError (|q_bar_i| >= 2L) like the
    forward kinematics.
    """
    q = kinematics.joint_vector(q)
    chains = kinematics.chains
    solutions = sorted(_real_solutions(chains, q), key=lambda item: tuple(round(v, 9) for v in item[0]))
    flags = [is_physical_mode(phi, rows) for phi, _, rows in solutions]
    # The physical mode must be unique; if the test ever passed twice (never seen), name none.
    physical_index = flags.index(True) if flags.count(True) == 1 else None
    modes = []
    for index, (phi, residual, rows) in enumerate(solutions):
        x_axis, y_axis, z_axis, position = chains.platform_frame(chains.apexes(q, phi))
        physical = index == physical_index
        modes.append(
            AssemblyMode(
                phi=np.array(phi),
                position=np.array(position),
                rotation=np.array((x_axis, y_axis, z_axis)).T,
                euler_zyx=np.array(euler_zyx_from_axes(x_axis, y_axis, z_axis)),
                residual=residual,
                constraint_conditioning=closure_conditioning(rows),
                physical=physical,
            )
        )
    return AssemblyModes(q=np.array(q), modes=tuple(modes), physical_index=physical_index)
