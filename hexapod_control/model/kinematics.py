"""Closed-chain kinematics of the 6-3-PUS Hexapod in plain float arithmetic.

Conventions (thesis ch. 6.1-6.2, errata in shared/HEXAPOD_MODEL.md):
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hexapod_control.model.parameters import HexapodParameters

SIDE_ANGLES_DEG = (-90.0, 30.0, 150.0)
# gamma_k closes the triangle edge from vertex SIDE_PAIRS[k][0] to SIDE_PAIRS[k][1].
SIDE_PAIRS = ((0, 1), (1, 2), (2, 0))

Vec = tuple[float, float, float]


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


@dataclass(frozen=True)
class SideState:
    """Everything about one side that depends on (q[2i], q[2i+1], phi_i) only."""

    apex: Vec  # P_i in the base frame
    d_apex_d_phi: Vec  # dP_i/dphi_i
    d_apex_d_q_first: Vec  # dP_i/dq[2i]
    d_apex_d_q_second: Vec  # dP_i/dq[2i+1]
    height: float  # r_i = |C_i P_i|
    d_height_d_qbar: float  # dr_i/dqbar_i


class ClosedChainKinematics:
    """Float-level kinematics; :class:`hexapod_control.model.HexapodModel` is the public face."""

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

    def side_state(self, side: int, q_first: float, q_second: float, phi: float) -> SideState:
        qbar = q_first + q_second
        r = self.height(qbar)
        dr = -qbar / (4.0 * r)
        c, s = math.cos(phi), math.sin(phi)
        apex = self.to_base(side, (0.5 * (q_second - q_first), self.side_offset + r * c, r * s))
        return SideState(
            apex=apex,
            d_apex_d_phi=self.to_base(side, (0.0, -r * s, r * c)),
            d_apex_d_q_first=self.to_base(side, (-0.5, dr * c, dr * s)),
            d_apex_d_q_second=self.to_base(side, (0.5, dr * c, dr * s)),
            height=r,
            d_height_d_qbar=dr,
        )

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
    def closure(self, q, phi) -> tuple[tuple[float, ...], tuple[tuple[float, float], ...], tuple[SideState, ...]]:
        """gamma (3,), the nonzero entries of dgamma/dphi per row and the side states.

        Row k of dgamma/dphi has (d gamma_k / d phi_i, d gamma_k / d phi_j) for (i, j) = SIDE_PAIRS[k].
        """
        sides = tuple(self.side_state(i, q[2 * i], q[2 * i + 1], phi[i]) for i in range(3))
        half_lp2 = 0.5 * self.platform_side**2
        gamma = []
        rows = []
        for i, j in SIDE_PAIRS:
            edge = _sub(sides[j].apex, sides[i].apex)
            gamma.append(0.5 * _dot(edge, edge) - half_lp2)
            rows.append((-_dot(edge, sides[i].d_apex_d_phi), _dot(edge, sides[j].d_apex_d_phi)))
        return tuple(gamma), tuple(rows), sides

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
        if scale == 0.0 or abs(det) <= 1e-14 * scale:
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
