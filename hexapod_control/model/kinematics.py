"""Closed-chain kinematics of the 6-3-PUS Hexapod in plain float arithmetic.

Conventions (thesis ch. 6.1-6.2, errata in doc/model.md):
side i = 0, 1, 2 carries actuators q[2i] and q[2i+1]; its frame is Rz(beta_i) with
beta = (-90, 30, 150) deg. The apex of side i is

    P_i = Rz(beta_i) [ (q[2i+1] - q[2i]) / 2,  d + r_i cos(phi_i),  r_i sin(phi_i) ],
    d = -L_B / (2 sqrt 3),  r_i = sqrt(4 L^2 - qbar_i^2) / 2,  qbar_i = q[2i] + q[2i+1].

The closure equations are gamma_k = (|P_j - P_i|^2 - L_P^2) / 2 = 0 for the side pairs
(i, j) = (0, 1), (1, 2), (2, 0), with L_P = L_B / 2. Each gamma_k depends on phi_i and phi_j
only, so d(gamma)/d(phi) is cyclic-bidiagonal and solved in closed form.

The platform frame: y_F = (P2 - P1) / L_P, z_F = c (P2 - P1) x (P0 - P1) with
c = 2 / (sqrt 3 L_P^2), x_F = y_F x z_F, r_F = centroid(P) + H_PQ z_F (0-based vertex indices).

Everything here works on tuples of floats: numpy's per-call overhead dominates 3-vectors, and
the forward kinematics runs inside a 1 kHz control loop.

:class:`Kinematics` is immutable; what a caller carries from one forward-kinematics call to the
next (the warm start along the physical assembly mode) is a :class:`KinematicState` it owns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hexapod_control.errors import (
    AssemblyError,
    AssemblyModeJumpError,
    ConvergenceError,
    InvalidInputError,
    UnreachablePoseError,
)
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.model.rotations import euler_zyx_from_axes, rotation_rows_from_euler_zyx
from hexapod_control.model.validation import as_vector

JOINT_NAMES = tuple(f"q{k}" for k in range(6))
PASSIVE_NAMES = ("phi1", "phi2", "phi3")
POSE_NAMES = ("x", "y", "z", "lambda", "mu", "nu")

SIDE_ANGLES_DEG = (-90.0, 30.0, 150.0)
# gamma_k closes the triangle edge from vertex SIDE_PAIRS[k][0] to SIDE_PAIRS[k][1].
SIDE_PAIRS = ((0, 1), (1, 2), (2, 0))

Vec = tuple[float, float, float]
# dgamma/dphi counts as singular to working precision where |det| <= this * prod(row 1-norms).
CYCLIC_SINGULARITY_RATIO = 1e-14


def _sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _add(a: Vec, b: Vec) -> Vec:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _scale(s: float, a: Vec) -> Vec:
    return (s * a[0], s * a[1], s * a[2])


def _dot(a: Vec, b: Vec) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Vec, b: Vec) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


class ClosedChainKinematics:
    """Float-level closure equations and platform frame of one parameter set (no validation)."""

    def __init__(self, parameters: HexapodParameters):
        g = parameters.geometry
        self.leg_length = g.leg_length
        self.platform_side = g.platform_side
        self.side_offset = g.side_offset
        self.platform_offset = g.platform_offset
        self.side_cos = tuple(math.cos(math.radians(b)) for b in SIDE_ANGLES_DEG)
        self.side_sin = tuple(math.sin(math.radians(b)) for b in SIDE_ANGLES_DEG)
        self.normal_scale = 2.0 / (math.sqrt(3.0) * self.platform_side**2)
        self.four_leg_length_squared = 4.0 * self.leg_length**2
        self.half_platform_side_squared = 0.5 * self.platform_side**2
        # Apex positions in the platform frame, relative to the centroid of P0P1P2.
        circumradius = self.platform_side / math.sqrt(3.0)
        self.platform_apexes = (
            (-circumradius, 0.0, 0.0),
            (0.5 * circumradius, -0.5 * self.platform_side, 0.0),
            (0.5 * circumradius, 0.5 * self.platform_side, 0.0),
        )

    # ----------------------------------------------------------------- side frames
    def to_base(self, side: int, local: Vec) -> Vec:
        c, s = self.side_cos[side], self.side_sin[side]
        return (c * local[0] - s * local[1], s * local[0] + c * local[1], local[2])

    def to_side(self, side: int, world: Vec) -> Vec:
        c, s = self.side_cos[side], self.side_sin[side]
        return (c * world[0] + s * world[1], -s * world[0] + c * world[1], world[2])

    def height(self, qbar: float) -> float:
        """r = sqrt(4L^2 - qbar^2)/2; the caller guarantees |qbar| < 2L."""
        return 0.5 * math.sqrt(4.0 * self.leg_length**2 - qbar * qbar)

    def apexes(self, q, phi) -> tuple[Vec, Vec, Vec]:
        result = []
        for side in range(3):
            qbar = q[2 * side] + q[2 * side + 1]
            r = self.height(qbar)
            local = (
                0.5 * (q[2 * side + 1] - q[2 * side]),
                self.side_offset + r * math.cos(phi[side]),
                r * math.sin(phi[side]),
            )
            result.append(self.to_base(side, local))
        return tuple(result)  # type: ignore[return-value]

    # ----------------------------------------------------------------- closure
    def closure_residual_and_slopes(self, q, phi):
        """gamma (3,), the rows of dgamma/dphi and the apexes, unrolled: the Newton loop's hot path."""
        sqrt, cos, sin = math.sqrt, math.cos, math.sin
        (c0, c1, c2), (s0, s1, s2), d = self.side_cos, self.side_sin, self.side_offset
        four_l2 = self.four_leg_length_squared
        q0, q1, q2, q3, q4, q5 = q
        f0, f1, f2 = phi
        # Side i in its own frame: (x, y, z) = ((qb - qa)/2, d + r cos phi, r sin phi).
        r0 = 0.5 * sqrt(four_l2 - (q0 + q1) ** 2)
        r1 = 0.5 * sqrt(four_l2 - (q2 + q3) ** 2)
        r2 = 0.5 * sqrt(four_l2 - (q4 + q5) ** 2)
        k0, n0, k1, n1, k2, n2 = cos(f0), sin(f0), cos(f1), sin(f1), cos(f2), sin(f2)
        x0, y0, z0 = 0.5 * (q1 - q0), d + r0 * k0, r0 * n0
        x1, y1, z1 = 0.5 * (q3 - q2), d + r1 * k1, r1 * n1
        x2, y2, z2 = 0.5 * (q5 - q4), d + r2 * k2, r2 * n2
        # Apexes and their slopes dP_i/dphi_i = Rz(beta_i) (0, -r sin, r cos) in the base frame.
        px0, py0 = c0 * x0 - s0 * y0, s0 * x0 + c0 * y0
        px1, py1 = c1 * x1 - s1 * y1, s1 * x1 + c1 * y1
        px2, py2 = c2 * x2 - s2 * y2, s2 * x2 + c2 * y2
        tx0, ty0, tz0 = s0 * z0, -c0 * z0, r0 * k0
        tx1, ty1, tz1 = s1 * z1, -c1 * z1, r1 * k1
        tx2, ty2, tz2 = s2 * z2, -c2 * z2, r2 * k2
        half_lp2 = self.half_platform_side_squared
        ex, ey, ez = px1 - px0, py1 - py0, z1 - z0
        g0 = 0.5 * (ex * ex + ey * ey + ez * ez) - half_lp2
        row0 = (-(ex * tx0 + ey * ty0 + ez * tz0), ex * tx1 + ey * ty1 + ez * tz1)
        ex, ey, ez = px2 - px1, py2 - py1, z2 - z1
        g1 = 0.5 * (ex * ex + ey * ey + ez * ez) - half_lp2
        row1 = (-(ex * tx1 + ey * ty1 + ez * tz1), ex * tx2 + ey * ty2 + ez * tz2)
        ex, ey, ez = px0 - px2, py0 - py2, z0 - z2
        g2 = 0.5 * (ex * ex + ey * ey + ez * ez) - half_lp2
        row2 = (-(ex * tx2 + ey * ty2 + ez * tz2), ex * tx0 + ey * ty0 + ez * tz0)
        return (g0, g1, g2), (row0, row1, row2), ((px0, py0, z0), (px1, py1, z1), (px2, py2, z2))

    @staticmethod
    def solve_cyclic(rows, rhs) -> tuple[float, float, float] | None:
        """Solve G x = rhs for the cyclic-bidiagonal G = dgamma/dphi given by ``rows``.

        G = [[a0, b0, 0], [0, a1, b1], [b2, 0, a2]]; det G = a0 a1 a2 + b0 b1 b2.
        Returns None when G is singular to working precision.
        """
        (a0, b0), (a1, b1), (a2, b2) = rows
        det = a0 * a1 * a2 + b0 * b1 * b2
        scale = (abs(a0) + abs(b0)) * (abs(a1) + abs(b1)) * (abs(a2) + abs(b2))
        if scale == 0.0 or abs(det) <= CYCLIC_SINGULARITY_RATIO * scale:
            return None
        r0, r1, r2 = rhs
        # Cramer's rule on the sparse pattern.
        x0 = (r0 * a1 * a2 - b0 * (r1 * a2 - b1 * r2)) / det
        x1 = (a0 * (r1 * a2 - b1 * r2) + r0 * b1 * b2) / det
        x2 = (a0 * a1 * r2 + b0 * b2 * r1 - a1 * b2 * r0) / det
        return (x0, x1, x2)

    # ----------------------------------------------------------------- platform
    def platform_frame(self, apexes) -> tuple[Vec, Vec, Vec, Vec]:
        """(x_F, y_F, z_F, r_F) from the three apexes."""
        p0, p1, p2 = apexes
        e21 = _sub(p2, p1)
        e01 = _sub(p0, p1)
        y_axis = _scale(1.0 / self.platform_side, e21)
        z_axis = _scale(self.normal_scale, _cross(e21, e01))
        x_axis = _cross(y_axis, z_axis)
        centroid = _scale(1.0 / 3.0, _add(_add(p0, p1), p2))
        return x_axis, y_axis, z_axis, _add(centroid, _scale(self.platform_offset, z_axis))


