"""realtime_priority: the fake driver's and the robot stack's threads under SCHED_FIFO, or a warning.

Checked on a driver process from outside, through the scheduler's own record of each of its
threads (os.sched_getscheduler), not through anything the node reports about itself.
"""

import os

import pytest

pytest.importorskip("rclpy")
from ros_helpers import DISCOVERY_TIMEOUT_S, NodeProcess, spin_until

from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY

APPLIED, REFUSED = "SCHED_FIFO at priority", "not applied, normal scheduling"


@pytest.mark.parametrize("module, parameters, priority, below", [
    ("hexapod_control.ros.fake_driver", [("realtime_priority", 1)], 1, 0),
    # Its default; its outputs thread runs one priority below the others (ros/output_thread.py).
    ("hexapod_control.ros.robot_stack", [], CONTROL_LOOP_PRIORITY, 1),
], ids=["driver", "robot_stack"])
def test_every_thread_runs_under_sched_fifo(tmp_path, executor, module, parameters, priority, below):
    process = NodeProcess(module, tmp_path / "node.log", *parameters)
    try:
        spin_until(executor, lambda: APPLIED in process.output() or REFUSED in process.output()
                   or process.process.poll() is not None, DISCOVERY_TIMEOUT_S, "the driver's scheduling line")
        if REFUSED in process.output():
            pytest.skip(f"this machine refuses SCHED_FIFO (rtprio limit): {process.output()[-300:]}")
        assert APPLIED in process.output(), process.output()
        threads = os.listdir(f"/proc/{process.process.pid}/task")
        assert len(threads) > 1  # Python's and the middleware's
        assert {os.sched_getscheduler(int(thread)) for thread in threads} == {os.SCHED_FIFO}
        priorities = [os.sched_getparam(int(thread)).sched_priority for thread in threads]
        assert priorities.count(priority - 1) == below and priorities.count(priority) == len(threads) - below
    finally:
        assert process.stop() == 0, process.log_path.read_text()


def test_a_priority_outside_1_to_99_is_refused_at_start(tmp_path, executor):
    process = NodeProcess("hexapod_control.ros.fake_driver", tmp_path / "driver.log", ("realtime_priority", 100))
    spin_until(executor, lambda: process.process.poll() is not None, DISCOVERY_TIMEOUT_S, "the driver to exit")
    assert process.stop() == 1
    output = process.log_path.read_text()
    assert "realtime_priority" in output and "0..99" in output
