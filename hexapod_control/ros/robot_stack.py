"""The robot stack: the controller, its supervisor and the trajectory in one lean process.

    ros2 run hexapod_control hexapod_robot_stack --ros-args -p controller:=computed_torque
    (or python -m hexapod_control.ros.robot_stack; launch/hardware.launch.py starts it)

On the robot's PC the separate Python nodes (trajectory, FK, controller) cost 0.5-1.5 ms of CPU
each per 1 kHz cycle, mostly inside rclpy, and did not fit on two cores. Here one node does the
work of a cycle in one callback:

Hot path    ``/joint_states`` (sensor_msgs/JointState from the driver's joint_state_broadcaster):
            the trajectory is sampled at the state's stamp (:class:`TrajectoryPlayer`), the
            controller answers behind the safety supervisor (:class:`ControlLoop`), and the forces
            go out on ``/effort_controller/commands`` (std_msgs/Float64MultiArray, the
            JointGroupEffortController convention). Nothing is logged per cycle; the staleness
            check runs in this path (the supervisor's command) with a backstop timer
            (``safety.watchdog_period``) for when the states stop.
Decimated   ``/hexapod/platform_pose`` (the controller's own FK of the state), ``/hexapod/reference``
            and ``/diagnostics`` (at once on a change of level or message), at most
            ``publish_rate`` Hz.
Changes     validated when they happen, never per cycle: ``~/arm`` (std_srvs/SetBool), ``~/start``
            and ``~/stop`` (std_srvs/Trigger), ``~/goal_pose`` (geometry_msgs/PoseStamped in the
            base frame: a smooth move checked along its path by inverse kinematics).
Parameters  ``params_file``; ``controller``; ``gain_set`` (default robot); ``trajectory``
            (run by ~/start); ``autostart`` and ``arm_on_start`` (simulation only); ``publish_rate``
            [Hz].

Executor. rclpy's SingleThreadedExecutor. The EventsExecutor (rclpy.experimental), 2.5x faster
inside the lockstep stacks' spin_once loops, answered no joint state at all when spun with spin()
in this process against the fake driver, and ignored SIGTERM (kilted wheels, measured here).
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.controllers import CONTROLLER_NAMES, GAIN_SETS
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectory_player import TRAJECTORY_CHOICES, TrajectoryPlayer
from hexapod_control.errors import HexapodError, InvalidInputError, ParameterError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.rotations import quaternion_from_euler_zyx
from hexapod_control.ros.common import (
    RELIABLE_QOS,
    DiagnosticsPublisher,
    construct,
    declare_choice,
    declare_flag,
    load_params_file,
    pose_vector,
    reference_message,
    run_node,
    seconds,
    set_time,
)
from hexapod_control.ros.conventions import TOPICS, check_frame, reference_point_from_euler, time_from_stamp

NODE_NAME = "hexapod_robot_stack"
DEFAULT_PUBLISH_RATE_HZ = 50.0  # decimated outputs: enough for RViz and plots, negligible CPU


class RobotStackNode(Node):
    def __init__(self, node_name: str = NODE_NAME, **node_options):
        super().__init__(node_name, **node_options)
        construct(self, self._setup)

    def _setup(self) -> None:
        parameters = load_params_file(self)
        self.names = parameters.ros
        controller = declare_choice(self, "controller", "double_loop", CONTROLLER_NAMES, "control law")
        gain_set = declare_choice(self, "gain_set", "robot", GAIN_SETS, "gains for the robot or a simulated plant")
        trajectory = declare_choice(self, "trajectory", "operational_space", TRAJECTORY_CHOICES, "run by ~/start")
        autostart = declare_flag(self, "autostart", False, "run the trajectory at once; the robot must be at its start")
        arm_on_start = declare_flag(self, "arm_on_start", False, "arm at the first valid joint state (simulation)")
        publish_rate = self.declare_parameter(
            "publish_rate", DEFAULT_PUBLISH_RATE_HZ,
            ParameterDescriptor(description="rate of pose, reference and routine diagnostics [Hz]", read_only=True),
        ).value
        if not isinstance(publish_rate, float) or not publish_rate > 0.0:
            raise ParameterError(f"ROS parameter 'publish_rate' of node {self.get_name()!r}: expected a positive "
                                 f"number of Hz, got {publish_rate!r}")
        model = HexapodModel(parameters)
        self.control = ControlLoop(model, controller, gain_set, arm_on_start)
        self.player = TrajectoryPlayer(model, trajectory)
        self.supervisor = self.control.supervisor
        self._autostart = autostart and trajectory != "hold"
        self.publish_period = 1.0 / publish_rate
        self._next_publication = -np.inf
        self.commands_published = 0

        self.command_publisher = self.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
        self.pose_publisher = self.create_publisher(PoseStamped, TOPICS["platform_pose"], RELIABLE_QOS)
        self.reference_publisher = self.create_publisher(MultiDOFJointTrajectory, TOPICS["reference"], RELIABLE_QOS)
        self.diagnostics = DiagnosticsPublisher(self, TOPICS["diagnostics"], f"{self.get_name()}: safety",
                                                parameters.safety.diagnostics_period)
        self.create_subscription(JointState, TOPICS["joint_states"], self._on_joint_state, RELIABLE_QOS)
        self.create_subscription(PoseStamped, "~/goal_pose", self._on_goal_pose, RELIABLE_QOS)
        self.create_service(SetBool, "~/arm", self._on_arm)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_timer(parameters.safety.watchdog_period, self._on_watchdog)

    # -------------------------------------------------------------- hot path
    def _on_joint_state(self, message: JointState) -> None:
        now, stamp = seconds(self), time_from_stamp(message.header.stamp)
        if self._autostart:
            self._autostart = False  # at the first joint state: the trajectory's t = 0 is its stamp
            self.player.start(stamp, autostart=True)
        reference, failure = self.player.sample(stamp)
        if reference is not None:
            self.control.reference_sample(now, reference)
        record = self.control.joint_state(now, stamp, message.name, message.position, message.velocity)
        if record is None:
            return  # repeated or out of order: answered already
        self.command_publisher.publish(Float64MultiArray(data=record.forces.tolist()))
        self.commands_published += 1
        if record.pose is not None and self.player.active is None:
            self.player.measured(record.pose, stamp)  # the first hold, before anything is started
        if failure:
            self.get_logger().error(failure)
        if record.diagnostic is not None:
            self._publish_status(now, record.diagnostic)
        if stamp >= self._next_publication:
            self._next_publication = stamp + self.publish_period
            self._publish_decimated(stamp, record.pose, reference)

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

    def _publish_status(self, now: float, status) -> None:
        self.diagnostics.publish(now, status.level, status.message, status.values)

    # -------------------------------------------------------------- backstop and operator
    def _on_watchdog(self) -> None:
        now = seconds(self)
        decision = self.control.watchdog(now)
        if decision is not None:
            self.command_publisher.publish(Float64MultiArray(data=decision.forces.tolist()))
            status = self.control.diagnostic(now)
            if status is not None:
                self._publish_status(now, status)

    def _on_arm(self, request, response):
        now = seconds(self)
        if request.data:
            response.success, response.message = self.control.arm(now)
        else:
            self.control.disarm()
            response.success, response.message = True, "disarmed"
        self.get_logger().info(f"arm request {request.data}: {response.message}")
        self._publish_status(now, self.control.diagnostic(now, force=True))
        return response

    def _on_start(self, request, response):
        return self._change(response, self.player.start, f"cannot start {self.player.trajectory_name}")

    def _on_stop(self, request, response):
        return self._change(response, self.player.stop, "cannot stop")

    def _on_goal_pose(self, message: PoseStamped) -> None:
        try:
            check_frame(message.header.frame_id, self.names.base_frame, "goal pose")
            self.get_logger().info(f"reference: {self.player.move_to(pose_vector(message), seconds(self))}")
        except (HexapodError, ValueError) as error:
            self.get_logger().error(f"goal pose rejected: {error}")

    def _change(self, response, change, failure: str):
        try:
            response.message, response.success = change(self._now_for_player()), True
            self.get_logger().info(f"reference: {response.message}")
        except (HexapodError, ValueError) as error:
            response.success, response.message = False, f"{failure}: {error}"
            self.get_logger().error(response.message)
        return response

    def _now_for_player(self) -> float:
        """The player runs on joint-state stamps: a change starts at the latest one."""
        feedback = self.supervisor.feedback
        if feedback is None:
            raise InvalidInputError("no joint state received yet")
        return feedback.stamp


def main(args=None) -> int:
    return run_node(RobotStackNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
