"""Hand-written velocity kinematics of the closed chains: a test oracle, independent of the
generated A(q) and A_dot q_dot that the model and the dynamics use.

Derived directly from the closure equations gamma_k(q, phi) = (|P_j - P_i|^2 - L_P^2) / 2 = 0
(see hexapod_control/model/kinematics.py): dgamma/dq and dgamma/dphi from the apex slopes of each
side, A_phi = -(dgamma/dphi)^-1 dgamma/dq, and the passive acceleration bias from the second time
derivative of gamma at q_ddot = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hexapod_control.errors import SingularityError
from hexapod_control.model.kinematics import SIDE_PAIRS, Kinematics, Vec, _add, _dot, _scale, _sub
from hexapod_control.model.validation import as_vector


@dataclass(frozen=True)
class SideState:
    """Everything about one side that depends on (q[2i], q[2i+1], phi_i) only."""

    apex: Vec  # P_i in the base frame
    d_apex_d_phi: Vec  # dP_i/dphi_i
    d_apex_d_q_first: Vec  # dP_i/dq[2i]
    d_apex_d_q_second: Vec  # dP_i/dq[2i+1]
    height: float  # r_i = |C_i P_i|
    d_height_d_qbar: float  # dr_i/dqbar_i


def side_state(chains, side: int, q_first: float, q_second: float, phi: float) -> SideState:
    qbar = q_first + q_second
    r = chains.height(qbar)
    dr = -qbar / (4.0 * r)
    c, s = math.cos(phi), math.sin(phi)
    apex = chains.to_base(side, (0.5 * (q_second - q_first), chains.side_offset + r * c, r * s))
    return SideState(
        apex=apex,
        d_apex_d_phi=chains.to_base(side, (0.0, -r * s, r * c)),
        d_apex_d_q_first=chains.to_base(side, (-0.5, dr * c, dr * s)),
        d_apex_d_q_second=chains.to_base(side, (0.5, dr * c, dr * s)),
        height=r,
        d_height_d_qbar=dr,
    )


def closure(chains, q, phi) -> tuple[tuple[float, ...], tuple[tuple[float, float], ...], tuple[SideState, ...]]:
    """gamma (3,), the nonzero entries of dgamma/dphi per row and the side states.

    Row k of dgamma/dphi has (d gamma_k / d phi_i, d gamma_k / d phi_j) for (i, j) = SIDE_PAIRS[k].
    """
    sides = tuple(side_state(chains, i, q[2 * i], q[2 * i + 1], phi[i]) for i in range(3))
    half_lp2 = 0.5 * chains.platform_side**2
    gamma = []
    rows = []
    for i, j in SIDE_PAIRS:
        edge = _sub(sides[j].apex, sides[i].apex)
        gamma.append(0.5 * _dot(edge, edge) - half_lp2)
        rows.append((-_dot(edge, sides[i].d_apex_d_phi), _dot(edge, sides[j].d_apex_d_phi)))
    return tuple(gamma), tuple(rows), sides


class VelocityOracle:
    """A(q) and A_dot q_dot of one parameter set, written by hand from the closure equations."""

    def __init__(self, kinematics: Kinematics):
        self.kinematics = kinematics
        self.chains = kinematics.chains

    def _state(self, q, phi):
        q = self.kinematics.joint_vector(q)
        phi = self.kinematics.solve_passive(q).phi if phi is None else as_vector(phi, 3, "phi")
        return q, phi

    def _passive_map_rows(self, q, phi):
        """(dphi/dq as 3 rows of 6, side states, closure rows); raises near a singularity."""
        chains = self.chains
        _, rows, sides = closure(chains, q, phi)
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
        """A(q) = [I; -(dgamma/dphi)^-1 dgamma/dq] (9, 6): rho_dot = A q_dot."""
        q, phi = self._state(q, phi)
        phi_rows, _, _ = self._passive_map_rows(q, phi)
        return np.vstack((np.eye(6), np.array(phi_rows)))

    @staticmethod
    def _apex_rates(sides, q_rate, phi_rate):
        return tuple(
            _add(
                _add(_scale(q_rate[2 * i], s.d_apex_d_q_first), _scale(q_rate[2 * i + 1], s.d_apex_d_q_second)),
                _scale(phi_rate[i], s.d_apex_d_phi),
            )
            for i, s in enumerate(sides)
        )

    def _apex_bias_accelerations(self, q, phi, q_rate, phi_rate):
        """P_i_ddot at q_ddot = 0, phi_ddot = 0 (the terms quadratic in the rates)."""
        chains = self.chains
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
        q, phi = self._state(q, phi)
        qd = as_vector(qd, 6, "qd")
        phi_rows, sides, rows = self._passive_map_rows(q, phi)
        phi_rate = tuple(sum(phi_rows[r][k] * qd[k] for k in range(6)) for r in range(3))
        apex_rates = self._apex_rates(sides, qd, phi_rate)
        apex_bias = self._apex_bias_accelerations(q, phi, qd, phi_rate)
        # d2/dt2 gamma_k = |edge_rate|^2 + edge . edge_acc = 0 with edge_acc = G phi_ddot + bias.
        rhs = []
        for i, j in SIDE_PAIRS:
            edge = _sub(sides[j].apex, sides[i].apex)
            edge_rate = _sub(apex_rates[j], apex_rates[i])
            rhs.append(_dot(edge_rate, edge_rate) + _dot(edge, _sub(apex_bias[j], apex_bias[i])))
        solved = self.chains.solve_cyclic(rows, rhs)
        if solved is None:
            raise SingularityError(f"dgamma/dphi is singular at q = {list(q)}, phi = {list(phi)}")
        return np.array((-solved[0], -solved[1], -solved[2]))
