"""The robot stack: the controller, its supervisor and the trajectory in one lean process.

    ros2 run hexapod_control hexapod_robot_stack --ros-args -p controller:=computed_torque
    (or python -m hexapod_control.ros.robot_stack; launch/hardware.launch.py starts it)

On the robot's PC the separate Python nodes (trajectory, FK, controller) cost 0.5-1.5 ms of CPU
each per 1 kHz cycle, mostly inside rclpy, and did not fit on two cores. This node is the
controller node (:mod:`hexapod_control.ros.controller_node`: supervisor, both watchdogs, ``~/arm``,
read-only parameters) with the trajectory inside, and does the work of a cycle in one callback:

Hot path    ``/joint_states``: the trajectory is sampled at the state's stamp
            (:class:`TrajectoryPlayer`), the controller answers behind the safety supervisor
            (:class:`ControlLoop`), and the forces go out on ``/effort_controller/commands``.
            Nothing is logged per cycle.
Decimated   ``/hexapod/platform_pose`` (the controller's own FK of the state) and
            ``/hexapod/reference`` at most ``publish_rate`` Hz; ``/diagnostics`` at once on a change
            of level or message, else every ``safety.diagnostics_period``.
Changes     validated when they happen, never per cycle: ``~/start`` and ``~/stop``
            (std_srvs/Trigger), ``~/goal_pose`` (geometry_msgs/PoseStamped in the base frame: a
            smooth move checked along its path by inverse kinematics).
Parameters  those of the controller node; ``trajectory`` (run by ~/start); ``autostart``
            (simulation only); ``publish_rate`` [Hz].

Executor. rclpy's SingleThreadedExecutor. The EventsExecutor (rclpy.experimental), 2.5x faster
inside the lockstep stacks' spin_once loops, answered no joint state at all when spun with spin()
in this process against the fake driver, and ignored SIGTERM (kilted wheels, measured here).
"""

from __future__ import annotations

import math

from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import ParameterDescriptor
from std_srvs.srv import Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.trajectory_player import TRAJECTORY_CHOICES, TrajectoryPlayer
from hexapod_control.errors import HexapodError, InvalidInputError, ParameterError
from hexapod_control.model.rotations import quaternion_from_euler_zyx
from hexapod_control.ros.common import (
    RELIABLE_QOS,
    answer_change,
    declare_choice,
    declare_flag,
    pose_vector,
    reference_message,
    run_node,
    seconds,
    set_time,
)
from hexapod_control.ros.controller_node import ControllerNode
from hexapod_control.ros.conventions import TOPICS, check_frame, reference_point_from_euler

NODE_NAME = "hexapod_robot_stack"
DEFAULT_PUBLISH_RATE_HZ = 50.0  # decimated outputs: enough for RViz and plots, negligible CPU


class RobotStackNode(ControllerNode):
    default_name = NODE_NAME
    takes_references = False  # the trajectory is sampled here, at each joint state's stamp

    def _setup(self, parameters) -> None:
        super()._setup(parameters)
        trajectory = declare_choice(self, "trajectory", "operational_space", TRAJECTORY_CHOICES, "run by ~/start")
        self._autostart = declare_flag(self, "autostart", False,
                                       "run the trajectory at once; the robot must be at its start") and trajectory != "hold"
        publish_rate = self.declare_parameter(
            "publish_rate", DEFAULT_PUBLISH_RATE_HZ,
            ParameterDescriptor(description="rate of pose and reference [Hz]", read_only=True),
        ).value
        if not isinstance(publish_rate, float) or not publish_rate > 0.0:
            raise ParameterError(f"ROS parameter 'publish_rate' of node {self.get_name()!r}: expected a positive "
                                 f"number of Hz, got {publish_rate!r}")
        self.player = TrajectoryPlayer(self.control.model, trajectory)
        self.publish_period = 1.0 / publish_rate
        self._next_publication = -math.inf
        self._reference = None
        self.pose_publisher = self.create_publisher(PoseStamped, TOPICS["platform_pose"], RELIABLE_QOS)
        self.reference_publisher = self.create_publisher(MultiDOFJointTrajectory, TOPICS["reference"], RELIABLE_QOS)
        self.create_subscription(PoseStamped, "~/goal_pose", self._on_goal_pose, RELIABLE_QOS)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)

    # -------------------------------------------------------------- hot path
    def _before_joint_state(self, stamp: float) -> None:
        if self._autostart:
            self._autostart = False  # at the first joint state: the trajectory's t = 0 is its stamp
            self.player.start(stamp, autostart=True)
        self._reference, failure = self.player.sample(stamp)
        if self._reference is not None:
            self.control.reference_sample(seconds(self), self._reference)
        if failure:
            self.get_logger().error(failure)

    def _after_joint_state(self, stamp: float, record) -> None:
        if record.pose is not None and self.player.active is None:
            self.player.measured(record.pose, stamp)  # the first hold, before anything is started
        if stamp >= self._next_publication:
            self._next_publication = stamp + self.publish_period
            self._publish_decimated(stamp, record.pose, self._reference)

    def _publish_decimated(self, stamp: float, pose, reference) -> None:
        if pose is not None:
            message = PoseStamped()
            set_time(message.header.stamp, stamp)
            message.header.frame_id = self.names.base_frame
            p, o = message.pose.position, message.pose.orientation
            p.x, p.y, p.z = (float(v) for v in pose[:3])
            o.x, o.y, o.z, o.w = quaternion_from_euler_zyx(tuple(pose[3:]))
            self.pose_publisher.publish(message)
        if reference is not None:
            point = reference_point_from_euler(reference.pose, reference.velocity, reference.acceleration)
            self.reference_publisher.publish(reference_message(stamp, self.names.base_frame, point))

    # -------------------------------------------------------------- changes
    def _on_start(self, request, response):
        return answer_change(self, response, lambda: self.player.start(self._latest_stamp()),
                             f"cannot start {self.player.trajectory_name}")

    def _on_stop(self, request, response):
        return answer_change(self, response, lambda: self.player.stop(self._latest_stamp()), "cannot stop")

    def _on_goal_pose(self, message: PoseStamped) -> None:
        try:
            check_frame(message.header.frame_id, self.names.base_frame, "goal pose")
            self.get_logger().info(f"reference: {self.player.move_to(pose_vector(message), self._latest_stamp())}")
        except (HexapodError, ValueError) as error:
            self.get_logger().error(f"goal pose rejected: {error}")

    def _latest_stamp(self) -> float:
        """The player runs on joint-state stamps: a change starts at the latest one taken."""
        feedback = self.supervisor.feedback
        if feedback is None:
            raise InvalidInputError("no joint state received yet")
        return feedback.stamp


def main(args=None) -> int:
    return run_node(RobotStackNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
