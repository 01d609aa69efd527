"""The loop a lab runs: hexapod_robot_stack against hexapod_fake_driver, two processes over DDS at 1 kHz.

The driver's own wall-clock loop does not wait for anyone. Before any command it applies zero
force and the platform sinks onto its stops (travel limit ``STOP``); the test then arms the stack
and starts the 6.5 trajectory through the stack's services, as an operator would, and compares
the stack's decimated pose with its reference at equal stamps once the move to the trajectory's
start is over. Both processes run at SCHED_FIFO 50 where the machine permits it (the stack's
default). Bounds are about 4x the errors benchmarks/bench_loop.py measured over 60 s
(doc/benchmarks.md, "The 1 kHz loop over DDS").
"""

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from ros_helpers import DISCOVERY_TIMEOUT_S, NodeProcess, spin_until
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.model.parameters import default_parameters_path
from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY, RELIABLE_QOS
from hexapod_control.ros.conventions import TOPICS, time_from_stamp

STOP = 0.30  # [m] the driver's travel limit: the unpowered platform rests on it (doc/robot.md, the fake-driver check)
REST_SPEED_M_S = 1e-6  # every slider slower than this: at rest
ANSWERING = 0.9  # commands per joint state at the driver: the stack answers its states
SETTLE_S = 1.5  # [s] of reference stamps after ~/start: the move to the trajectory's start is over
TRACKED_S = 3.0  # [s] of reference stamps compared
STARTUP_TIMEOUT_S = 60.0  # two processes start, discover each other, and the platform comes to rest
# Measured over 60 s (RMS, max): double loop 0.026, 0.066 mm; computed torque 0.0004, 0.005 mm.
BOUNDS_M = {"double_loop": (1e-4, 2.5e-4), "computed_torque": (2e-6, 2e-5)}


@pytest.mark.parametrize("controller", ["double_loop", "computed_torque"])
def test_the_stack_tracks_against_the_fake_driver(tmp_path, context, executor, controller):
    document = yaml.safe_load(default_parameters_path().read_text())
    document["hexapod"]["limits"]["actuator_position_max"] = STOP
    driver_file = tmp_path / "driver.yaml"
    driver_file.write_text(yaml.safe_dump(document))
    node = rclpy.create_node("loop_test", context=context)
    executor.add_node(node)
    poses, references, status = {}, {}, {"answering": False, "faults": 0, "stack": ""}
    speeds = [np.inf]

    def on_pose(message):
        p = message.pose.position
        poses[time_from_stamp(message.header.stamp)] = np.array([p.x, p.y, p.z])

    def on_reference(message):
        t = message.points[0].transforms[0].translation
        references[time_from_stamp(message.header.stamp)] = np.array([t.x, t.y, t.z])

    def on_diagnostics(message):
        for entry in message.status:
            values = {kv.key: kv.value for kv in entry.values}
            if entry.name.startswith("hexapod_fake_driver"):
                status["answering"] = float(values.get("commands_per_state", "nan")) >= ANSWERING
            elif entry.name.startswith("hexapod_robot_stack"):
                status["faults"] = int(values.get("faults", 0))
                status["stack"] = f"{entry.message} (last error: {values.get('last_error', '')})"

    # 1 kHz: listened to until the platform rests on its stops, then dropped.
    resting = node.create_subscription(JointState, TOPICS["joint_states"],
                                       lambda m: speeds.__setitem__(0, max(map(abs, m.velocity))), RELIABLE_QOS)
    node.create_subscription(PoseStamped, TOPICS["platform_pose"], on_pose, RELIABLE_QOS)
    node.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], on_reference, RELIABLE_QOS)
    node.create_subscription(DiagnosticArray, TOPICS["diagnostics"], on_diagnostics, RELIABLE_QOS)
    stack = NodeProcess("hexapod_control.ros.robot_stack", tmp_path / "stack.log", ("controller", controller),
                        ("gain_set", "simulated_plant"))
    driver = NodeProcess("hexapod_control.ros.fake_driver", tmp_path / "driver.log", ("params_file", driver_file),
                         ("realtime_priority", CONTROL_LOOP_PRIORITY))
    try:
        spin_until(executor, lambda: status["answering"] and speeds[0] < REST_SPEED_M_S, STARTUP_TIMEOUT_S,
                   "the platform resting on its stops, the stack answering the driver's states")
        node.destroy_subscription(resting)
        for service, kind, request in (("arm", SetBool, SetBool.Request(data=True)), ("start", Trigger, Trigger.Request())):
            client = node.create_client(kind, f"/hexapod_robot_stack/{service}")
            spin_until(executor, client.service_is_ready, DISCOVERY_TIMEOUT_S, f"~/{service}")
            future = client.call_async(request)
            spin_until(executor, future.done, DISCOVERY_TIMEOUT_S, f"the answer of ~/{service}")
            assert future.result().success, f"~/{service}: {future.result().message}"
        started = max(references, default=-np.inf)
        spin_until(executor, lambda: max(references, default=-np.inf) > started + SETTLE_S + TRACKED_S, STARTUP_TIMEOUT_S,
                   "the trajectory's reference")
    finally:
        stack_code, driver_code = stack.stop(), driver.stop()
    assert (stack_code, driver_code) == (0, 0), (stack.log_path.read_text()[-2000:], driver.log_path.read_text()[-2000:])
    assert status["faults"] == 0, status["stack"]
    window = [t for t in sorted(set(poses) & set(references)) if started + SETTLE_S <= t]
    assert len(window) >= TRACKED_S * 50 * 0.9  # the stack's 50 Hz decimated outputs, nearly all received
    errors = np.array([np.linalg.norm(references[t] - poses[t]) for t in window])
    rms_bound, max_bound = BOUNDS_M[controller]
    assert np.sqrt(np.mean(errors**2)) < rms_bound and errors.max() < max_bound
