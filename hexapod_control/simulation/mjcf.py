"""MJCF model of the Hexapod's 25 bodies, built from a :class:`HexapodParameters` object.

Independent of the project's dynamics: the MuJoCo model only knows the bodies (mass, centre of
mass, inertia in the frames of doc/model.md), the joints and the loop closures, and
MuJoCo derives the dynamics itself.

Spanning tree and loop closures
-------------------------------
Chain k = 2i + j of side i (j = 0: actuator q[2i], j = 1: actuator q[2i+1]) hangs from the base:

    slider_k    (PU part 1)  slide joint along -X_Ti (j = 0) or +X_Ti (j = 1); qpos = q_k, so the
                             body origin sits at D_k and the motor force is the force along +q_k.
    pu2_k       (PU part 2)  hinge about X_Ti at D_k; qpos = phi_i.         frame R_Ti Rx(phi_i)
    leg_k                    hinge about the leg-plane normal at D_k;       frame R_Ti Rx(phi_i) Rz(psi)
                             qpos = psi = -alpha_i (j = 0) or +alpha_i (j = 1), leg along +Y to P_i.

The first leg of every side (k = 2i) carries the spherical joint as three hinges (the thesis'
N convention, (6.68)): R_F = R_Ti Rx(phi_i) N Rx(theta1) Ry(theta2) Rz(theta3).

    s1_i        (S part 1)   hinge about the leg-plane normal at P_i; qpos = theta1_i - psi = theta1_i + alpha_i
    s2_i        (S part 2)   hinge about Y of s1; qpos = theta2_i
    platform_i               hinge about z_F; qpos = theta3_i.               frame R_F, origin P_i

The platform is split into three equal shards (one third of the mass and of each principal
moment, same centre of mass and axes), one at the end of each side's S joint, so the sum is
exactly the platform's rigid body. Closing the loops then needs no ball joint inside a loop:

    connect  tip of leg_{2i+1}  ==  tip of leg_{2i}             (3 rows each, sides 0..2)
    weld     platform_1, platform_2  ==  platform_0             (6 rows each)

27 joints - 21 independent equality rows = 6 degrees of freedom, the six actuators. The equalities
are site-based, so they hold between the named points whatever the model's reference pose qpos0.

Drives (``actuators``): MuJoCo's own joint attributes on each slider, ``armature`` (the reflected
inertia, added to the slider's diagonal of MuJoCo's mass matrix), ``damping`` (viscous friction)
and ``frictionloss`` (dry friction, enforced by MuJoCo's constraint solver: not the model's tanh
law, so the plant stays an independent check; it has no separate static friction). They are
written only when nonzero, so a rigid-body parameter set gives the same text as without drives.
A lead screw's asymmetry, Stribeck hump and ripple are forces the plant applies (mujoco_plant.py).
"""

from __future__ import annotations

import math

import numpy as np

from hexapod_control.model.kinematics import SIDE_ANGLES_DEG, ClosedChainKinematics
from hexapod_control.model.parameters import HexapodParameters, RigidBody

# The S-joint frame change of the thesis (C_i R_N_i in (6.68)): N e_x = Z_C, N e_y = X_C, N e_z = Y_C.
N_MATRIX = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
PLATFORM_SHARDS = 3  # one per spherical joint


# ---------------------------------------------------------------------- names
def slider_joint(k: int) -> str:
    return f"q{k}"


def phi_joint(k: int) -> str:
    return f"phi_{k}"


def leg_joint(k: int) -> str:
    return f"psi_{k}"


def s_joint(side: int, axis: int) -> str:
    """theta1 (axis 1), theta2 (axis 2), theta3 (axis 3) of side ``side``'s spherical joint."""
    return f"theta{axis}_{side}"


def leg_tip_site(k: int) -> str:
    return f"tip_{k}"


def platform_apex_site(shard: int, apex: int) -> str:
    return f"platform_{shard}_apex_{apex}"


