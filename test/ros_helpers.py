"""Waiting on DDS in the ROS tests: spin an executor against a deadline, never sleep.

The `context` and `executor` fixtures (a fresh rclpy Context per test) are in conftest.py.
"""

import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
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


class NodeProcess:
    """An executable of the package in its own process, its output in a file for failure messages."""

    def __init__(self, module, log_path, *ros_arguments):
        self.log_path = log_path
        self._log = open(log_path, "w")
        arguments = [item for name, value in ros_arguments for item in ("-p", f"{name}:={value}")]
        self.process = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", module, "--ros-args", *arguments],
                                        stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy())

    def output(self) -> str:
        """The end of the process's output; also after ``stop`` closed the log."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()[-3000:]

    def stop(self) -> int:
        """Ctrl-C (a kill if it does not exit in time); the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=DELIVERY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


class Starver:
    """Starve a process of CPU now and then, all its threads at once: from a thread of this one, stop
    it (SIGSTOP) for ``stop_s`` every ``every_s`` and let it go on (SIGCONT). A context manager; the
    process always runs again on exit. ``stops`` counts the stops made."""

    def __init__(self, pid: int, stop_s: float, every_s: float):
        self.pid, self.stop_s, self.every_s = pid, stop_s, every_s
        self.stops = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="starver", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self.every_s):
            try:
                os.kill(self.pid, signal.SIGSTOP)
            except ProcessLookupError:
                return
            try:
                self._done.wait(self.stop_s)
            finally:
                os.kill(self.pid, signal.SIGCONT)
            self.stops += 1


# What a test of a launch file imports: launch itself and launch_ros, whose import needs message
# packages (composition_interfaces) that a workspace may lack even where launch_ros is found.
LAUNCH_NEEDS = ("launch_testing", "launch_testing.actions", "launch.actions", "launch_ros", "launch_ros.actions")


def launch_unavailable() -> str:
    """Why ROS 2 launch cannot be used here, or "" when it can."""
    for module in LAUNCH_NEEDS:
        try:
            importlib.import_module(module)
        except Exception as error:  # noqa: BLE001 - whatever stops the import (a missing message package)
            return f"ROS 2 launch is not usable: import {module}: {error}"
    return ""


def launch_arguments(path) -> set[str]:
    """The argument names a launch file declares (its generate_launch_description); skips without ROS 2 launch."""
    reason = launch_unavailable()
    if reason:
        pytest.skip(reason)
    spec = importlib.util.spec_from_file_location(path.name.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    return {a.name for a in description.entities if type(a).__name__ == "DeclareLaunchArgument"}
