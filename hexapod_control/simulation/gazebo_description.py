"""Gazebo Sim description of the Hexapod (URDF + ``<gazebo>`` tags), generated from the parameters.

Pure Python (numpy, no ROS imports): ``python -m hexapod_control.simulation.gazebo_description --params
config/hexapod.yaml --output hexapod.urdf`` writes the robot; ``--controllers`` and ``--world``
write the ros2_control controllers file and the world. ``launch/gazebo.launch.py`` calls the same
functions, so nothing generated needs to be committed except ``config/gz_ros2_controllers.yaml``
(marked generated; a test regenerates it).

Spanning tree (URDF cannot hold loops, and neither can Gazebo's DART wrapper: see below)
--------------------------------------------------------------------------------------
Every link frame is the body frame of doc/model.md (the table of the 25 bodies), so each
``<inertial>`` is diagonal with ``rpy="0 0 0"`` and its ``xyz`` is the table's centre of mass.
Chain k = 2i + j of side i (j = 0: q[2i], j = 1: q[2i+1]):

    world --slider_k (prismatic, along -X_Ti for j = 0, +X_Ti for j = 1; value = q_k)--> pu_part1_k
          --pu_phi_k (about X_Ti)--> pu_part2_k --pu_psi_k (about the leg-plane normal)--> leg_k
    leg_k --s_pin_k (about the leg-plane normal, at P_i)--> s_part1_i_leg_k

Side 0 carries the platform: s_part1_0_leg_0 --s_theta2_0 (Y)--> s_part2_0 --s_theta3_0 (Z)-->
platform (the thesis' N convention (6.68): R_F = R_Ti Rx(phi_i) N Rx(theta1) Ry(theta2) Rz(theta3);
theta1 is the pin about the leg-plane normal). Sides 1 and 2 hang from the platform in reverse:
platform --s_theta3_i (-Z)--> s_part2_i --s_theta2_i (-Y)--> s_part1_i_platform.

S part 1 of every side is therefore split into shards that share its centre of mass and axes (one
on each leg tip, plus one on the platform chain for sides 1 and 2); their masses and principal
moments are equal fractions of the body's, so their sum is exactly the body. The five loops are
closed by welding the shards of each S part 1 together (five fixed joints):

    side 0: s_part1_0_leg_0 == s_part1_0_leg_1
    side i = 1, 2: s_part1_i_platform == s_part1_i_leg_2i  and  == s_part1_i_leg_2i+1

Loop closure in Gazebo Sim
--------------------------
gz-physics' DART wrapper refuses an SDF joint whose child already has a parent ("Asked to create a
closed kinematic chain ... not supported by the dartsim wrapper yet"), so a ``<joint type="ball">``
between links of one model does not close a loop there. What it does support (gz-physics >= 6,
gazebosim/gz-physics#352) is ``AttachFixedJoint`` on a child that already has a parent: it splits
the child into two bodies (halving its inertia between them), welds the mirror to the parent and
holds the two halves together with a DART WeldJointConstraint. gz-sim's DetachableJoint system
reaches it with ``<child_model>__model__</child_model>`` (a link of the same model). Hence fixed
joints only, between shards of one rigid body. Caveats, all documented upstream:

* The weld keeps the relative pose of the two links *at the moment it is created* (gz-sim
  Physics.cc: poseParent.inverse() * poseChild). So the model must be assembled then. Every passive
  joint is zero in the assembled home pose (origins carry the home angles); the sliders' zero is
  B_i (their value is q, as /joint_states must report) and gz_ros2_control moves them to
  ``home_actuator_position`` with ``initial_value`` (a JointPositionReset, applied while the
  plugin configures, before the DetachableJoint systems' first PreUpdate). The launch file starts
  the world paused and unpauses once the controllers' activation is requested (they can only
  switch while time advances), so no step happens before the welds.
* Each leg pair is a planar loop closed by a six-row weld of which only four rows are
  independent (both pins are about the same normal): redundant constraints, which an iterative
  solver handles and a pivoting LCP (DART's default Dantzig) may not. The world selects PGS.
* The weld is a soft constraint solved per step (error reduction): loops hold to the solver
  tolerance, not exactly; DART splits the child link's inertia once more between the two halves.

Everything numeric comes from the parameters: geometry, masses, inertias, limits, gravity, rates.
"""

