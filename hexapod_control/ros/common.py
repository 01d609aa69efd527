"""Plumbing shared by the nodes: the parameters file, ROS parameters, QoS, messages, diagnostics, main.

Everything numeric about the robot comes from the YAML parameters file named by the ``params_file``
ROS parameter (default: the shipped ``config/hexapod.yaml``). ROS parameters only pick between
alternatives (controller, backend, trajectory) or switch behaviour (arm_on_start, autostart).
A bad file or choice raises ParameterError naming the key; ``run_node`` logs it and exits with 1.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Transform, Twist, TwistStamped
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions, get_current_signal_handlers_options, uninstall_signal_handlers
from trajectory_msgs.msg import MultiDOFJointTrajectory, MultiDOFJointTrajectoryPoint

from hexapod_control.control.loop import DiagnosticThrottle, Level
from hexapod_control.conventions import (
    REFERENCE_JOINT_NAME,
    ReferencePoint,
    euler_from_message_quaternion,
    stamp_fields,
)
from hexapod_control.errors import HexapodError, InvalidInputError, ParameterError
from hexapod_control.model.parameters import (
    HexapodParameters,
    default_parameters_path,
    load_parameters,
)
from hexapod_control.model.rotations import angular_velocity_from_euler_rates

# Reliable, keep-last 10: the rclcpp/rclpy default, which ros2_control's JointGroupEffortController
# and joint_state_broadcaster use too, so the nodes match a real driver without QoS overrides.
RELIABLE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)

LEVEL_OK, LEVEL_WARN, LEVEL_ERROR = Level.OK, Level.WARN, Level.ERROR  # diagnostic_msgs' numbers
HARDWARE_ID = "quanser_hexapod"
MAX_REALTIME_PRIORITY = 99  # Linux SCHED_FIFO priorities are 1..99
# ros2_control's controller manager runs its loop at SCHED_FIFO 50 when allowed, and so does the
# robot stack by default: on the normal scheduler other processes delay the answers past the next
# tick of a 1 kHz driver (doc/benchmarks.md has the latencies with and without).
CONTROL_LOOP_PRIORITY = 50


# ------------------------------------------------------------------------------------------ parameters
def declare_choice(node, name: str, default: str, choices: Sequence[str], description: str) -> str:
    value = node.declare_parameter(name, default, ParameterDescriptor(description=description, read_only=True)).value
    if value not in choices:
        raise ParameterError(f"ROS parameter {name!r} of node {node.get_name()!r}: expected one of {list(choices)}, got {value!r}")
    return value


def declare_flag(node, name: str, default: bool, description: str) -> bool:
    value = node.declare_parameter(name, default, ParameterDescriptor(description=description, read_only=True)).value
    if not isinstance(value, bool):
        raise ParameterError(f"ROS parameter {name!r} of node {node.get_name()!r}: expected true or false, got {value!r}")
    return value


def declare_timing_log(node, what: str) -> str:
    """The read-only ``timing_log`` parameter: where to write the loop's event times on shutdown ("" = nowhere)."""
    return node.declare_parameter("timing_log", "", ParameterDescriptor(
        description=f"write {what} to this .npz on shutdown (hexapod_control/ros/timing_log.py)", read_only=True)).value


def declare_realtime_priority(node, default: int) -> int:
    """The read-only ``realtime_priority`` parameter: 0 keeps the normal scheduler, 1-99 asks for
    SCHED_FIFO at that priority (see :func:`use_realtime_priority`)."""
    value = node.declare_parameter("realtime_priority", default, ParameterDescriptor(
        description="0: normal scheduling; 1-99: SCHED_FIFO at this priority for every thread (needs the rtprio limit)",
        read_only=True)).value
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REALTIME_PRIORITY:
        raise ParameterError(f"ROS parameter 'realtime_priority' of node {node.get_name()!r}: expected an integer "
                             f"0..{MAX_REALTIME_PRIORITY}, got {value!r}")
    return value