BODY_GROUPS = {
    "platform": tuple(f"platform_{i}" for i in range(PLATFORM_SHARDS)),
    "leg": tuple(f"leg_{k}" for k in range(6)),
    "pu_part1": tuple(f"slider_{k}" for k in range(6)),
    "pu_part2": tuple(f"pu2_{k}" for k in range(6)),
    "s_part1": tuple(f"s1_{i}" for i in range(3)),
    "s_part2": tuple(f"s2_{i}" for i in range(3)),
}
ACTUATOR_NAMES = tuple(f"motor_{k}" for k in range(6))


# ---------------------------------------------------------------------- geometry helpers
def rot_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def side_rotation(side: int) -> np.ndarray:
    """R_Ti = Rz(beta_i)."""
    return rot_z(math.radians(SIDE_ANGLES_DEG[side]))


def quaternion(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation matrix (Shepperd's method, branch on the trace)."""
    r = np.asarray(rotation, dtype=float)
    trace = np.trace(r)
    if trace > 0.0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k])
        q = [0.0] * 4
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    q = np.array(q)
    return q / np.linalg.norm(q)


def _fmt(values) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(values))


def _inertial(body: RigidBody, pos, mass_fraction: float = 1.0) -> str:
    """<inertial> with the principal moments diagonal in the body frame (the table's convention)."""
    moments = [mass_fraction * m for m in body.inertia]
    return (
        f'<inertial pos="{_fmt(pos)}" quat="1 0 0 0" mass="{mass_fraction * body.mass!r}" '
        f'diaginertia="{_fmt(moments)}"/>'
    )


def platform_apexes_local(parameters: HexapodParameters) -> np.ndarray:
    """Rows P_0, P_1, P_2 in Sigma_F axes, relative to the centroid of the triangle (3, 3)."""
    return np.array(ClosedChainKinematics(parameters).platform_apexes)


# ---------------------------------------------------------------------- the model
def _drive_attributes(parameters: HexapodParameters, k: int) -> str:
    """armature, damping and frictionloss of slider k where nonzero (a leading space, or "")."""
    drives = parameters.actuators
    values = (
        ("armature", drives.reflected_inertia[k]),
        ("damping", drives.viscous_friction[k]),
        ("frictionloss", drives.coulomb_friction[k]),
    )
    attributes = "".join(f' {name}="{float(value)!r}"' for name, value in values if value)
    if drives.coulomb_friction[k]:
        # MuJoCo's dry friction is a soft constraint: below ~ F_c * time constant / mass it acts as a
        # damper. The loop closures' stiff time constant keeps that zone to mm/s, as the model's v_s.
        attributes += f' solreffriction="{_fmt(parameters.simulation.mujoco.equality_solref)}"'
    return attributes


