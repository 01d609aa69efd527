"""Inverse-dynamics node: the model's forces for the measured motion, the residual, the feed-forward.

Subscribes  ``/joint_states`` (sensor_msgs/JointState), ``/effort_controller/commands``
            (std_msgs/Float64MultiArray, the forces the controller sends) and ``/hexapod/reference``
            (trajectory_msgs/MultiDOFJointTrajectory).
Publishes   with the joint state's stamp and ``ros.joint_names``, as sensor_msgs/JointState:
            ``/hexapod/inverse_dynamics/predicted``: position, velocity = the filtered q, q_dot,
            effort = the forces the model predicts for the measured motion [N];
            ``/hexapod/inverse_dynamics/residual``: effort = commanded - predicted [N];
            with the reference's stamp: ``/hexapod/inverse_dynamics/feedforward``: position, velocity
            = the reference's q_d, q_d_dot (inverse kinematics, J_A), effort = the model's forces
            along it [N];
            ``/diagnostics``: OK while the residual stays within ``inverse_dynamics.residual_band``,
            WARN when a slider has left it for ``band_duration`` (a payload change, a collision, a
            drive fault, drive parameters that no longer fit), with the residual in the values.
Parameters  ``params_file`` (the model: give it the identified drives, e.g. the overlay written by
            ``hexapod_identify``); ``use_sim_time``.

The computation is :class:`hexapod_control.control.force_residual.ForceResidualMonitor` (filters,
alignment of the commands, band); this node converts messages. It is the live twin of the
evaluator's model check. It answers every joint state, so it costs one forward kinematics and one
inverse dynamics per state, and one inverse kinematics per reference.
"""

from __future__ import annotations

from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.force_residual import ForceResidualMonitor
from hexapod_control.control.trajectories import Reference
from hexapod_control.conventions import (
    TOPICS,
    check_frame,
    effort_array,
    euler_from_reference_point,
    joint_state_arrays,
    time_from_stamp,
)
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.ros.common import (
    RELIABLE_QOS,
    DiagnosticsPublisher,
    HexapodNode,
    reference_point,
    run_node,
    seconds,
)

NODE_NAME = "hexapod_inverse_dynamics"


class InverseDynamicsNode(HexapodNode):
    default_name = NODE_NAME

    def _setup(self, parameters) -> None:
        self.names = parameters.ros
        self.monitor = ForceResidualMonitor(HexapodModel(parameters))
        self.ignored = 0  # malformed messages
        self.predicted_publisher = self.create_publisher(JointState, TOPICS["predicted_forces"], RELIABLE_QOS)
        self.residual_publisher = self.create_publisher(JointState, TOPICS["force_residual"], RELIABLE_QOS)
        self.feedforward_publisher = self.create_publisher(JointState, TOPICS["feedforward_forces"], RELIABLE_QOS)
        self.diagnostics = DiagnosticsPublisher(
            self, TOPICS["diagnostics"], f"{self.get_name()}: force residual", parameters.safety.diagnostics_period
        )
        self.create_subscription(JointState, TOPICS["joint_states"], self._on_joint_state, RELIABLE_QOS)
        self.create_subscription(Float64MultiArray, TOPICS["effort_commands"], self._on_command, RELIABLE_QOS)
        self.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], self._on_reference, RELIABLE_QOS)

    # -------------------------------------------------------------- callbacks
    def _on_command(self, message: Float64MultiArray) -> None:
        try:
            self.monitor.command(effort_array(message.data, len(self.names.joint_names)))
        except InvalidInputError as error:
            self._ignore("effort command", error)

    def _on_joint_state(self, message: JointState) -> None:
        try:
            q, qd = joint_state_arrays(message.name, message.position, message.velocity, self.names.joint_names)
        except InvalidInputError as error:
            self._ignore("joint state", error)
            return
        sample = self.monitor.joint_state(time_from_stamp(message.header.stamp), q, qd)
        if sample is not None:
            self.predicted_publisher.publish(self._joint_state(message.header.stamp, sample.predicted,
                                                               sample.position, sample.velocity))
            self.residual_publisher.publish(self._joint_state(message.header.stamp, sample.residual))
        level, text = self.monitor.grade()
        self.diagnostics.update(seconds(self), level, text, {**self.monitor.status_values(), "ignored": self.ignored})

    def _on_reference(self, message: MultiDOFJointTrajectory) -> None:
        try:
            check_frame(message.header.frame_id, self.names.base_frame, "reference")
            pose, velocity, acceleration = euler_from_reference_point(reference_point(message))
            stamp = time_from_stamp(message.header.stamp)
            q, qd, _, forces = self.monitor.feedforward(Reference(stamp, pose, velocity, acceleration))
        except HexapodError as error:  # InvalidInputError, UnreachablePoseError, SingularityError
            self._ignore("reference", error)
            return
        self.feedforward_publisher.publish(self._joint_state(message.header.stamp, forces, q, qd))

    # -------------------------------------------------------------- helpers
    def _joint_state(self, stamp, effort, position=(), velocity=()) -> JointState:
        message = JointState()
        message.header.stamp = stamp
        message.name = list(self.names.joint_names)
        message.position = [float(v) for v in position]
        message.velocity = [float(v) for v in velocity]
        message.effort = [float(v) for v in effort]
        return message

    def _ignore(self, what: str, error: Exception) -> None:
        self.ignored += 1
        self.get_logger().warning(f"ignoring {what}: {error}", throttle_duration_sec=1.0)


def main(args=None) -> int:
    return run_node(InverseDynamicsNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
