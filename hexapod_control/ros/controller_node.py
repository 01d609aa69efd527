"""Controller node: /joint_states + reference -> actuator forces, behind the safety supervisor.

Subscribes  ``/joint_states`` (sensor_msgs/JointState), ``/hexapod/reference``
            (trajectory_msgs/MultiDOFJointTrajectory, one point; the latest one is used).
Publishes   ``/effort_controller/commands`` (std_msgs/Float64MultiArray: data = the six forces [N]
            in ``ros.joint_names`` order, the ros2_control JointGroupEffortController convention;
            the layout is left empty, as that controller ignores it).
            ``/diagnostics``: supervisor state, action and reason, controller status and message,
            saturated joints, tracking errors, conditioning, error counters.
Services    ``~/arm`` (std_srvs/SetBool): true arms (or re-arms after a fault), false disarms.
Parameters  ``params_file``; ``controller`` = double_loop | computed_torque; ``gain_set`` = robot |
            simulated_plant (the double loop's velocity gains for a simulated rigid-body plant);
            ``arm_on_start`` (default false): arm at the first valid joint state (simulation);
            ``use_sim_time``.

Timing: the control law runs once per received joint state (event-driven), not on a timer.
A joint state not stamped later than the last one taken is ignored (counted in the diagnostics):
the driver must stamp its states, as ros2_control's joint_state_broadcaster does.
The feedback then reaches the drives with the least delay, and a simulator that waits for each
command steps in lockstep with the controller, deterministically. The driver must therefore
publish /joint_states at ``controllers.rate`` (the double loop integrates with the nominal period).
A watchdog timer (``safety.watchdog_period``, node clock) publishes zero forces while the joint
states are stale, since the event-driven path is silent exactly then.

Disarmed, the node answers every joint state with zero forces (the drives let go: on the real
robot the platform then sinks onto its stops, so arm before relying on it). The full
safe-behaviour rule (ZERO / HOLD / CONTROL, latching, re-arming) is in :mod:`hexapod_control.control.safety`.
The controller and the supervisor share one HexapodModel; each keeps its own FK warm start.
"""

from __future__ import annotations

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.controllers import CONTROLLER_NAMES, GAIN_SETS, ControlStatus, make_controller
from hexapod_control.control.safety import (
    Action,
    Decision,
    SafetySupervisor,
    SupervisorState,
)
from hexapod_control.errors import InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.ros.common import (
    LEVEL_ERROR,
    LEVEL_OK,
    LEVEL_WARN,
    RELIABLE_QOS,
    DiagnosticsPublisher,
    construct,
    declare_choice,
    declare_flag,
    load_params_file,
    reference_point,
    run_node,
    seconds,
)
from hexapod_control.ros.conventions import TOPICS, check_frame, time_from_stamp

NODE_NAME = "hexapod_controller"