from __future__ import annotations

import argparse
import math
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hexapod_control.conventions import TOPICS
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.kinematics import SIDE_ANGLES_DEG, ClosedChainKinematics, ForwardKinematicsResult
from hexapod_control.model.parameters import HexapodParameters, RigidBody, RosNames, load_parameters
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.options import add_params

# sdformat treats a URDF link of this name as the world: joints to it anchor the model. The base
# has no mass in the parameters, and sdformat drops massless links together with their child
# joints, so the sliders hang from the world and the base frame is a frame (a massless leaf).
WORLD_LINK = "world"
MODEL_NAME = "hexapod"
WORLD_NAME = "hexapod"
# The S-joint frame change of the thesis (6.68): N e_x = Z_C, N e_y = X_C, N e_z = Y_C.
N_MATRIX = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
PLATFORM_SIDE = 0  # the side whose S joint carries the platform in the tree

GZ_ROS2_CONTROL_FILENAME = "gz_ros2_control-system"
GZ_ROS2_CONTROL_PLUGIN = "gz_ros2_control::GazeboSimROS2ControlPlugin"
GZ_HARDWARE_PLUGIN = "gz_ros2_control/GazeboSimSystem"
DETACHABLE_JOINT_FILENAME = "gz-sim-detachable-joint-system"
DETACHABLE_JOINT_PLUGIN = "gz::sim::systems::DetachableJoint"
EFFORT_CONTROLLER = "effort_controller"
EFFORT_CONTROLLER_TYPE = "effort_controllers/JointGroupEffortController"
JOINT_STATE_BROADCASTER = "joint_state_broadcaster"
JOINT_STATE_BROADCASTER_TYPE = "joint_state_broadcaster/JointStateBroadcaster"
STATE_INTERFACES = ("position", "velocity")
COMMAND_INTERFACE = "effort"
GENERATED_HEADER = "GENERATED by `python -m hexapod_control.simulation.gazebo_description`: do not edit"


# ------------------------------------------------------------------------------------ rotations
def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def side_rotation(side: int) -> np.ndarray:
    """R_Ti = Rz(beta_i)."""
    return rot_z(math.radians(SIDE_ANGLES_DEG[side]))


def rpy_from_matrix(rotation: np.ndarray) -> tuple[float, float, float]:
    """URDF (roll, pitch, yaw) with R = Rz(yaw) Ry(pitch) Rx(roll).

    At pitch = +-pi/2 (the N matrix sits exactly there) only roll -+ yaw is defined: roll = 0.
    """
    r = np.asarray(rotation, dtype=float)
    pitch = math.atan2(-r[2, 0], math.hypot(r[0, 0], r[1, 0]))
    if math.hypot(r[0, 0], r[1, 0]) < 1e-12:
        return 0.0, pitch, math.atan2(-r[0, 1], r[1, 1])
    return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])


def euler_xyz(rotation: np.ndarray) -> tuple[float, float, float]:
    """(a, b, c) with R = Rx(a) Ry(b) Rz(c): the S-joint angles theta1..3 of (6.69)."""
    r = np.asarray(rotation, dtype=float)
    b = math.atan2(r[0, 2], math.hypot(r[0, 0], r[0, 1]))
    return math.atan2(-r[1, 2], r[2, 2]), b, math.atan2(-r[0, 1], r[0, 0])


# ------------------------------------------------------------------------------------ configuration
@dataclass(frozen=True)
class ThesisAngles:
    """Passive variables of the thesis for one actuator vector q (physical assembly mode)."""

    q: np.ndarray  # (6,) [m]
    phi: np.ndarray  # (3,) tilt of each leg pair about its side [rad]
    psi: np.ndarray  # (6,) leg angle about the leg-plane normal: -alpha_i (k = 2i), +alpha_i (k = 2i+1)
    theta: np.ndarray  # (3, 3) S-joint XYZ angles theta1..3 of each side (6.69)
    position: np.ndarray  # r_F (3,)
    rotation: np.ndarray  # 0R_F (3, 3)