# ------------------------------------------------------------------------------------------ public API
# Newton settings of the forward kinematics. A step larger than MAX_NEWTON_STEP is shortened so
# the iteration cannot leap to a neighbouring assembly mode; MAX_BRANCH_JUMP bounds how far the
# solution may lie from an explicit guess before it counts as a jump to another mode.
FK_TOLERANCE = 1e-12  # [m] largest edge-length error of the platform triangle
MAX_NEWTON_ITERATIONS = 30
MAX_NEWTON_STEP = 0.2  # [rad]
MAX_BRANCH_JUMP = 0.5  # [rad]
CONTINUATION_STEP = 0.01  # [m] largest actuator change per step when re-tracking from home
CONTINUATION_TOLERANCE = 1e-9  # [m] closure of the intermediate continuation steps
HOME_PHI = math.pi / 2.0  # every leg pair stands vertically under its apex at home


@dataclass(frozen=True)
class ForwardKinematicsResult:
    """Platform pose of the physical assembly mode for the given actuator positions."""

    position: np.ndarray  # r_F [m], (3,)
    rotation: np.ndarray  # 0R_F, (3, 3)
    euler_zyx: np.ndarray  # (lambda, mu, nu) [rad] with R = Rz(lambda) Ry(mu) Rx(nu)
    phi: np.ndarray  # passive angles [rad], (3,)
    iterations: int  # Newton iterations used
    residual: float  # largest |  |P_j - P_i| - L_P  | [m]
    constraint_conditioning: float  # |det dgamma/dphi| / prod(row norms), 0 = singular, 1 = ideal
    # Actuators (numbered 1..6) outside [actuator_position_min, actuator_position_max]: the chains
    # assemble there, so FK solves it, but the sliders cannot be there (IK refuses such poses).
    outside_travel: tuple[int, ...] = ()

    @property
    def pose(self) -> np.ndarray:
        """xi = (x, y, z, lambda, mu, nu)."""
        return np.concatenate((self.position, self.euler_zyx))


