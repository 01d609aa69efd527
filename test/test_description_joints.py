"""The full joint state of the robot description, checked with an independent URDF kinematics.

yourdfpy (PyPI) reads the generated URDF and computes the link poses for the joint values that
DescriptionJoints (and so the hexapod_description_joint_states node) gives: the platform frame must
be where the model's FK puts it, and the two links of every loop closure (the Gazebo welds) must
coincide. Also here: the node over DDS, the launch file and the RViz, PlotJuggler and Foxglove
layouts in config/ (they parse, and name topics and frames the package has).
"""

import io
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import in_ci
from ros_helpers import DELIVERY_TIMEOUT_S, DISCOVERY_TIMEOUT_S, launch_arguments, spin_until

from hexapod_control.conventions import TOPICS
from hexapod_control.errors import ParameterError, UnreachablePoseError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import load_parameters
from hexapod_control.simulation import gazebo_description as gd
from hexapod_control.simulation.description_joints import DescriptionJoints

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "config"
PARAMETER_FILES = ("hexapod.yaml", "hexapod_validation.yaml")
# The bounds. Measured worst (both files): platform 4.9e-13 m and 3.5e-12, loop closures
# 8.5e-13 m and 1.3e-12, at the random poses: the FK closes the loops to its Newton tolerance.
POSITION_TOL = 1e-9  # [m]
ROTATION_TOL = 1e-9
OTHER_Q = (0.2, 0.15, 0.18, 0.17, 0.19, 0.16)  # away from home in every actuator, inside the travel [m]
RANDOM_POSES = 8
RANDOM_SEED = 20240616
# Random poses about home: half-widths of the box [m] and [rad] (the 6.5 trajectory spans 0.02 m, 0.05 rad).
POSITION_SPREAD = 0.05
ANGLE_SPREAD = 0.15
# Topics that are not the package's but a viewer reads: robot_state_publisher's description and TF.
VIEWER_TOPICS = {"/robot_description", "/tf", "/tf_static"}


# ------------------------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def yourdfpy():
    """yourdfpy (requirements-dev.txt): a skip outside CI, a failure in CI (CI=true)."""
    try:
        import yourdfpy
    except ImportError:
        if in_ci():
            pytest.fail("yourdfpy is not installed (CI=true: install requirements-dev.txt)", pytrace=False)
        pytest.skip("yourdfpy is not installed (pip install yourdfpy)")
    return yourdfpy


def load_robot(yourdfpy, parameters):
    """The plain description as yourdfpy reads it (no meshes: the description has none)."""
    return yourdfpy.URDF.load(io.StringIO(gd.build_urdf(parameters, None)), load_meshes=False,
                              build_collision_scene_graph=False)


def welded_pairs(parameters):
    """(parent, child) links of every loop closure, read from the Gazebo URDF's DetachableJoints."""
    root = ET.fromstring(gd.build_urdf(parameters, CONFIG / "gz_ros2_controllers.yaml"))
    return [(plugin.findtext("parent_link"), plugin.findtext("child_link"))
            for plugin in root.iter("plugin") if plugin.get("name") == gd.DETACHABLE_JOINT_PLUGIN]


def random_configurations(model, parameters, count, seed):
    """q of random poses about home: inside the travel (IK checks), away from singularities
    (conditioning above the controllers' damping threshold), in the mode FK finds from home."""
    rng = np.random.default_rng(seed)
    home = model.forward_kinematics(model.home_q)
    threshold = parameters.controllers.singularity.damping_threshold
    found = []
    while len(found) < count:
        position = home.position + rng.uniform(-POSITION_SPREAD, POSITION_SPREAD, 3)
        angles = home.euler_zyx + rng.uniform(-ANGLE_SPREAD, ANGLE_SPREAD, 3)
        try:
            q = model.inverse_kinematics(position, angles).q
        except UnreachablePoseError:
            continue
        fk = model.forward_kinematics(q)
        if model.analytic_jacobian(q, phi=fk.phi).jacobian_conditioning < threshold:
            continue
        if np.abs(fk.position - position).max() > POSITION_TOL:  # another assembly mode
            continue
        found.append(q)
    return found