def thesis_angles(parameters: HexapodParameters, q: Sequence[float] | None = None) -> ThesisAngles:
    """phi, psi = -+alpha and the S-joint angles for q (default: home), from the model's FK."""
    model = HexapodModel(parameters)  # a fresh model: FK tracks the physical mode from home
    q = model.home_q if q is None else np.asarray(q, dtype=float)
    return assembled_angles(model.kinematics.chains, q, model.forward_kinematics(q))


def assembled_angles(chains: ClosedChainKinematics, q: Sequence[float], fk: ForwardKinematicsResult) -> ThesisAngles:
    """The passive variables for q given its forward kinematics ``fk`` (whose mode they follow)."""
    q = np.asarray(q, dtype=float)
    psi, theta = np.zeros(6), np.zeros((3, 3))
    for side in range(3):
        qbar = q[2 * side] + q[2 * side + 1]
        height = chains.height(qbar)  # r_CP
        alpha = math.atan2(0.5 * qbar, height)  # sin = qbar / 2L, cos = r_CP / L (erratum 5)
        psi[2 * side], psi[2 * side + 1] = -alpha, alpha
        chain = N_MATRIX.T @ rot_x(fk.phi[side]).T @ side_rotation(side).T @ fk.rotation
        theta[side] = euler_xyz(chain)
    return ThesisAngles(q=np.array(q), phi=np.array(fk.phi), psi=psi, theta=theta,
                        position=np.array(fk.position), rotation=np.array(fk.rotation))


# ------------------------------------------------------------------------------------ the tree
@dataclass(frozen=True)
class Link:
    name: str
    body: str | None = None  # key of params.bodies; None for a massless frame
    fraction: float = 1.0  # share of the body's mass and principal moments carried by this link
    com: tuple[float, float, float] = (0.0, 0.0, 0.0)  # centre of mass in the link (= body) frame


@dataclass(frozen=True)
class Joint:
    name: str
    type: str  # prismatic | continuous | fixed
    parent: str
    child: str
    xyz: tuple[float, float, float]
    rotation: np.ndarray = field(compare=False)  # origin rotation: child frame at value 0 in parent
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    # value = thesis variable - home_offset (passive joints); = q for the sliders
    home_value: float = 0.0


@dataclass(frozen=True)
class Weld:
    """A loop closure: DetachableJoint (fixed) between two shards of one rigid body."""

    name: str
    parent: str
    child: str


@dataclass(frozen=True)
class Description:
    links: tuple[Link, ...]
    joints: tuple[Joint, ...]
    welds: tuple[Weld, ...]
    names: RosNames
    home: ThesisAngles
    body_links: Mapping[str, tuple[str, ...]]  # thesis body -> its links (shards); 25 entries


def pu1_link(k): return f"pu_part1_{k}"  # noqa: E704 - one-line name helpers
def pu2_link(k): return f"pu_part2_{k}"  # noqa: E704
def leg_link(k): return f"leg_{k}"  # noqa: E704
def s1_leg_link(side, k): return f"s_part1_{side}_leg_{k}"  # noqa: E704
def s1_platform_link(side): return f"s_part1_{side}_platform"  # noqa: E704
def s2_link(side): return f"s_part2_{side}"  # noqa: E704


PLATFORM_LINK = "platform"