@dataclass(frozen=True)
class InverseKinematicsResult:
    q: np.ndarray  # actuator positions [m], (6,)
    phi: np.ndarray  # passive angles [rad], (3,)


@dataclass(frozen=True)
class PassiveSolution:
    """phi of the physical mode with the Newton statistics (floats, for the 1 kHz loop)."""

    phi: tuple[float, float, float]
    iterations: int
    residual: float  # [m]
    rows: tuple  # the nonzero entries of dgamma/dphi at the solution
    apexes: tuple  # P_0, P_1, P_2 in the base frame


class KinematicState:
    """What a caller carries from one forward-kinematics call to the next: the warm start.

    The last two solutions (q, phi) of the physical assembly mode; the next call predicts phi
    from them. One state follows one robot: the controller, the supervisor and the FK node each
    own one, while they share one immutable :class:`Kinematics` (or ``HexapodModel``).
    Created at home by :meth:`Kinematics.create_state`.
    """

    __slots__ = ("home_q", "home_phi", "last_q", "last_phi", "previous_q", "previous_phi")

    def __init__(self, home_q: tuple[float, ...], home_phi: tuple[float, ...]):
        self.home_q, self.home_phi = home_q, home_phi
        self.reset()

    def reset(self) -> None:
        """Forget the history; the next call tracks the physical mode from home."""
        self.last_q = self.previous_q = self.home_q
        self.last_phi = self.previous_phi = self.home_phi

    def predict_phi(self, q) -> tuple[float, ...]:
        """Secant prediction of phi from the last two solutions, along the actuator motion.

        In a 1 kHz loop q moves almost linearly, so this saves one Newton iteration per call.
        """
        last_q, last_phi = self.last_q, self.last_phi
        norm2 = dot = 0.0
        for now, last, previous in zip(q, last_q, self.previous_q):
            step = last - previous
            norm2 += step * step
            dot += (now - last) * step
        if norm2 == 0.0 or not 0.0 < dot <= 2.0 * norm2:
            return last_phi
        s = dot / norm2
        (a0, a1, a2), (b0, b1, b2) = last_phi, self.previous_phi
        return (a0 + s * (a0 - b0), a1 + s * (a1 - b1), a2 + s * (a2 - b2))

    def advance(self, q, phi) -> None:
        if q != self.last_q:
            self.previous_q, self.previous_phi = self.last_q, self.last_phi
        self.last_q, self.last_phi = q, phi


