"""Simulator node: a simulated Hexapod behind the effort-command topic, and the simulation clock.

Subscribes  ``/effort_controller/commands`` (std_msgs/Float64MultiArray, six forces [N] in
            ``ros.joint_names`` order), like the ros2_control JointGroupEffortController it replaces.
Publishes   ``/clock`` (rosgraph_msgs/Clock, the plant time), then ``/joint_states``
            (sensor_msgs/JointState: names, measured q and q_dot, and the applied forces as effort),
            once per plant step; ``/diagnostics`` (plant time, steps, ignored commands, failures).
Parameters  ``params_file``; ``backend`` = embedded | mujoco (hexapod_control.simulation.make_plant);
            ``stepping`` = lockstep | realtime (below); ``use_sim_time`` is not used by this node:
            it is the source of the simulated time.

Stepping (the plant step is 1/``simulation.rate``):

* ``lockstep`` (default): after publishing a state the node waits for the next force command and
  then advances one step; the command acts ``simulation.loop_delay`` steps later (simulation/delay.py). The simulation is as fast as the stack allows and exactly as slow as
  the controller, so no command is ever late; nodes in other processes see a consistent /clock.
  A state that got no answer within ``LOCKSTEP_RESEND_PERIOD_S`` of wall time (startup
  discovery, a lost message) is published again, unchanged, rather than stepping without a command;
  the controller node answers each stamp once, so a copy never adds a command in flight.
* ``realtime``: a wall-clock timer steps at the plant rate with the latest command held.

A malformed command (wrong length, NaN/inf) is ignored with a throttled warning and counted; the
plant keeps the last valid forces (zero before any). That is what a JointGroupEffortController
does with a wrong-size command, and a command the controller's supervisor never sent is not a
reason for the simulated drives to do anything new. In lockstep a malformed command still
answers the pending state. A diverged plant (SimulationDivergedError) stops: the node reports an
ERROR diagnostic and publishes no more states, so the watchdogs downstream take over.
"""

from __future__ import annotations

import numpy as np
from rclpy.clock import Clock, ClockType
from rosgraph_msgs.msg import Clock as ClockMessage
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from hexapod_control.conventions import TOPICS, effort_array
from hexapod_control.errors import (
    HexapodError,
    InvalidInputError,
    SimulationDivergedError,
)
from hexapod_control.ros.common import (
    LEVEL_ERROR,
    LEVEL_OK,
    RELIABLE_QOS,
    DiagnosticsPublisher,
    HexapodNode,
    declare_choice,
    run_node,
    set_time,
)
from hexapod_control.simulation import BACKENDS, make_plant
from hexapod_control.simulation.delay import with_loop_delay

NODE_NAME = "hexapod_simulator"
STEPPING_MODES = ("lockstep", "realtime", "external")  # external: the owner calls advance() (one-process stack)
# Wall time a lockstep state may go unanswered before it is sent again. Long against a normal
# answer (~1 ms) so that a slow controller is never hurried, short against DDS discovery (~3 s).
LOCKSTEP_RESEND_PERIOD_S = 0.5


class SimulatorNode(HexapodNode):
    default_name = NODE_NAME

    def _setup(self, parameters) -> None:
        self.names = parameters.ros
        self.backend = declare_choice(self, "backend", "embedded", BACKENDS, "simulated plant")
        self.stepping = declare_choice(self, "stepping", "lockstep", STEPPING_MODES, "how the plant time advances")
        self.plant = make_plant(self.backend, parameters)
        if self.stepping != "realtime":
            # Stepped once per command, the plant models the transport delay the real loop has
            # (simulation.loop_delay); in realtime the delay is the middleware's own.
            self.plant = with_loop_delay(self.plant, parameters.simulation)
        self.plant.reset(np.full(6, parameters.home_actuator_position))
        self.forces = np.zeros(6)  # last valid command [N]
        self.commands_received = 0  # every command, valid or not (lockstep answers)
        self.commands_ignored = 0
        self.failure = ""  # why the plant stopped ("" while it runs)
        self._answered = True  # lockstep: the published state got its command

        self.clock_publisher = self.create_publisher(ClockMessage, TOPICS["clock"], RELIABLE_QOS)
        self.state_publisher = self.create_publisher(JointState, TOPICS["joint_states"], RELIABLE_QOS)
        self.diagnostics = DiagnosticsPublisher(
            self, TOPICS["diagnostics"], f"{self.get_name()}: {self.backend} plant", parameters.safety.diagnostics_period
        )
        self.create_subscription(Float64MultiArray, TOPICS["effort_commands"], self._on_command, RELIABLE_QOS)
        wall_clock = Clock(clock_type=ClockType.STEADY_TIME)  # not /clock: this node makes /clock
        if self.stepping == "lockstep":
            self.create_timer(LOCKSTEP_RESEND_PERIOD_S, self._resend_if_unanswered, clock=wall_clock)
            self.publish_state()
        elif self.stepping == "realtime":
            self.create_timer(self.plant.dt, self.advance, clock=wall_clock)

    # -------------------------------------------------------------- commands
    def _on_command(self, message: Float64MultiArray) -> None:
        self.commands_received += 1
        try:
            self.forces = effort_array(message.data, len(self.names.joint_names))
        except InvalidInputError as error:
            self.commands_ignored += 1
            self.get_logger().warning(f"ignoring effort command, keeping the last valid forces: {error}", throttle_duration_sec=1.0)
        if self.stepping == "lockstep" and not self._answered:
            self._answered = True
            self.advance()

    def _resend_if_unanswered(self) -> None:
        if not self._answered and not self.failure:
            self.publish_state()

    # -------------------------------------------------------------- stepping
    def advance(self) -> bool:
        """Apply the held forces, step the plant once and publish; False once the plant stopped."""
        if not self.step_plant():
            return False
        self.publish_state()
        return True

    def step_plant(self) -> bool:
        """Apply the held forces and step the plant once, without publishing."""
        if self.failure:
            return False
        try:
            self.plant.apply_forces(self.forces)
            self.plant.step()
        except (SimulationDivergedError, HexapodError) as error:
            self.failure = str(error)
            self.get_logger().error(f"simulation stopped: {error}")
            self._report(LEVEL_ERROR, "simulation stopped")
            return False
        return True

    def publish_clock(self) -> None:
        message = ClockMessage()
        set_time(message.clock, self.plant.time)
        self.clock_publisher.publish(message)

    def publish_joint_state(self) -> None:
        message = JointState()
        set_time(message.header.stamp, self.plant.time)
        message.name = list(self.names.joint_names)
        message.position = [float(v) for v in self.plant.joint_positions()]
        message.velocity = [float(v) for v in self.plant.joint_velocities()]
        message.effort = [float(v) for v in self.plant.applied_forces]
        self._answered = False
        self.state_publisher.publish(message)

    def publish_state(self) -> None:
        """/clock first, so that a node reading the joint state already runs at its time."""
        self.publish_clock()
        self.publish_joint_state()
        self._report(LEVEL_OK, "running")

    def _report(self, level, text: str) -> None:
        self.diagnostics.update(
            self.plant.time,
            level,
            text,
            {
                "backend": self.backend,
                "plant_time": self.plant.time,
                "commands_received": self.commands_received,
                "commands_ignored": self.commands_ignored,
                "failure": self.failure,
            },
        )


def main(args=None) -> int:
    return run_node(SimulatorNode, NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
