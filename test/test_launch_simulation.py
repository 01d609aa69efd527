"""launch_testing: simulation.launch.py brings the closed loop up (needs ROS 2 launch and launch_ros).

Run inside a sourced ROS 2 workspace with the package installed: ``colcon test`` or
``launch_test test/test_launch_simulation.py``.
"""

import math
import time
import unittest
from pathlib import Path

import launch_testing.actions
import launch_testing.asserts
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from hexapod_control.conventions import TOPICS

LAUNCH_FILE = Path(__file__).resolve().parent.parent / "launch" / "simulation.launch.py"
# Four node processes start, discover each other (~3 s) and the simulation must advance.
STARTUP_TIMEOUT_S = 60.0
# Sim time the loop must cover to count as running (200 lockstep steps at 1 kHz).
SIM_TIME_TO_REACH_S = 0.2
MAX_POSITION_ERROR_M = 1e-3  # tracking error the controller reports in /diagnostics


@pytest.mark.launch_test
def generate_test_description():
    simulation = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={"backend": "embedded", "controller": "computed_torque", "use_sim_time": "true"}.items(),
    )
    return LaunchDescription([simulation, launch_testing.actions.ReadyToTest()])


class TestClosedLoopRuns(unittest.TestCase):
    def setUp(self):
        rclpy.init()
        self.node = rclpy.create_node("simulation_launch_probe")

    def tearDown(self):
        self.node.destroy_node()
        rclpy.shutdown()

    def test_clock_advances_with_commands_poses_and_a_healthy_controller(self):
        seen = {"clock": 0.0, "commands": [], "poses": [], "full_states": [], "controller": [], "errors": []}

        def on_clock(message):
            seen["clock"] = message.clock.sec + 1e-9 * message.clock.nanosec

        def on_diagnostics(message):
            for status in message.status:
                if status.name.startswith("hexapod_controller"):
                    seen["controller"].append(status)
                    seen["errors"] += [float(v.value) for v in status.values if v.key == "position_error_norm"]

        def complete():
            tracking = any(math.isfinite(e) for e in seen["errors"])  # NaN until a control step ran
            # The full joint state too: every node is up before the launch shuts down (a node
            # interrupted while it starts exits with an error).
            started = seen["commands"] and seen["poses"] and seen["full_states"]
            return seen["clock"] >= SIM_TIME_TO_REACH_S and started and tracking

        self.node.create_subscription(Clock, "/clock", on_clock, 10)
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands", seen["commands"].append, 10)
        self.node.create_subscription(PoseStamped, "/hexapod/platform_pose", seen["poses"].append, 10)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
        self.node.create_subscription(JointState, TOPICS["description_joint_states"], seen["full_states"].append, 10)
        # Wait for every topic, not only the clock: this node discovers each publisher separately,
        # and the simulator (/clock) may be matched seconds before the controller.
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not complete() and time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.1)
        self.assertGreaterEqual(seen["clock"], SIM_TIME_TO_REACH_S, "the simulation did not advance")
        self.assertTrue(seen["commands"], "no effort command")
        self.assertTrue(all(len(c.data) == 6 for c in seen["commands"]))
        self.assertTrue(seen["poses"], "no platform pose")
        self.assertTrue(seen["full_states"], "no full joint state for robot_state_publisher")
        faults = [s.message for s in seen["controller"] if s.level == DiagnosticStatus.ERROR]
        self.assertFalse(faults, "controller reported errors")
        # Computed torque on the embedded plant tracks to ~1e-6 m; 1 mm only catches a broken loop.
        finite = [e for e in seen["errors"] if math.isfinite(e)]
        self.assertTrue(finite, f"no tracking error in the controller diagnostics: {seen['errors']}")
        self.assertLess(max(finite), MAX_POSITION_ERROR_M)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
