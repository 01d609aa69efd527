"""launch_testing: hardware.launch.py around a stand-in driver, both layouts (needs ROS 2 launch; skips here).

The test plays the robot's driver: it publishes /joint_states at home and expects, from every
node the launch file starts, what a driver and a viewer rely on: the disarmed controller answers
with zero forces on /effort_controller/commands, the platform pose is published (by the robot
stack, or by the FK node with ``layout:=separate_nodes``), robot_state_publisher has the
description (/robot_description), and the full joint state names every movable joint of it.
Waiting for all of them also means no node is still starting when the launch shuts down.
Run with ``colcon test`` or ``launch_test test/test_launch_hardware.py``.
"""

import time
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import pytest
import rclpy
from geometry_msgs.msg import PoseStamped
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

from hexapod_control.conventions import TOPICS
from hexapod_control.model.parameters import load_parameters
from hexapod_control.ros.launch_support import missing_packages

LAUNCH_FILE = Path(__file__).resolve().parent.parent / "launch" / "hardware.launch.py"
STARTUP_TIMEOUT_S = 60.0  # up to five node processes start and discover each other (~3 s)
HOME_PLATFORM_Z_M = 0.4243  # the platform's height with every slider at home (shipped geometry)
# robot_state_publisher latches the description for late subscribers, as a viewer is.
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# The robot description comes from robot_state_publisher: without it the launch file runs the rest
# (a warning), and the test checks the rest.
WITH_STATE_PUBLISHER = not missing_packages(["robot_state_publisher"])


@pytest.mark.launch_test
@launch_testing.parametrize("layout", ["one_process", "separate_nodes"])
def generate_test_description(layout):
    hardware = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={"controller": "double_loop", "layout": layout}.items(),
    )
    return LaunchDescription([hardware, launch_testing.actions.ReadyToTest()])


class TestAroundADriver(unittest.TestCase):
    def setUp(self):
        rclpy.init()
        self.node = rclpy.create_node("stand_in_driver")

    def tearDown(self):
        self.node.destroy_node()
        rclpy.shutdown()

    def test_zero_forces_pose_description_and_full_joint_state(self, layout):
        parameters = load_parameters()
        names = parameters.ros
        seen = {"commands": [], "poses": [], "descriptions": [], "full_states": []}
        publisher = self.node.create_publisher(JointState, TOPICS["joint_states"], 10)
        self.node.create_subscription(Float64MultiArray, TOPICS["effort_commands"], seen["commands"].append, 10)
        self.node.create_subscription(PoseStamped, TOPICS["platform_pose"], seen["poses"].append, 10)
        if WITH_STATE_PUBLISHER:
            self.node.create_subscription(String, "/robot_description", seen["descriptions"].append, LATCHED_QOS)
        else:
            del seen["descriptions"]
        self.node.create_subscription(JointState, TOPICS["description_joint_states"], seen["full_states"].append, 10)
        state = JointState(name=list(names.joint_names), position=[parameters.home_actuator_position] * 6,
                           velocity=[0.0] * 6)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not all(seen.values()) and time.monotonic() < deadline:
            state.header.stamp = self.node.get_clock().now().to_msg()
            publisher.publish(state)  # a driver publishes continuously; the first ones may find no reader
            rclpy.spin_once(self.node, timeout_sec=0.01)
        for key, messages in seen.items():
            self.assertTrue(messages, f"{layout}: nothing received of {key}")
        self.assertEqual(list(seen["commands"][-1].data), [0.0] * 6)  # disarmed: zero forces
        self.assertAlmostEqual(seen["poses"][-1].pose.position.z, HOME_PLATFORM_Z_M, places=3)
        if WITH_STATE_PUBLISHER:
            # robot_state_publisher computes TF only for joints it is given a position of.
            urdf = ET.fromstring(seen["descriptions"][-1].data)
            movable = {joint.get("name") for joint in urdf.iter("joint") if joint.get("type") != "fixed"}
            self.assertTrue(set(names.joint_names) <= movable)
            self.assertEqual(movable - set(seen["full_states"][-1].name), set())
        self.assertTrue(set(names.joint_names) <= set(seen["full_states"][-1].name))


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