def use_realtime_priority(node, priority: int) -> None:
    """Put every thread of this process (Python's and the middleware's) under SCHED_FIFO at ``priority``.

    As ros2_control's controller manager does for its loop: another process's work then never
    delays a joint state's answer (the loop blocks in its wait between states, so it does not
    starve the machine). Without the permission (``ulimit -r``, or CAP_SYS_NICE) the node warns
    and runs on the normal scheduler. 0 does nothing.
    """
    if priority == 0:
        return
    try:
        for thread in os.listdir("/proc/self/task"):
            os.sched_setscheduler(int(thread), os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as error:  # AttributeError: not Linux
        node.get_logger().warning(f"realtime_priority {priority} not applied, normal scheduling: {error}")
        return
    node.get_logger().info(f"SCHED_FIFO at priority {priority} for every thread")


def load_params_file(node) -> HexapodParameters:
    """The ``params_file`` ROS parameter, loaded and validated (errors name the key and the file)."""
    path = node.declare_parameter(
        "params_file",
        str(default_parameters_path()),
        ParameterDescriptor(description="YAML parameters file of the robot (config/hexapod.yaml)", read_only=True),
    ).value
    return load_parameters(path)


def seconds(node) -> float:
    """The node's clock (ROS time: simulated under use_sim_time) in seconds."""
    return node.get_clock().now().nanoseconds * 1e-9


def set_time(time_message, t: float) -> None:
    """Fill a builtin_interfaces/Time (a header stamp, a Clock's clock) with t seconds."""
    time_message.sec, time_message.nanosec = stamp_fields(t)


# ------------------------------------------------------------------------------------------ reference
def reference_message(t: float, frame_id: str, point: ReferencePoint) -> MultiDOFJointTrajectory:
    """The one-point reference message of ros_conventions (pose, twist and its derivative)."""
    message = MultiDOFJointTrajectory()
    set_time(message.header.stamp, t)
    message.header.frame_id = frame_id
    message.joint_names = [REFERENCE_JOINT_NAME]
    sample = MultiDOFJointTrajectoryPoint()
    pose = Transform()
    pose.translation.x, pose.translation.y, pose.translation.z = point.translation
    pose.rotation.x, pose.rotation.y, pose.rotation.z, pose.rotation.w = point.rotation
    velocity, acceleration = Twist(), Twist()
    velocity.linear.x, velocity.linear.y, velocity.linear.z = point.linear_velocity
    velocity.angular.x, velocity.angular.y, velocity.angular.z = point.angular_velocity
    acceleration.linear.x, acceleration.linear.y, acceleration.linear.z = point.linear_acceleration
    acceleration.angular.x, acceleration.angular.y, acceleration.angular.z = point.angular_acceleration
    sample.transforms, sample.velocities, sample.accelerations = [pose], [velocity], [acceleration]
    message.points = [sample]
    return message


def reference_point(message: MultiDOFJointTrajectory) -> ReferencePoint:
    """The numbers of a reference message; InvalidInputError when it is not a one-joint reference.

    Empty velocities or accelerations mean zero (as in a pose-only MultiDOF trajectory point).
    """
    if list(message.joint_names) != [REFERENCE_JOINT_NAME]:
        raise InvalidInputError(f"reference joint_names must be [{REFERENCE_JOINT_NAME!r}], got {list(message.joint_names)}")
    if len(message.points) != 1:
        raise InvalidInputError(f"reference must hold exactly one point, got {len(message.points)}")
    sample = message.points[0]
    if len(sample.transforms) != 1 or len(sample.velocities) > 1 or len(sample.accelerations) > 1:
        raise InvalidInputError(
            f"reference point must have one transform and at most one velocity and acceleration, got "
            f"{len(sample.transforms)}, {len(sample.velocities)}, {len(sample.accelerations)}"
        )
    pose = sample.transforms[0]

    def twist(values):
        if not values:
            return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        t = values[0]
        return (t.linear.x, t.linear.y, t.linear.z), (t.angular.x, t.angular.y, t.angular.z)

    linear_velocity, angular_velocity = twist(sample.velocities)
    linear_acceleration, angular_acceleration = twist(sample.accelerations)
    return ReferencePoint(
        translation=(pose.translation.x, pose.translation.y, pose.translation.z),
        rotation=(pose.rotation.x, pose.rotation.y, pose.rotation.z, pose.rotation.w),
        linear_velocity=linear_velocity,
        angular_velocity=angular_velocity,
        linear_acceleration=linear_acceleration,
        angular_acceleration=angular_acceleration,
    )


# ------------------------------------------------------------------------------------------ poses
def twist_message(header_stamp, frame_id: str, euler_zyx, rates) -> TwistStamped:
    """The platform's TwistStamped from xi_dot = J_A q_dot: linear = the (x, y, z) rates, angular =
    omega in the base frame (omega = T(psi) psi_dot of the Euler-angle rates)."""
    twist = TwistStamped()
    twist.header.stamp, twist.header.frame_id = header_stamp, frame_id
    twist.twist.linear.x, twist.twist.linear.y, twist.twist.linear.z = (float(v) for v in rates[:3])
    omega = angular_velocity_from_euler_rates(euler_zyx, rates[3:])
    twist.twist.angular.x, twist.twist.angular.y, twist.twist.angular.z = (float(v) for v in omega)
    return twist


def pose_vector(message) -> np.ndarray:
    """(x, y, z, lambda, mu, nu) of a PoseStamped; ValueError on a non-unit or non-finite quaternion."""
    p, o = message.pose.position, message.pose.orientation
    values = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w])
    if not np.all(np.isfinite(values)):
        raise InvalidInputError(f"pose holds a non-finite value: {values.tolist()}")
    return np.array([p.x, p.y, p.z, *euler_from_message_quaternion(o.x, o.y, o.z, o.w)])


