"""The Gazebo description: XML structure, names, ros2_control, masses and the assembled pose.

Gazebo cannot run here, so the tests check what it would read. The assembled pose is checked with
a forward kinematics of the URDF written below (compose each joint's origin and motion), against
the model's FK and the body table of doc/model.md, computed here from the model's
public geometry and not from the generator's internals.
"""

import importlib.util
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from ros_helpers import launch_arguments

from hexapod_control.conventions import TOPICS
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import load_parameters
from hexapod_control.simulation import gazebo_description as gd

REPO = Path(__file__).resolve().parent.parent
CONTROLLERS_FILE = REPO / "config" / "gz_ros2_controllers.yaml"
LAUNCH_FILE = REPO / "launch" / "gazebo.launch.py"
PARAMETER_FILES = ("hexapod.yaml", "hexapod_validation.yaml")
# Exact assembly up to round-off: 4.6e-16 m and 2.2e-15 worst measured (both files, both poses).
POSITION_TOL = 2e-15  # [m]
ROTATION_TOL = 1e-14
# A pose away from home in every actuator, inside the travel (m).
OTHER_Q = (0.2, 0.15, 0.18, 0.17, 0.19, 0.16)
SIDE_ANGLES = np.radians((-90.0, 30.0, 150.0))  # beta_i of doc/model.md
N = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
BODY_COUNTS = {"platform": 1, "leg": 6, "pu_part1": 6, "pu_part2": 6, "s_part1": 3, "s_part2": 3}


