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
            ``use_sim_time``. All are read-only, ``use_sim_time`` too: a node switched to an absent
            /clock at runtime would stop its own watchdog. Every safety number is in the file.

Timing: the control law runs once per received joint state (event-driven), not on a timer.
A joint state not stamped later than the last one taken is ignored (counted in the diagnostics):
the driver must stamp its states, as ros2_control's joint_state_broadcaster does.
The feedback then reaches the drives with the least delay, and a simulator that waits for each
command steps in lockstep with the controller, deterministically. The controllers run on the
time between the stamps (the double loop's integral, the delay predictor), so the driver's rate
need not be ``controllers.rate`` exactly, but it must lie within the gain set's ``valid_rates``:
outside, arming is refused and a rate drifting out while armed holds (control/safety.py).
A watchdog timer (``safety.watchdog_period``, node clock) publishes zero forces while the joint
states are stale, since the event-driven path is silent exactly then. A second one runs on the
steady clock: with /clock absent, stopped or going backwards the node clock never makes anything
look stale, so it compares monotonic arrival times (timeout ``safety.joint_state_timeout``, or
``safety.sim_time_stall_timeout`` under use_sim_time, where a simulation may run slower than real
time). States stamped too far ahead of the node's clock or too long ago are rejected on arrival.

Below the node. If this process dies or hangs, nothing it decides reaches the drives, and
ros2_control's JointGroupEffortController keeps writing the last force for ever. The drive side
must therefore zero the force when commands stop: a command timeout in the ros2_control hardware
interface (compare each write with the time of the last command) or in the drives (their fieldbus
or analog watchdog), a few control periods long. The package's test driver
(:mod:`hexapod_control.ros.fake_driver`) has one (``command_timeout``), and test_nodes.py kills
this node's process to check that the force there drops to zero within it.

Disarmed, the node answers every joint state with zero forces (the drives let go: on the real
robot the platform then sinks onto its stops, so arm before relying on it). The full
safe-behaviour rule (ZERO / HOLD / CONTROL, latching, re-arming) is in :mod:`hexapod_control.control.safety`.
The node is a thin shell over :class:`hexapod_control.control.loop.ControlLoop` (supervisor,
controller, diagnostics grading), which the lockstep loop, the main job and replay run too.
"""

from __future__ import annotations

import array
import math
import time

import numpy as np
from rcl_interfaces.msg import ParameterDescriptor, ParameterType
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.controllers import CONTROLLER_NAMES, GAIN_SETS
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.safety import Decision, SupervisorState
from hexapod_control.conventions import TOPICS, check_frame, time_from_stamp
from hexapod_control.errors import InvalidInputError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.ros.common import (
    RELIABLE_QOS,
    DiagnosticsPublisher,
    HexapodNode,
    declare_choice,
    declare_flag,
    reference_point,
    run_node,
    seconds,
)
from hexapod_control.ros.wire import JointStateFields

NODE_NAME = "hexapod_controller"


class ControllerNode(HexapodNode):
    default_name = NODE_NAME
    takes_references = True  # from the reference topic (the one-process stack samples its own)
    # ControlLoop.joint_state's reference_source: the one-process stack samples its trajectory at
    # the stamp of each state it answers; this node takes references by topic.
    reference_source = None

    def _setup(self, parameters) -> None:
        use_sim_time = self.get_parameter("use_sim_time").value
        self.set_descriptor("use_sim_time", ParameterDescriptor(
            type=ParameterType.PARAMETER_BOOL, description="run on /clock; fixed at start (the watchdog's clock)",
            read_only=True))
        self.names = parameters.ros
        self.controller_name = declare_choice(self, "controller", "double_loop", CONTROLLER_NAMES, "control law")
        arm_on_start = declare_flag(self, "arm_on_start", False, "arm at the first valid joint state")
        gain_set = declare_choice(
            self, "gain_set", "robot", GAIN_SETS,
            "gains for the real robot, or for a simulated rigid-body plant (see controllers.py)",
        )
        self.control = ControlLoop(HexapodModel(parameters), self.controller_name, gain_set, arm_on_start)
        self.supervisor, self.controller = self.control.supervisor, self.control.controller
        safety = parameters.safety
        self.command_publisher = self.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
        self._command = Float64MultiArray()  # reused: publish() serialises it at once
        self.diagnostics = DiagnosticsPublisher(self, TOPICS["diagnostics"], f"{self.get_name()}: safety", safety.diagnostics_period)
        if self.takes_references:
            self.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], self._on_reference, RELIABLE_QOS)
        self.create_service(SetBool, "~/arm", self._on_arm)
        self.steady_timeout = safety.sim_time_stall_timeout if use_sim_time else safety.joint_state_timeout
        self.diagnostics_timer = self.create_timer(safety.diagnostics_period, self._on_diagnostics_timer)
        self.commands_published = 0
        self._create_loop(safety.watchdog_period)

    def _create_loop(self, watchdog_period: float) -> None:
        """The joint-state subscription and both watchdogs, run by the executor (the robot stack may
        run them in a loop of its own)."""
        self.create_subscription(JointState, TOPICS["joint_states"], self._on_joint_state, RELIABLE_QOS)
        self.create_timer(watchdog_period, self._on_watchdog)
        self.create_timer(watchdog_period, self._on_steady_watchdog, clock=Clock(clock_type=ClockType.STEADY_TIME))

    @property
    def last_decision(self) -> Decision | None:
        return self.control.last_decision

    @property
    def last_reference_stamp(self) -> float | None:
        """Header stamp of the latest valid reference."""
        return self.control.last_reference_stamp

    # -------------------------------------------------------------- inputs
    def _on_joint_state(self, message: JointState) -> None:
        self._answer_joint_state(JointStateFields.of(message))

    def _answer_joint_state(self, state: JointStateFields) -> None:
        now, stamp = seconds(self), state.stamp
        arming_on_start = self.control.arm_on_start
        record = self.control.joint_state(now, stamp, state.names, state.positions, state.velocities,
                                          steady=time.monotonic(), reference_source=self.reference_source,
                                          efforts=state.efforts)
        if record is not None:  # else a copy (e.g. a lockstep simulator's resend) or out of order: answered already
            self._answered(now, stamp, record, arming_on_start)

    def _answered(self, now: float, stamp: float, record, arming_on_start: bool = False) -> None:
        """Publish the answer to the state stamped ``stamp`` and what follows it."""
        if record.error:
            self.get_logger().error(record.error, throttle_duration_sec=1.0)
        if arming_on_start and not self.control.arm_on_start:
            accepted, text = self.control.last_arm
            (self.get_logger().info if accepted else self.get_logger().error)(f"arm on start: {text}")
        self._publish_forces(record.forces, stamp)
        self.control.published(stamp, seconds(self))
        if record.diagnostic is not None:
            self._publish_status(now, record.diagnostic)
        self._after_joint_state(stamp, record)

    def _judge_joint_state(self, state: JointStateFields) -> None:
        """Validate a state that will not be answered (a newer one waits): safety.py judges every one."""
        self.control.judge(seconds(self), state.stamp, state.names, state.positions, state.velocities,
                           steady=time.monotonic())

    def _after_joint_state(self, stamp: float, record) -> None:
        """Hook of the one-process stack: its decimated outputs."""

    def _on_reference(self, message: MultiDOFJointTrajectory) -> None:
        now, stamp = seconds(self), time_from_stamp(message.header.stamp)
        try:
            check_frame(message.header.frame_id, self.names.base_frame, "reference")
            point, error = reference_point(message), ""
        except InvalidInputError as failure:
            point, error = None, str(failure)
        if not self.control.reference(now, stamp, point, error):
            self.get_logger().error(self.supervisor.last_error, throttle_duration_sec=1.0)

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

    def _on_watchdog(self) -> None:
        now = seconds(self)
        self._publish_watchdog(now, self.control.watchdog(now))

    def _on_steady_watchdog(self) -> None:
        self._publish_watchdog(seconds(self), self.control.steady_watchdog(time.monotonic(), self.steady_timeout))

    def _publish_watchdog(self, now: float, decision: Decision | None) -> None:
        if decision is not None:
            if self.supervisor.state == SupervisorState.FAULT:
                self.get_logger().error(self.supervisor.reason, throttle_duration_sec=1.0)
            self._publish_forces(decision.forces)
            status = self.control.diagnostic(now)
            if status is not None:
                self._publish_status(now, status)

    def _on_diagnostics_timer(self) -> None:
        now = seconds(self)
        status = self.control.diagnostic(now)
        if status is not None:
            self._publish_status(now, status)

    # -------------------------------------------------------------- outputs
    def _publish_forces(self, forces, answers: float = math.nan) -> None:
        """Publish ``forces``; ``answers``: the stamp of the joint state they answer (NaN: a watchdog's)."""
        command = self._command
        command.data = array.array("d", np.asarray(forces, dtype=float).tobytes())  # taken as is, not item by item
        self.command_publisher.publish(command)
        self.commands_published += 1

    def _publish_status(self, now: float, status) -> None:
        self.diagnostics.publish(now, status.level, status.message, status.values)


def main(args=None) -> int:
    return run_node(ControllerNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