def answer_change(node, response, change: Callable[[], str], failure: str):
    """Fill a Trigger response from a trajectory change (its description), logging the outcome."""
    try:
        response.message, response.success = change(), True
        node.get_logger().info(f"reference: {response.message}")
    except (HexapodError, ValueError) as error:
        response.success, response.message = False, f"{failure}: {error}"
        node.get_logger().error(response.message)
    return response


# ------------------------------------------------------------------------------------------ diagnostics
def _text(value) -> str:
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    return str(value)


class DiagnosticsPublisher:
    """One DiagnosticStatus on /diagnostics: at once when level or message change, else periodically.

    The period (``safety.diagnostics_period``, see control.loop.DiagnosticThrottle) keeps a 1 kHz
    node from flooding /diagnostics; a change (a fault, a recovery) is never delayed.
    """

    def __init__(self, node, topic: str, status_name: str, period: float):
        self._publisher = node.create_publisher(DiagnosticArray, topic, RELIABLE_QOS)
        self._name = status_name
        self._throttle = DiagnosticThrottle(period)
        self.published = 0

    def update(self, now: float, level: Level, message: str, values: dict) -> None:
        """Publish the status if it is due (throttled)."""
        if self._throttle.due(now, level, message):
            self.publish(now, level, message, values)

    def publish(self, now: float, level: Level, message: str, values: dict) -> None:
        """Publish the status now (already throttled by the caller)."""
        status = DiagnosticStatus(level=bytes([level]), name=self._name, message=message, hardware_id=HARDWARE_ID)
        status.values = [KeyValue(key=k, value=_text(v)) for k, v in values.items()]
        array = DiagnosticArray(status=[status])
        set_time(array.header.stamp, now)
        self._publisher.publish(array)
        self.published += 1


# ------------------------------------------------------------------------------------------ main
# How long run_node waits for rclpy to invalidate the context after an exception in spin [s].
SHUTDOWN_GRACE_S = 1.0


def _context_stays_valid(grace: float) -> bool:
    """True if the default context is still valid after `grace` seconds (no shutdown under way)."""
    deadline = time.monotonic() + grace
    while rclpy.ok():
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.01)
    return False


