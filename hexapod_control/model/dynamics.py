"""Rigid-body dynamics of the Hexapod: the non-minimal model in rho and its actuator-space reduction.

Non-minimal model (thesis 6.3, 25 bodies, errata in doc/model.md), in
rho = (q0..q5, phi1, phi2, phi3):

    M(rho) rho_dd + h(rho, rho_d) + g(rho) = tau_rho + D^T lambda,

evaluated by the code generated into :mod:`hexapod_control.model.generated.dynamics_terms`
(``python -m hexapod_control.codegen``) or by its compiled C twin, the ``backend`` chosen when the
dynamics are built (``HEXAPOD_DYNAMICS_BACKEND=auto|python|c`` when none is given; see
:mod:`hexapod_control.model.compiled`). Reduction to
the actuators (thesis 4.97-4.101) with rho_d = A(q) q_d and A(q) = [I; -(dgamma/dphi)^-1 dgamma/dq]:

    M_bar = A^T M A,    C_bar q_d = A^T (M [0; b] + h(rho, A q_d)),    g_bar = A^T g,
    tau = M_bar q_dd + C_bar q_d + g_bar = A^T Q(rho, A q_d, A q_dd + [0; b]),

where b = A_dot q_d is the passive acceleration when q_dd = 0 and Q = M rho_dd + h + g.
Forces are in N (actuators are prismatic), energies in J.

The drives (``parameters.actuators``, :mod:`hexapod_control.model.actuators`) add their reflected
inertia to M_bar and their friction to the forces, around the generated calls:
tau = tau_rigid + J q_dd + b q_d + F_c tanh(q_d / v_s). With all of them zero the generated path
runs alone, so the rigid-body results are bit for bit those without drives.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from hexapod_control.errors import SingularityError
from hexapod_control.model import compiled
from hexapod_control.model.actuators import ActuatorModel
from hexapod_control.model.kinematics import JOINT_NAMES, PASSIVE_NAMES, Kinematics, check_assembly
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.model.validation import as_vector

N_ACTUATORS = 6
N_PASSIVE = 3
N_COORDINATES = N_ACTUATORS + N_PASSIVE
COORDINATE_NAMES = JOINT_NAMES + PASSIVE_NAMES

_GEOMETRY_FIELDS = {
    "base_side": "base_side",
    "leg_length": "leg_length",
    "platform_offset": "platform_offset",
    "platform_com_offset": "platform_com_offset",
    "pu_part1_com_offset": "pu_part1_com_offset",
    "s_part2_com_offset": "s_part2_com_offset",
}


def pack_parameters(parameters: HexapodParameters) -> tuple[float, ...]:
    """The flat parameter tuple of the generated functions, in their ``PARAMETER_NAMES`` order (the
    same for both backends)."""
    values = {name: float(getattr(parameters.geometry, field)) for name, field in _GEOMETRY_FIELDS.items()}
    values["gravity"] = float(parameters.gravity)
    for kind in ("platform", "leg", "pu_part1", "pu_part2", "s_part1", "s_part2"):
        body = getattr(parameters.bodies, kind)
        values[f"{kind}_mass"] = float(body.mass)
        for axis, moment in zip(("ixx", "iyy", "izz"), body.inertia):
            values[f"{kind}_{axis}"] = float(moment)
    return tuple(values[name] for name in compiled.python_terms.PARAMETER_NAMES)


def _finite(values, what: str, where) -> list[float]:
    """Guard against overflow: the API never returns NaN or inf."""
    if not all(map(math.isfinite, values)):
        raise SingularityError(f"{what} is not finite at {where}: the state is singular or out of range")
    return values


class RigidBodyDynamics:
    """M(rho), h(rho, rho_d), g(rho), energies and Q = M rho_dd + h + g of the non-minimal model.

    ``rho`` must lie on the constraint manifold gamma(q, phi) = 0 for the numbers to be physical
    (the formulas take y_F, z_F as unit vectors there). ``backend``: "python", "c" or "auto" (C when
    the library is available), None for ``$HEXAPOD_DYNAMICS_BACKEND`` (default auto).
    """

    def __init__(self, parameters: HexapodParameters, backend: str | None = None):
        self.parameters = parameters
        self.terms = compiled.select_backend(backend)  # the generated functions, Python or C
        self.backend = compiled.backend_name(self.terms)
        self._packed = pack_parameters(parameters)
        self._two_leg_length = 2.0 * parameters.geometry.leg_length

    # ------------------------------------------------------------------ validation
    def _rho(self, rho, name: str = "rho") -> list[float]:
        rho = as_vector(rho, N_COORDINATES, name, COORDINATE_NAMES)
        check_assembly(rho, self._two_leg_length, name)
        return rho

    def _call(self, function, *arguments):
        try:
            return function(*arguments, self._packed)
        except (ZeroDivisionError, ValueError, OverflowError) as error:
            # r_i = 0 (legs stretched) or cos(theta2) = 0 (S-joint gimbal lock).
            raise SingularityError(f"{function.__name__} is singular at rho = {arguments[0]}: {error}") from error

    # ------------------------------------------------------------------ public API
    def mass_matrix(self, rho) -> np.ndarray:
        rho = self._rho(rho)
        flat = _finite(self._call(self.terms.mass_matrix, rho), "M(rho)", rho)
        return np.array(flat).reshape(N_COORDINATES, N_COORDINATES)

    def velocity_term(self, rho, rho_dot) -> np.ndarray:
        rho = self._rho(rho)
        rho_dot = as_vector(rho_dot, N_COORDINATES, "rho_dot", COORDINATE_NAMES)
        return np.array(_finite(self._call(self.terms.velocity_term, rho, rho_dot), "h(rho, rho_dot)", rho))

    def gravity_term(self, rho) -> np.ndarray:
        rho = self._rho(rho)
        return np.array(_finite(self._call(self.terms.gravity_term, rho), "g(rho)", rho))

    def energy(self, rho, rho_dot) -> tuple[float, float]:
        """(kinetic, potential) [J]; potential is zero with every centre of mass at z = 0."""
        rho = self._rho(rho)
        rho_dot = as_vector(rho_dot, N_COORDINATES, "rho_dot", COORDINATE_NAMES)
        kinetic, potential = _finite(self._call(self.terms.energy, rho, rho_dot), "energy", rho)
        return float(kinetic), float(potential)

    def generalized_forces(self, rho, rho_dot, rho_ddot) -> np.ndarray:
        """M rho_ddot + h(rho, rho_dot) + g(rho) (9,)."""
        rho = self._rho(rho)
        rho_dot = as_vector(rho_dot, N_COORDINATES, "rho_dot", COORDINATE_NAMES)
        rho_ddot = as_vector(rho_ddot, N_COORDINATES, "rho_ddot", COORDINATE_NAMES)
        values = self._call(self.terms.generalized_forces, rho, rho_dot, rho_ddot)
        return np.array(_finite(values, "generalized forces", rho))


class JacobianTerms(NamedTuple):
    """The generated analytic Jacobian of the platform pose xi = (x, y, z, lambda, mu, nu)."""

    analytic: np.ndarray  # J_A (6, 6): xi_dot = J_A q_dot
    passive_map: np.ndarray  # A(q) (9, 6): rho_dot = A q_dot
    convective: np.ndarray | None  # J_A_dot q_dot (6,), when q_dot was given
    constraint_conditioning: float  # |det dgamma/dphi| / prod(row norms), 0 = singular, 1 = ideal
    cos_mu: float  # cos of the ZYX pitch, >= 0; J_A is singular where it vanishes


# Below this |cos(mu)| the ZYX Euler rates are reported as singular (J_A blows up as 1/cos^2).
EULER_SINGULARITY_COS = 1e-6
_PASSIVE_MAP_SIZE = N_PASSIVE * N_ACTUATORS  # layout of the analytic_jacobian* outputs:
_ANALYTIC_END = _PASSIVE_MAP_SIZE + N_ACTUATORS * N_ACTUATORS  # A_phi (18), J_A (36), [J_A_dot q_d (6)], checks (2)
_IDENTITY = np.eye(N_ACTUATORS).ravel()  # the upper rows of A(q) = [I; A_phi], flat


class ReducedDynamics:
    """Actuator-space dynamics tau = M_bar(q) q_dd + C_bar(q, q_d) q_d + g_bar(q) + f(q_d) [N].

    M_bar includes the drives' reflected inertia and f is their friction (``actuators``: both zero
    for the rigid bodies alone).

    Holds a :class:`RigidBodyDynamics`. A(q) and b are evaluated inside the generated code,
    together with the rigid-body terms, so one call shares all the geometry. Every method takes
    the passive angles ``phi`` of the physical assembly mode (trusted, not re-solved; a caller
    that follows a robot has them from its warm-started forward kinematics); without them the
    forward kinematics is solved from home.
    """

    def __init__(self, parameters: HexapodParameters, backend: str | None = None):
        """``backend`` as :class:`RigidBodyDynamics`'s."""
        self.parameters = parameters
        self.kinematics = Kinematics(parameters)
        self.rigid_body = RigidBodyDynamics(parameters, backend)
        self.terms = self.rigid_body.terms  # read at every call: not looked up through rigid_body
        self.actuators = ActuatorModel(parameters.actuators)
        self._packed = self.rigid_body._packed

    @property
    def backend(self) -> str:
        """The generated functions in use: "c" or "python"."""
        return self.rigid_body.backend

    def _state(self, q, phi) -> tuple[list[float], list[float]]:
        q = self.kinematics.joint_vector(q)
        if phi is None:
            phi = self.kinematics.solve_passive(q).phi
        else:
            phi = as_vector(phi, N_PASSIVE, "phi", PASSIVE_NAMES)
        return q, phi

    def _call(self, function, *arguments):
        """function(*arguments, parameters) of a generated function returning floats (a list or a pair)."""
        try:
            values = function(*arguments, self._packed)
        except (ZeroDivisionError, ValueError, OverflowError) as error:
            # r_i = 0 (legs stretched), cos(theta2) = 0 (S-joint gimbal lock), det dgamma/dphi = 0, ...
            raise SingularityError(
                f"{function.__name__} is singular at q = {list(arguments[0])}, phi = {list(arguments[1])}: {error}"
            ) from error
        if not all(map(math.isfinite, values)):
            raise SingularityError(
                f"{function.__name__} is not finite at q = {list(arguments[0])}, phi = {list(arguments[1])}: "
                "the state is singular or out of range"
            )
        return values

    # ------------------------------------------------------------------ public API
    def passive_state(self, q, phi=None, qd=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(phi, A(q) (9, 6), b = A_dot q_d (3,)); b is zero when ``qd`` is not given."""
        q, phi = self._state(q, phi)
        qd = [0.0] * N_ACTUATORS if qd is None else as_vector(qd, N_ACTUATORS, "qd", JOINT_NAMES)
        values = np.array(self._call(self.terms.passive_kinematics, q, phi, qd))
        passive_map = np.concatenate((_IDENTITY, values[:_PASSIVE_MAP_SIZE])).reshape(N_COORDINATES, N_ACTUATORS)
        return np.array(phi), passive_map, values[_PASSIVE_MAP_SIZE:]

    def mass_matrix(self, q, phi=None) -> np.ndarray:
        """M_bar = A^T M A + diag(J) (6, 6), symmetric positive definite [kg]."""
        q, phi = self._state(q, phi)
        mass = _symmetric(self._call(self.terms.reduced_mass_matrix, q, phi))
        if not self.actuators.rigid:
            mass[np.diag_indices(N_ACTUATORS)] += self.actuators.inertia
        return mass

    def velocity_term(self, q, qd, phi=None) -> np.ndarray:
        """C_bar q_d = A^T (M [0; b] + h(rho, A q_d)) (6,) [N]."""
        q, phi = self._state(q, phi)
        qd = as_vector(qd, N_ACTUATORS, "qd", JOINT_NAMES)
        return np.array(self._call(self.terms.reduced_velocity_term, q, phi, qd))

    def gravity_term(self, q, phi=None) -> np.ndarray:
        """g_bar = A^T g = dU(q)/dq (6,) [N]."""
        q, phi = self._state(q, phi)
        return np.array(self._call(self.terms.reduced_gravity_term, q, phi))

    def inverse_dynamics(self, q, qd, qdd, phi=None) -> np.ndarray:
        """Actuator forces tau (6,) [N] for the motion (q, q_d, q_dd)."""
        q, phi = self._state(q, phi)
        qd = as_vector(qd, N_ACTUATORS, "qd", JOINT_NAMES)
        qdd = as_vector(qdd, N_ACTUATORS, "qdd", JOINT_NAMES)
        tau = np.array(self._call(self.terms.reduced_inverse_dynamics, q, phi, qd, qdd))
        if self.actuators.rigid:
            return tau
        return tau + self.actuators.forces(qd, qdd, q)

    def forward_dynamics(self, q, qd, tau, phi=None) -> np.ndarray:
        """q_dd (6,) [m/s^2] from M_bar q_dd = tau - C_bar q_d - g_bar - f(q_d).

        Rigid bodies alone: solved inside the generated code (M_bar, the bias forces and an
        unrolled Cholesky in one call). With drives: the generated M_bar and bias forces, the
        drives added, solved here. SingularityError when M_bar is not positive definite or the
        state is singular.
        """
        q, phi = self._state(q, phi)
        qd = as_vector(qd, N_ACTUATORS, "qd", JOINT_NAMES)
        tau = as_vector(tau, N_ACTUATORS, "tau", JOINT_NAMES)
        try:
            if self.actuators.rigid:
                return np.array(self._call(self.terms.reduced_forward_dynamics, q, phi, qd, tau))
            mass = self.mass_matrix(q, phi)
            bias = self.inverse_dynamics(q, qd, [0.0] * N_ACTUATORS, phi)  # C_bar q_d + g_bar + f(q_d)
            return _solve_positive_definite(mass, np.asarray(tau) - bias)
        except SingularityError as error:
            raise SingularityError(f"M_bar is not positive definite or the state is singular: {error}") from error

    def energy(self, q, qd, phi=None) -> tuple[float, float]:
        """(kinetic, potential) [J] of the whole robot moving with q_d, the drives' rotors included."""
        q, phi = self._state(q, phi)
        qd = as_vector(qd, N_ACTUATORS, "qd", JOINT_NAMES)
        kinetic, potential = self._call(self.terms.reduced_energy, q, phi, qd)
        if not self.actuators.rigid:
            kinetic += self.actuators.kinetic_energy(qd)
        return float(kinetic), float(potential)

    def analytic_jacobian_terms(self, q, phi=None, qd=None) -> JacobianTerms:
        """J_A (xi_dot = J_A q_dot), A(q), J_A_dot q_dot (when ``qd`` is given) and the checks.

        xi = (x, y, z, lambda, mu, nu): r_F and the ZYX Euler angles of the platform frame (see
        :mod:`hexapod_control.model.kinematics`). Generated code (derive_dynamics.py): the pose rates
        are differentiated symbolically through rho and reduced with A(q) and b = A_dot q_d.
        SingularityError where dgamma/dphi is singular or |cos(mu)| < EULER_SINGULARITY_COS.
        """
        q, phi = self._state(q, phi)
        if qd is not None:
            qd = as_vector(qd, N_ACTUATORS, "qd", JOINT_NAMES)
        return self._analytic_jacobian_terms(q, phi, qd)

    def _analytic_jacobian_terms(self, q, phi, qd) -> JacobianTerms:
        """As :meth:`analytic_jacobian_terms` for inputs already validated (sequences of floats)."""
        if qd is None:
            values = self._call(self.terms.analytic_jacobian, q, phi)
        else:
            values = self._call(self.terms.analytic_jacobian_and_convective, q, phi, qd)
        conditioning, cos_mu = values[-2:]
        if not cos_mu >= EULER_SINGULARITY_COS:
            raise SingularityError(f"ZYX Euler angles are singular: cos(mu) = {cos_mu:.3g} at q = {list(q)}")
        array = np.array(values)  # one conversion; the results are views of it
        return JacobianTerms(
            analytic=array[_PASSIVE_MAP_SIZE:_ANALYTIC_END].reshape(N_ACTUATORS, N_ACTUATORS),
            passive_map=np.concatenate((_IDENTITY, array[:_PASSIVE_MAP_SIZE])).reshape(N_COORDINATES, N_ACTUATORS),
            convective=None if qd is None else array[_ANALYTIC_END : _ANALYTIC_END + N_ACTUATORS],
            constraint_conditioning=abs(conditioning),
            cos_mu=cos_mu,
        )


def _solve_positive_definite(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """matrix^-1 rhs by Cholesky; SingularityError when the matrix is not positive definite."""
    try:
        factor = np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError as error:
        raise SingularityError(f"not positive definite: {error}") from error
    return np.linalg.solve(factor.T, np.linalg.solve(factor, rhs))


def _symmetric(flat: list[float]) -> np.ndarray:
    n = math.isqrt(len(flat))
    matrix = np.array(flat).reshape(n, n)
    return 0.5 * (matrix + matrix.T)  # the generated entries are symmetric up to round-off
