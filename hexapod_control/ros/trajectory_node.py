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

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from std_srvs.srv import Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.trajectories import (
    HoldTrajectory,
    Reference,
    SmoothMove,
    make_trajectory,
)
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.ros.common import (
    RELIABLE_QOS,
    construct,
    declare_choice,
    declare_flag,
    load_params_file,
    reference_message,
    run_node,
    seconds,
)
from hexapod_control.ros.conventions import (
    TOPICS,
    check_frame,
    euler_from_message_quaternion,
    reference_point_from_euler,
)

NODE_NAME = "hexapod_trajectory"
TRAJECTORY_CHOICES = ("operational_space", "joint_space", "hold")


class MoveThenTrajectory:
    """A SmoothMove to a trajectory's start, then the trajectory with its clock starting at 0."""

    def __init__(self, move: SmoothMove, trajectory):
        self.move, self.trajectory = move, trajectory

    def sample(self, t: float) -> Reference:
        if t < self.move.duration:
            return self.move.sample(t)
        return self.trajectory.sample(t - self.move.duration)


class TrajectoryNode(Node):
    def __init__(self, node_name: str = NODE_NAME, **node_options):
        super().__init__(node_name, **node_options)
        construct(self, self._setup)

    def _setup(self) -> None:
        parameters = load_params_file(self)
        self.names = parameters.ros
        self.model = HexapodModel(parameters)
        self.move_settings = parameters.trajectories.move
        self.trajectory_name = declare_choice(
            self, "trajectory", "operational_space", TRAJECTORY_CHOICES, "trajectory run by ~/start (or autostart)"
        )
        autostart = declare_flag(self, "autostart", False, "run the trajectory at once; the robot must be at its start")
        period = parameters.controllers.period

        self.active = None  # object with sample(t) -> Reference, or None before any pose is known
        self.origin = 0.0  # node-clock time at which the active trajectory's t = 0
        self.description = "waiting for the platform pose"
        self.last_reference: Reference | None = None
        self.measured_pose: np.ndarray | None = None
        self.goals_rejected = 0
        # Autostart begins at the first publication, not at construction: under use_sim_time the
        # clock reads 0 until the first /clock, and the simulation may already be running then
        # (the controller holds until a reference arrives), so a construction-time origin would
        # make the reference jump ahead into the trajectory.
        self._pending_autostart = autostart and self.trajectory_name != "hold"

        self.publisher = self.create_publisher(MultiDOFJointTrajectory, TOPICS["reference"], RELIABLE_QOS)
        self.create_subscription(PoseStamped, TOPICS["platform_pose"], self._on_platform_pose, RELIABLE_QOS)
        self.create_subscription(PoseStamped, "~/goal_pose", self._on_goal_pose, RELIABLE_QOS)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_timer(period, self._publish)

    # -------------------------------------------------------------- trajectory selection
    def _selected_trajectory(self):
        return make_trajectory(self.trajectory_name, self.model)

    def _activate(self, trajectory, description: str) -> None:
        self.active, self.origin, self.description = trajectory, seconds(self), description
        self.get_logger().info(f"reference: {description}")

    def _current_pose(self) -> np.ndarray | None:
        """Where a new motion starts: the current reference, else the measured pose."""
        if self.last_reference is not None:
            return self.last_reference.pose
        return self.measured_pose

    def _move_to(self, target: np.ndarray) -> SmoothMove:
        start = self._current_pose()
        if start is None:
            raise InvalidInputError("no current pose yet (no reference published, no platform_pose received)")
        return SmoothMove(self.model, start, target, start_time=0.0, settings=self.move_settings)

    # -------------------------------------------------------------- callbacks
    def _on_platform_pose(self, message: PoseStamped) -> None:
        try:
            self.measured_pose = _pose_vector(message)
        except (InvalidInputError, ValueError) as error:
            self.get_logger().warning(f"ignoring platform pose: {error}", throttle_duration_sec=1.0)
            return
        if self.active is None:
            self._activate(HoldTrajectory(self.measured_pose), "hold at the measured pose")

    def _on_goal_pose(self, message: PoseStamped) -> None:
        try:
            check_frame(message.header.frame_id, self.names.base_frame, "goal pose")
            target = _pose_vector(message)
            move = self._move_to(target)
        except (HexapodError, ValueError) as error:  # UnreachablePoseError is a HexapodError
            self.goals_rejected += 1
            self.get_logger().error(f"goal pose rejected: {error}")
            return
        self._activate(move, f"move to {np.round(target, 4).tolist()} in {move.duration:.3f} s")

    def _on_start(self, request, response):
        if self.trajectory_name == "hold":
            response.success, response.message = False, "the selected trajectory is 'hold': nothing to start"
            return response
        try:
            trajectory = self._selected_trajectory()
            move = self._move_to(trajectory.sample(0.0).pose)
        except (HexapodError, ValueError) as error:
            response.success, response.message = False, f"cannot start {self.trajectory_name}: {error}"
            self.get_logger().error(response.message)
            return response
        self._activate(MoveThenTrajectory(move, trajectory), f"{self.trajectory_name} after a {move.duration:.3f} s move to its start")
        response.success, response.message = True, self.description
        return response

    def _on_stop(self, request, response):
        pose = self._current_pose()
        if pose is None:
            response.success, response.message = False, "nothing to stop: no current pose yet"
            return response
        self._activate(HoldTrajectory(pose), "hold at the current reference (stopped)")
        response.success, response.message = True, self.description
        return response

    def _publish(self) -> None:
        if self._pending_autostart:
            self._pending_autostart = False
            self._activate(self._selected_trajectory(), f"{self.trajectory_name} (autostart)")
        if self.active is None:
            return
        now = seconds(self)
        try:
            reference = self.active.sample(now - self.origin)
            point = reference_point_from_euler(reference.pose, reference.velocity, reference.acceleration)
        except (HexapodError, ValueError) as error:
            self.get_logger().error(f"{self.description} failed to sample: {error}; holding")
            pose = self._current_pose()
            self.active = HoldTrajectory(pose) if pose is not None else None
            self.description = "hold after a trajectory failure"
            return
        self.last_reference = reference
        self.publisher.publish(reference_message(now, self.names.base_frame, point))


def _pose_vector(message: PoseStamped) -> np.ndarray:
    """(x, y, z, lambda, mu, nu) of a PoseStamped; ValueError on a non-unit or non-finite quaternion."""
    p, o = message.pose.position, message.pose.orientation
    values = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w])
    if not np.all(np.isfinite(values)):
        raise InvalidInputError(f"pose holds a non-finite value: {values.tolist()}")
    return np.array([p.x, p.y, p.z, *euler_from_message_quaternion(o.x, o.y, o.z, o.w)])


def main(args=None) -> int:
    return run_node(TrajectoryNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
