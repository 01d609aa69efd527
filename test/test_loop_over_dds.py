"""The loop a lab runs: hexapod_robot_stack against hexapod_fake_driver, two processes over DDS at 1 kHz.

The driver's own wall-clock loop does not wait for anyone. Before any command it applies zero
force and the platform sinks onto its stops (travel limit ``STOP``); the test then arms the stack
and starts the 6.5 trajectory through the stack's services, as an operator would, and compares
the stack's decimated pose with its reference at equal stamps once the move to the trajectory's
start is over. Both processes run at SCHED_FIFO 50 where the machine permits it (the stack's
default). Bounds are about 4x the errors benchmarks/bench_loop.py measured over 60 s
(doc/benchmarks.md, "The 1 kHz loop over DDS").
"""

import copy

import numpy as np
import pytest
import yaml
from drive_helpers import simulated_parameters

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from ros_helpers import DISCOVERY_TIMEOUT_S, NodeProcess, Starver, spin_until
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.conventions import TOPICS, time_from_stamp
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.ros import native_loop
from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY, RELIABLE_QOS

STOP = 0.30  # [m] the driver's travel limit: the unpowered platform rests on it (doc/robot.md, the fake-driver check)
REST_SPEED_M_S = 1e-6  # every slider slower than this: at rest
ANSWERING = 0.9  # commands per joint state at the driver: the stack answers its states
SETTLE_S = 1.5  # [s] of reference stamps after ~/start: the move to the trajectory's start is over
TRACKED_S = 3.0  # [s] of reference stamps compared
STARTUP_TIMEOUT_S = 60.0  # two processes start, discover each other, and the platform comes to rest
SINKING_M_S = 0.05  # [m/s] disarmed during the trajectory, some slider sinks at least this fast: re-arm
# Measured over 60 s (RMS, max): computed torque 0.0004, 0.005 mm; over this test's 3 s: double loop
# 0.045, 0.14 mm; computed torque at 500 Hz 0.002, 0.022 mm.
BOUNDS_M = {("double_loop", None): (1.5e-4, 4e-4), ("computed_torque", None): (2e-6, 2e-5),
            ("computed_torque", 500.0): (8e-6, 1e-4)}

# The simulated watchdog expires on the machine's stalls as a board's would on the robot's PC:
# 0.5 s lets a loaded CI machine's start-up pass.
SIMULATED_BOARD = simulated_parameters(STOP, watchdog_timeout=0.5).board.model_dump(mode="json")
# On a board the drive serves commands once powered up: not while it powers up or after a fault.
SERVING = ("applying commands", "no valid command yet: zero force", "command timed out: zero force")
DRIVE_FAULT = "drive fault: "  # the driver's status while a drive fault is latched
POWER_UP_RESETS = 3


# These tests judge tracking, stability and the re-arm, not the watchdog and rate rows
# (test_safety.py and test_stack_when_late.py hold those), and must not end on the machine's own
# stalls: on this 2-core virtual machine the hypervisor takes the virtual CPUs now and then
# (benchmarks/bench_machine_latency.py, more on some days than others), and under two CPU hogs a
# 29 ms gap in the joint states once tripped the shipped 20 ms watchdog. The stack's rows here let
# a stall of 100 ms pass (five times the shipped watchdog, twice the stamp age), and count a rate as
# dropped only below 400 Hz (the computed torque's gains are stable down to it on this plant, and
# the HOLD's damper down to 364 Hz, which the stack checks at start).
STALL_TOLERANT = {"safety": {"joint_state_timeout": 0.1, "max_feedback_age": 0.2}, "valid_rates_min": 400.0}


