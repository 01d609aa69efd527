"""Each node with real rclpy: publish its inputs, receive its outputs (no mocks, no sleeps).

A fresh Context per test; waits spin an executor until a condition holds or a generous deadline
passes (DDS discovery takes ~3 s on a loaded machine).
"""

import math
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TwistStamped
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter
from ros_helpers import DELIVERY_TIMEOUT_S, DISCOVERY_TIMEOUT_S, NodeProcess, spin_until
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.safety import RATE_KNOWN_SPACINGS, Action
from hexapod_control.control.trajectories import home_pose
from hexapod_control.conventions import (
    TOPICS,
    euler_from_reference_point,
    reference_point_from_euler,
    stamp_fields,
    time_from_stamp,
)
from hexapod_control.errors import InvalidInputError, ParameterError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.model.rotations import (
    angular_velocity_from_euler_rates,
    quaternion_from_euler_zyx,
)
from hexapod_control.ros.common import (
    RELIABLE_QOS,
    reference_message,
    reference_point,
)
from hexapod_control.ros.controller_node import ControllerNode
from hexapod_control.ros.fk_node import ForwardKinematicsNode
from hexapod_control.ros.simulator_node import SimulatorNode
from hexapod_control.ros.trajectory_node import TrajectoryNode

# Wall-clock tests publish joint states by hand, far slower than 1 kHz: the safety timeouts of the
# shipped file (20 ms) would fire between two of them, so these tests widen them.
# They stamp each state with the node's clock at publication; the age bound is widened the same way.
HAND_FED_SAFETY = {"joint_state_timeout": 1.0, "watchdog_period": 0.05, "reference_timeout": 30.0, "max_feedback_age": 1.0,
                   "hold_damping": 0.5}
# States fed by hand come as fast as the test goes, slower than any rate the gains are valid at:
# their valid_rates reach down to this [Hz] (and the HOLD damper above is stable there).
HAND_FED_MIN_RATE = 1.0
RATE_KNOWN_PERIOD = 0.001  # [s] stamp spacing of the states that make the rate known before arming

PARAMETERS = load_parameters()
NAMES = PARAMETERS.ros
HOME_Q = np.full(6, PARAMETERS.home_actuator_position)


# ------------------------------------------------------------------------------------------ fixtures




@pytest.fixture
def make_node(context, executor):
    """Build nodes in the test's context, add them to the executor, destroy them afterwards."""
    nodes = []

    def make(factory, **overrides):
        parameters = [Parameter(name, value=value) for name, value in overrides.items()]
        node = factory(context=context, parameter_overrides=parameters)
        nodes.append(node)
        executor.add_node(node)
        return node

    def probe():
        node = rclpy.create_node("test_probe", context=context)
        nodes.append(node)
        executor.add_node(node)
        return node

    make.probe = probe
    yield make
    for node in reversed(nodes):
        node.destroy_node()




def wait_matched(executor, publishers=(), subscriptions=()):
    spin_until(
        executor,
        lambda: all(p.get_subscription_count() >= 1 for p in publishers)
        and all(s.get_publisher_count() >= 1 for s in subscriptions),
        DISCOVERY_TIMEOUT_S,
        "publisher/subscription matching",
    )


def variant_file(tmp_path, safety=None, edit=None):
    document = yaml.safe_load(default_parameters_path().read_text())
    document["hexapod"]["safety"].update(safety or {})
    if safety is HAND_FED_SAFETY:
        controllers = document["hexapod"]["controllers"]
        for gains in (controllers["double_loop"], controllers["double_loop"]["simulated_plant"],
                      controllers["computed_torque"]):
            gains["valid_rates"]["min"] = HAND_FED_MIN_RATE
    if edit:
        edit(document["hexapod"])
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def joint_state(t, q, qd=None, names=None):
    message = JointState()
    message.header.stamp.sec, message.header.stamp.nanosec = stamp_fields(t)
    message.name = list(names if names is not None else NAMES.joint_names)
    message.position = [float(v) for v in q]
    message.velocity = [float(v) for v in (np.zeros(len(q)) if qd is None else qd)]
    return message


def status_of(array: DiagnosticArray) -> DiagnosticStatus:
    assert len(array.status) == 1
    return array.status[0]


def values_of(status: DiagnosticStatus) -> dict:
    return {kv.key: kv.value for kv in status.values}