def build_description(parameters: HexapodParameters) -> Description:
    """The spanning tree, welds and home values; see the module docstring."""
    g = parameters.geometry
    names = parameters.ros
    home = thesis_angles(parameters)
    apexes = np.array(ClosedChainKinematics(parameters).platform_apexes)  # P_i - centroid, in F
    leg = g.leg_length
    tip = (0.0, leg, 0.0)  # P_i in the leg frame (leg along +Y)
    identity = np.eye(3)
    links: list[Link] = []
    joints: list[Joint] = []
    welds: list[Weld] = []
    body_links: dict[str, tuple[str, ...]] = {}

    links.append(Link(WORLD_LINK))
    links.append(Link(names.base_frame))
    joints.append(Joint(f"{names.base_frame}_fixed", "fixed", WORLD_LINK, names.base_frame,
                        (0.0, 0.0, 0.0), identity))
    for side in range(3):
        midpoint = side_rotation(side) @ np.array([0.0, g.side_offset, 0.0])  # B_i
        # S part 1 shards: one per leg tip, plus one on the platform chain for sides 1 and 2.
        shard_names = [s1_leg_link(side, 2 * side + j) for j in range(2)]
        if side != PLATFORM_SIDE:
            shard_names.append(s1_platform_link(side))
        fraction = 1.0 / len(shard_names)
        body_links[f"s_part1_{side}"] = tuple(shard_names)
        for j in range(2):
            k = 2 * side + j
            direction = -1.0 if j == 0 else 1.0  # D_2i = B_i - q X_Ti, D_2i+1 = B_i + q X_Ti
            links += [
                Link(pu1_link(k), "pu_part1", com=(0.0, 0.0, -g.pu_part1_com_offset)),
                Link(pu2_link(k), "pu_part2"),
                Link(leg_link(k), "leg", com=(0.0, 0.5 * leg, 0.0)),
                Link(shard_names[j], "s_part1", fraction),
            ]
            body_links[f"pu_part1_{k}"] = (pu1_link(k),)
            body_links[f"pu_part2_{k}"] = (pu2_link(k),)
            body_links[f"leg_{k}"] = (leg_link(k),)
            psi0 = home.psi[k]
            pin0 = home.theta[side, 0] - psi0  # leg -> S part 1 is N Rx(theta1 - psi)
            joints += [
                Joint(names.joint_names[k], "prismatic", WORLD_LINK, pu1_link(k), tuple(midpoint),
                      side_rotation(side), (direction, 0.0, 0.0), home.q[k]),
                Joint(f"pu_phi_{k}", "continuous", pu1_link(k), pu2_link(k), (0.0, 0.0, 0.0),
                      rot_x(home.phi[side]), (1.0, 0.0, 0.0)),
                Joint(f"pu_psi_{k}", "continuous", pu2_link(k), leg_link(k), (0.0, 0.0, 0.0),
                      rot_z(psi0), (0.0, 0.0, 1.0)),
                Joint(f"s_pin_{k}", "continuous", leg_link(k), shard_names[j], tip,
                      N_MATRIX @ rot_x(pin0), (1.0, 0.0, 0.0)),
            ]
        body_links[f"s_part2_{side}"] = (s2_link(side),)
        _, theta2, theta3 = home.theta[side]  # theta1 is the pin's angle, set above
        s2 = Link(s2_link(side), "s_part2", com=(0.0, 0.0, g.s_part2_com_offset))  # P_i + l_c2 z_F
        if side == PLATFORM_SIDE:
            links += [s2, Link(PLATFORM_LINK, "platform",
                               com=tuple(-apexes[side] + np.array([0.0, 0.0, g.platform_com_offset])))]
            joints += [
                Joint(f"s_theta2_{side}", "continuous", shard_names[0], s2_link(side), (0.0, 0.0, 0.0),
                      rot_y(theta2), (0.0, 1.0, 0.0)),
                Joint(f"s_theta3_{side}", "continuous", s2_link(side), PLATFORM_LINK, (0.0, 0.0, 0.0),
                      rot_z(theta3), (0.0, 0.0, 1.0)),
            ]
            welds.append(Weld(f"loop_{side}_leg_{2 * side + 1}", shard_names[0], shard_names[1]))
        else:
            links += [s2, Link(s1_platform_link(side), "s_part1", fraction)]
            # Reversed: s2 = R_F Rz(-theta3), s1 = s2 Ry(-theta2); negative axes keep value = angle - home.
            joints += [
                Joint(f"s_theta3_{side}", "continuous", PLATFORM_LINK, s2_link(side),
                      tuple(apexes[side] - apexes[PLATFORM_SIDE]), rot_z(-theta3), (0.0, 0.0, -1.0)),
                Joint(f"s_theta2_{side}", "continuous", s2_link(side), s1_platform_link(side),
                      (0.0, 0.0, 0.0), rot_y(-theta2), (0.0, -1.0, 0.0)),
            ]
            welds += [Weld(f"loop_{side}_leg_{k}", s1_platform_link(side), s1_leg_link(side, k))
                      for k in (2 * side, 2 * side + 1)]
    body_links["platform"] = (PLATFORM_LINK,)
    links.append(Link(names.platform_frame))
    joints.append(Joint(f"{names.platform_frame}_fixed", "fixed", PLATFORM_LINK, names.platform_frame,
                        tuple(-apexes[PLATFORM_SIDE] + np.array([0.0, 0.0, g.platform_offset])), identity))
    return Description(tuple(links), tuple(joints), tuple(welds), names, home, body_links)