class Operator:
    """The stack and the fake driver as two processes, and a test node that listens and calls services."""

    def __init__(self, tmp_path, context, executor, controller, board="none", rate=None, driver_parameters=()):
        """``rate``: of both processes (default the shipped one); ``driver_parameters``: more (name,
        value) ROS parameters of the driver. The stack runs with the STALL_TOLERANT rows."""
        document = yaml.safe_load(default_parameters_path().read_text())
        hexapod = document["hexapod"]
        if rate is not None:
            hexapod["controllers"]["rate"] = hexapod["simulation"]["rate"] = rate
        hexapod["safety"].update(STALL_TOLERANT["safety"])
        hexapod["controllers"]["computed_torque"]["valid_rates"]["min"] = STALL_TOLERANT["valid_rates_min"]
        stack_file = tmp_path / "stack.yaml"
        stack_file.write_text(yaml.safe_dump(document))
        document["hexapod"]["limits"]["actuator_position_max"] = STOP
        if board != "none":
            document["hexapod"]["board"] = copy.deepcopy(SIMULATED_BOARD)
            if rate is not None:
                document["hexapod"]["board"]["limits"]["sample_rate"] = rate
        driver_file = tmp_path / "driver.yaml"
        driver_file.write_text(yaml.safe_dump(document))
        self.executor = executor
        self.node = node = rclpy.create_node("loop_test", context=context)
        executor.add_node(node)
        self.poses, self.references = {}, {}
        self.status = {"answering": False, "faults": 0, "stack": "", "state": "", "driver": ""}
        self.speeds = [np.inf]  # the fastest slider of the latest joint state [m/s]
        self.fastest = [0.0]  # the fastest slider since the last reset [m/s]
        self.clients = {}
        node.create_subscription(PoseStamped, TOPICS["platform_pose"], self._on_pose, RELIABLE_QOS)
        node.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], self._on_reference, RELIABLE_QOS)
        node.create_subscription(DiagnosticArray, TOPICS["diagnostics"], self._on_diagnostics, RELIABLE_QOS)
        self.joint_states = None
        self.listen_to_joint_states(True)
        self.stack = NodeProcess("hexapod_control.ros.robot_stack", tmp_path / "stack.log", ("controller", controller),
                                 ("gain_set", "simulated_plant"), ("params_file", stack_file))
        self.driver = NodeProcess("hexapod_control.ros.fake_driver", tmp_path / "driver.log",
                                  ("params_file", driver_file), ("realtime_priority", CONTROL_LOOP_PRIORITY),
                                  ("board", board), *driver_parameters)

    def listen_to_joint_states(self, listening: bool) -> None:
        """The 1 kHz stream costs this process a core's share: listened to only while needed."""
        if listening and self.joint_states is None:
            self.joint_states = self.node.create_subscription(JointState, TOPICS["joint_states"], self._on_joint_state,
                                                              RELIABLE_QOS)
        elif not listening and self.joint_states is not None:
            self.node.destroy_subscription(self.joint_states)
            self.joint_states = None

    def _on_joint_state(self, message):
        self.speeds[0] = max(map(abs, message.velocity))
        self.fastest[0] = max(self.fastest[0], self.speeds[0])

    def _on_pose(self, message):
        p = message.pose.position
        self.poses[time_from_stamp(message.header.stamp)] = np.array([p.x, p.y, p.z])

    def _on_reference(self, message):
        t = message.points[0].transforms[0].translation
        self.references[time_from_stamp(message.header.stamp)] = np.array([t.x, t.y, t.z])

    def _on_diagnostics(self, message):
        for entry in message.status:
            values = {kv.key: kv.value for kv in entry.values}
            if entry.name.startswith("hexapod_fake_driver"):
                self.status["answering"] = float(values.get("commands_per_state", "nan")) >= ANSWERING
                self.status["lost"] = int(values.get("commands_lost_injected", 0))
                self.status["driver"] = entry.message
            elif entry.name.startswith("hexapod_robot_stack"):
                self.status["faults"] = int(values.get("faults", 0))
                self.status["state"] = values.get("state", "")
                self.status["rcl_loop_answers"] = int(values.get("rcl_loop_answers", 0))
                self.status["stack"] = f"{entry.message} (last error: {values.get('last_error', '')})"

    def wait_for_rest(self):
        """Until the platform rests on its stops and the stack answers. A drive that latched a fault
        while powering up (a loaded machine can stall its loop past the watchdog) is reset, as
        doc/quanser_driver.md tells the operator, at most POWER_UP_RESETS times."""
        resets = 0

        def resting() -> bool:
            nonlocal resets
            if self.status["driver"].startswith(DRIVE_FAULT) and resets < POWER_UP_RESETS:
                resets += 1
                self.reset_driver()
            return self.status["answering"] and self.speeds[0] < REST_SPEED_M_S and self.status["driver"] in SERVING

        try:
            spin_until(self.executor, resting, STARTUP_TIMEOUT_S,
                       "the platform resting on its stops, the stack answering the driver's states")
        except pytest.fail.Exception:
            print(f"driver: {self.status['driver']!r}; stack: {self.status['stack']!r}; resets: {resets}")
            raise

    def reset_driver(self) -> None:
        client = self.clients.get("driver reset")
        if client is None:
            client = self.clients["driver reset"] = self.node.create_client(Trigger, "/hexapod_fake_driver/reset")
            spin_until(self.executor, client.service_is_ready, DISCOVERY_TIMEOUT_S, "the driver's ~/reset")
        future = client.call_async(Trigger.Request())
        spin_until(self.executor, future.done, DISCOVERY_TIMEOUT_S, "the answer of the driver's ~/reset")
        self.status["driver"] = ""  # the next diagnostics say how the power-up goes on

    def now(self) -> float:
        """This node's clock [s]: the time base of the driver's stamps. Taken after a service's answer,
        it dates the request no earlier than the stack served it; the latest reference received does
        not (none may have come yet, and on a loaded machine this process reads them late)."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def call(self, service, request):
        kind = SetBool if isinstance(request, SetBool.Request) else Trigger
        client = self.clients.get(service)
        if client is None:
            client = self.clients[service] = self.node.create_client(kind, f"/hexapod_robot_stack/{service}")
            spin_until(self.executor, client.service_is_ready, DISCOVERY_TIMEOUT_S, f"~/{service}")
        future = client.call_async(request)
        spin_until(self.executor, future.done, DISCOVERY_TIMEOUT_S, f"the answer of ~/{service}")
        assert future.result().success, f"~/{service}: {future.result().message}"
        return future.result().message

    def start_tracking(self) -> float:
        """Rest, arm and start as an operator would; the time [s] the start was answered by."""
        self.wait_for_rest()
        self.listen_to_joint_states(False)
        self.call("arm", SetBool.Request(data=True))
        self.call("start", Trigger.Request())
        return self.now()

    def tracking_errors(self, started) -> np.ndarray:
        """|reference - pose| [m] at equal stamps, from the end of the move to the trajectory's start."""
        window = [t for t in sorted(set(self.poses) & set(self.references)) if started + SETTLE_S <= t]
        assert len(window) >= TRACKED_S * 50 * 0.9  # the stack's 50 Hz decimated outputs, nearly all received
        return np.array([np.linalg.norm(self.references[t] - self.poses[t]) for t in window])

    def references_past(self, started, duration):
        spin_until(self.executor, lambda: max(self.references, default=-np.inf) > started + duration,
                   STARTUP_TIMEOUT_S, "the trajectory's reference")

    def stop(self):
        stack_code, driver_code = self.stack.stop(), self.driver.stop()
        assert (stack_code, driver_code) == (0, 0), (self.stack.log_path.read_text()[-2000:],
                                                    self.driver.log_path.read_text()[-2000:])