def call(executor, client, request):
    spin_until(executor, lambda: client.service_is_ready(), DISCOVERY_TIMEOUT_S, f"service {client.srv_name}")
    future = client.call_async(request)
    spin_until(executor, future.done, DELIVERY_TIMEOUT_S, f"answer of {client.srv_name}")
    return future.result()


# ------------------------------------------------------------------------------------------ FK node
def test_fk_node_publishes_pose_twist_passive_angles_and_diagnostics(make_node, executor):
    make_node(ForwardKinematicsNode)
    probe = make_node.probe()
    received = {"pose": [], "twist": [], "passive": [], "diagnostics": []}
    publisher = probe.create_publisher(JointState, TOPICS["joint_states"], RELIABLE_QOS)
    subscriptions = [
        probe.create_subscription(PoseStamped, TOPICS["platform_pose"], received["pose"].append, RELIABLE_QOS),
        probe.create_subscription(TwistStamped, TOPICS["platform_twist"], received["twist"].append, RELIABLE_QOS),
        probe.create_subscription(JointState, TOPICS["passive_joint_states"], received["passive"].append, RELIABLE_QOS),
        probe.create_subscription(DiagnosticArray, TOPICS["diagnostics"], received["diagnostics"].append, RELIABLE_QOS),
    ]
    wait_matched(executor, [publisher], subscriptions)

    q = HOME_Q + np.array([0.01, -0.005, 0.02, 0.0, -0.01, 0.015])
    qd = np.array([0.05, -0.02, 0.03, 0.01, 0.0, -0.04])
    publisher.publish(joint_state(1.5, q, qd))
    spin_until(executor, lambda: all(received[k] for k in received), DELIVERY_TIMEOUT_S, "the FK outputs")

    model = HexapodModel(PARAMETERS)
    fk = model.forward_kinematics(q)
    rates = model.analytic_jacobian(q, phi=fk.phi).analytic @ qd
    pose, twist, passive = received["pose"][0], received["twist"][0], received["passive"][0]
    assert time_from_stamp(pose.header.stamp) == 1.5 and pose.header.frame_id == NAMES.base_frame
    p, o = pose.pose.position, pose.pose.orientation
    np.testing.assert_allclose([p.x, p.y, p.z], fk.position, atol=1e-12)
    np.testing.assert_allclose([o.x, o.y, o.z, o.w], quaternion_from_euler_zyx(fk.euler_zyx), atol=1e-12)
    linear, angular = twist.twist.linear, twist.twist.angular
    np.testing.assert_allclose([linear.x, linear.y, linear.z], rates[:3], atol=1e-12)
    np.testing.assert_allclose([angular.x, angular.y, angular.z], angular_velocity_from_euler_rates(fk.euler_zyx, rates[3:]), atol=1e-12)
    assert list(passive.name) == list(NAMES.passive_joint_names)
    np.testing.assert_allclose(passive.position, fk.phi, atol=1e-12)
    status = status_of(received["diagnostics"][0])
    assert status.level == DiagnosticStatus.OK
    assert {"iterations", "residual", "constraint_conditioning", "jacobian_conditioning"} <= set(values_of(status))

    # Sliders spread wider than two legs can span: FK fails -> ERROR diagnostic, no pose.
    poses_before = len(received["pose"])
    publisher.publish(joint_state(2.0, np.full(6, PARAMETERS.limits.actuator_position_max - 0.001)))
    spin_until(
        executor,
        lambda: any(status_of(d).level == DiagnosticStatus.ERROR for d in received["diagnostics"]),
        DELIVERY_TIMEOUT_S,
        "the ERROR diagnostic",
    )
    error = next(status_of(d) for d in received["diagnostics"] if status_of(d).level == DiagnosticStatus.ERROR)
    assert error.message == "forward kinematics failed" and values_of(error)["error"]
    assert len(received["pose"]) == poses_before

    # A NaN joint state: an "invalid joint state" ERROR naming the joint, and still no pose.
    publisher.publish(joint_state(2.5, np.concatenate((q[:4], [math.nan], q[5:]))))
    spin_until(
        executor,
        lambda: any(status_of(d).message == "invalid joint state" for d in received["diagnostics"]),
        DELIVERY_TIMEOUT_S,
        "the invalid joint state diagnostic",
    )
    invalid = next(status_of(d) for d in received["diagnostics"] if status_of(d).message == "invalid joint state")
    assert invalid.level == DiagnosticStatus.ERROR and NAMES.joint_names[4] in values_of(invalid)["error"]
    assert len(received["pose"]) == poses_before and len(received["twist"]) == 1 and len(received["passive"]) == 1


