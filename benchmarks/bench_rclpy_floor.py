"""The CPU a Python node spends per joint state on rclpy and DDS alone: the floor under the robot stack.

    python benchmarks/bench_rclpy_floor.py [--states 15000] [--realtime-priority 50]

Runs ``hexapod_fake_driver`` (its own process, 1 kHz) and, in this process, an echo node built as
the robot stack's loop is: the joint-state subscription alone in a wait set
(:mod:`hexapod_control.ros.wait_set_loop`'s ``OwnLoopGroup``), each state taken and answered at once
with a zero effort command. No control, no checks: what is left is what any rclpy node pays. Two
passes, one taking the states as JointState objects and one as serialized bytes (what the stack
reads with :mod:`hexapod_control.ros.wire`). Printed per pass: this process's CPU per state (every
thread: DDS's own included) and the calling thread's CPU per state (take + publish), median and p99,
and the load average: quote it with the figures.
"""

from __future__ import annotations

import argparse
import array
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_loop import STOP_M, STARTUP_TIMEOUT_S, stop  # noqa: E402 - the loop benchmark's driver setup

from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY  # noqa: E402

SETTLE_STATES = 2000  # answered before measuring: discovery, the first wakes
WAIT_NS = 100_000_000  # the wait set's timeout; the loop ends on a count, not on it


def echo(node, serialized: bool, states: int) -> tuple[float, np.ndarray]:
    """(process CPU seconds per state, thread CPU [us] per state) over ``states`` after the settling ones."""
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from hexapod_control.ros.common import RELIABLE_QOS
    from hexapod_control.ros.conventions import TOPICS
    from hexapod_control.ros.wait_set_loop import OwnLoopGroup

    subscription = node.create_subscription(JointState, TOPICS["joint_states"], lambda message: None, RELIABLE_QOS,
                                            callback_group=OwnLoopGroup(), raw=serialized)
    publisher = node.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
    command = Float64MultiArray()
    zeros = np.zeros(6)
    per_state = np.zeros(states)
    taken = 0
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    with node.context.handle, subscription.handle:
        wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, node.context.handle)
        while taken < SETTLE_STATES + states:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {taken} joint states in {STARTUP_TIMEOUT_S} s: is the driver running?")
            wait_set.clear_entities()
            wait_set.add_subscription(subscription.handle)
            wait_set.wait(WAIT_NS)
            while True:
                start = time.thread_time_ns()
                message = subscription.handle.take_message(subscription.msg_type, serialized)
                if message is None:
                    break
                command.data = array.array("d", zeros.tobytes())
                publisher.publish(command)
                if taken == SETTLE_STATES:
                    process_start = time.process_time()
                if taken >= SETTLE_STATES:
                    per_state[taken - SETTLE_STATES] = (time.thread_time_ns() - start) / 1e3
                taken += 1
    process = (time.process_time() - process_start) / states
    node.destroy_subscription(subscription)
    node.destroy_publisher(publisher)
    return process, per_state


def main(argv=None) -> int:
    import subprocess

    import rclpy
    from rclpy.node import Node

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=15000, help="joint states measured per pass")
    parser.add_argument("--realtime-priority", type=int, default=CONTROL_LOOP_PRIORITY,
                        help="the driver's SCHED_FIFO priority (0: the normal scheduler)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench_rclpy_floor_"))
    overlay = folder / "driver.yaml"
    overlay.write_text(f"extends: {REPO / 'config' / 'hexapod.yaml'}\nhexapod:\n  limits:\n    actuator_position_max: {STOP_M}\n")
    driver = subprocess.Popen(
        [sys.executable, "-m", "hexapod_control.ros.fake_driver", "--ros-args", "-p", f"params_file:={overlay}",
         "-p", f"realtime_priority:={args.realtime_priority}"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rclpy.init()
    node = Node("hexapod_rclpy_floor_benchmark")
    load_before = os.getloadavg()
    try:
        results = {label: echo(node, serialized, args.states)
                   for label, serialized in (("JointState objects", False), ("serialized bytes", True))}
    finally:
        stop(driver)
        node.destroy_node()
        rclpy.shutdown()
        overlay.unlink()
        folder.rmdir()
    print(f"# an echo node answering hexapod_fake_driver's joint states, {args.states} states per pass; "
          f"{os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in load_before)} before and "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} after")
    print(f"{'states taken as':<20} {'process CPU per state [us]':>27} {'thread CPU: median':>19} {'p99 [us]':>9}")
    for label, (process, per_state) in results.items():
        print(f"{label:<20} {process * 1e6:>27.1f} {np.median(per_state):>19.1f} {np.percentile(per_state, 99):>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
