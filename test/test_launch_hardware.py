"""launch_testing: hardware.launch.py around a stand-in driver (needs a ROS install; skips here).

The test plays the robot's driver: it publishes /joint_states at home and expects the disarmed
controller to answer with zero forces on /effort_controller/commands and the FK node to publish
the platform pose. Run with ``colcon test`` or ``launch_test test/test_launch_hardware.py``.
"""

import time
import unittest
from pathlib import Path

import pytest

pytest.importorskip("launch_testing")
pytest.importorskip("launch_ros")
import launch_testing.actions
import launch_testing.asserts
import rclpy
from geometry_msgs.msg import PoseStamped
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from hexapod_control.model.parameters import load_parameters

LAUNCH_FILE = Path(__file__).resolve().parent.parent / "launch" / "hardware.launch.py"
STARTUP_TIMEOUT_S = 60.0  # three node processes start and discover each other (~3 s)


@pytest.mark.launch_test
def generate_test_description():
    hardware = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={"controller": "double_loop"}.items(),
    )
    return LaunchDescription([hardware, launch_testing.actions.ReadyToTest()])


class TestAroundADriver(unittest.TestCase):
    def setUp(self):
        rclpy.init()
        self.node = rclpy.create_node("stand_in_driver")

    def tearDown(self):
        self.node.destroy_node()
        rclpy.shutdown()

    def test_disarmed_controller_answers_with_zero_and_fk_publishes_the_pose(self):
        parameters = load_parameters()
        names = parameters.ros
        commands, poses = [], []
        publisher = self.node.create_publisher(JointState, "/joint_states", 10)
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands", commands.append, 10)
        self.node.create_subscription(PoseStamped, "/hexapod/platform_pose", poses.append, 10)
        state = JointState(name=list(names.joint_names), position=[parameters.home_actuator_position] * 6,
                           velocity=[0.0] * 6)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not (commands and poses) and time.monotonic() < deadline:
            state.header.stamp = self.node.get_clock().now().to_msg()
            publisher.publish(state)  # a driver publishes continuously; the first ones may find no reader
            rclpy.spin_once(self.node, timeout_sec=0.01)
        self.assertTrue(commands, "no effort command")
        self.assertTrue(poses, "no platform pose")
        self.assertEqual(list(commands[-1].data), [0.0] * 6)  # disarmed: zero forces
        self.assertAlmostEqual(poses[-1].pose.position.z, 0.4243, places=3)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
