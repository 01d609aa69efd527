"""The public model of the Hexapod: one immutable object per parameter set.

``HexapodModel`` joins the kinematics (:mod:`hexapod_control.model.kinematics`), the assembly
modes (:mod:`hexapod_control.model.assembly_modes`) and the actuator-space dynamics
(:mod:`hexapod_control.model.dynamics`), which depend downwards only. It holds no working state:
what a caller carries from call to call (the forward-kinematics warm start) is a
:class:`KinematicState` it creates with :meth:`HexapodModel.create_state` and passes in, so one
model serves the controller, the supervisor, the trajectory and the FK node of a process::

    model = HexapodModel.from_yaml()
    state = model.create_state()                   # follows one robot
    fk = model.forward_kinematics(q, state)        # warm-started from the last call

Pure Python and numpy; nothing here imports ROS, so a notebook can use it directly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from hexapod_control.model.assembly_modes import AssemblyModes, assembly_modes
from hexapod_control.model.dynamics import ReducedDynamics
from hexapod_control.model.kinematics import (
    JOINT_NAMES,
    PASSIVE_NAMES,
    POSE_NAMES,
    ForwardKinematicsResult,
    InverseKinematicsResult,
    Kinematics,
    KinematicState,
)
from hexapod_control.model.parameters import HexapodParameters, load_parameters
from hexapod_control.model.validation import as_vector

__all__ = [
    "JOINT_NAMES",
    "PASSIVE_NAMES",
    "POSE_NAMES",
    "ForwardKinematicsResult",
    "HexapodModel",
    "InverseKinematicsResult",
    "JacobianResult",
    "KinematicState",
]


@dataclass(frozen=True)
class JacobianResult:
    analytic: np.ndarray  # J_A (6, 6): xi_dot = J_A q_dot
    passive_map: np.ndarray  # A(q) (9, 6): rho_dot = A q_dot
    convective: Optional[np.ndarray]  # J_A_dot q_dot (6,), when q_dot was given
    constraint_conditioning: float  # as in ForwardKinematicsResult
    phi: np.ndarray

    @functools.cached_property
    def jacobian_conditioning(self) -> float:
        """sigma_min / sigma_max of J_A in SI units; 0 = singular (an SVD: computed when first read)."""
        singular_values = np.linalg.svd(self.analytic, compute_uv=False)
        return float(singular_values[-1] / singular_values[0])


class HexapodModel:
    """Kinematics and dynamics of the Quanser Hexapod for one parameter set; immutable.

    Methods that need the passive angles take ``phi`` (trusted: the physical mode's, e.g. from
    this step's forward kinematics) or else solve the forward kinematics warm-started from
    ``state``, or from home without one. Building a model builds its dynamics backend (the
    compiled C, on a machine's first use), so no control cycle pays for it: ``backend`` "c",
    "python" or "auto" (C when the library is available, else Python with one warning), None for
    ``$HEXAPOD_DYNAMICS_BACKEND`` (default auto). ``model.backend`` is the one in use ("c" or
    "python"); the controllers' compiled cycle follows it unless told otherwise.
    """

    joint_names = JOINT_NAMES

    def __init__(self, parameters: HexapodParameters, backend: str | None = None):
        kinematics = Kinematics(parameters)
        dynamics = ReducedDynamics(parameters, backend)
        object.__setattr__(self, "parameters", parameters)
        object.__setattr__(self, "kinematics", kinematics)
        object.__setattr__(self, "dynamics", dynamics)
        object.__setattr__(self, "home_q", np.array(kinematics.home_q))

    def __setattr__(self, name, value):
        raise AttributeError(f"HexapodModel is immutable: cannot set {name!r} (carry state in a KinematicState)")

    @property
    def backend(self) -> str:
        """The dynamics backend in use: "c" or "python"."""
        return self.dynamics.backend

    @classmethod
    def from_yaml(cls, path: str | Path | None = None, backend: str | None = None) -> "HexapodModel":
        """Model of a parameters file (default: the shipped experiments set, config/hexapod.yaml)."""
        return cls(load_parameters(path), backend)

    def create_state(self) -> KinematicState:
        """A new forward-kinematics warm start at home, for one robot (or one series of q)."""
        return self.kinematics.create_state()

    # ------------------------------------------------------------------ kinematics
    def forward_kinematics(self, q, state: KinematicState | None = None, phi_guess=None) -> ForwardKinematicsResult:
        """Platform pose and passive angles from the six actuator positions [m]; see Kinematics."""
        return self.kinematics.forward_kinematics(q, state, phi_guess)

    def inverse_kinematics(self, position, euler_zyx, check_limits: bool = True) -> InverseKinematicsResult:
        """Actuator positions and passive angles for a platform pose, in closed form."""
        return self.kinematics.inverse_kinematics(position, euler_zyx, check_limits)

    def check_joint_limits(self, q, error: type[Exception] | None = None) -> None:
        """Raise (InvalidInputError or ``error``) naming an actuator outside its travel or a colliding pair."""
        if error is None:
            self.kinematics.check_joint_limits(q)
        else:
            self.kinematics.check_joint_limits(q, error)

    def assembly_modes(self, q) -> AssemblyModes:
        """Every real solution of the closed chains for q; see :mod:`hexapod_control.model.assembly_modes`."""
        return assembly_modes(self.kinematics, q)

    def platform_vertices(self, q, phi=None, state: KinematicState | None = None) -> np.ndarray:
        """Rows P_1, P_2, P_3 (the spherical-joint centres) in the base frame (3, 3)."""
        return self.kinematics.platform_vertices(q, self._phi(q, phi, state))

    def slider_positions(self, q) -> np.ndarray:
        """Rows D_0..D_5, the universal-joint centres, in the base frame (6, 3)."""
        return self.kinematics.slider_positions(q)

    def analytic_jacobian(self, q, qd=None, phi=None, state: KinematicState | None = None) -> JacobianResult:
        """J_A (xi_dot = J_A q_dot), A(q), J_A_dot q_dot when ``qd`` is given, and conditioning.

        J_A, J_A_dot q_dot, A(q) and the constraint conditioning come from the generated code
        (:meth:`ReducedDynamics.analytic_jacobian_terms`, C or Python backend). Raises
        SingularityError where dgamma/dphi or the ZYX Euler rates are singular.
        """
        q = self.kinematics.joint_vector(q)
        phi = self._phi(q, phi, state)
        if qd is not None:
            qd = as_vector(qd, 6, "qd", JOINT_NAMES)
        terms = self.dynamics._analytic_jacobian_terms(q, phi, qd)
        return JacobianResult(
            analytic=terms.analytic,
            passive_map=terms.passive_map,
            convective=terms.convective,
            constraint_conditioning=terms.constraint_conditioning,
            phi=np.array(phi),
        )

    # ------------------------------------------------------------------ dynamics
    def mass_matrix(self, q, phi=None, state: KinematicState | None = None) -> np.ndarray:
        """M_bar(q) = A^T M A (6, 6) [kg]."""
        return self.dynamics.mass_matrix(q, self._phi(q, phi, state))

    def velocity_term(self, q, qd, phi=None, state: KinematicState | None = None) -> np.ndarray:
        """C_bar(q, q_d) q_d (6,) [N]."""
        return self.dynamics.velocity_term(q, qd, self._phi(q, phi, state))

    def gravity_term(self, q, phi=None, state: KinematicState | None = None) -> np.ndarray:
        """g_bar(q) (6,) [N]."""
        return self.dynamics.gravity_term(q, self._phi(q, phi, state))

    def inverse_dynamics(self, q, qd, qdd, phi=None, state: KinematicState | None = None) -> np.ndarray:
        """Actuator forces tau (6,) [N]."""
        return self.dynamics.inverse_dynamics(q, qd, qdd, self._phi(q, phi, state))

    def forward_dynamics(self, q, qd, tau, phi=None, state: KinematicState | None = None) -> np.ndarray:
        """Actuator accelerations q_dd (6,) [m/s^2] under the forces tau."""
        return self.dynamics.forward_dynamics(q, qd, tau, self._phi(q, phi, state))

    def energy(self, q, qd, phi=None, state: KinematicState | None = None) -> tuple[float, float]:
        """(kinetic, potential) energy [J]."""
        return self.dynamics.energy(q, qd, self._phi(q, phi, state))

    def _phi(self, q, phi, state: KinematicState | None):
        """The given phi, else that of the forward kinematics warm-started from ``state``."""
        if phi is not None:
            return phi
        return self.kinematics.solve_passive(q, state).phi