def joint_positions(parameters: HexapodParameters, q: Sequence[float] | None = None) -> dict[str, float]:
    """URDF joint values (movable joints) that assemble the robot at q (default: home).

    Sliders: q. Passive joints: thesis angle minus its home value (zero at home), wrapped.
    """
    home = thesis_angles(parameters)
    return joint_values(parameters.ros, home, home if q is None else thesis_angles(parameters, q))


def joint_values(names: RosNames, home: ThesisAngles, now: ThesisAngles) -> dict[str, float]:
    """URDF joint values (movable joints) that assemble the robot in the configuration ``now``.

    ``home``: the configuration the joint origins carry (``Description.home``), where the passive
    joints are zero.
    """
    values: dict[str, float] = {}
    for side in range(3):
        for j in range(2):
            k = 2 * side + j
            values[names.joint_names[k]] = float(now.q[k])
            values[f"pu_phi_{k}"] = wrap_angle(now.phi[side] - home.phi[side])
            values[f"pu_psi_{k}"] = wrap_angle(now.psi[k] - home.psi[k])
            values[f"s_pin_{k}"] = wrap_angle((now.theta[side, 0] - now.psi[k]) - (home.theta[side, 0] - home.psi[k]))
        values[f"s_theta2_{side}"] = wrap_angle(now.theta[side, 1] - home.theta[side, 1])
        values[f"s_theta3_{side}"] = wrap_angle(now.theta[side, 2] - home.theta[side, 2])
    return values


# ------------------------------------------------------------------------------------ XML
def _num(value: float) -> str:
    return repr(float(value))


def _vec(values) -> str:
    return " ".join(_num(v) for v in values)


def _inertial(parent: ET.Element, link: Link, parameters: HexapodParameters) -> None:
    body: RigidBody = getattr(parameters.bodies, link.body)
    inertial = ET.SubElement(parent, "inertial")
    # The link frame is the body frame of the table, where the inertia is diagonal: rpy = 0.
    ET.SubElement(inertial, "origin", xyz=_vec(link.com), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_num(link.fraction * body.mass))
    ixx, iyy, izz = (link.fraction * m for m in body.inertia)
    ET.SubElement(inertial, "inertia", ixx=_num(ixx), ixy="0", ixz="0", iyy=_num(iyy), iyz="0", izz=_num(izz))


