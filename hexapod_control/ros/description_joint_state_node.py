"""Full joint state of the robot description, for robot_state_publisher: /joint_states -> every joint.

Subscribes  ``/joint_states`` (sensor_msgs/JointState; the sliders named in ``ros.joint_names``)
Publishes   ``/hexapod/description_joint_states`` (sensor_msgs/JointState: every movable joint of
            the description of :mod:`hexapod_control.simulation.gazebo_description`, the sliders
            and the passive joints from the forward kinematics; positions only, with the input's
            stamp)
Parameters  ``params_file``; ``rate`` [Hz] (default 30): the input is decimated by its stamps to
            at most this rate, so the FK runs at the rate a viewer needs, not at the 1 kHz of the
            control loop; ``use_sim_time``.

robot_state_publisher, given the description (``hexapod_gazebo_description --plain``) and this
topic as its ``joint_states``, then publishes the TF of all 25 bodies (the launch files do this).

A joint state is published when its stamp is at least 1/``rate`` after the last one published, or
before it (a restarted driver, a bag played again). An invalid joint state or an FK failure is
logged (throttled) and skipped, and the next joint state is tried at once: a stale pose in RViz is
better than a wrong one.
"""

from __future__ import annotations

import math

from rcl_interfaces.msg import ParameterDescriptor
from sensor_msgs.msg import JointState

from hexapod_control.conventions import TOPICS, joint_state_arrays
from hexapod_control.errors import HexapodError, InvalidInputError, ParameterError
from hexapod_control.ros.common import RELIABLE_QOS, HexapodNode, run_node
from hexapod_control.simulation.description_joints import DescriptionJoints

NODE_NAME = "hexapod_description_joint_states"
# RViz renders at 30 frames per second by default: a faster joint state would not be seen.
DEFAULT_RATE_HZ = 30.0
LOG_THROTTLE_S = 1.0
NANOSECONDS_PER_SECOND = 1_000_000_000


def declare_rate(node) -> float:
    """The ``rate`` ROS parameter [Hz]: a positive finite number (an integer is accepted)."""
    descriptor = ParameterDescriptor(description="highest publishing rate [Hz]; the input is decimated by its stamps",
                                     read_only=True, dynamic_typing=True)
    value = node.declare_parameter("rate", DEFAULT_RATE_HZ, descriptor).value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ParameterError(f"ROS parameter 'rate' of node {node.get_name()!r}: expected a positive number of Hz, "
                             f"got {value!r}")
    return float(value)


class DescriptionJointStateNode(HexapodNode):
    default_name = NODE_NAME

    def _setup(self, parameters) -> None:
        # Whole nanoseconds, as stamps are: a rate equal to the input's then keeps every message.
        self.period_ns = round(1e9 / declare_rate(self))
        self.slider_names = parameters.ros.joint_names
        self.joints = DescriptionJoints(parameters)
        self.kinematic_state = self.joints.model.create_state()
        self.last_published_ns: int | None = None
        self.publisher = self.create_publisher(JointState, TOPICS["description_joint_states"], RELIABLE_QOS)
        self.create_subscription(JointState, TOPICS["joint_states"], self._on_joint_state, RELIABLE_QOS)

    def _due(self, stamp_ns: int) -> bool:
        last = self.last_published_ns
        return last is None or stamp_ns < last or stamp_ns >= last + self.period_ns

    def _on_joint_state(self, message: JointState) -> None:
        stamp_ns = message.header.stamp.sec * NANOSECONDS_PER_SECOND + message.header.stamp.nanosec
        if not self._due(stamp_ns):
            return
        try:
            q, _ = joint_state_arrays(message.name, message.position, message.velocity, self.slider_names)
        except InvalidInputError as error:
            self.get_logger().error(f"invalid joint state: {error}", throttle_duration_sec=LOG_THROTTLE_S)
            return
        try:
            positions = self.joints.positions(q, self.kinematic_state)
        except HexapodError as error:
            self.get_logger().error(f"forward kinematics failed at q = {q.tolist()}: {error}",
                                    throttle_duration_sec=LOG_THROTTLE_S)
            return
        output = JointState()
        output.header.stamp = message.header.stamp
        output.name = list(self.joints.names)
        output.position = [float(v) for v in positions]
        self.publisher.publish(output)
        self.last_published_ns = stamp_ns


def main(args=None) -> int:
    return run_node(DescriptionJointStateNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
