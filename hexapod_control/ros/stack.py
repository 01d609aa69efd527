"""The whole simulated stack in one process: simulator, FK, trajectory and controller nodes.

Composition without the launch package: the four nodes (and a tracking monitor) share one rclpy
context and one SingleThreadedExecutor, and talk over the usual topics, so what runs here is what
``simulation.launch.py`` starts as separate processes. ``--inverse-dynamics`` adds the
inverse-dynamics node (outside the lockstep chain: it listens), ``--plant-params`` gives the
simulated robot a parameters file of its own (a payload, other drives) while the nodes keep
``--params``.

Lockstep (deterministic). This module, not a timer, advances the simulation. For plant step k at
t_k = k dt:

1. the simulator publishes /clock = t_k; the other nodes run on sim time (``use_sim_time``);
2. the executor spins until the controller holds the reference stamped t_k (the trajectory node's
   control-rate timer fires when its clock reaches t_k; step 0 has none, the controller holds);
3. the simulator publishes /joint_states stamped t_k;
4. the executor spins until the simulator got the controller's answer (the controller computes on
   each joint state);
5. the plant steps once with that command.

Every control step thus sees exactly the reference and the state of its own instant, so two runs
with the same parameters give the same numbers, however loaded the machine. Wall-clock limits only
catch a stalled stack (``STEP_TIMEOUT_S``). The stack needs ``simulation.rate == controllers.rate``
(one control step per plant step). The controller arms itself at the first joint state; the
trajectory starts at t = 0 from home, where the plant starts.

    hexapod_sim_stack --controller computed_torque --backend embedded --duration 5
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import rclpy
from geometry_msgs.msg import PoseStamped
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from trajectory_msgs.msg import MultiDOFJointTrajectory

from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.control.trajectories import wrap_angle
from hexapod_control.conventions import TOPICS, euler_from_reference_point
from hexapod_control.errors import HexapodError, InvalidInputError, StackStalledError
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.model.rotations import euler_zyx_from_quaternion
from hexapod_control.options import add_params
from hexapod_control.ros.common import RELIABLE_QOS, reference_point
from hexapod_control.ros.controller_node import ControllerNode
from hexapod_control.ros.fk_node import ForwardKinematicsNode
from hexapod_control.ros.inverse_dynamics_node import InverseDynamicsNode
from hexapod_control.ros.simulator_node import SimulatorNode
from hexapod_control.ros.trajectory_node import TRAJECTORY_CHOICES, TrajectoryNode
from hexapod_control.simulation import BACKENDS

# DDS discovery of the nodes usually takes ~3 s; the margin is for a loaded 2-core machine.
DISCOVERY_TIMEOUT_S = 20.0
# Wall time one lockstep stage may take before the stack counts as stalled (normally ~1 ms).
STEP_TIMEOUT_S = 10.0
# /clock is best effort (rclpy's TimeSource subscribes so); if the trajectory node has not reacted
# within this wall time, the same clock message is sent again (harmless: the time is unchanged).
CLOCK_RESEND_S = 0.2
# How long one executor wait may block before the condition is checked again.
SPIN_STEP_S = 0.05


def _fast_executor(context: Context):
    """rclpy's EventsExecutor where available (faster: it does not rebuild a wait set at every
    spin, and runs callbacks in arrival order); the SingleThreadedExecutor otherwise."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:  # rclpy before Jazzy
        return SingleThreadedExecutor(context=context)
    return EventsExecutor(context=context)


class TrackingMonitor(Node):
    """Pairs each reference with the measured platform pose of the same stamp (from the FK node)."""

    def __init__(self, context: Context):
        super().__init__("hexapod_tracking_monitor", context=context, start_parameter_services=False,
                         parameter_overrides=[Parameter("start_type_description_service", value=False)])
        self.references: dict[int, np.ndarray] = {}
        self.position_errors: list[float] = []
        self.orientation_errors: list[float] = []
        self.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], self._on_reference, RELIABLE_QOS)
        self.create_subscription(PoseStamped, TOPICS["platform_pose"], self._on_pose, RELIABLE_QOS)

    @staticmethod
    def _key(stamp) -> int:
        return stamp.sec * 1_000_000_000 + stamp.nanosec

    def _on_reference(self, message) -> None:
        try:
            pose, _, _ = euler_from_reference_point(reference_point(message))
        except InvalidInputError:
            return
        self.references[self._key(message.header.stamp)] = pose

    def _on_pose(self, message: PoseStamped) -> None:
        reference = self.references.pop(self._key(message.header.stamp), None)
        if reference is None:
            return  # step 0 has no reference
        p, o = message.pose.position, message.pose.orientation
        measured = np.array([p.x, p.y, p.z, *euler_zyx_from_quaternion(o.x, o.y, o.z, o.w)])
        error = reference - measured
        self.position_errors.append(float(np.linalg.norm(error[:3])))
        self.orientation_errors.append(float(np.linalg.norm(wrap_angle(error[3:]))))