# ------------------------------------------------------------------------------------------ trajectory node
def test_trajectory_node_reference_start_stop_and_goals(make_node, executor):
    node = make_node(TrajectoryNode, trajectory="operational_space")
    probe = make_node.probe()
    references = []
    pose_publisher = probe.create_publisher(PoseStamped, TOPICS["platform_pose"], RELIABLE_QOS)
    goal_publisher = probe.create_publisher(PoseStamped, f"/{node.get_name()}/goal_pose", RELIABLE_QOS)
    subscription = probe.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], references.append, RELIABLE_QOS)
    wait_matched(executor, [pose_publisher, goal_publisher], [subscription])

    home = home_pose(HexapodModel(PARAMETERS))
    pose_publisher.publish(pose_stamped(home))
    spin_until(executor, lambda: references, DELIVERY_TIMEOUT_S, "a reference")
    message = references[-1]
    assert list(message.joint_names) == ["platform"] and len(message.points) == 1
    assert message.header.frame_id == NAMES.base_frame
    now = probe.get_clock().now().nanoseconds * 1e-9
    assert abs(time_from_stamp(message.header.stamp) - now) < DELIVERY_TIMEOUT_S  # stamped with the node's now
    pose, velocity, _ = euler_from_reference_point(reference_point(message))
    np.testing.assert_allclose(pose, home, atol=1e-12)  # holds the measured pose
    np.testing.assert_allclose(velocity, 0.0, atol=0.0)

    started = call(executor, probe.create_client(Trigger, f"/{node.get_name()}/start"), Trigger.Request())
    assert started.success, started.message
    stopped = call(executor, probe.create_client(Trigger, f"/{node.get_name()}/stop"), Trigger.Request())
    assert stopped.success and "hold" in node.description

    # Unreachable, non-finite and wrong-frame goals are rejected; the reachable one after them is
    # taken (same publisher: in order).
    unreachable, not_finite, reachable = home.copy(), home.copy(), home.copy()
    unreachable[2] = 1.0
    not_finite[0] = math.nan
    reachable[2] += 0.01
    wrong_frame = pose_stamped(reachable)
    wrong_frame.header.frame_id = "not_" + NAMES.base_frame
    for goal in (pose_stamped(unreachable), pose_stamped(not_finite), wrong_frame, pose_stamped(reachable)):
        goal_publisher.publish(goal)
    spin_until(executor, lambda: node.description.startswith("move to"), DELIVERY_TIMEOUT_S, "the move to the goal")
    assert node.goals_rejected == 3
    np.testing.assert_allclose(node.player.active.target_pose, reachable, atol=1e-12)


def pose_stamped(pose) -> PoseStamped:
    message = PoseStamped()
    message.header.frame_id = NAMES.base_frame
    p, o = message.pose.position, message.pose.orientation
    p.x, p.y, p.z = (float(v) for v in pose[:3])
    o.x, o.y, o.z, o.w = quaternion_from_euler_zyx(pose[3:])
    return message