def closure_conditioning(rows) -> float:
    """|det dgamma/dphi| / prod(row norms): 0 at a singularity, 1 for orthogonal rows."""
    (a0, b0), (a1, b1), (a2, b2) = rows
    det = a0 * a1 * a2 + b0 * b1 * b2
    norms = math.hypot(a0, b0) * math.hypot(a1, b1) * math.hypot(a2, b2)
    return abs(det) / norms if norms > 0.0 else 0.0


def newton_update(chains: ClosedChainKinematics, rows, gamma, phi, max_step: float) -> list[float] | None:
    """phi after one Newton step on the closure residual ``gamma`` (Jacobian ``rows``), the step
    scaled down to ``max_step`` [rad] at most; None where the Jacobian is singular."""
    step = chains.solve_cyclic(rows, gamma)
    if step is None:
        return None
    largest = max(abs(s) for s in step)
    shrink = max_step / largest if largest > max_step else 1.0
    return [phi[i] - shrink * step[i] for i in range(3)]


def is_physical_mode(phi, rows) -> bool:
    """The physical mode: every leg pair above the base (0 < phi < pi) and det dgamma/dphi > 0.

    Among the 8 real assembly modes near home only the physical one has all three passive
    angles in (0, pi); the determinant sign cannot change without crossing a singularity.
    """
    (a0, b0), (a1, b1), (a2, b2) = rows
    f0, f1, f2 = phi
    pi = math.pi
    return 0.0 < f0 < pi and 0.0 < f1 < pi and 0.0 < f2 < pi and a0 * a1 * a2 + b0 * b1 * b2 > 0.0