def assert_platform_at_fk(robot, names, q, fk):
    transform = robot.get_transform(names.platform_frame, names.base_frame)
    assert np.abs(transform[:3, 3] - fk.position).max() <= POSITION_TOL, q
    assert np.abs(transform[:3, :3] - fk.rotation).max() <= ROTATION_TOL, q


def assert_loops_closed(robot, pairs):
    for parent, child in pairs:
        relative = robot.get_transform(child, parent)
        assert np.linalg.norm(relative[:3, 3]) <= POSITION_TOL, (parent, child)
        assert np.abs(relative[:3, :3] - np.eye(3)).max() <= ROTATION_TOL, (parent, child)


# ------------------------------------------------------------------------------------------ kinematics
@pytest.mark.slow
@pytest.mark.parametrize("parameters_file", PARAMETER_FILES)
def test_description_with_the_joint_state_puts_the_platform_at_fk_and_closes_every_loop(yourdfpy, parameters_file):
    parameters = load_parameters(CONFIG / parameters_file)
    model = HexapodModel(parameters)
    joints = DescriptionJoints(parameters, model)
    robot = load_robot(yourdfpy, parameters)
    assert set(joints.names) == set(robot.actuated_joint_names)  # a value for every movable joint
    pairs = welded_pairs(parameters)
    assert len(pairs) == 5  # 25 bodies in a tree: 6 legs + 3 S joints close 5 loops
    configurations = [model.home_q, np.array(OTHER_Q)] + random_configurations(model, parameters, RANDOM_POSES, RANDOM_SEED)
    for q in configurations:
        positions = joints.positions(q, model.create_state())
        robot.update_cfg(dict(zip(joints.names, positions)))
        assert_platform_at_fk(robot, parameters.ros, q, model.forward_kinematics(q))
        assert_loops_closed(robot, pairs)


def test_home_joint_state_is_the_assembled_description():
    """At home the passive joints are zero (the origins carry the home angles) and the sliders are q."""
    parameters = load_parameters()
    joints = DescriptionJoints(parameters)
    values = dict(zip(joints.names, joints.positions(np.full(6, parameters.home_actuator_position))))
    for name, value in values.items():
        expected = parameters.home_actuator_position if name in parameters.ros.joint_names else 0.0
        assert value == pytest.approx(expected, abs=1e-15), name


def test_a_series_of_q_follows_the_robot_through_one_state(yourdfpy):
    """Decimated input (large steps of q) with one warm-start state, as the node runs it."""
    parameters = load_parameters()
    model = HexapodModel(parameters)
    joints = DescriptionJoints(parameters, model)
    robot = load_robot(yourdfpy, parameters)
    state = model.create_state()
    for s in np.linspace(0.0, 1.0, 6):
        q = model.home_q + s * (np.array(OTHER_Q) - model.home_q)
        robot.update_cfg(dict(zip(joints.names, joints.positions(q, state))))
        assert_platform_at_fk(robot, parameters.ros, q, model.forward_kinematics(q))


def test_plain_urdf_is_the_gazebo_tree_without_the_simulator_elements():
    parameters = load_parameters()
    plain = ET.fromstring(gd.build_urdf(parameters, None))
    gazebo = ET.fromstring(gd.build_urdf(parameters, CONFIG / "gz_ros2_controllers.yaml"))
    assert {child.tag for child in plain} == {"link", "joint"}

    def tree(robot):
        return [ET.tostring(e).strip() for e in robot if e.tag in ("link", "joint")]  # strip: indentation tails

    assert tree(plain) == tree(gazebo)


def test_command_line_writes_the_plain_description(tmp_path):
    output = tmp_path / "plain.urdf"
    assert gd.main(["--plain", "--output", str(output)]) == 0
    assert output.read_text() == gd.build_urdf(load_parameters(), None)