def end_signal_handling() -> None:
    """Stop rclpy's answer to Ctrl-C and SIGTERM before a node is torn down.

    rclpy answers these signals in a thread of its own: it triggers every executor's signal guard
    condition and shuts the contexts down. A node whose loop does not wait in the executor takes the
    KeyboardInterrupt at once, and its teardown then frees that guard condition and the node's
    handles while the thread still uses them: a SIGSEGV at the stop. Uninstalling the handlers joins
    the thread first. A further Ctrl-C is then ignored until the process ends: in a terminal, Ctrl-C
    reaches every process of the foreground group, the node and ros2 launch, which sends each node
    a SIGINT of its own a moment later; that one would end the teardown, or the interpreter's exit
    after it, with a KeyboardInterrupt or SIGINT's default action (exit code -2, launch's "process
    has died", a traceback). A SIGTERM (launch's next step when a node does not stop) ends the
    process at once.
    """
    # Once only: uninstalling puts back the handler rclpy found at its start, Python's, which a
    # second call would restore over SIG_IGN for a moment.
    if get_current_signal_handlers_options() != SignalHandlerOptions.NO:
        uninstall_signal_handlers()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_node(factory: Callable[[], object], name: str, args: list[str] | None = None) -> int:
    """rclpy.init, build the node, spin until Ctrl-C; a parameter error is logged and gives exit code 1."""
    rclpy.init(args=args)
    try:
        try:
            node = factory()
        except HexapodError as error:
            # A configuration error is the user's to fix: one clear line, no traceback.
            rclpy.logging.get_logger(name).fatal(f"cannot start: {error}")
            print(f"{name}: cannot start: {error}", file=sys.stderr)
            return 1
        except Exception:
            # Ctrl-C while the node is being built shuts the context down under it (an RCLError
            # from whatever it was creating, seen under launch): a normal exit. Otherwise a bug.
            if rclpy.ok():
                raise
            return 0
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        # rcl's logging sets itself up at the first message of the process, which takes tens of
        # milliseconds: paid here, not by the node's first message in its loop (an arming's, at
        # normal scheduling, stalled the robot stack past the joint-state watchdog). "ready": the
        # node spins next.
        node.get_logger().info("ready")
        # The objects of the start-up (modules, the model, rclpy's) live as long as the process: out
        # of the collector's sight, a full collection no longer scans them: a full scan paused the
        # process for longer than the joint-state watchdog allows (doc/benchmarks.md).
        gc.collect()
        gc.freeze()
        try:
            try:
                node.spin(executor)
            except (KeyboardInterrupt, ExternalShutdownException):
                pass
            except Exception:
                # Ctrl-C: rclpy's signal handler invalidates the context, and a callback publishing at
                # that moment raises. That is a normal exit; with the context still valid it is a bug.
                # The invalidation can lag the interrupt under load (seen in launch tests: a RuntimeError
                # from the executor taking a message while the context was still valid): wait for it.
                if _context_stays_valid(SHUTDOWN_GRACE_S):
                    raise
        except KeyboardInterrupt:
            pass  # that Ctrl-C's own KeyboardInterrupt, delivered while the error it caused was handled
        finally:
            end_signal_handling()
            executor.shutdown()
            node.destroy_node()
        return 0
    except KeyboardInterrupt:
        return 0  # Ctrl-C while the node was starting, before it spun: a normal exit
    finally:
        end_signal_handling()
        rclpy.try_shutdown()


class HexapodNode(Node):
    """A node of the package: ``_setup(parameters)`` builds it from the ``params_file`` parameter.

    A failure while building (a bad file or parameter) destroys the half-built node before the
    error propagates, so nothing leaks; ``run_node`` then prints it as one line.
    """

    default_name = ""  # each node's NODE_NAME

    def __init__(self, node_name: str | None = None, **node_options):
        super().__init__(node_name or self.default_name, **node_options)
        try:
            self._setup(load_params_file(self))
        except BaseException:
            self.destroy_node()
            raise

    def _setup(self, parameters: HexapodParameters) -> None:
        raise NotImplementedError

    def spin(self, executor) -> None:
        """Run the node until shutdown; a node with a hot loop of its own runs it here (run_node calls this)."""
        executor.spin()
