"""Trajectory node: publishes the platform reference at the control rate.

Publishes   ``/hexapod/reference`` (trajectory_msgs/MultiDOFJointTrajectory: one point, joint
            ``platform``, header stamp = now, frame ``ros.base_frame``; see ros_conventions) every
            1/``controllers.rate`` s of the node's clock (simulated under use_sim_time).
Subscribes  ``/hexapod/platform_pose`` (PoseStamped, from the FK node): where the robot is, so that
            the node can hold it before anything else is commanded.
            ``~/goal_pose`` (PoseStamped in ``ros.base_frame``, or an empty frame): a SmoothMove from
            the current reference to that pose; an unreachable pose is rejected with a logged error.
Services    ``~/start`` (std_srvs/Trigger): SmoothMove from the current reference to the start of the
            selected trajectory, then the trajectory.
            ``~/stop`` (std_srvs/Trigger): hold at the current reference pose (velocity to zero at once).
Parameters  ``params_file``; ``trajectory`` = operational_space | joint_space | hold;
            ``autostart`` (default false): run the selected trajectory from the first publication,
            assuming the robot already is at its start (home, as a simulation starts).
            ``use_sim_time``.

Until a trajectory runs the node holds the first measured platform pose, and publishes nothing
before one arrives (the controller then holds by itself). A trajectory that fails to sample
(e.g. its forward kinematics) is replaced by a hold at its last good pose.
"""

from __future__ import annotations

from geometry_msgs.msg import PoseStamped
from std_srvs.srv import Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.trajectory_player import TRAJECTORY_CHOICES, TrajectoryPlayer
from hexapod_control.conventions import (
    TOPICS,
    check_frame,
    reference_point_from_euler,
)
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.ros.common import (
    RELIABLE_QOS,
    HexapodNode,
    answer_change,
    declare_choice,
    declare_flag,
    pose_vector,
    reference_message,
    run_node,
    seconds,
)

NODE_NAME = "hexapod_trajectory"


class TrajectoryNode(HexapodNode):
    default_name = NODE_NAME
    """A shell around :class:`hexapod_control.control.trajectory_player.TrajectoryPlayer`."""

    def _setup(self, parameters) -> None:
        self.names = parameters.ros
        trajectory_name = declare_choice(
            self, "trajectory", "operational_space", TRAJECTORY_CHOICES, "trajectory run by ~/start (or autostart)"
        )
        autostart = declare_flag(self, "autostart", False, "run the trajectory at once; the robot must be at its start")
        self.player = TrajectoryPlayer(HexapodModel(parameters), trajectory_name)
        self.goals_rejected = 0
        # Autostart begins at the first publication, not at construction: under use_sim_time the
        # clock reads 0 until the first /clock, and the simulation may already be running then
        # (the controller holds until a reference arrives), so a construction-time origin would
        # make the reference jump ahead into the trajectory.
        self._pending_autostart = autostart and trajectory_name != "hold"
        self.publisher = self.create_publisher(MultiDOFJointTrajectory, TOPICS["reference"], RELIABLE_QOS)
        self.create_subscription(PoseStamped, TOPICS["platform_pose"], self._on_platform_pose, RELIABLE_QOS)
        self.create_subscription(PoseStamped, "~/goal_pose", self._on_goal_pose, RELIABLE_QOS)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_timer(parameters.controllers.period, self._publish)

    @property
    def description(self) -> str:
        return self.player.description

    # -------------------------------------------------------------- callbacks
    def _on_platform_pose(self, message: PoseStamped) -> None:
        try:
            pose = pose_vector(message)
        except (InvalidInputError, ValueError) as error:
            self.get_logger().warning(f"ignoring platform pose: {error}", throttle_duration_sec=1.0)
            return
        changes = self.player.changes
        self.player.measured(pose, seconds(self))
        if self.player.changes != changes:
            self.get_logger().info(f"reference: {self.player.description}")

    def _on_goal_pose(self, message: PoseStamped) -> None:
        try:
            check_frame(message.header.frame_id, self.names.base_frame, "goal pose")
            description = self.player.move_to(pose_vector(message), seconds(self))
        except (HexapodError, ValueError) as error:  # UnreachablePoseError is a HexapodError
            self.goals_rejected += 1
            self.get_logger().error(f"goal pose rejected: {error}")
            return
        self.get_logger().info(f"reference: {description}")

    def _on_start(self, request, response):
        return answer_change(self, response, lambda: self.player.start(seconds(self)),
                             f"cannot start {self.player.trajectory_name}")

    def _on_stop(self, request, response):
        return answer_change(self, response, lambda: self.player.stop(seconds(self)), "cannot stop")

    def _publish(self) -> None:
        now = seconds(self)
        if self._pending_autostart:
            self._pending_autostart = False
            self.get_logger().info(f"reference: {self.player.start(now, autostart=True)}")
        reference, failure = self.player.sample(now)
        if failure:
            self.get_logger().error(failure)
        if reference is None:
            return
        point = reference_point_from_euler(reference.pose, reference.velocity, reference.acceleration)
        self.publisher.publish(reference_message(now, self.names.base_frame, point))


def main(args=None) -> int:
    return run_node(TrajectoryNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