# ------------------------------------------------------------------------------------------ controller node
class ControllerProbe:
    def __init__(self, make_node, executor, node):
        self.executor, self.node = executor, node
        probe = make_node.probe()
        self.commands, self.diagnostics = [], []
        self.states = probe.create_publisher(JointState, TOPICS["joint_states"], RELIABLE_QOS)
        self.references = probe.create_publisher(MultiDOFJointTrajectory, TOPICS["reference"], RELIABLE_QOS)
        subscriptions = [
            probe.create_subscription(Float64MultiArray, TOPICS["effort_commands"], self.commands.append, RELIABLE_QOS),
            probe.create_subscription(DiagnosticArray, TOPICS["diagnostics"], self.diagnostics.append, RELIABLE_QOS),
        ]
        self.arm_client = probe.create_client(SetBool, f"/{node.get_name()}/arm")
        wait_matched(executor, [self.states, self.references], subscriptions)

    def now(self) -> float:
        """The node's clock [s]: the stamp of a state measured now."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def command_after(self, publish):
        """Publish, then the first command the node sends in answer."""
        count = len(self.commands)
        publish()
        spin_until(self.executor, lambda: len(self.commands) > count, DELIVERY_TIMEOUT_S, "an effort command")
        return np.array(self.commands[count].data)

    def arm(self, value=True):
        return call(self.executor, self.arm_client, SetBool.Request(data=value))

    def settle(self, end=None):
        """States at rest at home, 1 ms apart up to ``end`` (default now): arming needs the rate known."""
        supervisor = self.node.supervisor
        if end is None:
            # The burst's first stamp must come after the last state taken, or it adds no spacing.
            earlier = supervisor.feedback.stamp if supervisor.feedback is not None else -math.inf
            spin_until(self.executor, lambda: self.now() - RATE_KNOWN_SPACINGS * RATE_KNOWN_PERIOD > earlier,
                       DELIVERY_TIMEOUT_S, "the clock past the last state taken")
            end = self.now()
        # One burst (within the subscription's depth): stamps taken just before, so that a slow test
        # machine cannot age them past max_feedback_age while they are fed one by one.
        for k in range(RATE_KNOWN_SPACINGS, -1, -1):
            self.states.publish(joint_state(end - k * RATE_KNOWN_PERIOD, HOME_Q))
        # Commands may be the watchdog's: wait until the node has taken the last state itself.
        spin_until(self.executor, lambda: supervisor.feedback is not None
                   and supervisor.feedback.stamp >= end - RATE_KNOWN_PERIOD / 2, DELIVERY_TIMEOUT_S, "the settled states")
        self.node.control.synchronize()  # the compiled step's rate window, into the supervisor read here
        assert supervisor.rate_known

    def wait_for_status(self, predicate, what):
        spin_until(self.executor, lambda: any(predicate(status_of(d)) for d in self.diagnostics), DELIVERY_TIMEOUT_S, what)
        return next(status_of(d) for d in self.diagnostics if predicate(status_of(d)))


def test_controller_node_arms_controls_and_stops_on_stale_joint_states(make_node, executor, tmp_path):
    # Hand-fed states stay at home whatever the forces: the bare law, no prediction of their motion.
    bare_law = variant_file(tmp_path, HAND_FED_SAFETY, lambda h: h["controllers"]["delay_compensation"].update(predictor="none"))
    node = make_node(ControllerNode, controller="computed_torque", params_file=bare_law)
    io = ControllerProbe(make_node, executor, node)
    home = home_pose(HexapodModel(PARAMETERS))

    forces = io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    assert np.all(forces == 0.0)  # disarmed: zero
    io.settle()
    answer = io.arm()
    assert answer.success, answer.message
    io.references.publish(reference_message(0.0, NAMES.base_frame, reference_point_from_euler(home, np.zeros(6), np.zeros(6))))
    spin_until(executor, lambda: node.last_reference_stamp is not None, DELIVERY_TIMEOUT_S, "the reference at the node")
    forces = io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    # At home, at rest, on the reference: computed torque gives the static force g_bar (8.9e-16 N apart measured).
    np.testing.assert_allclose(forces, HexapodModel(PARAMETERS).gravity_term(HOME_Q), rtol=0, atol=4e-15)
    assert len(forces) == 6

    # No more joint states: the watchdog sends zero forces and reports why.
    spin_until(executor, lambda: io.commands and np.all(np.array(io.commands[-1].data) == 0.0), DELIVERY_TIMEOUT_S + 2 * HAND_FED_SAFETY["joint_state_timeout"], "zero forces from the watchdog")
    status = io.wait_for_status(lambda s: s.level == DiagnosticStatus.ERROR and "stale" in s.message, "the stale diagnostic")
    assert values_of(status)["state"] == "fault" and values_of(status)["action"] == "zero"
    # Latched: fresh joint states alone do not restore control.
    forces = io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    assert np.all(forces == 0.0)


@pytest.mark.parametrize(
    "bad_state, words",
    [
        (lambda t: joint_state(t, [0.1765] * 5 + [math.nan]), "nan"),
        (lambda t: joint_state(t, [0.1765] * 5, names=NAMES.joint_names[:5]), "lacks joint"),
        (lambda t: joint_state(t, [0.1765] * 5, qd=[0.0] * 6), "5 positions"),
        # slider_0 twice, the second value (last wins) far from the first: which one is measured?
        (lambda t: joint_state(t, [0.1765] * 6 + [0.25], names=list(NAMES.joint_names) + [NAMES.joint_names[0]]),
         "more than once"),
    ],
    ids=["nan", "missing_joint", "wrong_length", "duplicate_name"],
)
def test_controller_node_answers_bad_joint_states_with_zero_force(make_node, executor, tmp_path, bad_state, words):
    node = make_node(ControllerNode, controller="double_loop", params_file=variant_file(tmp_path, HAND_FED_SAFETY))
    io = ControllerProbe(make_node, executor, node)
    io.settle()
    assert io.arm().success
    forces = io.command_after(lambda: io.states.publish(bad_state(io.now())))
    assert np.all(forces == 0.0)
    status = io.wait_for_status(lambda s: s.level == DiagnosticStatus.ERROR, "the ERROR diagnostic")
    assert "invalid joint state" in status.message and words in status.message
    assert values_of(status)["invalid_joint_states"] == "1"
    assert all(np.all(np.isfinite(c.data)) for c in io.commands)
    # Re-arming needs valid feedback first, then restores the hold (no reference yet).
    assert not io.arm().success
    io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    assert io.arm().success
    forces = io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    np.testing.assert_allclose(forces, HexapodModel(PARAMETERS).gravity_term(HOME_Q), rtol=0, atol=1e-15)  # HOLD at rest: 0 N apart measured


def two_points(message):
    message.points = [message.points[0], message.points[0]]


def foreign_frame(message):
    message.header.frame_id = "camera"


def scaled_quaternion(message):
    rotation = message.points[0].transforms[0].rotation
    rotation.x, rotation.y, rotation.z, rotation.w = 0.0, 0.0, 1e-150, 1e-150  # normalised: a 90 deg yaw


@pytest.mark.parametrize(
    "spoil, words",
    [(two_points, "exactly one point"), (foreign_frame, "frame 'camera'"), (scaled_quaternion, "norm")],
    ids=["two_points", "foreign_frame", "non_unit_quaternion"],
)
def test_controller_node_holds_on_a_malformed_reference(make_node, executor, tmp_path, spoil, words):
    """A malformed reference is a HOLD fault (gravity compensation), never a target."""
    node = make_node(ControllerNode, controller="computed_torque", params_file=variant_file(tmp_path, HAND_FED_SAFETY))
    io = ControllerProbe(make_node, executor, node)
    io.settle()
    assert io.arm().success
    home = home_pose(HexapodModel(PARAMETERS))
    # Offset by 1 cm: tracking it would give forces far from the hold force g_bar(q).
    target = home + np.array([0.01, 0.0, 0.0, 0.0, 0.0, 0.0])
    malformed = reference_message(0.0, NAMES.base_frame, reference_point_from_euler(target, np.zeros(6), np.zeros(6)))
    spoil(malformed)
    io.references.publish(malformed)
    spin_until(executor, lambda: node.supervisor.invalid_references == 1, DELIVERY_TIMEOUT_S, "the malformed reference at the node")
    forces = io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    np.testing.assert_allclose(forces, HexapodModel(PARAMETERS).gravity_term(HOME_Q), rtol=0, atol=1e-15)  # HOLD at rest: 0 N apart measured
    status = io.wait_for_status(lambda s: s.level == DiagnosticStatus.ERROR, "the ERROR diagnostic")
    assert "invalid reference" in status.message and words in status.message
    assert values_of(status)["state"] == "fault" and values_of(status)["action"] == "hold"
    assert values_of(status)["invalid_references"] == "1"


def test_controller_node_rejects_a_future_stamp_and_keeps_taking_the_genuine_states(make_node, executor, tmp_path):
    """One state stamped an hour ahead must not make every later genuine state look old (issue 14, item 3)."""
    # Hand-fed states stay at home whatever the forces: the bare law, or its prediction of their
    # motion would push until the frozen-feedback row holds.
    bare_law = variant_file(tmp_path, HAND_FED_SAFETY, lambda h: h["controllers"]["delay_compensation"].update(predictor="none"))
    node = make_node(ControllerNode, controller="computed_torque", params_file=bare_law)
    io = ControllerProbe(make_node, executor, node)
    home = home_pose(HexapodModel(PARAMETERS))
    io.settle()
    io.references.publish(reference_message(0.0, NAMES.base_frame, reference_point_from_euler(home, np.zeros(6), np.zeros(6))))
    spin_until(executor, lambda: node.last_reference_stamp is not None, DELIVERY_TIMEOUT_S, "the reference at the node")
    assert io.arm().success
    io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    assert node.last_decision.action == Action.CONTROL, node.last_decision.reason

    forces = io.command_after(lambda: io.states.publish(joint_state(io.now() + 3600.0, HOME_Q)))
    assert np.all(forces == 0.0)
    status = io.wait_for_status(lambda s: s.level == DiagnosticStatus.ERROR and "ahead of the clock" in s.message,
                                "the future-stamp diagnostic")
    assert values_of(status)["action"] == "zero" and values_of(status)["invalid_joint_states"] == "1"
    # The next genuine state is answered (latched: zero), not ignored as older than the bad stamp ...
    forces = io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    assert np.all(forces == 0.0) and node.supervisor.repeated_joint_states == 0
    # ... and re-arming restores control at once.
    assert io.arm().success
    io.command_after(lambda: io.states.publish(joint_state(io.now(), HOME_Q)))
    assert node.last_decision.action == Action.CONTROL, node.last_decision.reason


def test_controller_node_parameters_are_read_only_at_runtime(make_node, executor):
    """use_sim_time switched on with no /clock would stop the node's clock, and its watchdog (item 5)."""
    node = make_node(ControllerNode)
    probe = make_node.probe()
    client = probe.create_client(SetParameters, f"/{node.get_name()}/set_parameters")
    changes = [Parameter("use_sim_time", value=True), Parameter("controller", value="computed_torque"),
               Parameter("arm_on_start", value=True), Parameter("params_file", value="/tmp/other.yaml")]
    answer = call(executor, client, SetParameters.Request(parameters=[c.to_parameter_msg() for c in changes]))
    assert [r.successful for r in answer.results] == [False] * len(changes)
    assert all("read-only" in r.reason for r in answer.results)
    assert node.get_parameter("use_sim_time").value is False and not node.get_clock().ros_time_is_active