def check_assembly(q, two_leg_lengths: float, name: str = "q") -> None:
    """AssemblyError unless the legs of every side span its two sliders: |q_bar_i| < 2L.

    ``q`` holds the six actuator positions first (q or rho); beyond 2L, r_i is imaginary.
    """
    two_l = two_leg_lengths
    if -two_l < q[0] + q[1] < two_l and -two_l < q[2] + q[3] < two_l and -two_l < q[4] + q[5] < two_l:
        return
    for side in range(3):
        qbar = q[2 * side] + q[2 * side + 1]
        if not -two_l < qbar < two_l:
            raise AssemblyError(
                f"{name}: side {side + 1}: q{2 * side} + q{2 * side + 1} = {qbar:.6g} m; the legs "
                f"cannot assemble unless |q_bar| < 2L = {two_l:.6g} m"
            )


def _largest_difference(a, b) -> float:
    """max |a_i - b_i| of two 3-vectors."""
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]), abs(a[2] - b[2]))


class Kinematics:
    """Validated forward and inverse kinematics of one parameter set; immutable.

    The forward kinematics takes the caller's :class:`KinematicState` (warm start); without one
    it solves from home, as a fresh state would.
    """

    def __init__(self, parameters: HexapodParameters):
        self.parameters = parameters
        self.chains = ClosedChainKinematics(parameters)
        self.limits = parameters.limits
        self.two_leg_lengths = 2.0 * parameters.geometry.leg_length
        self.home_q = (parameters.home_actuator_position,) * 6
        self.home_phi = (HOME_PHI,) * 3

    def create_state(self) -> KinematicState:
        return KinematicState(self.home_q, self.home_phi)

    # ------------------------------------------------------------------ validation
    def joint_vector(self, q, name: str = "q") -> tuple[float, ...]:
        """q as six finite floats for which every side can assemble (|q_bar_i| < 2L)."""
        q = as_vector(q, 6, name, JOINT_NAMES)
        check_assembly(q, self.two_leg_lengths, name)
        return q

    def check_joint_limits(self, q, error: type[Exception] = InvalidInputError) -> None:
        """Raise ``error`` naming the first actuator outside its travel or a colliding slider pair."""
        q = as_vector(q, 6, "q", JOINT_NAMES)
        limits = self.limits
        for k, value in enumerate(q):
            if not limits.actuator_position_min <= value <= limits.actuator_position_max:
                raise error(
                    f"{JOINT_NAMES[k]} = {value:.6g} m is outside the travel "
                    f"[{limits.actuator_position_min}, {limits.actuator_position_max}] m"
                )
        for side in range(3):
            separation = q[2 * side] + q[2 * side + 1]
            if separation < limits.min_slider_separation:
                raise error(
                    f"side {side + 1}: q{2 * side} + q{2 * side + 1} = {separation:.6g} m is below the "
                    f"minimum slider separation {limits.min_slider_separation} m"
                )

    # ------------------------------------------------------------------ forward kinematics
    def _newton(self, q, phi, tolerance: float):
        """Newton on gamma(q, phi) = 0 from phi: a PassiveSolution, or None when it fails."""
        chains = self.chains
        phi = list(phi)
        lp = chains.platform_side
        for iteration in range(MAX_NEWTON_ITERATIONS + 1):
            gamma, rows, apexes = chains.closure_residual_and_slopes(q, phi)
            # |edge| - L_P = gamma / ((|edge| + L_P) / 2) ~ gamma / L_P near closure.
            residual = max(abs(gamma[0]), abs(gamma[1]), abs(gamma[2])) / lp
            if residual <= tolerance:
                return PassiveSolution(tuple(phi), iteration, residual, rows, apexes)
            if iteration == MAX_NEWTON_ITERATIONS:
                return None
            phi = newton_update(chains, rows, gamma, phi, MAX_NEWTON_STEP)
            if phi is None:
                return None
        return None

    def _track(self, q, start_q, start_phi, tolerance: float):
        """Follow the physical mode from (start_q, start_phi) to q in small actuator steps."""
        distance = max(abs(a - b) for a, b in zip(q, start_q))
        steps = max(1, math.ceil(distance / CONTINUATION_STEP))
        phi, total = start_phi, 0
        for step in range(1, steps + 1):
            s = step / steps
            target = tuple(a + s * (b - a) for a, b in zip(start_q, q))
            solved = self._newton(target, phi, tolerance if step == steps else CONTINUATION_TOLERANCE)
            if solved is None or _largest_difference(solved.phi, phi) > MAX_BRANCH_JUMP:
                return None
            phi, total = solved.phi, total + solved.iterations
        return PassiveSolution(solved.phi, total, solved.residual, solved.rows, solved.apexes)

    def solve_passive(self, q, state: KinematicState | None = None, phi_guess=None,
                      tolerance: float = FK_TOLERANCE) -> PassiveSolution:
        """phi of the physical mode for q, warm-started from ``state`` (advanced on success)."""
        q = self.joint_vector(q)
        state = state if state is not None else self.create_state()
        explicit_guess = phi_guess is not None
        guess = as_vector(phi_guess, 3, "phi_guess", PASSIVE_NAMES) if explicit_guess else state.predict_phi(q)
        solved = self._newton(q, guess, tolerance)
        if solved is not None and _largest_difference(solved.phi, guess) > MAX_BRANCH_JUMP:
            if explicit_guess:
                raise AssemblyModeJumpError(
                    f"forward kinematics from phi_guess {list(guess)} converged to phi "
                    f"{list(solved.phi)}, another branch; give a guess closer to the robot's state"
                )
            solved = None
        if solved is None and not explicit_guess:
            # The warm start was too far away: re-track from the last solution, then from home.
            solved = self._track(q, state.last_q, state.last_phi, tolerance)
            if solved is None:
                solved = self._track(q, self.home_q, self.home_phi, tolerance)
        if solved is None:
            raise ConvergenceError(
                f"forward kinematics did not converge for q = {list(q)}: the closed chains "
                "cannot assemble there, or the configuration is singular"
            )
        if not is_physical_mode(solved.phi, solved.rows):
            raise AssemblyModeJumpError(
                f"forward kinematics for q = {list(q)} reached phi = {list(solved.phi)}, which is not the "
                "physical assembly mode (0 < phi_i < pi, det dgamma/dphi > 0)"
            )
        state.advance(q, solved.phi)
        return solved

    def forward_kinematics(self, q, state: KinematicState | None = None, phi_guess=None) -> ForwardKinematicsResult:
        """Platform pose and passive angles from the six actuator positions [m].

        Newton on the closure equations, warm-started from ``phi_guess`` or the caller's
        ``state``, to a closure residual <= 1e-12 m. Raises ConvergenceError when it cannot
        converge and AssemblyModeJumpError rather than return another assembly mode. A q outside
        the actuator travel is solved and flagged in ``outside_travel``.
        """
        solved = self.solve_passive(q, state, phi_guess)
        low, high = self.limits.actuator_position_min, self.limits.actuator_position_max
        x_axis, y_axis, z_axis, position = self.chains.platform_frame(solved.apexes)
        return ForwardKinematicsResult(
            position=np.array(position),
            rotation=np.array((x_axis, y_axis, z_axis)).T,
            euler_zyx=np.array(euler_zyx_from_axes(x_axis, y_axis, z_axis)),
            phi=np.array(solved.phi),
            iterations=solved.iterations,
            residual=solved.residual,
            constraint_conditioning=closure_conditioning(solved.rows),
            outside_travel=tuple(k + 1 for k, value in enumerate(q) if not low <= value <= high),
        )

    # ------------------------------------------------------------------ inverse kinematics
    def inverse_kinematics(self, position, euler_zyx, check_limits: bool = True) -> InverseKinematicsResult:
        """Actuator positions and passive angles for a platform pose, in closed form.

        Raises UnreachablePoseError when a leg pair cannot reach its apex, the solution leaves the
        physical assembly mode, or (with ``check_limits``) an actuator leaves its travel.
        """
        position = as_vector(position, 3, "position", ("x", "y", "z"))
        euler = as_vector(euler_zyx, 3, "euler_zyx", ("lambda", "mu", "nu"))
        chains = self.chains
        rows_of_rotation = rotation_rows_from_euler_zyx(euler)
        z_axis = (rows_of_rotation[0][2], rows_of_rotation[1][2], rows_of_rotation[2][2])
        centre = _sub(position, _scale(chains.platform_offset, z_axis))
        leg = chains.leg_length
        q, phi = [0.0] * 6, [0.0] * 3
        for side, local_apex in enumerate(chains.platform_apexes):
            apex = _add(centre, tuple(_dot(row, local_apex) for row in rows_of_rotation))
            along, across, up = chains.to_side(side, apex)
            across -= chains.side_offset
            height = math.hypot(across, up)
            if height >= leg:
                raise UnreachablePoseError(
                    f"side {side + 1}: apex P{side + 1} is {height:.6g} m from the base side, beyond "
                    f"the leg length {leg:.6g} m"
                )
            half_qbar = math.sqrt(leg * leg - height * height)
            q[2 * side], q[2 * side + 1] = half_qbar - along, half_qbar + along
            phi[side] = math.atan2(up, across)
        _, rows, _ = chains.closure_residual_and_slopes(q, phi)
        if not is_physical_mode(phi, rows):
            raise UnreachablePoseError(
                f"pose {list(position) + list(euler)} needs phi = {phi}, outside the physical "
                "assembly mode (a forward-kinematics singularity lies in between)"
            )
        if check_limits:
            self.check_joint_limits(q, error=UnreachablePoseError)
        return InverseKinematicsResult(q=np.array(q), phi=np.array(phi))

    # ------------------------------------------------------------------ geometry
    def platform_vertices(self, q, phi) -> np.ndarray:
        """Rows P_1, P_2, P_3 (the spherical-joint centres) in the base frame (3, 3)."""
        q = self.joint_vector(q)
        return np.array(self.chains.apexes(q, as_vector(phi, 3, "phi", PASSIVE_NAMES)))

    def slider_positions(self, q) -> np.ndarray:
        """Rows D_0..D_5, the universal-joint centres, in the base frame (6, 3)."""
        q = as_vector(q, 6, "q", JOINT_NAMES)
        chains = self.chains
        rows = []
        for side in range(3):
            rows.append(chains.to_base(side, (-q[2 * side], chains.side_offset, 0.0)))
            rows.append(chains.to_base(side, (q[2 * side + 1], chains.side_offset, 0.0)))
        return np.array(rows)
