"""Waiting on DDS in the ROS tests: spin an executor against a deadline, never sleep.

The `context` and `executor` fixtures (a fresh rclpy Context per test) are in conftest.py.
"""

import time

import pytest

DISCOVERY_TIMEOUT_S = 20.0  # DDS discovery is ~3 s; the margin is for a loaded 2-core CI machine
DELIVERY_TIMEOUT_S = 10.0
SPIN_STEP_S = 0.05


def spin_until(executor, condition, timeout_s, what):
    """Process callbacks until `condition()` holds; fail after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        executor.spin_once(timeout_sec=SPIN_STEP_S)