def build_mjcf(parameters: HexapodParameters) -> str:
    """MJCF text of the Hexapod for ``parameters``; see the module docstring for the structure."""
    settings = parameters.simulation.mujoco
    g = parameters.geometry
    b = parameters.bodies
    leg_length = g.leg_length
    apexes = platform_apexes_local(parameters)
    solref = _fmt(settings.equality_solref)
    solimp = _fmt(settings.equality_solimp)
    force_max = parameters.limits.actuator_force_max
    n_quat = _fmt(quaternion(N_MATRIX))

    def platform_shard(side: int, indent: str) -> list[str]:
        # Shard origin at P_side, axes of Sigma_F: the centre of mass is centroid + H* z_F.
        com = -apexes[side] + np.array([0.0, 0.0, g.platform_com_offset])
        lines = [
            f'{indent}<body name="platform_{side}">',
            f'{indent}  <joint name="{s_joint(side, 3)}" type="hinge" axis="0 0 1"/>',
            f"{indent}  {_inertial(b.platform, com, 1.0 / PLATFORM_SHARDS)}",
        ]
        for apex in range(3):
            lines.append(
                f'{indent}  <site name="{platform_apex_site(side, apex)}" '
                f'pos="{_fmt(apexes[apex] - apexes[side])}"/>'
            )
        lines.append(f"{indent}</body>")
        return lines

    body_lines: list[str] = []
    for side in range(3):
        side_quat = _fmt(quaternion(side_rotation(side)))
        midpoint = side_rotation(side) @ np.array([0.0, g.side_offset, 0.0])  # B_i
        for j in range(2):
            k = 2 * side + j
            direction = -1.0 if j == 0 else 1.0  # D_2i lies at -q X_Ti from B_i, D_2i+1 at +q X_Ti
            ind = "    "
            body_lines += [
                f'{ind}<body name="slider_{k}" pos="{_fmt(midpoint)}" quat="{side_quat}">',
                f'{ind}  <joint name="{slider_joint(k)}" type="slide" axis="{_fmt([direction, 0.0, 0.0])}"'
                f"{_drive_attributes(parameters, k)}/>",
                f"{ind}  {_inertial(b.pu_part1, [0.0, 0.0, -g.pu_part1_com_offset])}",
                f'{ind}  <body name="pu2_{k}">',
                f'{ind}    <joint name="{phi_joint(k)}" type="hinge" axis="1 0 0"/>',
                f"{ind}    {_inertial(b.pu_part2, [0.0, 0.0, 0.0])}",
                f'{ind}    <body name="leg_{k}">',
                f'{ind}      <joint name="{leg_joint(k)}" type="hinge" axis="0 0 1"/>',
                f"{ind}      {_inertial(b.leg, [0.0, 0.5 * leg_length, 0.0])}",
                f'{ind}      <site name="{leg_tip_site(k)}" pos="{_fmt([0.0, leg_length, 0.0])}"/>',
            ]
            if j == 0:
                inner = ind + "      "
                body_lines += [
                    # S part 1: frame R_Ti Rx(phi) N Rx(theta1) = leg frame Rz(-psi) N Rx(theta1)
                    # = leg frame N Rx(theta1 - psi): body quat N, hinge about its own X.
                    f'{inner}<body name="s1_{side}" pos="{_fmt([0.0, leg_length, 0.0])}" quat="{n_quat}">',
                    f'{inner}  <joint name="{s_joint(side, 1)}" type="hinge" axis="1 0 0"/>',
                    f"{inner}  {_inertial(b.s_part1, [0.0, 0.0, 0.0])}",
                    f'{inner}  <body name="s2_{side}">',
                    f'{inner}    <joint name="{s_joint(side, 2)}" type="hinge" axis="0 1 0"/>',
                    # z of S part 2 is z_F (R_F = R_s2 Rz(theta3)): centre of mass P_i + l_c2 z_F.
                    f"{inner}    {_inertial(b.s_part2, [0.0, 0.0, g.s_part2_com_offset])}",
                    *platform_shard(side, inner + "    "),
                    f"{inner}  </body>",
                    f"{inner}</body>",
                ]
            body_lines += [f"{ind}    </body>", f"{ind}  </body>", f"{ind}</body>"]

    equality_lines = [
        f'    <connect name="apex_{side}" site1="{leg_tip_site(2 * side + 1)}" '
        f'site2="{leg_tip_site(2 * side)}" solref="{solref}" solimp="{solimp}"/>'
        for side in range(3)
    ] + [
        f'    <weld name="platform_{shard}" site1="{platform_apex_site(shard, shard)}" '
        f'site2="{platform_apex_site(0, shard)}" solref="{solref}" solimp="{solimp}"/>'
        for shard in range(1, PLATFORM_SHARDS)
    ]
    actuator_lines = [
        f'    <motor name="{ACTUATOR_NAMES[k]}" joint="{slider_joint(k)}" gear="1" '
        f'ctrllimited="true" ctrlrange="{-force_max!r} {force_max!r}"/>'
        for k in range(6)
    ]
    return "\n".join(
        [
            '<mujoco model="quanser_hexapod_6_3_pus">',
            # Mass properties come only from <inertial>; no geoms, so no contacts either.
            '  <compiler angle="radian" inertiafromgeom="false" autolimits="true"/>',
            (
                f'  <option timestep="{parameters.simulation.mujoco_timestep!r}" gravity="0 0 {-parameters.gravity!r}" '
                f'integrator="{settings.integrator}" solver="{settings.solver}" '
                f'iterations="{settings.iterations}" tolerance="{settings.tolerance!r}">'
            ),
            '    <flag contact="disable"/>',
            "  </option>",
            "  <worldbody>",
            *body_lines,
            "  </worldbody>",
            "  <equality>",
            *equality_lines,
            "  </equality>",
            "  <actuator>",
            *actuator_lines,
            "  </actuator>",
            "</mujoco>",
        ]
    )
