"""Waiting on DDS in the ROS tests: spin an executor against a deadline, never sleep.

The `context` and `executor` fixtures (a fresh rclpy Context per test) are in conftest.py.
"""

import importlib
import importlib.util
import os
import signal
import subprocess
import sys
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


# The starver's loop, in a process of its own at real-time priority: a thread of the test's process
# lets the stopped process go on only once it has the GIL (and after the test's garbage collection),
# so its stops could last several times what they should, more so in a full suite run.
STARVER_SCRIPT = """
import os, signal, sys, time
pid, stop_s, every_s, priority = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
except OSError:
    pass
ending = []
signal.signal(signal.SIGTERM, lambda *_: ending.append(True))
stops, longest = 0, 0.0
print("ready", flush=True)
while not ending:
    time.sleep(every_s)
    if ending:
        break
    began = time.monotonic()
    try:
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(stop_s)
        finally:
            os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        break
    longest = max(longest, time.monotonic() - began)
    stops += 1
print(stops, longest, flush=True)
"""


class Starver:
    """Starve a process of CPU now and then, all its threads at once: stop it (SIGSTOP) for
    ``stop_s`` every ``every_s`` and let it go on (SIGCONT), from a process of its own at SCHED_FIFO
    ``priority`` (above the starved process's, where the machine permits it), so that the stops last
    what they should. A context manager; the process always runs again on exit. ``stops`` counts the
    stops made, ``longest`` is the longest one [s] (for failure messages)."""

    def __init__(self, pid: int, stop_s: float, every_s: float, priority: int):
        self.pid, self.stop_s, self.every_s, self.priority = pid, stop_s, every_s, priority
        self.stops, self.longest = 0, 0.0
        self._process = None

    def __enter__(self):
        self._process = subprocess.Popen([sys.executable, "-c", STARVER_SCRIPT, str(self.pid), str(self.stop_s),
                                          str(self.every_s), str(self.priority)], stdout=subprocess.PIPE, text=True)
        assert self._process.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *_):
        self._process.terminate()  # its handler ends the loop after the stop under way, if any
        output, _ = self._process.communicate(timeout=DELIVERY_TIMEOUT_S)
        stops, longest = output.split()
        self.stops, self.longest = int(stops), float(longest)


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