# Computed torque at half the shipped rate, as on a PC that cannot keep 1 kHz: its shipped gains
# are stable down to 400 Hz on this plant (STALL_TOLERANT's rate row).
SLOW_RATE_HZ = 500.0


@pytest.mark.parametrize(("controller", "board", "rate"), [
    pytest.param("double_loop", "none", None),
    pytest.param("computed_torque", "none", None),
    pytest.param("double_loop", "simulated", None),
    pytest.param("computed_torque", "none", SLOW_RATE_HZ),
    # On the simulated board: the board's effort once ran a sample ahead of the motion, the delay
    # estimate went to zero and computed torque oscillated (fixed, held in test_stack_when_late.py).
    pytest.param("computed_torque", "simulated", SLOW_RATE_HZ),
])
def test_the_stack_tracks_against_the_fake_driver(tmp_path, context, executor, controller, board, rate):
    """board simulated: the drive core powers up (calibration, homing) before the stack arms from the stops."""
    operator = Operator(tmp_path, context, executor, controller, board, rate)
    try:
        started = operator.start_tracking()
        operator.references_past(started, SETTLE_S + TRACKED_S)
    finally:
        operator.stop()
    assert operator.status["faults"] == 0, operator.status["stack"]
    if not isinstance(native_loop.build(), str):  # the stack's default executor served them in C
        assert operator.status["rcl_loop_answers"] > TRACKED_S * (rate or 1000.0) / 2, operator.status
    errors = operator.tracking_errors(started)
    rms_bound, max_bound = BOUNDS_M[controller, rate]
    print(f"{controller} on board {board} at {rate or 1000} Hz: RMS {np.sqrt(np.mean(errors**2)):.3g} m, max {errors.max():.3g} m")
    assert np.sqrt(np.mean(errors**2)) < rms_bound and errors.max() < max_bound