class ControllerNode(Node):
    def __init__(self, node_name: str = NODE_NAME, **node_options):
        super().__init__(node_name, **node_options)
        construct(self, self._setup)

    def _setup(self) -> None:
        parameters = load_params_file(self)
        self.names = parameters.ros
        self.controller_name = declare_choice(self, "controller", "double_loop", CONTROLLER_NAMES, "control law")
        self.arm_on_start = declare_flag(self, "arm_on_start", False, "arm at the first valid joint state")
        gain_set = declare_choice(
            self, "gain_set", "robot", GAIN_SETS,
            "gains for the real robot, or for a simulated rigid-body plant (see controllers.py)",
        )
        model = HexapodModel(parameters)
        self.controller = make_controller(self.controller_name, model, gain_set=gain_set)
        settings = parameters.safety
        self.supervisor = SafetySupervisor(model, settings, self.names.joint_names)

        self.command_publisher = self.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
        self.diagnostics = DiagnosticsPublisher(self, TOPICS["diagnostics"], f"{self.get_name()}: safety", settings.diagnostics_period)
        self.create_subscription(JointState, TOPICS["joint_states"], self._on_joint_state, RELIABLE_QOS)
        self.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], self._on_reference, RELIABLE_QOS)
        self.create_service(SetBool, "~/arm", self._on_arm)
        self.create_timer(settings.watchdog_period, self._on_watchdog)
        self.create_timer(settings.diagnostics_period, self._on_diagnostics_timer)
        self.last_decision: Decision | None = None
        self.last_reference_stamp: float | None = None  # header stamp of the latest valid reference
        self.commands_published = 0

    # -------------------------------------------------------------- inputs
    def _on_joint_state(self, message: JointState) -> None:
        now, stamp = seconds(self), time_from_stamp(message.header.stamp)
        if not self.supervisor.is_new(stamp):
            return  # a copy (e.g. a lockstep simulator's resend) or out of order: answered already
        feedback = self.supervisor.joint_state(now, stamp, message.name, message.position, message.velocity)
        if feedback is None:
            self.get_logger().error(self.supervisor.last_error, throttle_duration_sec=1.0)
        elif self.arm_on_start:
            self.arm_on_start = False  # once: a later fault must be re-armed by the operator
            accepted, text = self.supervisor.arm(now, self.controller.reset)
            (self.get_logger().info if accepted else self.get_logger().error)(f"arm on start: {text}")
        self._publish(now, self.supervisor.command(now, self.controller.update))

    def _on_reference(self, message: MultiDOFJointTrajectory) -> None:
        now, stamp = seconds(self), time_from_stamp(message.header.stamp)
        try:
            check_frame(message.header.frame_id, self.names.base_frame, "reference")
            point, error = reference_point(message), ""
        except InvalidInputError as failure:
            point, error = None, str(failure)
        if self.supervisor.reference_point(now, stamp, point, error):
            self.last_reference_stamp = stamp
        else:
            self.get_logger().error(self.supervisor.last_error, throttle_duration_sec=1.0)

    def _on_arm(self, request, response):
        now = seconds(self)
        if request.data:
            response.success, response.message = self.supervisor.arm(now, self.controller.reset)
        else:
            self.supervisor.disarm()
            response.success, response.message = True, "disarmed"
        self.get_logger().info(f"arm request {request.data}: {response.message}")
        self._report(now, self.last_decision)
        return response

    def _on_watchdog(self) -> None:
        now = seconds(self)
        decision = self.supervisor.watchdog(now)
        if decision is not None:
            if self.supervisor.state == SupervisorState.FAULT:
                self.get_logger().error(self.supervisor.reason, throttle_duration_sec=1.0)
            self._publish(now, decision)

    def _on_diagnostics_timer(self) -> None:
        self._report(seconds(self), self.last_decision)

    # -------------------------------------------------------------- outputs
    def _publish(self, now: float, decision: Decision) -> None:
        self.command_publisher.publish(Float64MultiArray(data=[float(f) for f in decision.forces]))
        self.commands_published += 1
        self.last_decision = decision
        self._report(now, decision)

    def _report(self, now: float, decision: Decision | None) -> None:
        supervisor = self.supervisor
        control = decision.control if decision is not None else None
        action = decision.action.value if decision is not None else Action.ZERO.value
        if supervisor.state == SupervisorState.FAULT:
            level, text = LEVEL_ERROR, f"fault ({supervisor.fault_action.value}): {supervisor.reason}"
        elif supervisor.state == SupervisorState.DISARMED:
            level, text = LEVEL_OK, f"disarmed: {supervisor.reason}"
        elif decision is not None and decision.action != Action.CONTROL:
            level, text = LEVEL_WARN, f"{decision.action.value}: {decision.reason}"
        elif control is not None and control.status != ControlStatus.OK:
            level, text = LEVEL_WARN, f"controller {control.status.value}"
        else:
            level, text = LEVEL_OK, "tracking"
        saturated = [] if decision is None else [n for n, s in zip(self.names.joint_names, decision.saturated) if s]
        values = {
            "state": supervisor.state.value,
            "action": action,
            "reason": supervisor.reason,
            "controller": self.controller_name,
            "controller_status": control.status.value if control is not None else "not run",
            "controller_message": control.message if control is not None else "",
            "saturated": saturated,
            "forces": decision.forces if decision is not None else [],
            "position_error_norm": control.position_error_norm if control is not None else float("nan"),
            "orientation_error_norm": control.orientation_error_norm if control is not None else float("nan"),
            "jacobian_conditioning": control.jacobian_conditioning if control is not None else float("nan"),
            "invalid_joint_states": supervisor.invalid_joint_states,
            "repeated_joint_states": supervisor.repeated_joint_states,
            "invalid_references": supervisor.invalid_references,
            "faults": supervisor.faults,
            "last_error": supervisor.last_error,
        }
        self.diagnostics.update(now, level, text, values)


def main(args=None) -> int:
    return run_node(ControllerNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
