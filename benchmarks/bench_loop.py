"""The 1 kHz loop through ROS 2: hexapod_robot_stack against hexapod_fake_driver, as separate processes.

    python benchmarks/bench_loop.py [--seconds 60] [--controllers double_loop computed_torque]
                                    [--executors native wait_set single_threaded events] [--rate 1000]
                                    [--realtime-priority 50] [--extra-ticks 2] [--command-loss 0.01]
                                    [--starve-ms 5 --starve-every 0.5] [--driver-executor wait_set]
                                    [--disarmed]

For each controller and stack executor: the fake driver (its own wall-clock loop at ``--rate``) and
the robot stack run as two processes over DDS on loopback. Before any command the driver applies
zero force, so the platform sinks onto its stops (the driver gets the travel limit ``STOP_M``: the
shipped 0.40 m lies beyond the model's straight-leg collapse); this script then arms the stack
(``~/arm``) and starts the 6.5 trajectory (``~/start``: a smooth move from the stops to its start,
then the trajectory), as an operator would, and measures for ``--seconds`` from ``SETTLE_S`` later
(``--disarmed``: it arms nothing, and measures the stack answering ZERO).

The loop's timing comes from the two processes' ``timing_log`` files (written when they stop; one
system clock): the driver's stamps of its joint states, when it published each and took the
commands waiting at that tick, and the DDS reception and source timestamps of the commands, and the
stack's answered stamp and publication time of each command, matched by the source timestamps
(``answers``). So no third process has to listen at 1 kHz. Printed per run:

* joint states answered: commands that answered a joint state of the window / its joint states;
* latency from a joint state's stamp to its command's arrival at the driver: median, p99, max; and
  its parts: from the stamp to the driver's publication of the state, and to the stack's
  publication of the answer;
* periods late: driver ticks from a command's joint state to the first tick that took commands
  after it arrived (1 = applied from the next tick on, as on a ros2_control robot), as a histogram;
* the stack's faults (watchdog trips included) and superseded joint states, the driver's overruns;
* CPU per process (from /proc), the position tracking error RMS and max between the stack's
  decimated pose and reference (same stamps), and the load average before and after.

Faults can be injected while measuring, to see the loop stay stable when late: ``--extra-ticks N``
(the driver takes each command 0..N ticks later, drawn per command: the forces' delay jumps between
1 and 1 + N periods), ``--command-loss p`` (the driver loses each command with probability p), and
``--starve-ms T --starve-every S`` (the stack's process is stopped, SIGSTOP, for T ms every S s:
starved of CPU).

First, the compiled control cycle against one MuJoCo step in this process (bench_cycle.py's
side-by-side measurement, CPU time).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "test"))

from ros_helpers import Starver  # noqa: E402 - the tests' own starver, beside the tests

from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY  # noqa: E402

STARTUP_TIMEOUT_S = 120.0  # a cold machine compiles the C code on first use
EXIT_TIMEOUT_S = 20.0  # for a process to write its log and exit after SIGINT
STOP_M = 0.30  # [m] the driver's upper travel limit, where the unpowered platform comes to rest
REST_SPEED_M_S = 1e-6  # the platform rests on its stops when every slider is slower than this
LATE_BUCKETS = 5  # the histogram's last bucket holds every command this many periods late or more
CYCLE_STEPS = 1000  # control periods of the side-by-side cycle measurement
ANSWERING = 0.9  # commands per joint state at the driver: the stack answers its states
SETTLE_S = 1.5  # [s] from ~/start to the window: the arming ramp and the move to the start are over
STAMP_MATCH_S = 1e-6  # stamps saved as float seconds differ from the published ones by < 0.5 us


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cycle_ratios() -> dict[str, float]:
    """Median CPU time of each compiled control cycle over one mujoco.mj_step (bench_cycle.py)."""
    from bench_cycle import SideBySide, clock_cost

    samples, _ = SideBySide(None, CYCLE_STEPS).measure(time.thread_time_ns)
    cost = clock_cost(time.thread_time_ns)
    median = {key: max(float(np.median(values)) - cost, 0.0) for key, values in samples.items()}
    step = median["mujoco.mj_step (1 substep)"]
    return {key.removesuffix(" (compiled)"): value / step for key, value in median.items() if key.endswith("(compiled)")}


def answers(driver, stack, start: float, end: float) -> tuple[int, np.ndarray, Counter, dict[str, np.ndarray]]:
    """Joint states stamped in [start, end), the latency [s] of each command that answered one of
    them (stamp -> arrival at the driver), how many ticks late each was applied (module doc), and
    the parts of the latency [s] (the stamp to the return of the driver's publish call, to the
    stack's publication of its answer)."""
    stamps, takes, arrivals = driver["state_stamps"], driver["command_takes"], driver["command_arrivals"]
    sources, answered, published = driver["command_sources"], stack["answer_stamps"], stack["publish_times"]
    # Each arrival is the stack's publication logged first at or after its DDS source timestamp (taken
    # in the publish call, which the stack logs on its return) within half a publication spacing.
    # The order alone does not tell: DDS delivers on the same machine before the call returns, so an
    # arrival can precede its logged publication.
    sent = np.searchsorted(published, sources)
    inside = sent < published.size
    sent, arrivals, sources = sent[inside], arrivals[inside], sources[inside]
    matched = published[sent] - sources < 0.5 * np.median(np.diff(published))
    sent, arrival = sent[matched], arrivals[matched]
    stamp = answered[sent]  # NaN: a watchdog's command, which answers no joint state
    keep = (stamp >= start) & (stamp < end)
    stamp, arrival = stamp[keep], arrival[keep]
    # The tick of the answered state, and the first tick that took its commands after the command
    # arrived (a state's stamp is the time its plant steps reached, which a late tick began after).
    tick = np.searchsorted(stamps, stamp - STAMP_MATCH_S)
    applied = np.searchsorted(takes, arrival, side="right")
    late = Counter(np.minimum(applied - tick, LATE_BUCKETS).tolist())
    parts = {"the driver published the state": driver["state_publications"][np.minimum(tick, stamps.size - 1)] - stamp,
             "the stack published the answer": published[sent][keep] - stamp}
    return int(np.sum((stamps >= start) & (stamps < end))), arrival - stamp, late, parts


def stop(process: subprocess.Popen | None) -> None:
    """SIGINT (the driver then writes its timing log), SIGKILL if it does not exit."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run(controller: str, executor: str, seconds: float, rate: float, priority: int,
        faults: argparse.Namespace) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_srvs.srv import SetBool, Trigger
    from trajectory_msgs.msg import MultiDOFJointTrajectory

    from hexapod_control.conventions import TOPICS, time_from_stamp

    folder = Path(tempfile.mkdtemp(prefix="bench_loop_"))
    overlay, driver_log, stack_log = folder / "driver.yaml", folder / "driver.npz", folder / "stack.npz"
    # Both run at the driver's rate (the plant steps once per tick; the schema keeps the two rates equal).
    shipped = f"extends: {REPO / 'config' / 'hexapod.yaml'}\nhexapod:\n  controllers:\n    rate: {rate}\n  simulation:\n    rate: {rate}\n"
    overlay.write_text(f"{shipped}  limits:\n    actuator_position_max: {STOP_M}\n")
    stack_overlay = folder / "stack.yaml"
    stack_overlay.write_text(shipped)
    stack = subprocess.Popen(
        [sys.executable, "-m", "hexapod_control.ros.robot_stack", "--ros-args", "-p", f"params_file:={stack_overlay}",
         "-p", f"controller:={controller}",
         "-p", "gain_set:=simulated_plant", "-p", f"executor:={executor}", "-p", f"timing_log:={stack_log}", "-p", f"realtime_priority:={priority}"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    driver = None
    rclpy.init()
    node = Node("hexapod_loop_benchmark")
    poses: dict[float, np.ndarray] = {}
    references: dict[float, np.ndarray] = {}
    status = {"faults": 0, "superseded": 0, "compiled": 0, "overruns": 0, "problem": ""}
    speeds = [float("inf")]

    def on_pose(message):
        p = message.pose.position
        poses[time_from_stamp(message.header.stamp)] = np.array([p.x, p.y, p.z])

    def on_reference(message):
        t = message.points[0].transforms[0].translation
        references[time_from_stamp(message.header.stamp)] = np.array([t.x, t.y, t.z])

    def on_diagnostics(message):
        for entry in message.status:
            values = {kv.key: kv.value for kv in entry.values}
            if entry.name.startswith("hexapod_robot_stack"):
                status["faults"] = int(values.get("faults", 0))
                status["superseded"] = int(values.get("superseded_joint_states", 0))
                status["compiled"] = int(values.get("compiled_answers", 0))
                status["stack_error"] = values.get("last_error", "")
                if entry.level != b"\x00":
                    status["problem"] = entry.message
            elif entry.name.startswith("hexapod_fake_driver"):
                status["overruns"] = int(values.get("loop_overruns", 0))
                status["driver_native"] = int(values.get("native_ticks", 0))
                status["driver_ticks"] = int(values.get("loop_ticks", 0))
                status["lost"] = int(values.get("commands_lost_injected", 0))
                status["answering"] = float(values.get("commands_per_state", "nan")) >= ANSWERING

    # 1 kHz: listened to only until the platform rests, then destroyed (it would load the machine).
    rest = node.create_subscription(JointState, TOPICS["joint_states"],
                                    lambda m: speeds.__setitem__(0, max(abs(v) for v in m.velocity)), 10)
    node.create_subscription(PoseStamped, TOPICS["platform_pose"], on_pose, 100)
    node.create_subscription(MultiDOFJointTrajectory, TOPICS["reference"], on_reference, 100)
    node.create_subscription(DiagnosticArray, TOPICS["diagnostics"], on_diagnostics, 100)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while node.count_publishers(TOPICS["effort_commands"]) < 1:
            if time.monotonic() > deadline or stack.poll() is not None:
                raise RuntimeError(f"the robot stack did not come up: {stack.stderr.read()[-2000:] if stack.poll() is not None else 'timeout'}")
            rclpy.spin_once(node, timeout_sec=0.1)
        driver = subprocess.Popen(
            [sys.executable, "-m", "hexapod_control.ros.fake_driver", "--ros-args", "-p", f"params_file:={overlay}",
             "-p", f"rate:={rate}", "-p", f"timing_log:={driver_log}", "-p", f"realtime_priority:={priority}",
             "-p", f"inject_extra_ticks:={faults.extra_ticks}", "-p", f"inject_command_loss:={faults.command_loss}",
             "-p", f"executor:={faults.driver_executor}"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # An operator arms once the platform rests and the stack answers the driver's states.
        while speeds[0] >= REST_SPEED_M_S or not status.get("answering"):
            if time.monotonic() > deadline:
                raise RuntimeError("the platform never came to rest on its stops, or the stack never answered")
            rclpy.spin_once(node, timeout_sec=0.1)
        node.destroy_subscription(rest)
        faults_at_arming = status["faults"]
        operator = () if faults.disarmed else (("arm", SetBool.Request(data=True)), ("start", Trigger.Request()))
        for service, request in operator:
            client = node.create_client(SetBool if service == "arm" else Trigger, f"/hexapod_robot_stack/{service}")
            client.wait_for_service(timeout_sec=STARTUP_TIMEOUT_S)
            future = client.call_async(request)
            rclpy.spin_until_future_complete(node, future, timeout_sec=STARTUP_TIMEOUT_S)
            if service == "arm":
                faults_at_arming = status["faults"]
            if not (future.done() and future.result().success):
                # The loop's timing is still measured; the report says why nothing tracks.
                status["problem"] = (f"~/{service} refused: {future.result().message if future.done() else 'no answer'} "
                                     f"(the stack's last error: {status.get('stack_error') or 'none'})")
                break
        settle = time.monotonic() + SETTLE_S
        while time.monotonic() < settle:
            rclpy.spin_once(node, timeout_sec=0.01)
        before = dict(status)
        load_before = os.getloadavg()[0]
        poses.clear(), references.clear()
        cpu_start = {name: cpu_seconds(p.pid) for name, p in (("stack", stack), ("driver", driver))}
        start, wall_start = time.monotonic(), time.time()
        # Above the stack's priority, so that its stops last what they should.
        starver = (Starver(stack.pid, faults.starve_ms * 1e-3, faults.starve_every, priority + 1)
                   if faults.starve_ms else None)
        with starver or contextlib.nullcontext():
            while time.monotonic() - start < seconds:
                rclpy.spin_once(node, timeout_sec=0.01)
        cpu = {name: (cpu_seconds(p.pid) - cpu_start[name]) / (time.monotonic() - start)
               for name, p in (("stack", stack), ("driver", driver))}
        wall_end = time.time()
        load_after = os.getloadavg()[0]
    finally:
        stop(driver)
        stop(stack)
        node.destroy_node()
        rclpy.shutdown()
    states, latency, late, parts = answers(np.load(driver_log), np.load(stack_log), wall_start, wall_end)
    shutil.rmtree(folder)
    common = sorted(set(poses) & set(references))
    errors = np.array([np.linalg.norm(references[t] - poses[t]) for t in common]) if common else np.array([np.nan])
    return {
        "states": states, "commands": latency.size, "latency": latency, "late": late, "parts": parts, "cpu": cpu,
        "faults": status["faults"] - faults_at_arming, "superseded": status["superseded"] - before["superseded"],
        "compiled": status["compiled"] - before["compiled"],
        "overruns": status["overruns"] - before["overruns"], "problem": status["problem"],
        "driver_native": status["driver_native"] - before["driver_native"],
        "driver_ticks": status["driver_ticks"] - before["driver_ticks"],
        "lost": status.get("lost", 0) - before.get("lost", 0), "stops": starver.stops if starver else 0,
        "tracking_rms": float(np.sqrt(np.mean(errors**2))), "tracking_max": float(np.max(errors)),
        "samples": len(common), "load": (load_before, load_after),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per run (default: %(default)s)")
    parser.add_argument("--controllers", nargs="+", default=["double_loop", "computed_torque"])
    parser.add_argument("--executors", nargs="+", default=["native"], help="the stack's executor parameter")
    parser.add_argument("--driver-executor", choices=("native", "wait_set"), default="native",
                        help="the fake driver's executor parameter: its ticks in C while it holds a command, or Python's")
    parser.add_argument("--rate", type=float, default=1000.0, help="the driver's loop rate, and the rate of both processes' parameters [Hz]")
    parser.add_argument("--disarmed", action="store_true",
                        help="never arm: measure the stack answering ZERO, the platform on its stops")
    parser.add_argument("--realtime-priority", type=int, default=CONTROL_LOOP_PRIORITY,
                        help="SCHED_FIFO priority of the stack and the driver, as ros2_control runs "
                             "(default: %(default)s, the stack's own; 0: normal scheduling)")
    faults = parser.add_argument_group("faults injected while measuring")
    faults.add_argument("--extra-ticks", type=int, default=0,
                        help="the driver takes each command 0..N ticks later, drawn per command (inject_extra_ticks)")
    faults.add_argument("--command-loss", type=float, default=0.0,
                        help="the driver loses each command with this probability (inject_command_loss)")
    faults.add_argument("--starve-ms", type=float, default=0.0, help="stop the stack (SIGSTOP) this long [ms] ...")
    faults.add_argument("--starve-every", type=float, default=0.5, help="... every this long [s]")
    args = parser.parse_args()
    print(f"# CPython {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    ratios = cycle_ratios()
    print("compiled control cycle / one mujoco.mj_step, CPU medians in this process: "
          + ", ".join(f"{name} {ratio:.2f}" for name, ratio in ratios.items()))
    for executor in args.executors:
        for controller in args.controllers:
            r = run(controller, executor, args.seconds, args.rate, args.realtime_priority, args)
            lat = r["latency"] * 1e3 if r["latency"].size else np.array([np.nan])
            period = 1.0 / args.rate
            print(f"\n## {controller}, executor {executor}, driver at {args.rate:g} Hz, realtime priority "
                  f"{args.realtime_priority}{', disarmed' if args.disarmed else ''}: {args.seconds:g} s, "
                  f"load average {r['load'][0]:.2f} -> {r['load'][1]:.2f}")
            if args.extra_ticks or args.command_loss or args.starve_ms:
                print(f"injected: each command taken 0..{args.extra_ticks} ticks later (not counted in the periods "
                      f"late below), {r['lost']} commands lost (p = {args.command_loss:g}), the stack stopped "
                      f"{r['stops']} times for {args.starve_ms:g} ms")
            print(f"joint states {r['states']} ({r['states'] / args.seconds:.0f}/s), commands {r['commands']}: "
                  f"answered {100 * r['commands'] / max(r['states'], 1):.2f} %; superseded in the stack {r['superseded']}; "
                  f"answered by the compiled step {r['compiled']}")
            print(f"latency stamp -> command at the driver [ms]: median {np.median(lat):.3f}, "
                  f"p99 {np.percentile(lat, 99):.3f}, max {np.max(lat):.3f} (period {period * 1e3:g} ms)")
            print("from the stamp to [ms, median / p99]: " + "; ".join(
                f"{part} {np.median(values) * 1e3:.3f} / {np.percentile(values, 99) * 1e3:.3f}"
                for part, values in r["parts"].items() if values.size))
            print("periods late (1 = applied at the next tick): "
                  + ", ".join(f"{k}{'+' if k == LATE_BUCKETS else ''}: {v}" for k, v in sorted(r["late"].items())))
            print(f"driver ticks run in C: {r['driver_native']} of {r['driver_ticks']} (executor {args.driver_executor})")
            print(f"stack faults since arming (watchdog trips included): {r['faults']}; driver overruns: {r['overruns']}"
                  + (f"; last problem: {r['problem']}" if r["problem"] else ""))
            print("CPU per process [fraction of a core]: " + ", ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items()))
            print(f"tracking over {r['samples']} decimated samples: position error RMS {r['tracking_rms'] * 1e3:.4f} mm, "
                  f"max {r['tracking_max'] * 1e3:.4f} mm")


if __name__ == "__main__":
    main()