@pytest.mark.parametrize("sim_clock", ["absent", "backwards"])
def test_controller_node_steady_watchdog_zeroes_the_force_when_the_sim_clock_fails(make_node, executor, tmp_path, sim_clock):
    """Under use_sim_time with /clock absent or going back, the node clock never shows the states as
    stale; the steady-clock watchdog still publishes zero forces (item 5)."""
    node = make_node(ControllerNode, controller="computed_torque", use_sim_time=True,
                     params_file=variant_file(tmp_path, HAND_FED_SAFETY))
    io = ControllerProbe(make_node, executor, node)
    clock = make_node.probe().create_publisher(Clock, TOPICS["clock"], RELIABLE_QOS)

    def set_clock(t):
        message = Clock()
        message.clock.sec, message.clock.nanosec = stamp_fields(t)
        clock.publish(message)
        spin_until(executor, lambda: io.now() == t, DISCOVERY_TIMEOUT_S, f"the node clock at {t} s")

    if sim_clock == "backwards":
        set_clock(10.0)
    spin_until(executor, io.arm_client.service_is_ready, DISCOVERY_TIMEOUT_S, "the arm service")
    start = io.now()  # frozen: states are stamped a little later each, within max_future_stamp
    io.settle(start)
    home = home_pose(HexapodModel(PARAMETERS))
    io.references.publish(reference_message(start, NAMES.base_frame, reference_point_from_euler(home, np.zeros(6), np.zeros(6))))
    spin_until(executor, lambda: node.last_reference_stamp is not None, DELIVERY_TIMEOUT_S, "the reference at the node")
    assert io.arm().success
    forces = io.command_after(lambda: io.states.publish(joint_state(start + 0.001, HOME_Q)))
    assert node.last_decision.action == Action.CONTROL and np.all(forces != 0.0)
    if sim_clock == "backwards":
        set_clock(5.0)

    timeout = PARAMETERS.safety.sim_time_stall_timeout
    spin_until(executor, lambda: np.all(np.array(io.commands[-1].data) == 0.0), timeout + DELIVERY_TIMEOUT_S,
               "zero forces from the steady watchdog")
    status = io.wait_for_status(lambda s: s.level == DiagnosticStatus.ERROR and "steady clock" in s.message,
                                "the steady-clock diagnostic")
    assert values_of(status)["state"] == "fault" and values_of(status)["action"] == "zero"


