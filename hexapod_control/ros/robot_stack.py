"""The robot stack: the controller, its supervisor and the trajectory in one lean process.

    ros2 run hexapod_control hexapod_robot_stack --ros-args -p controller:=computed_torque
    (or python -m hexapod_control.ros.robot_stack; launch/hardware.launch.py starts it)

On the robot's PC the separate Python nodes (trajectory, FK, controller) each cost most of a 1 kHz
period, mostly inside rclpy, and did not fit on two cores (doc/benchmarks.md). This node is the
controller node (:mod:`hexapod_control.ros.controller_node`: supervisor, both watchdogs, ``~/arm``,
read-only parameters) with the trajectory inside, and does the work of a cycle in one callback:

Hot path    ``/joint_states``: the trajectory is sampled at the state's stamp
            (:class:`TrajectoryPlayer`), the controller answers behind the safety supervisor
            (:class:`ControlLoop`), and the forces go out on ``/effort_controller/commands``.
            Nothing is logged per cycle.
Decimated   ``/hexapod/platform_pose`` (the controller's own FK of the state),
            ``/hexapod/platform_twist`` (as the FK node's) and ``/hexapod/reference`` at most
            ``publish_rate`` Hz, all three of one state's stamp; ``/diagnostics`` at once on a
            change of level or message, else every ``safety.diagnostics_period``. Both are built
            and published by a thread of their own (:mod:`hexapod_control.ros.output_thread`): the
            loop only hands over what they are made of, and while it tracks, the rcl loop in C
            records the answers due for publication in a ring that thread reads, without returning.
Changes     validated when they happen, never per cycle: ``~/start`` and ``~/stop``
            (std_srvs/Trigger), ``~/goal_pose`` (geometry_msgs/PoseStamped in the base frame: a
            smooth move checked along its path by inverse kinematics).
Parameters  those of the controller node; ``trajectory`` (run by ~/start); ``autostart``
            (simulation only); ``publish_rate`` [Hz]; ``executor`` (below); ``timing_log``: a
            path where the answered stamp and publication time of every command are written on
            shutdown (:mod:`hexapod_control.ros.timing_log`); ``realtime_priority`` (default 50,
            SCHED_FIFO for every thread as ros2_control's controller manager runs; 0: the normal
            scheduler; without the permission it warns and runs normally).
Diagnostics those of the controller node, plus the executor, the superseded joint states and the
            latency from a joint state's stamp to its command's publication (median, p99, max
            since the last status; NaN under use_sim_time, where stamps are not wall-clock times).

Executor (parameter ``executor``). ``wait_set``: the joint states wait alone in a wait
set of their own (:mod:`hexapod_control.ros.wait_set_loop`) and the watchdog checks run in that
loop at ``safety.watchdog_period``; services, parameters and the diagnostics timer are served by
polling the executor every ``SERVICE_POLL_PERIOD_S``, each poll starting no callback after
``SERVICE_POLL_BUDGET_S``: a flood of requests waits in its queue, and delays an answer by at most
that budget plus one callback. When the loop falls behind, only the newest waiting joint state is
answered; the older ones are counted as ``superseded_joint_states`` (an answer to them would be
overwritten at once) and judged all the same: a bad one counts and latches, a good one is a
spacing of the measured rate (control/safety.py). While tracking, disarmed or faulted, each
message's bytes go to the compiled step in one C call (ControlLoop.serialized_joint_state: the
reference read off the player's grid at the stamp, the command's bytes written; disarmed or
faulted, the player's hold follows the measured pose after each answer, or at each return of the
rcl loop in C). ``native`` (default): the same loop, where meanwhile an rcl loop in C
(:mod:`hexapod_control.ros.native_loop`) also waits, takes and publishes, so that no Python runs per
joint state; it returns to this loop for any message the compiled step does not finish, when the
joint states pause, and right after an answer for a diagnostics status when due, or for the
decimated outputs while disarmed or faulted (while tracking it records them for the outputs thread).
Its wait watches the services, timers (but the diagnostics timer) and other subscriptions too, and
returns as soon as one is ready, for the executor's poll: a request is served at once, or ``SERVICE_POLL_PERIOD_S`` after the previous poll when one ran just before (so that a
flood of requests is polled once per period at most, as before), and the blind poll runs only every
``WATCHED_POLL_PERIOD_S`` meanwhile (``wait_set`` where the loop in C cannot be built).
``single_threaded``: rclpy's SingleThreadedExecutor runs everything, as in the controller node.
``events``: rclpy's EventsExecutor (experimental). What each costs is measured by benchmarks/bench_loop.py
(doc/benchmarks.md).
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.experimental import EventsExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.bags import StepMessages
from hexapod_control.control.compiled_cycle import CycleLibrary
from hexapod_control.control.loop import Serialized
from hexapod_control.control.safety import Action, SupervisorState
from hexapod_control.control.trajectories import Reference
from hexapod_control.control.trajectory_player import TRAJECTORY_CHOICES, TrajectoryPlayer
from hexapod_control.conventions import TOPICS, check_frame
from hexapod_control.errors import HexapodError, InvalidInputError, ParameterError
from hexapod_control.model.rotations import angular_velocity_from_euler_rates, quaternion_from_euler_zyx
from hexapod_control.ros.common import (
    CONTROL_LOOP_PRIORITY,
    RELIABLE_QOS,
    answer_change,
    declare_choice,
    declare_flag,
    declare_realtime_priority,
    declare_timing_log,
    pose_vector,
    run_node,
    seconds,
    use_realtime_priority,
)
from hexapod_control.ros.controller_node import ControllerNode
from hexapod_control.ros.native_loop import RclLoop, RecordRing, build
from hexapod_control.ros.output_thread import OutputThread
from hexapod_control.ros.timing_log import LatencyWindow, TimingLog
from hexapod_control.ros.wait_set_loop import WaitSetLoop
from hexapod_control.ros.wire import JointStateFields, JointStateWire, float64_array_message

NODE_NAME = "hexapod_robot_stack"
DEFAULT_PUBLISH_RATE_HZ = 50.0  # decimated outputs: enough for RViz and plots, negligible CPU
EXECUTORS = ("native", "wait_set", "single_threaded", "events")
OWN_LOOPS = ("native", "wait_set")  # the joint states in a loop of their own, not in an rclpy executor
# Services, parameters and the diagnostics timer wait at most this long [s] for the executor's poll.
SERVICE_POLL_PERIOD_S = 0.01
# The blind poll's period [s] while the rcl loop in C watches the executor's entities: only for what
# it does not watch (guard conditions, QoS event handlers, the executor's tasks); each costs a rebuild
# of rclpy's wait set, longer than a 4 kHz period (and a return of the loop 10 ms later, when it
# starts watching again). Ctrl-C ends the loop at the next return: this long at most.
WATCHED_POLL_PERIOD_S = 1.0
# A poll starts no callback after this [s]: with the one callback running then, the most any rate
# of requests can delay a joint state's answer (a tenth of a 1 kHz period; a goal's path check,
# the longest callback, is a few periods).
SERVICE_POLL_BUDGET_S = 0.0001
EVENTS_SPIN_TIMEOUT_S = 0.1  # the events executor's wait; its loop checks for shutdown in between
# Knots of the reference grid held ahead of the latest stamp when the rcl loop in C runs (it reads
# them, and asks Python for more only when a stamp outruns them): when fewer are left than the
# first number, up to the second are sampled at once (player.hold). At the shipped
# trajectories.sample_period the first outlasts a serving of the loop, which returns at the latest
# for the executor's blind poll, WATCHED_POLL_PERIOD_S after the last. The player's grid holds the
# span, the knot before the latest stamp and the two around the span's ends.
GRID_AHEAD_KNOTS, GRID_SPAN_KNOTS = 576, 704
GRID_KNOTS = GRID_SPAN_KNOTS + 3


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
        self.player = TrajectoryPlayer(self.control.model, trajectory, GRID_KNOTS)
        self.reference_source = self._reference_for
        self.publish_period = 1.0 / publish_rate
        self._records: tuple[RecordRing, tuple] | None = None  # what the rcl loop in C records, and its fields
        # Looks for records twice per publication period: none waits longer than that to go out.
        self.outputs = OutputThread(f"{self.get_name()}_outputs", self._report_output_failure, self.context.ok,
                                    self._publish_recorded, self.publish_period / 2)
        self._next_publication = -math.inf
        self._reference = None
        self.pose_publisher = self.create_publisher(PoseStamped, TOPICS["platform_pose"], RELIABLE_QOS)
        self.twist_publisher = self.create_publisher(TwistStamped, TOPICS["platform_twist"], RELIABLE_QOS)
        self.twist_state = self.control.model.create_state()  # FK warm start of the decimated J_A (outputs thread)
        self.arming_state = self.control.model.create_state()  # FK warm start of the pose an arming ramps from
        self.decimated_messages = StepMessages(self.names.joint_names, self.names.base_frame)
        self.reference_publisher = self.create_publisher(MultiDOFJointTrajectory, TOPICS["reference"], RELIABLE_QOS)
        self.create_subscription(PoseStamped, "~/goal_pose", self._on_goal_pose, RELIABLE_QOS)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)

    def _create_loop(self, watchdog_period: float) -> None:
        self.timing_log = TimingLog(declare_timing_log(self, "each command's answered stamp and publication time"),
                                    ("answer_stamps", "publish_times"))
        self.latencies = LatencyWindow()  # stamp -> command published, for /diagnostics
        self._wall_clock = not self.get_parameter("use_sim_time").value  # stamps comparable with time.time()
        self.executor_choice = declare_choice(
            self, "executor", EXECUTORS[0], EXECUTORS,
            "native: the joint states in a loop of their own, served by an rcl loop in C (in Python from arming "
            "to tracking); wait_set: the same loop in Python; or an rclpy executor")
        self.superseded_joint_states = 0
        self.rcl_loop_answers = 0  # answers the rcl loop in C published
        self.realtime_priority = declare_realtime_priority(self, CONTROL_LOOP_PRIORITY)
        self._serving: bool | None = False  # the compiled step takes the bytes (None: not tried yet)
        if self.executor_choice not in OWN_LOOPS:
            super()._create_loop(watchdog_period)
            return
        self.watchdog_period = watchdog_period
        self._next_watchdog = time.monotonic() + watchdog_period
        self.wire = JointStateWire(self.names.joint_names)
        self._serving = None  # the wait-set loop reads bytes: tried once a layout is learned
        self._served_layout = None
        self.loop = WaitSetLoop(self, JointState, TOPICS["joint_states"], RELIABLE_QOS,
                                lambda messages, _infos: self._on_joint_states(messages),
                                lambda: self._next_watchdog, self._on_watchdogs, SERVICE_POLL_PERIOD_S,
                                SERVICE_POLL_BUDGET_S, raw=True, serve=self._serve_in_c,
                                watched_poll_period=WATCHED_POLL_PERIOD_S,
                                # The loop in C returns for a status when one is due: its timer need not wake it.
                                unwatched=(self.diagnostics_timer,))
        self._rcl_loop: RclLoop | None = None
        self._rcl_function = None
        if self.executor_choice == "native":
            self._rcl_function = build() if self._wall_clock else "the stamps are simulated time (use_sim_time)"
        if isinstance(self._rcl_function, str):
            self.get_logger().warning(f"joint states served in Python, not by the rcl loop in C: {self._rcl_function}")
            self._rcl_function = None

    def spin(self, executor) -> None:
        use_realtime_priority(self, self.realtime_priority)
        self.outputs.below()
        if self.executor_choice in OWN_LOOPS:
            self.loop.spin(executor)
        elif self.executor_choice == "events":
            executor.remove_node(self)
            events = EventsExecutor(context=self.context)
            events.add_node(self)
            try:
                # Its spin() runs no callback at all with the kilted wheels (measured); spin_once does.
                while self.context.ok():
                    events.spin_once(timeout_sec=EVENTS_SPIN_TIMEOUT_S)
            finally:
                events.shutdown()
        else:
            executor.spin()

    # -------------------------------------------------------------- hot path
    def _on_joint_states(self, messages: list[bytes]) -> None:
        """The serialized joint states taken at one wake: the newest answered, the others judged.

        While tracking, disarmed or faulted, the compiled step takes each one's bytes and answers with
        the command's (ControlLoop.serialized_joint_state); the rest is read and run as usual."""
        self.superseded_joint_states += len(messages) - 1
        for message in messages[:-1]:
            if self._serialized(message, answer=False) is Serialized.UNREAD:
                fields = self._fields(message)
                if fields is not None:
                    self._judge_joint_state(fields)
        message = messages[-1]
        result = self._serialized(message, answer=True)
        if result is Serialized.ANSWERED:
            self._answered_in_step()
        elif result is Serialized.UNREAD:
            fields = self._fields(message)
            if fields is not None:
                self._answer_joint_state(fields)
        elif result is not Serialized.DONE:  # taken in C, answered by the Python objects
            self._answered(self._serialized_at, result.t, result)
        if self._serving is not False and self.wire.last_read is not self._served_layout:
            self._serving = self._serve_serialized()  # the first layout read, or the driver's changed

    def _serialized(self, data: bytes, answer: bool):
        if not self._serving:
            return Serialized.UNREAD
        self._serialized_at = now = seconds(self)
        return self.control.serialized_joint_state(now, data, time.monotonic(), answer, self.player.extend,
                                                   self.reference_source)

    def _serve_serialized(self) -> bool | None:
        """Hand the compiled step the layout of the joint state read last (None: none it can take);
        False when the steps run in Python."""
        command, offset = float64_array_message(len(self.names.joint_names))
        self._served_layout = self.wire.last_read
        layout = self.wire.native_layout(offset)
        if layout is None:
            return None
        return self.control.serve_serialized(*layout, self.player.grid.array, command)

    def _answered_in_step(self) -> None:
        """Publish the compiled step's command, as _answered publishes the Python objects' answer."""
        stamp = self.supervisor.feedback.stamp
        self.command_publisher.publish(self.control.command_bytes)
        self.commands_published += 1
        self._log_answer(stamp, time.time())
        self.control.published(stamp, seconds(self))
        self._after_answer_in_step(stamp, self._serialized_at)

    def _log_answer(self, stamp: float, published: float) -> None:
        """The compiled step's answer to the state stamped ``stamp``, published at the wall time
        ``published``: in the timing log and the latencies."""
        self.timing_log.record("answer_stamps", stamp)
        self.timing_log.record("publish_times", published)
        if self._wall_clock:
            self.latencies.add(published - stamp)

    def _log_answers(self, log: np.ndarray) -> None:
        """The rcl loop's answers, rows of (stamp answered, wall time published): as _log_answer, one
        array per column, whatever their number."""
        self.timing_log.extend("answer_stamps", log[:, 0])
        self.timing_log.extend("publish_times", log[:, 1])
        if self._wall_clock:
            self.latencies.extend(log[:, 1] - log[:, 0])

    def _after_answer_in_step(self, stamp: float, now: float) -> None:
        """The diagnostics status and the decimated outputs after an answer of the compiled step."""
        answer = self.control.answered_in_step  # armed: no measured pose for the player to follow
        if self.control.answered_action != Action.CONTROL:
            answered = self.control.answered_in_step()
            self._follow(stamp, answered[0])
            answer = lambda: answered  # noqa: E731
        status = self.control.diagnostic(now)
        if status is not None:
            self._publish_status(now, status)
        self._advance_decimated(stamp, answer)

    def _follow(self, stamp: float, record) -> None:
        """After an answer of the compiled step while disarmed or faulted: the player's hold moved to
        the measured pose, as after an answer in Python (_after_joint_state); after the answers of an
        rcl loop in C, at its returns only."""
        if record.pose is not None:
            self.player.measured(record.pose, stamp, follow=True)

    # -------------------------------------------------------------- the rcl loop in C
    def _serve_in_c(self, until: float, poll: float) -> bool:
        """Serve the joint states from the rcl loop in C until the first answer at or after the
        executor's ``poll`` (monotonic; a watchdog period later at the latest), a pause in the
        joint states of a watchdog period (the watchdogs then run, as they run after every return),
        or until it returns for Python's work (ros/native_loop.py); False when it cannot run now
        (not tracking, no library, bytes not served), and the wait-set loop waits for ``until``
        instead."""
        if self._rcl_function is None or not self._serving or not self.control.ready_for_c():
            return False
        if self._rcl_loop is None or self._rcl_loop.step is not self.control.compiled_step:
            step = self.control.compiled_step
            inputs, outputs = step.library.inputs, step.library.outputs
            records = RecordRing(CycleLibrary.size(inputs), CycleLibrary.size(outputs))
            self._rcl_loop = RclLoop(self._rcl_function, self.context, self.loop.subscription,
                                     self.command_publisher, step, records)
            self._records = records, (inputs["stamp"].start, inputs["q"], inputs["qd"], inputs["reference"],
                                      outputs["pose"], outputs["phi"])
        latest, period = self.supervisor.last_stamp, self.player.grid.period
        if not self.player.grid.holds(latest + GRID_AHEAD_KNOTS * period):
            self.player.hold(latest - period, latest + GRID_SPAN_KNOTS * period)
        # Tracking, a due publication is recorded for the outputs thread; disarmed or faulted, the loop
        # returns for it, and the player's hold then follows the platform (_after_answer_in_step).
        served = self._rcl_loop.run(poll + self.watchdog_period, self.watchdog_period, poll,
                                    self.control.compiled_status_due(), self._next_publication,
                                    self.publish_period if self.control.tracking() else 0.0,
                                    self.loop.executor_entities())
        self._next_publication = served.publication_due
        if served.executor_ready:
            self.loop.request_poll()
        self.superseded_joint_states += served.superseded
        self.control.served_in_c(served.answers, served.taken, served.repeated, served.message_now, served.taken_now,
                                 served.taken_steady, served.last_answered)
        self.commands_published += served.answers
        self.rcl_loop_answers += served.answers
        self._log_answers(served.log)
        if served.reason == "answered":
            self._after_answer_in_step(served.last_answered, served.taken_now)
        elif served.answers and self.control.answered_action != Action.CONTROL:
            self._follow(served.last_answered, self.control.answered_in_step()[0])
        if served.reason == "pending":
            self._on_pending(served)
        return True

    def _on_pending(self, served) -> None:
        """The messages the C loop left: an answer its compiled step took but did not finish goes on in
        the Python objects; any other is taken as at a wake of the wait-set loop."""
        if served.pending_answer:
            status = self.control.compiled_step.library.statuses[served.pending_status]
            result = self.control.after_message(status, served.pending_now, served.pending_steady,
                                                self.reference_source)
            if result is not Serialized.UNREAD:
                if result is not Serialized.DONE:
                    self._answered(served.pending_now, result.t, result)
                return
        self._on_joint_states(served.pending)

    def _fields(self, data: bytes) -> JointStateFields | None:
        """Read at the layout's offsets (ros/wire.py), or deserialized in full when it has none; None
        for bytes that are no JointState (judged invalid: safety.py)."""
        fields = self.wire.read(data)
        if fields is not None:
            return fields
        try:
            return JointStateFields.of(deserialize_message(data, JointState))
        except _rclpy.RMWError as error:
            self.control.malformed_joint_state(seconds(self), str(error))
            self.get_logger().error(self.supervisor.last_error, throttle_duration_sec=1.0)
            return None

    def _on_watchdogs(self, now: float) -> None:
        self._next_watchdog = now + self.watchdog_period
        self._on_watchdog()
        self._on_steady_watchdog()

    def _publish_forces(self, forces, answers: float = math.nan) -> None:
        self.timing_log.record("answer_stamps", answers)
        self.timing_log.record("publish_times", time.time())
        super()._publish_forces(forces, answers)

    def _publish_status(self, now: float, status) -> None:
        polls = ({"executor_polls_requested": self.loop.polls_requested, "executor_polls_blind": self.loop.polls_blind}
                 if self.executor_choice in OWN_LOOPS else {})
        lost = {"decimated_records_lost": self._records[0].lost} if self._records is not None else {}
        values = {**status.values, "executor": self.executor_choice, "superseded_joint_states": self.superseded_joint_states,
                  "rcl_loop_answers": self.rcl_loop_answers, **polls, **lost, **self.latencies.report()}
        self.outputs.submit(functools.partial(self.diagnostics.publish, now, status.level, status.message, values))

    def _report_output_failure(self, error: Exception) -> None:
        self.get_logger().error(f"an output was not published: {error!r}", throttle_duration_sec=1.0)

    def destroy_node(self) -> None:
        if hasattr(self, "outputs"):
            self.outputs.stop()  # before the publishers go
        if hasattr(self, "timing_log"):
            self.timing_log.save()
        super().destroy_node()

    def _reference_for(self, stamp: float) -> None:
        """The trajectory sample at the stamp of a state that will be answered (and only of such a one)."""
        if self._serving:  # the compiled step took references the player did not sample
            self._player_from_taken_reference()
        if self._autostart:
            self._autostart = False  # at the first joint state: the trajectory's t = 0 is its stamp
            self.player.start(stamp, autostart=True)
        self._reference, failure = self.player.sample(stamp)
        if self._reference is not None:  # the player checked it when it changed (safety.py)
            self.control.validated_reference(seconds(self), self._reference)
        if failure:
            self.get_logger().error(failure)

    def _after_joint_state(self, stamp: float, record) -> None:
        if self._wall_clock:
            self.latencies.add(time.time() - stamp)
        if record.pose is not None:  # the hold before anything is started, where the platform is until armed
            self.player.measured(record.pose, stamp, follow=self.supervisor.state != SupervisorState.ARMED)
        self._advance_decimated(stamp, lambda: (record, self._reference))

    def _advance_decimated(self, stamp: float, answer) -> None:
        """After the answer to the state stamped ``stamp``: when due, the decimated outputs of
        ``answer()``'s (record, reference), handed to the outputs thread."""
        if stamp >= self._next_publication:
            self._next_publication = stamp + self.publish_period
            record, reference = answer()
            self.outputs.submit(functools.partial(self._publish_decimated, stamp, record.q, record.qd, record.pose,
                                                  record.phi, reference))

    def _publish_recorded(self) -> None:
        """(Outputs thread) The decimated outputs of the answers the rcl loop in C recorded."""
        if self._records is None:
            return
        ring, (stamp_at, q_at, qd_at, reference_at, pose_at, phi_at) = self._records
        for inputs, out in ring.new_records():
            stamp, reference = float(inputs[stamp_at]), inputs[reference_at]
            self._publish_decimated(stamp, inputs[q_at], inputs[qd_at], out[pose_at], out[phi_at],
                                    Reference(stamp, reference[:6], reference[6:12], reference[12:]))

    def _publish_decimated(self, stamp: float, q, qd, pose, phi, reference) -> None:
        """Pose, reference and twist of the state stamped ``stamp`` (measured q, qd, its pose and passive
        angles phi, None where unknown), each written in place (bags.StepMessages) and published as
        bytes (in the outputs thread: nothing here is the loop's)."""
        messages = self.decimated_messages
        if pose is not None:
            self.pose_publisher.publish(messages.pose(stamp, pose[:3], quaternion_from_euler_zyx(tuple(pose[3:]))))
        if reference is not None:
            self.reference_publisher.publish(
                messages.reference(stamp, reference.pose, reference.velocity, reference.acceleration))
        if pose is not None:
            try:
                jacobian = self.control.model.analytic_jacobian(q, phi=phi, state=self.twist_state)
                rates = jacobian.analytic @ qd
            except HexapodError:
                return  # as the FK node: no twist where J_A is singular or FK fails (the pose still went out)
            self.twist_publisher.publish(
                messages.twist(stamp, rates[:3], angular_velocity_from_euler_rates(tuple(pose[3:]), rates[3:])))

    # -------------------------------------------------------------- changes
    def _on_arm(self, request, response):
        if request.data:
            self._follow_before_arming()
        return super()._on_arm(request, response)

    def _follow_before_arming(self) -> None:
        """The player's hold, and the reference the supervisor ramps to, at the latest measured pose:
        the rcl loop in C moves the hold at its returns only, and a platform that has just landed on
        its stops has moved since: a ramp to a stale hold would push it into them, and the next
        reference, at the moved hold, would jump from the one armed with."""
        feedback = self.supervisor.feedback
        if feedback is None or self.supervisor.state == SupervisorState.ARMED:
            return  # arming refuses, or answers "already armed"
        try:
            pose = self.control.model.forward_kinematics(feedback.q, self.arming_state).pose
        except HexapodError:
            return  # arming then refuses: the controller cannot start from this state
        self.player.measured(pose, feedback.stamp, follow=True)
        self._reference_for(feedback.stamp)

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

    def _player_from_taken_reference(self) -> None:
        """The player's last reference is the one the loop took last, by the compiled step or not: where
        a change starts, and where a source that fails to sample holds."""
        self.player.last_reference = self.control.current_reference() or self.player.last_reference

    def _latest_stamp(self) -> float:
        """The player runs on joint-state stamps: a change starts at the latest one taken, from the
        latest reference taken (which the compiled step may have taken without the player)."""
        self._player_from_taken_reference()
        feedback = self.supervisor.feedback
        if feedback is None:
            raise InvalidInputError("no joint state received yet")
        return feedback.stamp


def main(args=None) -> int:
    return run_node(RobotStackNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