# ------------------------------------------------------------------------------------------ node
@pytest.fixture
def ros():
    """The ROS modules of the node tests (skips without rclpy)."""
    pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from hexapod_control.ros.common import RELIABLE_QOS
    from hexapod_control.ros.description_joint_state_node import DescriptionJointStateNode

    class Modules:
        pass

    modules = Modules()
    modules.Parameter, modules.JointState, modules.RELIABLE_QOS = Parameter, JointState, RELIABLE_QOS
    modules.Node = DescriptionJointStateNode
    return modules


def make_node(ros, context, **overrides):
    parameters = [ros.Parameter(name, value=value) for name, value in overrides.items()]
    return ros.Node(context=context, parameter_overrides=parameters)


def slider_state(ros, stamp_ns, q, names):
    message = ros.JointState()
    message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    message.name = list(names)
    message.position = [float(v) for v in q]
    message.velocity = [0.0] * len(names)
    return message


def test_node_publishes_every_joint_decimated_by_the_stamps(yourdfpy, ros, context, executor):
    import rclpy

    parameters = load_parameters()
    names = parameters.ros
    rate = 50  # [Hz], an integer on purpose: the node accepts one -> 20 ms between outputs
    node = make_node(ros, context, rate=rate)
    probe = rclpy.create_node("description_probe", context=context)
    try:
        executor.add_node(node)
        executor.add_node(probe)
        received = []
        publisher = probe.create_publisher(ros.JointState, TOPICS["joint_states"], ros.RELIABLE_QOS)
        subscription = probe.create_subscription(ros.JointState, TOPICS["description_joint_states"], received.append,
                                                 ros.RELIABLE_QOS)
        spin_until(executor, lambda: publisher.get_subscription_count() >= 1 and subscription.get_publisher_count() >= 1,
                   DISCOVERY_TIMEOUT_S, "publisher/subscription matching")
        ms = 1_000_000
        home = np.full(6, parameters.home_actuator_position)
        # Batches shorter than the queue (10), each ending on a joint state that is due, so the wait
        # for its output is the wait for the batch. A stamp 1 ns short of the period is dropped.
        batches = [
            [(0, home)],
            [(5 * ms, home), (10 * ms, home), (20 * ms - 1, home), (20 * ms, np.array(OTHER_Q))],
            [(30 * ms, home), (40 * ms, home)],
            [(41 * ms, home), (10 * ms, home)],  # back in time: a restarted source, published at once
        ]
        expected_stamps = [0, 20 * ms, 40 * ms, 10 * ms]
        for count, batch in enumerate(batches, start=1):
            for stamp, q in batch:
                publisher.publish(slider_state(ros, stamp, q, names.joint_names))
            spin_until(executor, lambda count=count: len(received) >= count, DELIVERY_TIMEOUT_S, f"output {count}")
        # Invalid (a slider missing) then valid: the invalid one is skipped and does not count.
        publisher.publish(slider_state(ros, 60 * ms, home[:5], names.joint_names[:5]))
        publisher.publish(slider_state(ros, 61 * ms, home, names.joint_names))
        spin_until(executor, lambda: len(received) >= 5, DELIVERY_TIMEOUT_S, "the output after an invalid input")
        expected_stamps.append(61 * ms)
        stamps = [m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in received]
        assert stamps == expected_stamps

        robot = load_robot(yourdfpy, parameters)
        model = HexapodModel(parameters)
        pairs = welded_pairs(parameters)
        assert all(list(m.name) == list(robot.actuated_joint_names) for m in received)
        for message, q in zip(received[:2], (home, np.array(OTHER_Q))):
            robot.update_cfg(dict(zip(message.name, message.position)))
            assert_platform_at_fk(robot, names, q, model.forward_kinematics(q))
            assert_loops_closed(robot, pairs)
    finally:
        probe.destroy_node()
        node.destroy_node()


@pytest.mark.parametrize("rate", [0.0, -30.0, math.inf, "fast", True])
def test_node_rejects_a_rate_that_is_not_a_positive_number(ros, context, rate):
    with pytest.raises(ParameterError, match="'rate'"):
        make_node(ros, context, rate=rate)


def test_visualization_launch_file_builds():
    arguments = launch_arguments(REPO / "launch" / "visualization.launch.py")
    assert {"params_file", "use_sim_time", "rviz", "rate", "joint_states_topic", "robot_state_publisher"} <= arguments