# The killed-controller test: the driver's travel stops catch the platform that sinks before the
# controller starts (0.40 m lies beyond the straight-leg collapse), a driver rate a Python
# controller process keeps up with on two cores, and timeouts wide enough for its start-up.
DRIVER_STOP = 0.30  # [m]
DRIVER_RATE = 200.0  # [Hz]
DRIVER_COMMAND_TIMEOUT = 0.05  # [s]
HELD_STATES = 20  # states under the controller's force before the kill
TIMED_OUT = "command timed out: zero force"  # the fake driver's status when its command expires


def test_killing_the_controller_process_zeroes_the_force_at_the_driver_by_its_timeout(context, executor, tmp_path):
    """Nothing below the node decides: the drive side's command timeout does (item 8). The order of
    events is checked here (force held, kill, the driver's timeout, zero force from then on); how
    long the timeout is, CommandHold's own test checks with given times."""
    def edit(hexapod):
        hexapod["limits"]["actuator_position_max"] = DRIVER_STOP

    params_file = variant_file(tmp_path, {"joint_state_timeout": 0.5, "watchdog_period": 0.05, "max_feedback_age": 0.5}, edit)
    states = []  # (stamp, position, effort) of the driver's joint states
    listener = rclpy.create_node("kill_test_listener", context=context)
    executor.add_node(listener)
    listener.create_subscription(JointState, TOPICS["joint_states"], lambda m: states.append(
        (time_from_stamp(m.header.stamp), tuple(m.position), tuple(m.effort))), RELIABLE_QOS)
    driver_statuses = []  # (stamp, message) of the driver's /diagnostics
    listener.create_subscription(DiagnosticArray, TOPICS["diagnostics"], lambda m: driver_statuses.extend(
        (time_from_stamp(m.header.stamp), s.message) for s in m.status if s.name.startswith("hexapod_fake_driver")),
        RELIABLE_QOS)
    driver = NodeProcess("hexapod_control.ros.fake_driver", tmp_path / "driver.log", ("params_file", params_file),
                     ("rate", DRIVER_RATE), ("command_timeout", DRIVER_COMMAND_TIMEOUT))
    controller = None
    try:
        def wait(condition, what, timeout=DISCOVERY_TIMEOUT_S):
            try:
                spin_until(executor, condition, timeout, what)
            except pytest.fail.Exception:
                print(driver.output(), controller.output() if controller else "")
                raise

        # The platform rests on its stops before the controller arms at its first joint state.
        wait(lambda: states and states[-1][1] == (DRIVER_STOP,) * 6, "the platform on the driver's stops")
        controller = NodeProcess("hexapod_control.ros.controller_node", tmp_path / "controller.log", ("params_file", params_file),
                             ("controller", "computed_torque"), ("arm_on_start", True))
        # A loaded machine may starve the controller past the driver's timeout now and then; what
        # matters is a run of states under its force before the kill.
        wait(lambda: len(states) >= HELD_STATES and all(all(e != 0.0 for e in state[2]) for state in states[-HELD_STATES:]),
             "states under the controller's force", DELIVERY_TIMEOUT_S)
        killed = len(states)
        held = killed - HELD_STATES
        controller.process.send_signal(signal.SIGKILL)
        controller.process.wait()
        wait(lambda: any(state[2] == (0.0,) * 6 for state in states[killed:]), "zero force after the kill", DELIVERY_TIMEOUT_S)
        wait(lambda: any(message == TIMED_OUT for _, message in driver_statuses), "the driver's timeout status",
             DELIVERY_TIMEOUT_S)
        first_zero = next(state for state in states[killed:] if state[2] == (0.0,) * 6)
        # The driver held the dead controller's last force until it timed out, then zero from then on.
        assert all(all(e != 0.0 for e in state[2]) for state in states[held:states.index(first_zero)])
        wait(lambda: len(states) >= states.index(first_zero) + HELD_STATES, "states after the timeout", DELIVERY_TIMEOUT_S)
        assert all(state[2] == (0.0,) * 6 for state in states[states.index(first_zero):])
    finally:
        if controller is not None:
            controller.stop()
        driver.stop()
        listener.destroy_node()


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda m: setattr(m, "joint_names", ["platform", "extra"]), "joint_names"),
        (lambda m: setattr(m, "points", []), "exactly one point"),
        (lambda m: setattr(m.points[0], "transforms", []), "one transform"),
        (lambda m: setattr(m.points[0], "velocities", list(m.points[0].velocities) * 2), "at most one velocity"),
    ],
    ids=["joint_names", "no_point", "no_transform", "two_velocities"],
)
def test_reference_conversion_rejects_malformed_messages(edit, words):
    message = reference_message(0.0, NAMES.base_frame, reference_point_from_euler(home_pose(HexapodModel(PARAMETERS)), np.zeros(6), np.zeros(6)))
    assert euler_from_reference_point(reference_point(message)) is not None  # the unedited message converts
    edit(message)
    with pytest.raises(InvalidInputError, match=words):
        reference_point(message)


