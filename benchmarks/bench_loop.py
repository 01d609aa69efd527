"""The 1 kHz loop through ROS 2: hexapod_robot_stack against hexapod_fake_driver, as separate processes.

    python benchmarks/bench_loop.py [--seconds 60] [--controllers double_loop computed_torque]

For each controller: the fake driver (its own wall-clock loop at ``simulation.rate``) and the robot
stack run as two processes over DDS on loopback, and a third process listens. Before any command
the driver applies zero force, so the platform sinks onto its stops (the driver gets the travel
limit ``STOP_M``: the shipped 0.40 m lies beyond the model's straight-leg collapse); the listener
then arms the stack (``~/arm``) and starts the 6.5 trajectory (``~/start``: a smooth move from the
stops to its start, then the trajectory), as an operator would. It prints:

* joint states answered: commands received / joint states published over the run (the stack
  answers each new joint state once);
* latency stamp -> command: arrival time of each command minus the stamp of the newest joint state
  published before it (one clock: all on this machine), median, p99, max;
* periods late: how many driver periods after its joint state a command arrives (1 = in time for
  the next tick), as a histogram;
* watchdog trips and faults (the stack's diagnostics), CPU per process (from /proc), tracking RMS
  and max of the position error between the stack's decimated pose and reference (same stamps);
* the load average before and after, since this machine is shared.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

STARTUP_TIMEOUT_S = 120.0  # a cold machine compiles the C code on first use
STOP_M = 0.30  # [m] the driver's upper travel limit, where the unpowered platform comes to rest
REST_SPEED_M_S = 1e-6  # the platform rests on its stops when every slider is slower than this
LATE_BUCKETS = 10  # the histogram's last bucket holds every command this many periods late or more


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(controller: str, seconds: float) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import SetBool, Trigger
    from trajectory_msgs.msg import MultiDOFJointTrajectory

    from hexapod_control.model.parameters import load_parameters
    from hexapod_control.ros.conventions import TOPICS, time_from_stamp

    period = 1.0 / load_parameters().simulation.rate
    overlay = Path(tempfile.mkdtemp()) / "driver.yaml"
    overlay.write_text(f"extends: {REPO / 'config' / 'hexapod.yaml'}\nhexapod:\n  limits:\n    actuator_position_max: {STOP_M}\n")
    stack = subprocess.Popen(
        [sys.executable, "-m", "hexapod_control.ros.robot_stack", "--ros-args", "-p", f"controller:={controller}",
         "-p", "gain_set:=simulated_plant"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    driver = None
    rclpy.init()
    node = Node("hexapod_loop_benchmark")
    stamps: list[float] = []
    latencies: list[float] = []
    poses: dict[float, np.ndarray] = {}
    references: dict[float, np.ndarray] = {}
    faults = {"faults": 0, "stack_states": Counter()}

    speeds = [float("inf")]

    def on_state(message):
        stamps.append(time_from_stamp(message.header.stamp))
        speeds[0] = max(abs(v) for v in message.velocity)

    def on_command(_message):
        if stamps:
            latencies.append(time.time() - stamps[-1])

    def on_pose(message):
        p = message.pose.position
        poses[time_from_stamp(message.header.stamp)] = np.array([p.x, p.y, p.z])

    def on_reference(message):
        t = message.points[0].transforms[0].translation
        references[time_from_stamp(message.header.stamp)] = np.array([t.x, t.y, t.z])

    def on_diagnostics(message):
        for status in message.status:
            if status.name.startswith("hexapod_robot_stack"):
                values = {kv.key: kv.value for kv in status.values}
                faults["faults"] = max(faults["faults"], int(values.get("faults", 0)))
                if status.level != b"\x00":
                    faults["last_problem"] = status.message
                faults["stack_states"][values.get("state", "?")] += 1

    node.create_subscription(JointState, TOPICS["joint_states"], on_state, 100)
    node.create_subscription(Float64MultiArray, TOPICS["effort_commands"], on_command, 100)
    node.create_subscription(PoseStamped, TOPICS["platform_pose"], on_pose, 100)
    node.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], on_reference, 100)
    node.create_subscription(DiagnosticArray, TOPICS["diagnostics"], on_diagnostics, 100)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while node.count_publishers(TOPICS["effort_commands"]) < 1:
            if time.monotonic() > deadline or stack.poll() is not None:
                raise RuntimeError(f"the robot stack did not come up: {stack.stderr.read()[-2000:] if stack.poll() is not None else 'timeout'}")
            rclpy.spin_once(node, timeout_sec=0.1)
        driver = subprocess.Popen([sys.executable, "-m", "hexapod_control.ros.fake_driver", "--ros-args", "-p",
                                   f"params_file:={overlay}"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not (latencies and speeds[0] < REST_SPEED_M_S):
            if time.monotonic() > deadline:
                raise RuntimeError("no command answered a joint state, or the platform never came to rest")
            rclpy.spin_once(node, timeout_sec=0.1)
        for service, request in (("arm", SetBool.Request(data=True)), ("start", Trigger.Request())):
            client = node.create_client(SetBool if service == "arm" else Trigger, f"/hexapod_robot_stack/{service}")
            client.wait_for_service(timeout_sec=STARTUP_TIMEOUT_S)
            future = client.call_async(request)
            rclpy.spin_until_future_complete(node, future, timeout_sec=STARTUP_TIMEOUT_S)
            if not (future.done() and future.result().success):
                # The loop's timing is still measured; the report says why nothing tracks.
                faults["last_problem"] = f"~/{service} refused: {future.result().message if future.done() else 'no answer'}"
                break
        load_before = os.getloadavg()[0]
        stamps.clear(), latencies.clear(), poses.clear(), references.clear()
        cpu_start = {name: cpu_seconds(p.pid) for name, p in (("stack", stack), ("driver", driver))}
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            rclpy.spin_once(node, timeout_sec=0.01)
        wall = time.monotonic() - start
        cpu = {name: (cpu_seconds(p.pid) - cpu_start[name]) / wall for name, p in (("stack", stack), ("driver", driver))}
        states, commands = len(stamps), len(latencies)
    finally:
        for process in (stack, driver):
            if process is not None:
                process.terminate()
        for process in (stack, driver):
            if process is not None:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        node.destroy_node()
        rclpy.shutdown()
    latency = np.array(latencies)
    common = sorted(set(poses) & set(references))
    errors = np.array([np.linalg.norm(references[t] - poses[t]) for t in common]) if common else np.array([np.nan])
    late = Counter(min(int(np.ceil(v / period)), LATE_BUCKETS) for v in latency)
    return {
        "controller": controller, "states": states, "commands": commands,
        "answered": commands / max(states, 1), "latency": latency, "late": late, "cpu": cpu,
        "faults": faults["faults"], "problem": faults.get("last_problem", ""), "tracking_rms": float(np.sqrt(np.mean(errors**2))), "tracking_max": float(np.max(errors)),
        "samples": len(common), "load": (load_before, os.getloadavg()[0]), "listener_rate": states / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per controller (default: %(default)s)")
    parser.add_argument("--controllers", nargs="+", default=["double_loop", "computed_torque"])
    args = parser.parse_args()
    print(f"# CPython {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for controller in args.controllers:
        r = run(controller, args.seconds)
        lat = r["latency"] * 1e3
        print(f"\n## {controller}: {args.seconds:g} s, load average {r['load'][0]:.2f} -> {r['load'][1]:.2f}")
        print(f"joint states seen {r['states']} ({r['listener_rate']:.0f}/s by the listener), commands {r['commands']}: "
              f"answered {100 * r['answered']:.2f} %")
        print(f"latency stamp -> command [ms]: median {np.median(lat):.3f}, p99 {np.percentile(lat, 99):.3f}, max {np.max(lat):.3f}")
        print("periods late (1 = applied at the next tick): "
              + ", ".join(f"{k}{'+' if k == LATE_BUCKETS else ''}: {v}" for k, v in sorted(r["late"].items())))
        print(f"faults (watchdog trips included): {r['faults']}" + (f"; last problem: {r['problem']}" if r["problem"] else ""))
        print("CPU per process [fraction of a core]: " + ", ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items()))
        print(f"tracking over {r['samples']} decimated samples: position error RMS {r['tracking_rms'] * 1e3:.4f} mm, "
              f"max {r['tracking_max'] * 1e3:.4f} mm")


if __name__ == "__main__":
    main()