@dataclass(frozen=True)
class StackResult:
    steps: int
    sim_time: float  # [s]
    wall_time: float  # [s]
    tracked_samples: int  # reference/pose pairs compared
    max_position_error: float  # [m]
    rms_position_error: float  # [m]
    max_orientation_error: float  # [rad]
    supervisor_state: str
    action: str
    controller_status: str
    plant_failure: str
    final_q: tuple[float, ...]

    def summary(self) -> str:
        return (
            f"{self.steps} steps, {self.sim_time:.3f} s simulated in {self.wall_time:.1f} s wall "
            f"({self.sim_time / max(self.wall_time, 1e-9):.3f} x real time); tracking over {self.tracked_samples} "
            f"samples: position error max {self.max_position_error * 1e3:.4f} mm, rms "
            f"{self.rms_position_error * 1e3:.4f} mm, orientation error max {math.degrees(self.max_orientation_error):.4f} deg; "
            f"supervisor {self.supervisor_state}/{self.action}, controller {self.controller_status}"
            + (f"; plant stopped: {self.plant_failure}" if self.plant_failure else "")
        )


class SimStack:
    """The nodes of a simulated run in one context; ``run(duration)`` advances it in lockstep."""

    def __init__(self, context: Context, params_file: str, controller: str, backend: str, trajectory: str,
                 plant_params_file: str | None = None, inverse_dynamics: bool = False):
        """``plant_params_file``: the simulated robot's own file (a model mismatch: a payload, other
        drives), default ``params_file``; ``inverse_dynamics``: add the inverse-dynamics node."""
        load_parameters(params_file)  # fail early, with the file's own message
        plant_params_file = str(plant_params_file or params_file)
        load_parameters(plant_params_file)
        # The executor rebuilds its wait set from every entity of every node at each spin, and the
        # lockstep loop spins several times per step: the parameter and type-description services
        # (seven per node, unused inside the stack) would double the cost of each wait.
        common = [Parameter("params_file", value=str(params_file)), Parameter("start_type_description_service", value=False)]
        lean = {"start_parameter_services": False}
        sim_time = [Parameter("use_sim_time", value=True)]
        self.context = context
        self.nodes: list[Node] = []
        try:
            self.simulator = self._add(SimulatorNode(context=context, **lean, parameter_overrides=[
                Parameter("params_file", value=plant_params_file), *common[1:],
                Parameter("backend", value=backend), Parameter("stepping", value="external")]))
            self.fk = self._add(ForwardKinematicsNode(context=context, **lean, parameter_overrides=common + sim_time))
            self.trajectory = self._add(TrajectoryNode(context=context, **lean, parameter_overrides=common + sim_time + [
                Parameter("trajectory", value=trajectory), Parameter("autostart", value=True)]))
            self.controller = self._add(ControllerNode(context=context, **lean, parameter_overrides=common + sim_time + [
                Parameter("controller", value=controller), Parameter("gain_set", value="simulated_plant"),
                Parameter("arm_on_start", value=True)]))
            self.monitor = self._add(TrackingMonitor(context))
            self.inverse_dynamics = (
                self._add(InverseDynamicsNode(context=context, **lean, parameter_overrides=common + sim_time))
                if inverse_dynamics else None
            )
        except BaseException:
            self.destroy()
            raise
        self.executor = _fast_executor(context)
        for node in self.nodes:
            self.executor.add_node(node)
        self.steps = 0
        self._discovered = False

    def _add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    # -------------------------------------------------------------- running
    def spin_until(self, condition: Callable[[], bool], timeout_s: float, what: str,
                   retry: Callable[[], None] | None = None, retry_period_s: float = math.inf) -> None:
        deadline = time.monotonic() + timeout_s
        next_retry = time.monotonic() + retry_period_s
        while not condition():
            now = time.monotonic()
            if now > deadline:
                raise StackStalledError(f"stack stalled at step {self.steps}: no {what} within {timeout_s} s")
            if retry is not None and now > next_retry:
                retry()
                next_retry = now + retry_period_s
            self.executor.spin_once(timeout_sec=SPIN_STEP_S)

    def wait_for_discovery(self) -> None:
        """Every publisher of the loop matched with its subscribers (a volatile reader misses earlier samples)."""
        s, t, c, f = self.simulator, self.trajectory, self.controller, self.fk
        expectations = [
            (s.clock_publisher, 3, "/clock subscribers (FK, trajectory, controller)"),
            (s.state_publisher, 2, "/joint_states subscribers (FK, controller)"),
            (t.publisher, 2, "reference subscribers (controller, monitor)"),
            (c.command_publisher, 1, "effort command subscriber (simulator)"),
            (f.pose_publisher, 2, "platform pose subscribers (trajectory, monitor)"),
        ]
        self.spin_until(
            lambda: all(p.get_subscription_count() >= n for p, n, _ in expectations),
            DISCOVERY_TIMEOUT_S,
            "; ".join(what for p, n, what in expectations if p.get_subscription_count() < n) or "discovery",
        )
        self._discovered = True

    def step(self) -> bool:
        """One lockstep plant step (module docstring); False once the plant stopped."""
        simulator, controller = self.simulator, self.controller
        t_ns = round(simulator.plant.time * 1e9)
        simulator.publish_clock()
        if self.steps > 0:
            self.spin_until(
                lambda: controller.last_reference_stamp is not None and round(controller.last_reference_stamp * 1e9) >= t_ns,
                STEP_TIMEOUT_S, f"reference for t = {t_ns * 1e-9:.4f} s",
                retry=simulator.publish_clock, retry_period_s=CLOCK_RESEND_S,
            )
        answered = simulator.commands_received
        simulator.publish_joint_state()
        self.spin_until(lambda: simulator.commands_received > answered, STEP_TIMEOUT_S, "effort command")
        self.steps += 1
        return simulator.step_plant()

    def run(self, duration: float) -> StackResult:
        if not self._discovered:
            self.wait_for_discovery()
        start = time.monotonic()
        steps = round(duration / self.simulator.plant.dt)
        for _ in range(steps):
            if not self.step():
                break
        # Let the FK node and the monitor catch up with the last states (they are not in the loop).
        self.executor.spin_once(timeout_sec=SPIN_STEP_S)
        wall = time.monotonic() - start
        decision = self.controller.last_decision
        control = decision.control if decision is not None else None
        positions = np.array(self.monitor.position_errors or [math.nan])
        return StackResult(
            steps=self.steps,
            sim_time=self.simulator.plant.time,
            wall_time=wall,
            tracked_samples=len(self.monitor.position_errors),
            max_position_error=float(np.max(positions)),
            rms_position_error=float(np.sqrt(np.mean(positions**2))),
            max_orientation_error=float(np.max(self.monitor.orientation_errors or [math.nan])),
            supervisor_state=self.controller.supervisor.state.value,
            action=decision.action.value if decision is not None else "none",
            controller_status=control.status.value if control is not None else "not run",
            plant_failure=self.simulator.failure,
            final_q=tuple(float(v) for v in self.simulator.plant.joint_positions()),
        )

    def destroy(self) -> None:
        executor = getattr(self, "executor", None)
        if executor is not None:
            executor.shutdown()
        for node in reversed(self.nodes):
            node.destroy_node()
        self.nodes = []