# ------------------------------------------------------------------------------------------ simulator node
def test_simulator_node_steps_in_lockstep_and_ignores_malformed_commands(make_node, executor, tmp_path):
    # Without the loop delay a command acts on the very next step (simulation/delay.py tests the delay).
    no_delay = variant_file(tmp_path, edit=lambda h: h["simulation"]["loop_delay"].update(periods=0))
    node = make_node(SimulatorNode, backend="embedded", stepping="lockstep", params_file=no_delay)
    probe = make_node.probe()
    states, clocks = [], []
    commands = probe.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
    subscriptions = [
        probe.create_subscription(JointState, TOPICS["joint_states"], states.append, RELIABLE_QOS),
        probe.create_subscription(Clock, TOPICS["clock"], clocks.append, RELIABLE_QOS),
    ]
    wait_matched(executor, [commands], subscriptions)
    # The first state went out before anyone listened; lockstep sends it again until answered.
    spin_until(executor, lambda: states, DELIVERY_TIMEOUT_S, "the initial joint state")
    assert list(states[0].name) == list(NAMES.joint_names) and time_from_stamp(states[0].header.stamp) == 0.0
    np.testing.assert_allclose(states[0].position, HOME_Q)

    def answer(data):
        """Command, then the next state (later than the last one: a resend of the same one does not count)."""
        last = time_from_stamp(states[-1].header.stamp)
        commands.publish(Float64MultiArray(data=data))
        spin_until(executor, lambda: time_from_stamp(states[-1].header.stamp) > last, DELIVERY_TIMEOUT_S, "the next joint state")
        return states[-1]

    gravity = list(HexapodModel(PARAMETERS).gravity_term(HOME_Q))
    state = answer(gravity)
    dt = node.plant.dt
    assert time_from_stamp(state.header.stamp) == pytest.approx(dt, abs=1e-9)
    # /clock went out just before that state, on its own topic: it may be taken after it.
    spin_until(executor, lambda: clocks and time_from_stamp(clocks[-1].clock) >= dt, DELIVERY_TIMEOUT_S, "/clock at dt")
    assert time_from_stamp(clocks[-1].clock) == pytest.approx(dt, abs=1e-9)
    np.testing.assert_allclose(state.effort, gravity)
    for malformed in ([1.0] * 5, gravity[:5] + [math.nan]):
        state = answer(malformed)  # still answers the state (the plant steps) ...
        np.testing.assert_allclose(state.effort, gravity)  # ... with the last valid forces
    assert node.commands_ignored == 2
    assert time_from_stamp(state.header.stamp) == pytest.approx(3 * dt, abs=1e-9)