# ------------------------------------------------------------------------------------------ tool layouts
PACKAGE_TOPICS = set(TOPICS.values())


def test_rviz_config_shows_the_description_and_tf_in_the_base_frame():
    config = yaml.safe_load((CONFIG / "hexapod.rviz").read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == load_parameters().ros.base_frame
    displays = {display["Class"]: display for display in manager["Displays"]}
    robot_model = displays["rviz_default_plugins/RobotModel"]
    assert robot_model["Description Topic"]["Value"] == "/robot_description"
    assert robot_model["Description Topic"]["Durability Policy"] == "Transient Local"  # robot_state_publisher latches it
    assert robot_model["Mass Properties"]["Inertia"] is True  # the description has no visuals
    assert "rviz_default_plugins/TF" in displays
    topics = {display["Topic"]["Value"] for display in manager["Displays"] if "Topic" in display}
    assert topics <= PACKAGE_TOPICS, topics - PACKAGE_TOPICS


def _curve_topic(curve: str, topics) -> str:
    matches = [topic for topic in topics if curve.startswith(topic + "/")]
    assert matches, f"curve {curve} names no topic of {sorted(topics)}"
    return max(matches, key=len)


def test_plotjuggler_layout_is_well_formed_and_names_package_topics_and_joints():
    root = ET.parse(CONFIG / "hexapod_plotjuggler.xml").getroot()
    for splitter in root.iter("DockSplitter"):
        sizes = [float(s) for s in splitter.get("sizes").split(";")]
        assert int(splitter.get("count")) == len(splitter) == len(sizes)
        assert sum(sizes) == pytest.approx(1.0, abs=1e-5)
    for plugin in root.iter("plugin"):
        selected = set(plugin.find("selected_topics").get("value").split(";"))
        assert selected <= PACKAGE_TOPICS, selected - PACKAGE_TOPICS
    names = load_parameters().ros
    curves = [curve.get("name") for curve in root.iter("curve")]
    assert curves
    plotted = set()
    for curve in curves:
        topic = _curve_topic(curve, PACKAGE_TOPICS)
        plotted.add(topic)
        if topic in (TOPICS["joint_states"], TOPICS["passive_joint_states"]):  # <topic>/<joint>/<field>
            joint = curve[len(topic) + 1:].split("/")[0]
            assert joint in names.joint_names + names.passive_joint_names, curve
    assert {TOPICS[k] for k in ("joint_states", "effort_commands", "platform_pose", "reference")} <= plotted


def _layout_panels(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    return _layout_panels(node["first"]) + _layout_panels(node["second"])


def test_foxglove_layout_is_well_formed_and_names_package_topics_and_joints():
    document = json.loads((CONFIG / "hexapod_foxglove.json").read_text())
    panels = document["configById"]
    referenced = _layout_panels(document["layout"])
    for panel in list(referenced):
        if panel.startswith("Tab!"):
            for tab in panels[panel]["tabs"]:
                referenced += _layout_panels(tab["layout"])
    assert sorted(referenced) == sorted(panels)  # every panel placed once, none missing
    names = load_parameters().ros
    three_d = next(config for panel, config in panels.items() if panel.startswith("3D!"))
    assert three_d["followTf"] == names.base_frame
    assert set(three_d["topics"]) <= PACKAGE_TOPICS | VIEWER_TOPICS
    plotted = set()
    for panel, config in panels.items():
        if panel.startswith("Plot!"):
            for path in config["paths"]:
                topic = path["value"].split(".")[0]
                assert topic in PACKAGE_TOPICS, path["value"]
                plotted.add(topic)
                if topic == TOPICS["joint_states"]:  # by index: the label must be the joint there
                    index = int(path["value"].split("[")[1].split("]")[0])
                    assert path["label"] == names.joint_names[index], path
        if panel.startswith("DiagnosticSummary!"):
            assert config["topicToRender"] == TOPICS["diagnostics"]
    assert {TOPICS[k] for k in ("joint_states", "effort_commands", "platform_pose", "reference")} <= plotted