def run_stack(params_file: str, controller: str, backend: str, trajectory: str, duration: float,
              plant_params_file: str | None = None, inverse_dynamics: bool = False) -> StackResult:
    """Build the stack in a fresh rclpy context, run it for ``duration`` simulated seconds, tear down."""
    context = Context()
    rclpy.init(context=context)
    try:
        stack = SimStack(context, params_file, controller, backend, trajectory, plant_params_file, inverse_dynamics)
        try:
            return stack.run(duration)
        finally:
            stack.destroy()
    finally:
        rclpy.try_shutdown(context=context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--controller", choices=CONTROLLER_NAMES, default="computed_torque")
    parser.add_argument("--backend", choices=BACKENDS, default="embedded")
    parser.add_argument("--trajectory", choices=TRAJECTORY_CHOICES, default="operational_space")
    parser.add_argument("--duration", type=float, default=5.0, help="simulated seconds (default: %(default)s)")
    add_params(parser, help="parameters file (default: the shipped config/hexapod.yaml)")
    parser.add_argument("--plant-params", default=None, help="the simulated robot's parameters file (default: --params)")
    parser.add_argument("--inverse-dynamics", action="store_true", help="also run the inverse-dynamics node")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.duration) and args.duration > 0.0):
        parser.error(f"--duration must be a positive number of seconds, got {args.duration}")
    try:
        params = args.params or str(default_parameters_path())
        result = run_stack(params, args.controller, args.backend, args.trajectory, args.duration,
                           args.plant_params, args.inverse_dynamics)
    except HexapodError as error:
        print(f"hexapod_sim_stack: {error}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0 if not result.plant_failure and result.supervisor_state == "armed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