# ------------------------------------------------------------------------------------------ parameters
def _negative_gain(hexapod):
    hexapod["controllers"]["computed_torque"]["position_gain"][2] = -50000.0


def test_bad_parameters_stop_a_node_with_the_key_named(context, tmp_path):
    bad_file = variant_file(tmp_path, edit=_negative_gain)
    with pytest.raises(ParameterError, match=r"hexapod\.controllers\.computed_torque\.position_gain") as error:
        ControllerNode(context=context, parameter_overrides=[Parameter("params_file", value=bad_file)])
    assert bad_file in str(error.value)
    with pytest.raises(ParameterError, match="'controller'.*'pid'"):
        ControllerNode(context=context, parameter_overrides=[Parameter("controller", value="pid")])
    with pytest.raises(ParameterError, match=r"hexapod\.safety\.watchdog_period"):
        ControllerNode(context=context, parameter_overrides=[
            Parameter("params_file", value=variant_file(tmp_path, {"watchdog_period": 1.0}))])


@pytest.mark.slow
def test_node_executable_exits_with_the_key_named(tmp_path):
    bad_file = variant_file(tmp_path, edit=_negative_gain)
    result = subprocess.run(
        [sys.executable, "-m", "hexapod_control.ros.controller_node", "--ros-args", "-p", f"params_file:={bad_file}"],
        check=False, capture_output=True, text=True, timeout=60, env=os.environ.copy(),
    )
    assert result.returncode == 1
    assert "hexapod.controllers.computed_torque.position_gain" in result.stderr
    assert "Traceback" not in result.stderr