def build_urdf(parameters: HexapodParameters, controllers_file: str | Path | None,
               description: Description | None = None) -> str:
    """URDF text: links, joints, <ros2_control>, the gz_ros2_control plugin and the loop welds.

    ``controllers_file``: path written into the gz_ros2_control plugin's <parameters>; None gives
    the plain description (links and joints only), for robot_state_publisher outside Gazebo.
    """
    d = description or build_description(parameters)
    limits = parameters.limits
    robot = ET.Element("robot", name=MODEL_NAME)
    robot.append(ET.Comment(f" {GENERATED_HEADER} (from {parameters.source}) "))
    for link in d.links:
        element = ET.SubElement(robot, "link", name=link.name)
        if link.body is not None:
            _inertial(element, link, parameters)
    for joint in d.joints:
        element = ET.SubElement(robot, "joint", name=joint.name, type=joint.type)
        ET.SubElement(element, "parent", link=joint.parent)
        ET.SubElement(element, "child", link=joint.child)
        ET.SubElement(element, "origin", xyz=_vec(joint.xyz), rpy=_vec(rpy_from_matrix(joint.rotation)))
        if joint.type != "fixed":
            ET.SubElement(element, "axis", xyz=_vec(joint.axis))
        if joint.type == "prismatic":
            ET.SubElement(element, "limit", lower=_num(limits.actuator_position_min),
                          upper=_num(limits.actuator_position_max),
                          effort=_num(limits.actuator_force_max), velocity=_num(limits.actuator_speed_max))
    if controllers_file is not None:
        _add_gazebo_elements(robot, parameters, d, controllers_file)
    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"


def _add_gazebo_elements(robot: ET.Element, parameters: HexapodParameters, d: Description,
                         controllers_file: str | Path) -> None:
    """<ros2_control> (GazeboSimSystem), the gz_ros2_control plugin and the DetachableJoint welds."""
    limits = parameters.limits
    control = ET.SubElement(robot, "ros2_control", name="GazeboSimSystem", type="system")
    ET.SubElement(ET.SubElement(control, "hardware"), "plugin").text = GZ_HARDWARE_PLUGIN
    for k, name in enumerate(d.names.joint_names):
        joint = ET.SubElement(control, "joint", name=name)
        command = ET.SubElement(joint, "command_interface", name=COMMAND_INTERFACE)
        ET.SubElement(command, "param", name="min").text = _num(-limits.actuator_force_max)
        ET.SubElement(command, "param", name="max").text = _num(limits.actuator_force_max)
        # initial_value becomes a JointPositionReset: the sliders start at home, where the passive
        # joints' zero values assemble the loops before the welds are created.
        initial = {"position": d.home.q[k], "velocity": 0.0}
        for interface in STATE_INTERFACES:
            state = ET.SubElement(joint, "state_interface", name=interface)
            ET.SubElement(state, "param", name="initial_value").text = _num(initial[interface])

    gazebo = ET.SubElement(robot, "gazebo")
    plugin = ET.SubElement(gazebo, "plugin", filename=GZ_ROS2_CONTROL_FILENAME, name=GZ_ROS2_CONTROL_PLUGIN)
    ET.SubElement(plugin, "parameters").text = str(controllers_file)
    for weld in d.welds:
        gazebo = ET.SubElement(robot, "gazebo")
        plugin = ET.SubElement(gazebo, "plugin", filename=DETACHABLE_JOINT_FILENAME, name=DETACHABLE_JOINT_PLUGIN)
        ET.SubElement(plugin, "parent_link").text = weld.parent
        ET.SubElement(plugin, "child_model").text = "__model__"  # a link of this same model
        ET.SubElement(plugin, "child_link").text = weld.child
        # Several DetachableJoints in one model need their own topics, or one message detaches all.
        for topic in ("detach_topic", "attach_topic", "output_topic"):
            ET.SubElement(plugin, topic).text = f"/model/{MODEL_NAME}/{weld.name}/{topic.split('_')[0]}"


def controller_rate(parameters: HexapodParameters) -> int:
    """controller_manager update_rate [Hz] = ``controllers.rate`` (a whole number, checked at load)."""
    return round(parameters.controllers.rate)


def physics_rate(parameters: HexapodParameters) -> float:
    return parameters.simulation.rate


