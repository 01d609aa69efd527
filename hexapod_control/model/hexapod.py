"""The public model of the Hexapod: kinematics here, dynamics delegated to ``dynamics``.

Pure Python and numpy; nothing here imports ROS, so a notebook can use it directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from hexapod_control.errors import (
    AssemblyError,
    AssemblyModeJumpError,
    ConvergenceError,
    InvalidInputError,
    SingularityError,
    UnreachablePoseError,
)
from hexapod_control.model.kinematics import (
    SIDE_PAIRS,
    ClosedChainKinematics,
    _add,
    _dot,
    _scale,
    _sub,
)
from hexapod_control.model.parameters import HexapodParameters, load_parameters
from hexapod_control.model.rotations import euler_zyx_from_axes, rotation_rows_from_euler_zyx
from hexapod_control.model.validation import as_vector

JOINT_NAMES = tuple(f"q{k}" for k in range(6))
PASSIVE_NAMES = ("phi1", "phi2", "phi3")
POSE_NAMES = ("x", "y", "z", "lambda", "mu", "nu")

# Newton settings of the forward kinematics. A step larger than MAX_NEWTON_STEP is shortened so
# the iteration cannot leap to a neighbouring assembly mode; MAX_BRANCH_JUMP bounds how far the
# solution may lie from an explicit guess before it counts as a jump to another mode.
FK_TOLERANCE = 1e-12  # [m] largest edge-length error of the platform triangle
MAX_NEWTON_ITERATIONS = 30
MAX_NEWTON_STEP = 0.2  # [rad]
MAX_BRANCH_JUMP = 0.5  # [rad]
CONTINUATION_STEP = 0.01  # [m] largest actuator change per step when re-tracking from home
HOME_PHI = math.pi / 2.0


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

    @property
    def pose(self) -> np.ndarray:
        """xi = (x, y, z, lambda, mu, nu)."""
        return np.concatenate((self.position, self.euler_zyx))


@dataclass(frozen=True)
class InverseKinematicsResult:
    q: np.ndarray  # actuator positions [m], (6,)
    phi: np.ndarray  # passive angles [rad], (3,)


@dataclass(frozen=True)
class JacobianResult:
    analytic: np.ndarray  # J_A (6, 6): xi_dot = J_A q_dot
    passive_map: np.ndarray  # A(q) (9, 6): rho_dot = A q_dot, rho = (q, phi)
    convective: Optional[np.ndarray]  # J_A_dot q_dot (6,), when q_dot was given
    constraint_conditioning: float  # as in ForwardKinematicsResult
    jacobian_conditioning: float  # sigma_min / sigma_max of J_A in SI units; 0 = singular
    phi: np.ndarray


class HexapodModel:
    """Kinematics and dynamics of the Quanser Hexapod for one parameter set.

    The forward kinematics keeps the last solution as the warm start of the next call, so one
    model instance should follow one robot (create one per thread).
    """

    joint_names = JOINT_NAMES

    def __init__(self, parameters: HexapodParameters):
        self.parameters = parameters
        self._chains = ClosedChainKinematics(parameters)
        home = parameters.home_actuator_position
        self._two_leg_lengths = 2.0 * parameters.geometry.leg_length
        self._home_q = (home,) * 6
        self._home_phi = (HOME_PHI,) * 3
        self._last_q: tuple[float, ...] = self._home_q
        self._last_phi: tuple[float, ...] = self._home_phi
        self._previous_q: tuple[float, ...] = self._home_q
        self._previous_phi: tuple[float, ...] = self._home_phi
        self._dynamics = None

    @classmethod
    def from_yaml(cls, path: str | Path | None = None) -> "HexapodModel":
        """Model of a parameters file (default: the shipped experiments set, config/hexapod.yaml)."""
        return cls(load_parameters(path))

    @property
    def home_q(self) -> np.ndarray:
        return np.array(self._home_q)

    def reset_warm_start(self) -> None:
        """Forget the previous solution; the next FK call tracks the physical mode from home."""
        self._last_q, self._last_phi = self._home_q, self._home_phi
        self._previous_q, self._previous_phi = self._home_q, self._home_phi

    def _predict_phi(self, q) -> tuple[float, ...]:
        """Secant prediction of phi from the last two solutions, along the actuator motion.

        In a 1 kHz loop q moves almost linearly, so this saves one Newton iteration per call.
        """
        last_q, last_phi = self._last_q, self._last_phi
        norm2 = dot = 0.0
        for now, last, previous in zip(q, last_q, self._previous_q):
            step = last - previous
            norm2 += step * step
            dot += (now - last) * step
        if norm2 == 0.0 or not 0.0 < dot <= 2.0 * norm2:
            return last_phi
        s = dot / norm2
        (a0, a1, a2), (b0, b1, b2) = last_phi, self._previous_phi
        return (a0 + s * (a0 - b0), a1 + s * (a1 - b1), a2 + s * (a2 - b2))

    # ------------------------------------------------------------------ validation
    def _joint_vector(self, q, name: str = "q") -> tuple[float, ...]:
        q = as_vector(q, 6, name, JOINT_NAMES)
        two_l = self._two_leg_lengths
        if -two_l < q[0] + q[1] < two_l and -two_l < q[2] + q[3] < two_l and -two_l < q[4] + q[5] < two_l:
            return q
        for side in range(3):
            qbar = q[2 * side] + q[2 * side + 1]
            if not -two_l < qbar < two_l:
                raise AssemblyError(
                    f"side {side + 1}: q{2 * side} + q{2 * side + 1} = {qbar:.6g} m; the legs "
                    f"cannot assemble unless |q_bar| < 2L = {two_l:.6g} m"
                )
        return q

    def _phi_vector(self, phi, name: str = "phi") -> tuple[float, ...]:
        return as_vector(phi, 3, name, PASSIVE_NAMES)

    # ------------------------------------------------------------------ forward kinematics
    def _newton(self, q, phi, tolerance: float):
        """Newton on gamma(q, phi) = 0 from phi: (phi, iterations, residual, rows, apexes) or None."""
        chains = self._chains
        phi = list(phi)
        lp = chains.platform_side
        for iteration in range(MAX_NEWTON_ITERATIONS + 1):
            gamma, rows, apexes = chains.closure_residual_and_slopes(q, phi)
            # |edge| - L_P = gamma / ((|edge| + L_P) / 2) ~ gamma / L_P near closure.
            residual = max(abs(gamma[0]), abs(gamma[1]), abs(gamma[2])) / lp
            if residual <= tolerance:
                return tuple(phi), iteration, residual, rows, apexes
            if iteration == MAX_NEWTON_ITERATIONS:
                return None
            step = chains.solve_cyclic(rows, gamma)
            if step is None:
                return None
            largest = max(abs(s) for s in step)
            shrink = MAX_NEWTON_STEP / largest if largest > MAX_NEWTON_STEP else 1.0
            phi = [phi[i] - shrink * step[i] for i in range(3)]
        return None

    @staticmethod
    def _conditioning(rows) -> float:
        (a0, b0), (a1, b1), (a2, b2) = rows
        det = a0 * a1 * a2 + b0 * b1 * b2
        norms = math.hypot(a0, b0) * math.hypot(a1, b1) * math.hypot(a2, b2)
        return abs(det) / norms if norms > 0.0 else 0.0

    @staticmethod
    def _is_physical_mode(phi, rows) -> bool:
        """The physical mode: every leg pair above the base (0 < phi < pi) and det dgamma/dphi > 0.

        Among the 8 real assembly modes near home only the physical one has all three passive
        angles in (0, pi); the determinant sign cannot change without crossing a singularity.
        """
        (a0, b0), (a1, b1), (a2, b2) = rows
        f0, f1, f2 = phi
        pi = math.pi
        return 0.0 < f0 < pi and 0.0 < f1 < pi and 0.0 < f2 < pi and a0 * a1 * a2 + b0 * b1 * b2 > 0.0

    def _track(self, q, start_q, start_phi, tolerance: float):
        """Follow the physical mode from (start_q, start_phi) to q in small actuator steps."""
        distance = max(abs(a - b) for a, b in zip(q, start_q))
        steps = max(1, math.ceil(distance / CONTINUATION_STEP))
        phi, total = start_phi, 0
        for step in range(1, steps + 1):
            s = step / steps
            target = tuple(a + s * (b - a) for a, b in zip(start_q, q))
            solved = self._newton(target, phi, tolerance if step == steps else 1e-9)
            if solved is None or _largest_difference(solved[0], phi) > MAX_BRANCH_JUMP:
                return None
            phi, total = solved[0], total + solved[1]
        return solved[0], total, solved[2], solved[3], solved[4]

    def solve_passive(self, q, phi_guess=None, tolerance: float = FK_TOLERANCE):
        """phi of the physical mode and the Newton statistics: (phi, iterations, residual, rows, apexes)."""
        q = self._joint_vector(q)
        explicit_guess = phi_guess is not None
        guess = self._phi_vector(phi_guess, "phi_guess") if explicit_guess else self._predict_phi(q)
        solved = self._newton(q, guess, tolerance)
        if solved is not None and _largest_difference(solved[0], guess) > MAX_BRANCH_JUMP:
            if explicit_guess:
                raise AssemblyModeJumpError(
                    f"forward kinematics from phi_guess {list(guess)} converged to phi "
                    f"{list(solved[0])}, another branch; give a guess closer to the robot's state"
                )
            solved = None
        if solved is None and not explicit_guess:
            # The warm start was too far away: re-track from the last solution, then from home.
            solved = self._track(q, self._last_q, self._last_phi, tolerance)
            if solved is None:
                solved = self._track(q, self._home_q, self._home_phi, tolerance)
        if solved is None:
            raise ConvergenceError(
                f"forward kinematics did not converge for q = {list(q)}: the closed chains "
                "cannot assemble there, or the configuration is singular"
            )
        phi, iterations, residual, rows, apexes = solved
        if not self._is_physical_mode(phi, rows):
            raise AssemblyModeJumpError(
                f"forward kinematics for q = {list(q)} reached phi = {list(phi)}, which is not the "
                "physical assembly mode (0 < phi_i < pi, det dgamma/dphi > 0)"
            )
        if q != self._last_q:
            self._previous_q, self._previous_phi = self._last_q, self._last_phi
        self._last_q, self._last_phi = q, phi
        return phi, iterations, residual, rows, apexes

    def forward_kinematics(self, q, phi_guess=None) -> ForwardKinematicsResult:
        """Platform pose and passive angles from the six actuator positions [m].

        Newton on the closure equations, warm-started from ``phi_guess`` or the previous
        solution, to a closure residual <= 1e-12 m. Raises ConvergenceError when it cannot
        converge and AssemblyModeJumpError rather than return another assembly mode.
        """
        phi, iterations, residual, rows, apexes = self.solve_passive(q, phi_guess)
        x_axis, y_axis, z_axis, position = self._chains.platform_frame(apexes)
        return ForwardKinematicsResult(
            position=np.array(position),
            rotation=np.array((x_axis, y_axis, z_axis)).T,
            euler_zyx=np.array(euler_zyx_from_axes(x_axis, y_axis, z_axis)),
            phi=np.array(phi),
            iterations=iterations,
            residual=residual,
            constraint_conditioning=self._conditioning(rows),
        )

    def assembly_modes(self, q):
        """Every real solution of the closed chains for q; see :mod:`hexapod_control.model.assembly_modes`."""
        from hexapod_control.model.assembly_modes import assembly_modes

        return assembly_modes(self, q)

    # ------------------------------------------------------------------ inverse kinematics
    def inverse_kinematics(self, position, euler_zyx, check_limits: bool = True) -> InverseKinematicsResult:
        """Actuator positions and passive angles for a platform pose, in closed form.

        Raises UnreachablePoseError when a leg pair cannot reach its apex, the solution leaves the
        physical assembly mode, or (with ``check_limits``) an actuator leaves its travel.
        """
        position = as_vector(position, 3, "position", ("x", "y", "z"))
        euler = as_vector(euler_zyx, 3, "euler_zyx", ("lambda", "mu", "nu"))
        chains = self._chains
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
        if not self._is_physical_mode(phi, rows):
            raise UnreachablePoseError(
                f"pose {list(position) + list(euler)} needs phi = {phi}, outside the physical "
                "assembly mode (a forward-kinematics singularity lies in between)"
            )
        if check_limits:
            self.check_joint_limits(q, error=UnreachablePoseError)
        return InverseKinematicsResult(q=np.array(q), phi=np.array(phi))

    def check_joint_limits(self, q, error: type[Exception] = InvalidInputError) -> None:
        """Raise ``error`` naming the first actuator outside its travel or a colliding slider pair."""
        q = as_vector(q, 6, "q", JOINT_NAMES)
        limits = self.parameters.limits
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

    # ------------------------------------------------------------------ velocity kinematics
    def _passive_state(self, q, phi):
        q = self._joint_vector(q)
        if phi is None:
            phi = self.solve_passive(q)[0]
        else:
            phi = self._phi_vector(phi)
        return q, phi

    def _passive_map_rows(self, q, phi):
        """(dphi/dq as 3 rows of 6, side states, closure rows); raises near a singularity."""
        chains = self._chains
        _, rows, sides = chains.closure(q, phi)
        # dgamma_k/dq: gamma_k = |P_j - P_i|^2 / 2 depends on the actuators of sides i and j.
        gamma_q = []
        for i, j in SIDE_PAIRS:
            edge = _sub(sides[j].apex, sides[i].apex)
            row = [0.0] * 6
            row[2 * i] = -_dot(edge, sides[i].d_apex_d_q_first)
            row[2 * i + 1] = -_dot(edge, sides[i].d_apex_d_q_second)
            row[2 * j] = _dot(edge, sides[j].d_apex_d_q_first)
            row[2 * j + 1] = _dot(edge, sides[j].d_apex_d_q_second)
            gamma_q.append(row)
        columns = []
        for k in range(6):
            solved = chains.solve_cyclic(rows, (gamma_q[0][k], gamma_q[1][k], gamma_q[2][k]))
            if solved is None:
                raise SingularityError(f"dgamma/dphi is singular at q = {list(q)}, phi = {list(phi)}")
            columns.append((-solved[0], -solved[1], -solved[2]))
        phi_rows = tuple(tuple(columns[k][r] for k in range(6)) for r in range(3))
        return phi_rows, sides, rows

    def passive_map(self, q, phi=None) -> np.ndarray:
        """A(q) = [I; -(dgamma/dphi)^-1 dgamma/dq] (9, 6): rho_dot = A q_dot.

        Hand-written from the closure equations, independently of the generated A(q) that
        :meth:`analytic_jacobian` and the dynamics use (the tests compare the two).
        """
        q, phi = self._passive_state(q, phi)
        phi_rows, _, _ = self._passive_map_rows(q, phi)
        return np.vstack((np.eye(6), np.array(phi_rows)))

    def _apex_rates(self, sides, q_rate, phi_rate):
        return tuple(
            _add(
                _add(_scale(q_rate[2 * i], s.d_apex_d_q_first), _scale(q_rate[2 * i + 1], s.d_apex_d_q_second)),
                _scale(phi_rate[i], s.d_apex_d_phi),
            )
            for i, s in enumerate(sides)
        )

    def _apex_bias_accelerations(self, q, phi, q_rate, phi_rate):
        """P_i_ddot at q_ddot = 0, phi_ddot = 0 (the terms quadratic in the rates)."""
        chains = self._chains
        out = []
        for side in range(3):
            qbar = q[2 * side] + q[2 * side + 1]
            qbar_rate = q_rate[2 * side] + q_rate[2 * side + 1]
            r = chains.height(qbar)
            dr = -qbar / (4.0 * r)
            d2r = -1.0 / (4.0 * r) - qbar * qbar / (16.0 * r**3)
            r_rate, r_acc = dr * qbar_rate, d2r * qbar_rate * qbar_rate
            w = phi_rate[side]
            c, s = math.cos(phi[side]), math.sin(phi[side])
            local = (
                0.0,
                r_acc * c - 2.0 * r_rate * s * w - r * c * w * w,
                r_acc * s + 2.0 * r_rate * c * w - r * s * w * w,
            )
            out.append(chains.to_base(side, local))
        return tuple(out)

    def passive_acceleration_bias(self, q, phi, qd) -> np.ndarray:
        """A_dot q_dot restricted to phi: the passive accelerations when q_ddot = 0 (3,)."""
        q, phi = self._passive_state(q, phi)
        qd = as_vector(qd, 6, "qd", JOINT_NAMES)
        phi_rows, sides, rows = self._passive_map_rows(q, phi)
        return np.array(self._phi_bias(q, phi, qd, phi_rows, sides, rows))

    def _phi_bias(self, q, phi, qd, phi_rows, sides, rows) -> tuple[float, float, float]:
        phi_rate = tuple(sum(phi_rows[r][k] * qd[k] for k in range(6)) for r in range(3))
        apex_rates = self._apex_rates(sides, qd, phi_rate)
        apex_bias = self._apex_bias_accelerations(q, phi, qd, phi_rate)
        # d2/dt2 gamma_k = |edge_rate|^2 + edge . edge_acc = 0 with edge_acc = G phi_ddot + bias.
        rhs = []
        for i, j in SIDE_PAIRS:
            edge = _sub(sides[j].apex, sides[i].apex)
            edge_rate = _sub(apex_rates[j], apex_rates[i])
            rhs.append(_dot(edge_rate, edge_rate) + _dot(edge, _sub(apex_bias[j], apex_bias[i])))
        solved = self._chains.solve_cyclic(rows, rhs)
        if solved is None:
            raise SingularityError(f"dgamma/dphi is singular at q = {list(q)}, phi = {list(phi)}")
        return (-solved[0], -solved[1], -solved[2])

    def analytic_jacobian(self, q, qd=None, phi=None) -> JacobianResult:
        """J_A (xi_dot = J_A q_dot), A(q), J_A_dot q_dot when ``qd`` is given, and conditioning.

        J_A, J_A_dot q_dot, A(q) and the constraint conditioning come from the generated code
        (``ReducedDynamics.analytic_jacobian_terms``, C or Python backend, see
        :mod:`hexapod_control.model.dynamics`). Raises SingularityError where dgamma/dphi or the ZYX
        Euler rates are singular.
        """
        q, phi = self._passive_state(q, phi)
        if qd is not None:
            qd = as_vector(qd, 6, "qd", JOINT_NAMES)
        terms = self.dynamics._analytic_jacobian_terms(q, phi, qd)
        singular_values = np.linalg.svd(terms.analytic, compute_uv=False)
        return JacobianResult(
            analytic=terms.analytic,
            passive_map=terms.passive_map,
            convective=terms.convective,
            constraint_conditioning=terms.constraint_conditioning,
            jacobian_conditioning=float(singular_values[-1] / singular_values[0]),
            phi=np.array(phi),
        )

    # ------------------------------------------------------------------ geometry accessors
    def platform_vertices(self, q, phi=None) -> np.ndarray:
        """Rows P_1, P_2, P_3 (the spherical-joint centres) in the base frame (3, 3)."""
        q, phi = self._passive_state(q, phi)
        return np.array(self._chains.apexes(q, phi))

    def constraint_residual(self, q, phi) -> np.ndarray:
        """gamma(q, phi) = (|P_j - P_i|^2 - L_P^2) / 2 for (i, j) = (1,2), (2,3), (3,1) [m^2]."""
        q = self._joint_vector(q)
        return np.array(self._chains.closure_residual_and_slopes(q, self._phi_vector(phi))[0])

    def slider_positions(self, q) -> np.ndarray:
        """Rows D_0..D_5, the universal-joint centres, in the base frame (6, 3)."""
        q = as_vector(q, 6, "q", JOINT_NAMES)
        chains = self._chains
        rows = []
        for side in range(3):
            rows.append(chains.to_base(side, (-q[2 * side], chains.side_offset, 0.0)))
            rows.append(chains.to_base(side, (q[2 * side + 1], chains.side_offset, 0.0)))
        return np.array(rows)

    # --- dynamics (delegates to hexapod_control.model.dynamics) ---
    @property
    def dynamics(self):
        """The actuator-space ReducedDynamics of this model, created on first use."""
        if self._dynamics is None:
            from hexapod_control.model.dynamics import ReducedDynamics  # imported late: dynamics imports model types

            self._dynamics = ReducedDynamics(self)
        return self._dynamics

    def mass_matrix(self, q, phi=None) -> np.ndarray:
        """M_bar(q) = A^T M A (6, 6) [kg]."""
        return self.dynamics.mass_matrix(q, phi=phi)

    def velocity_term(self, q, qd, phi=None) -> np.ndarray:
        """C_bar(q, q_d) q_d (6,) [N]."""
        return self.dynamics.velocity_term(q, qd, phi=phi)

    def gravity_term(self, q, phi=None) -> np.ndarray:
        """g_bar(q) (6,) [N]."""
        return self.dynamics.gravity_term(q, phi=phi)

    def inverse_dynamics(self, q, qd, qdd, phi=None) -> np.ndarray:
        """Actuator forces tau (6,) [N]."""
        return self.dynamics.inverse_dynamics(q, qd, qdd, phi=phi)

    def forward_dynamics(self, q, qd, tau, phi=None) -> np.ndarray:
        """Actuator accelerations q_dd (6,) [m/s^2] under the forces tau."""
        return self.dynamics.forward_dynamics(q, qd, tau, phi=phi)

    def energy(self, q, qd, phi=None) -> tuple[float, float]:
        """(kinetic, potential) energy [J]."""
        return self.dynamics.energy(q, qd, phi=phi)


def _largest_difference(a, b) -> float:
    """max |a_i - b_i| of two 3-vectors."""
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]), abs(a[2] - b[2]))