# ------------------------------------------------------------------------------------ helpers
def rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def ry(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def rodrigues(axis, angle):
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def floats(text):
    return np.array([float(v) for v in text.split()])


class Urdf:
    """The parsed URDF: links, joints and a forward kinematics over joint values."""

    def __init__(self, text):
        self.root = ET.fromstring(text)
        self.links = {link.get("name"): link for link in self.root.findall("link")}
        self.joints = {joint.get("name"): joint for joint in self.root.findall("joint")}
        self.child_joint = {j.find("child").get("link"): j for j in self.root.findall("joint")}

    def poses(self, values):
        """World pose (R, p) of every link for joint values (missing movable joints: 0)."""
        poses = {}

        def pose(link):
            if link in poses:
                return poses[link]
            joint = self.child_joint.get(link)
            if joint is None:
                poses[link] = (np.eye(3), np.zeros(3))
                return poses[link]
            parent_r, parent_p = pose(joint.find("parent").get("link"))
            origin = joint.find("origin")
            roll, pitch, yaw = floats(origin.get("rpy"))
            r = parent_r @ rz(yaw) @ ry(pitch) @ rx(roll)
            p = parent_p + parent_r @ floats(origin.get("xyz"))
            value = values.get(joint.get("name"), 0.0)
            kind = joint.get("type")
            if kind in ("revolute", "continuous"):
                r = r @ rodrigues(floats(joint.find("axis").get("xyz")), value)
            elif kind == "prismatic":
                p = p + r @ (value * floats(joint.find("axis").get("xyz")))
            else:
                assert kind == "fixed", kind
            poses[link] = (r, p)
            return poses[link]

        for name in self.links:
            pose(name)
        return poses

    def inertial(self, link):
        """(mass, inertia tensor in the link frame, centre of mass in the link frame) or None."""
        element = self.links[link].find("inertial")
        if element is None:
            return None
        origin = element.find("origin")
        roll, pitch, yaw = floats(origin.get("rpy"))
        frame = rz(yaw) @ ry(pitch) @ rx(roll)
        i = element.find("inertia")
        ixy, ixz, iyz = (float(i.get(name)) for name in ("ixy", "ixz", "iyz"))
        tensor = np.array([[float(i.get("ixx")), ixy, ixz],
                           [ixy, float(i.get("iyy")), iyz],
                           [ixz, iyz, float(i.get("izz"))]])
        return float(element.find("mass").get("value")), frame @ tensor @ frame.T, floats(origin.get("xyz"))

    def welds(self):
        """(parent_link, child_link) of every DetachableJoint loop closure."""
        pairs = []
        for plugin in self.root.iter("plugin"):
            if plugin.get("name") == gd.DETACHABLE_JOINT_PLUGIN:
                assert plugin.findtext("child_model") == "__model__"
                pairs.append((plugin.findtext("parent_link"), plugin.findtext("child_link")))
        return pairs


def body_of(link):
    """Thesis body a link belongs to, from its name (shards of one S part 1 share a body)."""
    for pattern, body in ((r"pu_part1_(\d)$", "pu_part1_{}"), (r"pu_part2_(\d)$", "pu_part2_{}"),
                          (r"leg_(\d)$", "leg_{}"), (r"s_part1_(\d)_", "s_part1_{}"),
                          (r"s_part2_(\d)$", "s_part2_{}"), (r"platform$", "platform")):
        match = re.match(pattern, link)
        if match:
            return body.format(*match.groups())
    return None


def table_frames(parameters, q):
    """Body frame and centre of mass of the 25 bodies (the table of doc/model.md) at q, in Sigma_0."""
    g = parameters.geometry
    model = HexapodModel(parameters)
    fk = model.forward_kinematics(q)
    apex = model.platform_vertices(q, fk.phi)
    slider = model.slider_positions(q)
    z_f = fk.rotation[:, 2]
    frames = {"platform": (fk.rotation, apex.mean(axis=0) + g.platform_com_offset * z_f)}
    for i in range(3):
        side = rz(SIDE_ANGLES[i])
        tilt = side @ rx(fk.phi[i])
        m = N.T @ tilt.T @ fk.rotation  # = Rx(theta1) Ry(theta2) Rz(theta3), (6.69)
        theta1 = math.atan2(-m[1, 2], m[2, 2])
        theta2 = math.asin(m[0, 2])
        qbar = q[2 * i] + q[2 * i + 1]
        alpha = math.asin(qbar / (2 * g.leg_length))
        for j, sign in ((0, -1.0), (1, 1.0)):
            k = 2 * i + j
            frames[f"pu_part1_{k}"] = (side, slider[k] - g.pu_part1_com_offset * np.array([0, 0, 1.0]))
            frames[f"pu_part2_{k}"] = (tilt, slider[k])
            frames[f"leg_{k}"] = (tilt @ rz(sign * alpha), 0.5 * (slider[k] + apex[i]))
        frames[f"s_part1_{i}"] = (tilt @ N @ rx(theta1), apex[i])
        frames[f"s_part2_{i}"] = (tilt @ N @ rx(theta1) @ ry(theta2), apex[i] + g.s_part2_com_offset * z_f)
    return frames, fk, apex, slider


@pytest.fixture(scope="module", params=PARAMETER_FILES)
def setup(request):
    parameters = load_parameters(REPO / "config" / request.param)
    text = gd.build_urdf(parameters, CONTROLLERS_FILE)
    return parameters, Urdf(text), parameters.ros


# ------------------------------------------------------------------------------------ structure
def test_xml_well_formed_and_names_unique(setup):
    _, urdf, _ = setup
    links = [e.get("name") for e in urdf.root.findall("link")]
    joints = [e.get("name") for e in urdf.root.findall("joint")]
    assert len(links) == len(set(links)) and len(joints) == len(set(joints))
    assert not set(links) & set(joints) - {None}


def test_tree_rooted_at_world(setup):
    _, urdf, names = setup
    children = [j.find("child").get("link") for j in urdf.joints.values()]
    assert len(children) == len(set(children)), "a link with two parents is a loop URDF cannot hold"
    roots = set(urdf.links) - set(children)
    assert roots == {gd.WORLD_LINK}
    for joint in urdf.joints.values():
        assert joint.find("parent").get("link") in urdf.links
        assert joint.find("child").get("link") in urdf.links
    # sdformat drops a massless link together with its child joints unless it is a leaf reached
    # through a fixed joint: only frames may be massless.
    for name in urdf.links:
        if name == gd.WORLD_LINK or urdf.inertial(name) is not None:
            continue
        assert urdf.child_joint[name].get("type") == "fixed", name
        assert not [j for j in urdf.joints.values() if j.find("parent").get("link") == name], name
    assert names.base_frame in urdf.links and names.platform_frame in urdf.links


def test_joint_names_match_ros_names_ros2_control_and_controllers(setup):
    parameters, urdf, names = setup
    prismatic = [n for n, j in urdf.joints.items() if j.get("type") == "prismatic"]
    assert prismatic == list(names.joint_names)
    assert not set(urdf.joints) & set(names.passive_joint_names)  # the FK node's names stay distinct
    control = urdf.root.find("ros2_control")
    assert control.findtext("hardware/plugin") == "gz_ros2_control/GazeboSimSystem"
    assert [j.get("name") for j in control.findall("joint")] == list(names.joint_names)
    home = parameters.home_actuator_position
    for joint in control.findall("joint"):
        assert [c.get("name") for c in joint.findall("command_interface")] == ["effort"]
        states = {s.get("name"): s for s in joint.findall("state_interface")}
        assert set(states) == {"position", "velocity"}
        assert float(states["position"].find("param[@name='initial_value']").text) == home
        assert float(states["velocity"].find("param[@name='initial_value']").text) == 0.0
    limits = parameters.limits
    for name in names.joint_names:
        limit = urdf.joints[name].find("limit")
        assert float(limit.get("lower")) == limits.actuator_position_min
        assert float(limit.get("upper")) == limits.actuator_position_max
        assert float(limit.get("effort")) == limits.actuator_force_max
        assert float(limit.get("velocity")) == limits.actuator_speed_max


def test_controllers_file_matches_parameters_and_is_regenerated():
    parameters = load_parameters()
    assert CONTROLLERS_FILE.read_text() == gd.build_controllers_yaml(parameters), (
        "config/gz_ros2_controllers.yaml is stale: regenerate it with python -m "
        "hexapod_control.simulation.gazebo_description --controllers config/gz_ros2_controllers.yaml"
    )
    config = yaml.safe_load(CONTROLLERS_FILE.read_text())
    names = parameters.ros
    manager = config["controller_manager"]["ros__parameters"]
    assert manager["update_rate"] == parameters.controllers.rate
    assert manager["effort_controller"]["type"] == "effort_controllers/JointGroupEffortController"
    assert manager["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert config["effort_controller"]["ros__parameters"]["joints"] == list(names.joint_names)
    assert config["joint_state_broadcaster"]["ros__parameters"]["joints"] == list(names.joint_names)
    assert TOPICS["effort_commands"] == "/effort_controller/commands"


def test_gazebo_plugins(setup):
    _, urdf, _ = setup
    plugins = list(urdf.root.iter("plugin"))
    control = [p for p in plugins if p.get("name") == "gz_ros2_control::GazeboSimROS2ControlPlugin"]
    assert len(control) == 1 and control[0].get("filename") == "gz_ros2_control-system"
    assert control[0].findtext("parameters") == str(CONTROLLERS_FILE)
    welds = [p for p in plugins if p.get("name") == gd.DETACHABLE_JOINT_PLUGIN]
    assert len(welds) == 5  # five loops: 6 legs + 3 S joints + platform in a tree closed 5 times
    for topic in ("detach_topic", "attach_topic", "output_topic"):
        values = [p.findtext(topic) for p in welds]
        assert len(set(values)) == len(values), f"{topic} shared: one message would act on all"


def test_world_uses_parameters():
    parameters = load_parameters()
    world = ET.fromstring(gd.build_world_sdf(parameters)).find("world")
    step = float(world.findtext("physics/max_step_size"))
    assert step == pytest.approx(1.0 / parameters.simulation.rate, rel=1e-15)
    assert np.allclose(floats(world.findtext("gravity")), [0.0, 0.0, -parameters.gravity])
    assert world.findtext("physics/dart/solver/solver_type") == "pgs"


# ------------------------------------------------------------------------------------ inertia
def test_masses_and_inertias_equal_parameters(setup):
    parameters, urdf, _ = setup
    frames, *_ = table_frames(parameters, HexapodModel(parameters).home_q)
    poses = urdf.poses(gd.joint_positions(parameters))
    per_body = {}
    total = 0.0
    for link in urdf.links:
        inertial = urdf.inertial(link)
        if inertial is None:
            continue
        body = body_of(link)
        assert body is not None, f"link {link} with mass belongs to no body"
        mass, tensor, com = inertial
        r, p = poses[link]
        entry = per_body.setdefault(body, [0.0, np.zeros((3, 3)), []])
        entry[0] += mass
        entry[1] += r @ tensor @ r.T  # shards share the centre of mass: no parallel-axis term
        entry[2].append(p + r @ com)
        total += mass
    assert set(per_body) == set(frames)  # the 25 bodies
    for body, (mass, tensor, coms) in per_body.items():
        kind = re.sub(r"_\d$", "", body)
        expected = getattr(parameters.bodies, kind)
        frame, com = frames[body]
        assert mass == pytest.approx(expected.mass, rel=1e-12), body
        assert np.allclose(tensor, frame @ np.diag(expected.inertia) @ frame.T, rtol=0, atol=1e-15), body
        for point in coms:
            assert np.linalg.norm(point - com) <= POSITION_TOL, body
    expected_total = sum(getattr(parameters.bodies, b).mass * n for b, n in BODY_COUNTS.items())
    assert total == pytest.approx(expected_total, rel=1e-12)


def test_inertia_frames_are_the_table_frames(setup):
    """The inertial frame (link pose x inertial rpy) of every link is its body's table frame."""
    parameters, urdf, _ = setup
    frames, *_ = table_frames(parameters, HexapodModel(parameters).home_q)
    poses = urdf.poses(gd.joint_positions(parameters))
    for link, element in urdf.links.items():
        if element.find("inertial") is None:
            continue
        roll, pitch, yaw = floats(element.find("inertial/origin").get("rpy"))
        frame = poses[link][0] @ rz(yaw) @ ry(pitch) @ rx(roll)
        assert np.abs(frame - frames[body_of(link)][0]).max() <= ROTATION_TOL, link


# ------------------------------------------------------------------------------------ assembly
@pytest.mark.parametrize("q_choice", ["home", "other"])
def test_assembled_pose_equals_fk(setup, q_choice):
    parameters, urdf, names = setup
    q = HexapodModel(parameters).home_q if q_choice == "home" else np.array(OTHER_Q)
    values = gd.joint_positions(parameters, None if q_choice == "home" else q)
    movable = {n for n, j in urdf.joints.items() if j.get("type") != "fixed"}
    assert set(values) == movable
    if q_choice == "home":  # passive joints are zero at home: the spawn pose after the slider reset
        assert all(values[n] == 0.0 for n in movable - set(names.joint_names))
    frames, fk, apex, slider = table_frames(parameters, q)
    poses = urdf.poses(values)
    # Loop closures: each welded pair coincides (position and orientation).
    welds = urdf.welds()
    assert len(welds) == 5
    for parent, child in welds:
        (r1, p1), (r2, p2) = poses[parent], poses[child]
        assert np.linalg.norm(p1 - p2) <= POSITION_TOL, (parent, child)
        assert np.abs(r1 - r2).max() <= ROTATION_TOL, (parent, child)
    # The platform frame is the FK pose.
    r, p = poses[names.platform_frame]
    assert np.linalg.norm(p - fk.position) <= POSITION_TOL
    assert np.abs(r - fk.rotation).max() <= ROTATION_TOL
    # Every leg runs from D_k to P_i, every link frame is its body's table frame.
    leg_length = parameters.geometry.leg_length
    for k in range(6):
        r, p = poses[f"leg_{k}"]
        assert np.linalg.norm(p - slider[k]) <= POSITION_TOL
        assert np.linalg.norm(p + r @ [0.0, leg_length, 0.0] - apex[k // 2]) <= POSITION_TOL
    for link in urdf.links:
        body = body_of(link)
        if body is not None:
            assert np.abs(poses[link][0] - frames[body][0]).max() <= ROTATION_TOL, link


def test_joint_positions_track_the_physical_mode():
    parameters = load_parameters()
    home = gd.joint_positions(parameters)
    moved = gd.joint_positions(parameters, OTHER_Q)
    assert all(abs(moved[n] - home[n]) < 0.1 for n in home if not n.startswith("slider"))


# ------------------------------------------------------------------------------------ entry points
def test_command_line_writes_the_files(tmp_path, capsys):
    urdf, controllers, world = tmp_path / "h.urdf", tmp_path / "c.yaml", tmp_path / "w.sdf"
    assert gd.main(["--output", str(urdf), "--controllers", str(controllers), "--world", str(world)]) == 0
    parsed = Urdf(urdf.read_text())
    plugin = next(p for p in parsed.root.iter("plugin") if p.findtext("parameters"))
    assert plugin.findtext("parameters") == str(controllers.resolve())
    assert yaml.safe_load(controllers.read_text())["effort_controller"]
    ET.fromstring(world.read_text())
    assert gd.main([]) == 0
    assert ET.fromstring(capsys.readouterr().out).tag == "robot"


def test_launch_file_builds_a_description():
    assert {"controller", "params_file", "use_sim_time", "gui"} <= launch_arguments(LAUNCH_FILE)


# ------------------------------------------------------------------------------------ launch order
class _Recorded:
    """Stands for a launch action: keeps what the launch file passed, does nothing."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context[self.name]


def _offline_launch_setup(monkeypatch, tmp_path, installed=lambda package: True, launch_file=LAUNCH_FILE,
                          arguments=None):
    """The actions a launch file's set-up returns (gazebo.launch.py unless told), built against
    stand-ins of launch and launch_ros, with the packages ``installed`` accepts in the ament index
    and the launch ``arguments`` given over the defaults below."""
    import sys
    import tempfile
    import types

    names = {
        "launch": ["LaunchDescription"],
        "launch.actions": ["DeclareLaunchArgument", "ExecuteProcess", "IncludeLaunchDescription", "LogInfo",
                           "OpaqueFunction", "RegisterEventHandler", "TimerAction"],
        "launch.event_handlers": ["OnProcessExit"],
        "launch.launch_description_sources": ["PythonLaunchDescriptionSource"],
        "launch_ros.actions": ["Node"],
        "launch_ros.parameter_descriptions": ["ParameterValue"],
    }
    for module_name, classes in {**names, "launch.substitutions": ["PathJoinSubstitution"], "launch_ros": [],
                                 "launch_ros.substitutions": ["FindPackageShare"], "ament_index_python": [],
                                 "ament_index_python.packages": []}.items():
        module = types.ModuleType(module_name)
        for class_name in classes:
            setattr(module, class_name, type(class_name, (_Recorded,), {}))
        monkeypatch.setitem(sys.modules, module_name, module)
    sys.modules["launch.substitutions"].LaunchConfiguration = _LaunchConfiguration
    sys.modules["ament_index_python.packages"].get_package_share_directory = lambda package: f"/opt/{package}"

    def get_package_prefix(package):
        if not installed(package):
            raise KeyError(package)  # as ament_index_python's PackageNotFoundError
        return f"/opt/{package}"

    sys.modules["ament_index_python.packages"].get_package_prefix = get_package_prefix
    monkeypatch.setattr(tempfile, "mkdtemp", lambda prefix="": str(tmp_path))
    spec = importlib.util.spec_from_file_location("launch_file_offline", launch_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    (setup_action,) = [a for a in description.args[0] if type(a).__name__ == "OpaqueFunction"]
    context = {"params_file": str(REPO / "config" / "hexapod.yaml"), "controller": "double_loop",
               "use_sim_time": "true", "gui": "false", "rviz": "false", **(arguments or {})}
    return module, setup_action.kwargs["function"](context)


def _command(action):
    """The command line of a Node or ExecuteProcess stand-in, as one list of words."""
    if type(action).__name__ == "Node":
        return [action.kwargs["package"], action.kwargs["executable"], *action.kwargs.get("arguments", [])]
    return list(action.kwargs["cmd"])


def test_launch_order_activates_the_controllers_only_once_time_can_advance(monkeypatch, tmp_path):
    """gz_ros2_control switches controllers only in an update, which runs only while simulated time
    advances (gz_ros2_control#421): the world starts paused, the controllers are loaded INACTIVE,
    their activation is requested, and only then is the world unpaused, so the first update both
    switches them on and steps the welded robot from its exact home assembly."""
    module, actions = _offline_launch_setup(monkeypatch, tmp_path)
    (gazebo,) = [a for a in actions if type(a).__name__ == "IncludeLaunchDescription"
                 and "ros_gz_sim" in a.args[0].args[0]]
    gz_args = dict(gazebo.kwargs["launch_arguments"])["gz_args"].split()
    assert "-r" not in gz_args  # paused at start
    # Which actions start when a process exits (and after which timer).
    handlers = [a.args[0] for a in actions if type(a).__name__ == "RegisterEventHandler"]
    after = {id(h.kwargs["target_action"]): h.kwargs["on_exit"] for h in handlers}
    (spawn,) = [a for a in actions if type(a).__name__ == "Node" and a.kwargs["executable"] == "create"]
    (configure,) = after[id(spawn)]
    assert _command(configure)[:2] == ["controller_manager", "spawner"] and "--inactive" in _command(configure)
    assert {gd.JOINT_STATE_BROADCASTER, gd.EFFORT_CONTROLLER} <= set(_command(configure))
    activate, timer = after[id(configure)]
    words = _command(activate)
    assert words[:3] == ["ros2", "control", "switch_controllers"]
    assert words[words.index("--activate") + 1:] == [gd.JOINT_STATE_BROADCASTER, gd.EFFORT_CONTROLLER]
    (unpause,) = timer.kwargs["actions"]
    assert type(timer).__name__ == "TimerAction" and "pause: false" in _command(unpause)
    # The activation still waits in the controller manager when the world unpauses.
    assert timer.kwargs["period"] < float(words[words.index("--switch-timeout") + 1])
    # Nothing else activates a controller or unpauses the world.
    started = [a for a in actions if type(a).__name__ in ("Node", "ExecuteProcess")]
    for action in started:
        command = _command(action)
        assert "pause: false" not in command and "switch_controllers" not in command
        assert not (command[:2] == ["controller_manager", "spawner"])
    assert {id(spawn)} == set(after) - {id(configure)}


def test_without_gazebo_packages_the_launch_stops_before_starting_anything(monkeypatch, tmp_path):
    """One error naming what is missing, raised while the launch is set up: no process has started."""
    with pytest.raises(RuntimeError, match="ros_gz_sim.*robot_state_publisher.*nothing was started"):
        _offline_launch_setup(monkeypatch, tmp_path,
                              installed=lambda package: package not in ("ros_gz_sim", "robot_state_publisher"))


def test_visualization_without_its_viewers_warns_and_runs_the_rest(monkeypatch, tmp_path):
    """robot_state_publisher and rviz2 are optional: missing, each is a warning and is not started,
    and the full joint state (the package's own node) still runs."""
    visualization = REPO / "launch" / "visualization.launch.py"
    wanted = {"robot_state_publisher": "true", "rviz": "true"}
    _, actions = _offline_launch_setup(monkeypatch, tmp_path, launch_file=visualization, arguments=wanted,
                                       installed=lambda package: package not in ("robot_state_publisher", "rviz2"))
    started = [action.kwargs["executable"] for action in actions if type(action).__name__ == "Node"]
    warnings = [action.kwargs["msg"] for action in actions if type(action).__name__ == "LogInfo"]
    assert started == ["hexapod_description_joint_states"]
    assert len(warnings) == 2 and all("not installed" in warning for warning in warnings)
    _, actions = _offline_launch_setup(monkeypatch, tmp_path, launch_file=visualization, arguments=wanted)
    started = [action.kwargs["executable"] for action in actions if type(action).__name__ == "Node"]
    assert started == ["hexapod_description_joint_states", "robot_state_publisher", "rviz2"]
    assert not [action for action in actions if type(action).__name__ == "LogInfo"]
