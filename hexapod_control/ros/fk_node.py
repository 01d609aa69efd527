"""Forward-kinematics node: /joint_states -> platform pose, twist, passive angles, diagnostics.

Subscribes  ``/joint_states`` (sensor_msgs/JointState; joints named in ``ros.joint_names``)
Publishes   ``/hexapod/platform_pose`` (geometry_msgs/PoseStamped, frame ``ros.base_frame``)
            ``/hexapod/platform_twist`` (geometry_msgs/TwistStamped: linear = (x, y, z) rates,
            angular = omega in the base frame, from xi_dot = J_A q_dot and omega = T(psi) psi_dot)
            ``/hexapod/passive_joint_states`` (sensor_msgs/JointState: phi_1..3 and their rates A(q) q_dot)
            ``/diagnostics`` (FK iterations, residual, constraint and Jacobian conditioning)
Parameters  ``params_file``; ``use_sim_time``.

Every output carries the joint state's stamp. On an invalid joint state or an FK failure nothing
but an ERROR diagnostic is published: a stale pose is better than a wrong one. The Jacobian
conditioning is graded with the controllers' thresholds (``controllers.singularity``): WARN
where they switch to damped least squares, ERROR where they stop.
"""

from __future__ import annotations

from geometry_msgs.msg import PoseStamped, TwistStamped
from sensor_msgs.msg import JointState

from hexapod_control.conventions import (
    TOPICS,
    joint_state_arrays,
    time_from_stamp,
)
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.rotations import quaternion_from_euler_zyx
from hexapod_control.ros.common import (
    LEVEL_ERROR,
    LEVEL_OK,
    LEVEL_WARN,
    RELIABLE_QOS,
    DiagnosticsPublisher,
    HexapodNode,
    run_node,
    seconds,
    twist_message,
)

NODE_NAME = "hexapod_forward_kinematics"


class ForwardKinematicsNode(HexapodNode):
    default_name = NODE_NAME

    def _setup(self, parameters) -> None:
        self.names = parameters.ros
        self.model = HexapodModel(parameters)  # builds the compiled dynamics (J_A) before the first message
        self.kinematic_state = self.model.create_state()
        self.singularity = parameters.controllers.singularity
        diagnostics_period = parameters.safety.diagnostics_period

        self.pose_publisher = self.create_publisher(PoseStamped, TOPICS["platform_pose"], RELIABLE_QOS)
        self.twist_publisher = self.create_publisher(TwistStamped, TOPICS["platform_twist"], RELIABLE_QOS)
        self.passive_publisher = self.create_publisher(JointState, TOPICS["passive_joint_states"], RELIABLE_QOS)
        self.diagnostics = DiagnosticsPublisher(self, TOPICS["diagnostics"], f"{self.get_name()}: forward kinematics", diagnostics_period)
        self.create_subscription(JointState, TOPICS["joint_states"], self._on_joint_state, RELIABLE_QOS)
        self.failures = 0

    def _on_joint_state(self, message: JointState) -> None:
        now = seconds(self)
        try:
            q, qd = joint_state_arrays(message.name, message.position, message.velocity, self.names.joint_names)
        except InvalidInputError as error:
            self._report_failure(now, "invalid joint state", str(error))
            return
        try:
            fk = self.model.forward_kinematics(q, self.kinematic_state)
            jacobian = self.model.analytic_jacobian(q, phi=fk.phi)
        except HexapodError as error:
            self._report_failure(now, "forward kinematics failed", f"at q = {q.tolist()}: {error}")
            return

        header_stamp, frame = message.header.stamp, self.names.base_frame

        pose = PoseStamped()
        pose.header.stamp, pose.header.frame_id = header_stamp, frame
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = (float(v) for v in fk.position)
        o = pose.pose.orientation
        o.x, o.y, o.z, o.w = quaternion_from_euler_zyx(fk.euler_zyx)
        self.pose_publisher.publish(pose)

        self.twist_publisher.publish(twist_message(header_stamp, frame, fk.euler_zyx, jacobian.analytic @ qd))

        passive = JointState()
        passive.header.stamp = header_stamp
        passive.name = list(self.names.passive_joint_names)
        passive.position = [float(v) for v in fk.phi]
        passive.velocity = [float(v) for v in jacobian.passive_map[6:] @ qd]  # phi_dot rows of A(q)
        self.passive_publisher.publish(passive)

        level, message_text = self._grade(jacobian.jacobian_conditioning, fk.constraint_conditioning)
        if fk.outside_travel and level == LEVEL_OK:
            level, message_text = LEVEL_WARN, "actuator outside its travel"
        self.diagnostics.update(
            now,
            level,
            message_text,
            {
                "stamp": time_from_stamp(header_stamp),
                "iterations": fk.iterations,
                "residual": fk.residual,
                "constraint_conditioning": fk.constraint_conditioning,
                "jacobian_conditioning": jacobian.jacobian_conditioning,
                "outside_travel": list(fk.outside_travel),
                "failures": self.failures,
            },
        )

    def _grade(self, jacobian_conditioning: float, constraint_conditioning: float) -> tuple[bytes, str]:
        rule = self.singularity
        if constraint_conditioning < rule.constraint_stop_threshold or jacobian_conditioning < rule.stop_threshold:
            return LEVEL_ERROR, "singular configuration"
        if jacobian_conditioning < rule.damping_threshold:
            return LEVEL_WARN, "near a singular configuration"
        return LEVEL_OK, "ok"

    def _report_failure(self, now: float, summary: str, detail: str) -> None:
        """ERROR diagnostic; the summary is the message (a fixed text, so repeats are throttled)."""
        self.failures += 1
        self.get_logger().error(f"{summary}: {detail}", throttle_duration_sec=1.0)
        self.diagnostics.update(now, LEVEL_ERROR, summary, {"error": detail, "failures": self.failures})


def main(args=None) -> int:
    return run_node(ForwardKinematicsNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