# The driver takes each command 0..2 ticks later than it would (the forces' delay jumps between 1
# and 3 periods from cycle to cycle) and loses 1 % of them, while the stack's process is stopped for
# a few milliseconds twice a second: what a loaded PC and a lossy link do, all at once.
LATE_AND_LOSSY = (("inject_extra_ticks", 2), ("inject_command_loss", 0.01))
STARVED_S, STARVED_EVERY_S = 0.005, 0.5


@pytest.mark.parametrize("controller", ["double_loop", "computed_torque"])
def test_the_stack_stays_stable_and_tracks_when_late_lossy_and_starved(tmp_path, context, executor, controller):
    operator = Operator(tmp_path, context, executor, controller, driver_parameters=LATE_AND_LOSSY)
    try:
        started = operator.start_tracking()
        with Starver(operator.stack.process.pid, STARVED_S, STARVED_EVERY_S, CONTROL_LOOP_PRIORITY + 1) as starver:
            operator.references_past(started, SETTLE_S + TRACKED_S)
    finally:
        operator.stop()
    assert starver.stops >= TRACKED_S / STARVED_EVERY_S / 2 and operator.status["lost"] > 0, (starver.stops,
                                                                                              operator.status)
    assert operator.status["faults"] == 0, operator.status["stack"]
    errors = operator.tracking_errors(started)
    rms_bound, max_bound = BOUNDS_M[controller, None]
    rms = np.sqrt(np.mean(errors**2))
    assert rms < rms_bound and errors.max() < max_bound, (rms, errors.max(), starver.longest, operator.status)


def test_rearming_while_the_platform_moves_stays_within_the_speed_limit(tmp_path, context, executor):
    """The operator's path after a fault: disarmed during the trajectory the platform sinks; armed
    again while it moves, the stack ramps from the measured pose and never overspeeds."""
    operator = Operator(tmp_path, context, executor, "computed_torque", rate=SLOW_RATE_HZ)
    limit = load_parameters().limits.actuator_speed_max
    try:
        operator.wait_for_rest()
        operator.call("arm", SetBool.Request(data=True))
        operator.call("start", Trigger.Request())
        started = operator.now()
        operator.references_past(started, SETTLE_S)
        operator.call("arm", SetBool.Request(data=False))
        spin_until(executor, lambda: operator.speeds[0] > SINKING_M_S, STARTUP_TIMEOUT_S, "the platform sinking")
        operator.fastest[0] = 0.0
        message = operator.call("arm", SetBool.Request(data=True))
        rearmed = operator.now()
        operator.references_past(rearmed, SETTLE_S)
    finally:
        operator.stop()
    assert "ramp" in message
    assert operator.status["faults"] == 0 and operator.status["state"] == "armed", operator.status["stack"]
    assert operator.fastest[0] <= limit
