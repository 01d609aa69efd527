"""The CPU a node spends per joint state on rclpy and DDS alone: the floor under the robot stack.

    python benchmarks/bench_rclpy_floor.py [--states 15000] [--realtime-priority 50]

Runs ``hexapod_fake_driver`` (its own process, 1 kHz) and, in this process, an echo node in the
robot stack's own loop (:class:`hexapod_control.ros.wait_set_loop.WaitSetLoop`, its executor polled
as the stack polls it): each state taken and answered at once with a zero effort command. No
control, no checks: what is left is what any rclpy node in that loop pays. Three passes: taking the
states as JointState objects; as serialized bytes (what the stack reads with
:mod:`hexapod_control.ros.wire`); and with no Python per state at all, the same subscription and
publisher (made by rclpy) served by an rcl loop in C (``benchmarks/rcl_echo.c``, compiled here
against the rcl headers of this environment, the ctypes call releasing the interpreter lock; it
polls no executor). Printed per pass: this process's CPU per state (every thread: DDS's own
included) and the loop thread's CPU from one answer to the next (wait, take, publish, polls),
median and p99, and the load average: quote it with the figures.
"""

from __future__ import annotations

import argparse
import array
import ctypes
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_loop import STARTUP_TIMEOUT_S, STOP_M, stop  # noqa: E402 - the loop benchmark's driver setup

from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY  # noqa: E402
from hexapod_control.errors import CompilationError  # noqa: E402
from hexapod_control.model.compiled import compile_into  # noqa: E402
from hexapod_control.ros.native_loop import rcl_compile_command, rcl_prefix  # noqa: E402

SETTLE_STATES = 2000  # answered before measuring: discovery, the first wakes
RCL_ECHO_SOURCE = REPO / "benchmarks" / "rcl_echo.c"
NANOSECONDS = 1e9


def echo(serialized: bool, states: int) -> tuple[float, np.ndarray]:
    """(process CPU seconds per state, the loop thread's CPU [us] from one state's answer to the next)
    over ``states`` after the settling ones, answered in the stack's own loop (WaitSetLoop)."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from hexapod_control.conventions import TOPICS
    from hexapod_control.ros.common import RELIABLE_QOS
    from hexapod_control.ros.robot_stack import SERVICE_POLL_BUDGET_S, SERVICE_POLL_PERIOD_S
    from hexapod_control.ros.wait_set_loop import WaitSetLoop

    context = Context()
    rclpy.init(context=context)
    node = Node("hexapod_rclpy_floor_benchmark", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    publisher = node.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
    command = Float64MultiArray()
    zeros = np.zeros(6)
    thread_times = np.zeros(SETTLE_STATES + states + 1)
    taken = [0, 0.0]  # states answered, the process CPU time when the measurement began

    def answer(messages: list, _infos: list) -> None:
        for _ in messages:
            command.data = array.array("d", zeros.tobytes())
            publisher.publish(command)
            count = taken[0]
            thread_times[count] = time.thread_time_ns()
            if count == SETTLE_STATES:
                taken[1] = time.process_time()
            taken[0] = count + 1
            if count == SETTLE_STATES + states:
                context.try_shutdown()  # ends the loop
                return

    loop = WaitSetLoop(node, JointState, TOPICS["joint_states"], RELIABLE_QOS, answer, lambda: math.inf,
                       lambda now: None, SERVICE_POLL_PERIOD_S, SERVICE_POLL_BUDGET_S, raw=serialized)
    watchdog = threading.Timer(STARTUP_TIMEOUT_S + states / 500.0, context.try_shutdown)
    watchdog.start()
    try:
        loop.spin(executor)
    finally:
        watchdog.cancel()
        executor.shutdown()
        context.try_shutdown()
    if taken[0] <= SETTLE_STATES + states:
        raise RuntimeError(f"only {taken[0]} joint states answered: is the driver running?")
    process = (time.process_time() - taken[1]) / states
    return process, np.diff(thread_times[SETTLE_STATES:]) / 1e3


def build_rcl_echo(folder: Path) -> ctypes.CDLL | str:
    """benchmarks/rcl_echo.c compiled and loaded, or why not."""
    prefix = rcl_prefix()
    if prefix is None:
        return "no rcl headers in this environment or on AMENT_PREFIX_PATH"
    library = folder / "librcl_echo.so"
    try:
        compile_into(library, lambda output: rcl_compile_command(RCL_ECHO_SOURCE, output, prefix))
    except CompilationError as error:
        return str(error)
    echo_function = ctypes.CDLL(str(library)).hexapod_rcl_echo
    echo_function.restype = ctypes.c_long
    echo_function.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_size_t, ctypes.c_long, ctypes.c_int64, ctypes.c_void_p]
    return echo_function


def echo_in_c(echo_function, states: int) -> tuple[float, np.ndarray]:
    """As :func:`echo`, the loop in C: no Python runs per state."""
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from hexapod_control.conventions import TOPICS
    from hexapod_control.ros.common import RELIABLE_QOS

    context = Context()
    rclpy.init(context=context)
    try:
        node = Node("hexapod_rcl_floor_benchmark", context=context)
        publisher = node.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
        # Nothing spins this node: only the C loop takes the messages.
        subscription = node.create_subscription(JointState, TOPICS["joint_states"], lambda message: None,
                                                RELIABLE_QOS, raw=True)
        command = serialize_message(Float64MultiArray(data=[0.0] * 6))
        buffer = (ctypes.c_uint8 * len(command)).from_buffer_copy(command)
        thread_times = np.zeros(SETTLE_STATES + states, dtype=np.int64)
        handles = (context.handle.pointer, subscription.handle.pointer, publisher.handle.pointer)

        def answer(count: int, timeout_s: float, offset: int) -> int:
            return echo_function(*handles, buffer, len(command), count, int(timeout_s * NANOSECONDS),
                                 thread_times[offset:].ctypes.data)

        with context.handle, subscription.handle, publisher.handle:  # valid while C holds them
            settled = answer(SETTLE_STATES, STARTUP_TIMEOUT_S, 0)
            if settled != SETTLE_STATES:
                raise RuntimeError(f"only {settled} joint states answered while settling: is the driver running?")
            start = time.process_time()
            answered = answer(states, 1.0, SETTLE_STATES)
            process = (time.process_time() - start) / max(answered, 1)
        if answered != states:
            raise RuntimeError(f"{answered} of {states} joint states answered (an rcl error or the driver stopped)")
        return process, np.diff(thread_times[SETTLE_STATES - 1:]) / 1e3
    finally:
        context.try_shutdown()


def main(argv=None) -> int:
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
    load_before = os.getloadavg()
    try:
        results = {label: echo(serialized, args.states)
                   for label, serialized in (("JointState objects", False), ("serialized bytes", True))}
        echo_function = build_rcl_echo(folder)
        if isinstance(echo_function, str):
            print(f"# the pass in C is skipped: {echo_function}")
        else:
            results["rcl loop in C"] = echo_in_c(echo_function, args.states)
    finally:
        stop(driver)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"# an echo node answering hexapod_fake_driver's joint states, {args.states} states per pass; "
          f"{os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in load_before)} before and "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} after")
    print(f"{'states taken as':<20} {'process CPU per state [us]':>27} {'loop thread CPU: median':>24} {'p99 [us]':>9}")
    for label, (process, per_state) in results.items():
        print(f"{label:<20} {process * 1e6:>27.1f} {np.median(per_state):>24.1f} {np.percentile(per_state, 99):>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
