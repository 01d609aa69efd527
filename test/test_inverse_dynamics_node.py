"""The inverse-dynamics node over DDS, in the one-process simulated stack (lockstep on sim time).

The stack runs the plant with the drives of config/hexapod_actuators.yaml and the loop delay of one
period, the controller and the node on the same file. The node's residual must stay within its
band (0.5 N) while nothing is wrong, and its diagnostics must turn WARN when something is: a 1 kg
payload on the plant's platform (not in the node's model), or a 20 N push on one slider for 50 ms.
Measured here: nominal |residual| <= 0.3 N; the payload flagged 0.06 s after the start, i.e. as
soon as the filter has settled; the push 25 ms after it began. Bounds: 0.1 s and 40 ms.
"""

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from sensor_msgs.msg import JointState

from hexapod_control.control.force_residual import SETTLING_PERIODS
from hexapod_control.control.loop import Level
from hexapod_control.conventions import TOPICS, time_from_stamp
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.ros.inverse_dynamics_node import NODE_NAME
from hexapod_control.ros.stack import SimStack

DRIVES = default_parameters_path("hexapod_actuators.yaml")
PARAMETERS = load_parameters(DRIVES)
BAND = PARAMETERS.inverse_dynamics.residual_band[0]  # [N]
STATUS_NAME = f"{NODE_NAME}: force residual"
PAYLOAD = 1.0  # [kg]
PAYLOAD_DETECTION_S = 0.1  # from the start of the run
PUSH_SLIDER, PUSH_FORCE, PUSH_START, PUSH_LENGTH = 2, 20.0, 0.5, 0.05  # [N], [s]
PUSH_DETECTION_S = 0.04  # from the start of the push


class Listener:
    """The node's residuals and its diagnostics, received over DDS."""

    def __init__(self, stack: SimStack):
        self.node = rclpy.create_node("residual_listener", context=stack.context)
        self.residuals, self.statuses = [], []
        self.node.create_subscription(JointState, TOPICS["force_residual"], self._on_residual, 100)
        self.node.create_subscription(DiagnosticArray, TOPICS["diagnostics"], self._on_diagnostics, 100)
        stack.executor.add_node(self.node)
        stack.nodes.append(self.node)  # destroyed with the stack

    def _on_residual(self, message):
        self.residuals.append((time_from_stamp(message.header.stamp), np.array(message.effort)))

    def _on_diagnostics(self, message):
        for status in message.status:
            if status.name == STATUS_NAME:
                self.statuses.append((time_from_stamp(message.header.stamp), status.level[0], status.message))

    def first_warning(self):
        return next((t for t, level, _ in self.statuses if level == Level.WARN), None)


@pytest.fixture
def stack_factory():
    made = []

    def make(plant_params_file=DRIVES):
        context = Context()
        rclpy.init(context=context)
        stack = SimStack(context, str(DRIVES), "computed_torque", "embedded", "excitation",
                         plant_params_file=str(plant_params_file), inverse_dynamics=True)
        made.append((context, stack))
        listener = Listener(stack)
        stack.wait_for_discovery()
        spin_until_matched(stack, listener)
        return stack, listener

    yield make
    for context, stack in made:
        stack.destroy()
        rclpy.try_shutdown(context=context)


def spin_until_matched(stack, listener):
    node = stack.inverse_dynamics
    stack.spin_until(
        lambda: node.residual_publisher.get_subscription_count() >= 1
        and all(s.get_publisher_count() >= 1 for s in node.subscriptions if s.topic_name != "/parameter_events"),
        20.0, "inverse-dynamics node matched",
    )


def run_until(stack, listener, t_end, each_step=None):
    while stack.simulator.plant.time < t_end - 1e-9:
        if each_step is not None:
            each_step(stack.simulator.plant.time)
        assert stack.step(), stack.simulator.failure
    stack.executor.spin_once(timeout_sec=0.05)  # the last residual and status in flight


def test_residual_stays_in_band_then_a_push_is_flagged(stack_factory):
    stack, listener = stack_factory()
    run_until(stack, listener, PUSH_START)
    assert len(listener.residuals) > 0.9 * PUSH_START / PARAMETERS.simulation.dt
    # The band applies once the filter has settled (the node says "filter settling" until then).
    settled = listener.residuals[0][0] + SETTLING_PERIODS / (2.0 * np.pi * PARAMETERS.inverse_dynamics.filter_cutoff)
    nominal = np.max(np.abs([r for t, r in listener.residuals if t >= settled]))
    print(f"nominal |residual| max {nominal:.3f} N over {len(listener.residuals)} joint states")
    assert nominal < BAND
    assert listener.first_warning() is None

    plant = stack.simulator.plant
    push = np.zeros(6)
    push[PUSH_SLIDER] = PUSH_FORCE

    def apply_push(t):
        plant.set_external_forces(push if PUSH_START <= t < PUSH_START + PUSH_LENGTH else np.zeros(6))

    run_until(stack, listener, PUSH_START + PUSH_LENGTH + 0.05, apply_push)
    flagged = listener.first_warning()
    print(f"push flagged {flagged - PUSH_START:.4f} s after it began")
    assert flagged is not None and PUSH_START <= flagged <= PUSH_START + PUSH_DETECTION_S
    message = next(m for _, level, m in listener.statuses if level == Level.WARN)
    assert PARAMETERS.ros.joint_names[PUSH_SLIDER] in message


def test_a_payload_the_model_does_not_know_is_flagged(stack_factory, tmp_path):
    plant_file = tmp_path / "payload.yaml"
    mass = PARAMETERS.bodies.platform.mass + PAYLOAD
    plant_file.write_text(f"extends: {DRIVES}\nhexapod:\n  bodies:\n    platform: {{mass: {mass}}}\n")
    stack, listener = stack_factory(plant_file)
    run_until(stack, listener, PAYLOAD_DETECTION_S + 0.02)
    flagged = listener.first_warning()
    print(f"payload flagged at t = {flagged} s")
    assert flagged is not None and flagged <= PAYLOAD_DETECTION_S