def build_controllers_yaml(parameters: HexapodParameters) -> str:
    """controller_manager, joint_state_broadcaster and effort_controller (ros2_control params)."""
    joints = list(parameters.ros.joint_names)
    command_topic = f"/{EFFORT_CONTROLLER}/commands"
    if command_topic != TOPICS["effort_commands"]:  # the controller node publishes there
        raise ValueError(f"{command_topic} != {TOPICS['effort_commands']}")
    joint_list = ", ".join(joints)
    return "\n".join([
        f"# {GENERATED_HEADER}",
        "#   python -m hexapod_control.simulation.gazebo_description --controllers config/gz_ros2_controllers.yaml",
        "# Joints and rate come from the parameters file (ros.joint_names, controllers.rate).",
        "controller_manager:",
        "  ros__parameters:",
        f"    update_rate: {controller_rate(parameters)}  # [Hz] controllers.rate",
        f"    {JOINT_STATE_BROADCASTER}:",
        f"      type: {JOINT_STATE_BROADCASTER_TYPE}",
        f"    {EFFORT_CONTROLLER}:",
        f"      type: {EFFORT_CONTROLLER_TYPE}",
        "",
        f"{JOINT_STATE_BROADCASTER}:",
        "  ros__parameters:",
        f"    joints: [{joint_list}]",
        f"    interfaces: [{', '.join(STATE_INTERFACES)}]",
        "",
        # Its command topic is /effort_controller/commands: data = forces [N] in this joint order.
        f"{EFFORT_CONTROLLER}:",
        "  ros__parameters:",
        f"    joints: [{joint_list}]",
        "",
    ])


def build_world_sdf(parameters: HexapodParameters) -> str:
    """An empty world: physics step 1/simulation.rate, the parameters' gravity, DART with PGS."""
    sdf = ET.Element("sdf", version="1.9")
    sdf.append(ET.Comment(f" {GENERATED_HEADER} (from {parameters.source}) "))
    world = ET.SubElement(sdf, "world", name=WORLD_NAME)
    physics = ET.SubElement(world, "physics", name="plant_rate", type="dart")
    ET.SubElement(physics, "max_step_size").text = _num(1.0 / physics_rate(parameters))
    ET.SubElement(physics, "real_time_factor").text = "1"
    # PGS: the leg-pair welds carry redundant rows (see the module docstring).
    solver = ET.SubElement(ET.SubElement(ET.SubElement(physics, "dart"), "solver"), "solver_type")
    solver.text = "pgs"
    ET.SubElement(world, "gravity").text = _vec((0.0, 0.0, -parameters.gravity))
    for filename, name in (("gz-sim-physics-system", "gz::sim::systems::Physics"),
                           ("gz-sim-user-commands-system", "gz::sim::systems::UserCommands"),
                           ("gz-sim-scene-broadcaster-system", "gz::sim::systems::SceneBroadcaster")):
        ET.SubElement(world, "plugin", filename=filename, name=name)
    ET.indent(sdf)
    return '<?xml version="1.0"?>\n' + ET.tostring(sdf, encoding="unicode") + "\n"


# ------------------------------------------------------------------------------------ command line
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hexapod_gazebo_description", description=__doc__.splitlines()[0])
    add_params(parser, help="parameters file (default: the shipped config/hexapod.yaml)")
    parser.add_argument("--output", default="-", help="URDF file to write ('-' = stdout)")
    parser.add_argument("--controllers", help="also write the ros2_control controllers YAML here")
    parser.add_argument("--controllers-path", help="path written into the URDF's gz_ros2_control "
                        "<parameters> (default: --controllers, else config/gz_ros2_controllers.yaml)")
    parser.add_argument("--world", help="also write the Gazebo world SDF here")
    parser.add_argument("--plain", action="store_true",
                        help="links and joints only (no ros2_control or Gazebo elements), e.g. for RViz")
    args = parser.parse_args(argv)
    parameters = load_parameters(args.params)
    if args.controllers:
        Path(args.controllers).write_text(build_controllers_yaml(parameters))
    if args.world:
        Path(args.world).write_text(build_world_sdf(parameters))
    default_controllers = Path(__file__).resolve().parents[2] / "config" / "gz_ros2_controllers.yaml"
    controllers_path = args.controllers_path or (
        str(Path(args.controllers).resolve()) if args.controllers else str(default_controllers))
    urdf = build_urdf(parameters, None if args.plain else controllers_path)
    if args.output == "-":
        sys.stdout.write(urdf)
    else:
        Path(args.output).write_text(urdf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
