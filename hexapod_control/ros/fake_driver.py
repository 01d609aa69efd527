"""Fake driver: a ros2_control-style stand-in for the robot, to test a PC and a stack against.

    ros2 run hexapod_control hexapod_fake_driver        (or python -m hexapod_control.ros.fake_driver)

It behaves like the robot's ros2_control driver with a joint_state_broadcaster and a
JointGroupEffortController, with the embedded simulator (hexapod_control.simulation.embedded) in
place of the robot. Unlike the simulator node it does not wait for anyone: its own loop runs on
the wall clock, so a late controller is late here as it would be on the robot. To check a PC,
run it under ``hardware.launch.py`` and watch /diagnostics: its loop overruns and command
timeouts, and the controller's stale-joint-state faults.

Subscribes  ``/effort_controller/commands`` (std_msgs/Float64MultiArray, six forces [N] in
            ``ros.joint_names`` order). A command of another length or holding NaN/inf is rejected
            (counted, never applied), as JointGroupEffortController rejects a wrong size; it does
            not refresh the command timeout either.
Publishes   ``/joint_states`` (sensor_msgs/JointState) once per loop tick, as
            joint_state_broadcaster does: stamped with the ROS time (system time) at which the
            state was read (for a simulated plant, the scheduled time its steps reached; see
            Loop), names = ``ros.joint_names``, position and velocity measured by the
            simulator's sensor model, effort = the forces the drives apply (the command clamped
            to ``limits.actuator_force_max``).
            ``/diagnostics`` every ``safety.diagnostics_period`` and at once on a change: commands
            received and rejected, command timeouts, loop overruns, achieved rate and tick periods
            (median, 99th percentile, longest) over the last ``safety.diagnostics_period``, and the
            commands received per joint state published since the last report.
Parameters  ``params_file``; ``rate`` [Hz] (default ``simulation.rate``, which it must divide);
            ``command_timeout`` [s] (default ``DEFAULT_COMMAND_TIMEOUT_S``); ``timing_log`` (below);
            ``realtime_priority`` (default 0, the normal scheduler; 1-99: SCHED_FIFO for its
            threads, as the robot's ros2_control driver would run); ``board`` (below);
            ``inject_extra_ticks``, ``inject_command_loss``, ``inject_seed`` (below); ``executor``
            (below).
Board       ``board:=none`` (default): the forces act on the plant directly, as described here.
            ``simulated`` or ``quanser``: the driver core of hexapod_control.drive runs in this
            loop over that board (its power-up, its command timeout and protections, its latched
            faults; doc/quanser_driver.md), with the ``hexapod.board`` section of ``params_file``,
            which then sets the rate and the command timeout; joint states start once the
            encoders are calibrated. Service ``~/reset`` (std_srvs/Trigger) clears a latched fault.
            The simulated board's plant is this module's; a Quanser board paces the loop by its
            clock (its blocking read), the others by the deadlines below.

Loop. One thread does the Python ticks and everything else (:class:`hexapod_control.ros.wait_set_loop.WaitSetLoop`;
the ticks in C below have a thread of their own, which never takes the interpreter lock): it
sleeps until the next absolute ``time.monotonic`` deadline, 1/``rate`` apart, and does the work of
a tick itself, in ros2_control's order (read, the joint_state_broadcaster publishes, the
controllers update, write): it publishes the plant's state at the tick's scheduled time, then takes
the commands that arrived meanwhile (each one's age counted from its DDS reception time, as
ros2_control reads its command interfaces at each update) and steps the plant under them to the
next tick's scheduled time (``simulation.rate`` / ``rate`` plant steps). So a command acts from the
tick that takes it on, and the state that tick publishes does not show it yet, as on the robot;
and the state leaves at the deadline, not after the plant's steps. Neither an rclpy timer's
scheduling nor a second Python thread competing for the interpreter lock sits between the deadline
and the state going out (with a loop thread beside an executor thread the GIL hand-over alone cost
whole periods: hundreds of overruns a run, doc/benchmarks.md). A tick that starts a whole period
or more late is an overrun: the ticks it missed are counted and not run, and the plant goes on
through their steps under the forces it had, because a real robot keeps moving while its PC stalls
and nothing wrote new forces. A simulated plant's state is stamped with the scheduled time its
steps reached, not with the wall time of the late tick that publishes it: a robot's sensors are
read at the time of the stamp. A wall-clock stamp runs up to a period ahead of the motion it
reports, and the controller then compares that motion with the reference up to a period ahead (over
DDS it drove computed torque at 500 Hz to overspeed). The tick's lateness shows as the state's age
on arrival instead, as it would on the robot. A Quanser board's state is stamped when it was read.

Ticks in C. With ``executor:=native`` (the default) the ticks run in an rcl loop in C while a valid
command is held and the plant moves freely (:mod:`hexapod_control.ros.native_driver`): the same
order, the same plant step, no Python per tick. Every other tick is the Python tick above: before
the first command and after a timeout, on an end stop, at a command the C loop leaves to Python
(another layout, a rejected one), a late tick when a step of the ticks it skipped is Python's;
and every tick on a board or with injected faults. The C loop runs in a thread of its own while
this node's thread serves the executor and the diagnostics beside it, taking over what the
loop counted so far at each poll. ``executor:=wait_set``: the Python ticks only. /diagnostics
counts the ticks run in C as ``native_ticks``.

Injected faults (for tests and benchmarks of a controller; default none). ``inject_extra_ticks``
N: each command is taken 0..N ticks later than it would be, drawn per command but never before
the command before it (the commands keep their order: the delay of the forces jumps between 1 and
1 + N periods from one cycle to the next); ``inject_command_loss`` p: each command is lost with
probability p (counted as ``commands_lost_injected``); ``inject_seed``: the draws' seed.

Answers. /diagnostics reports the commands received per joint state published since the last
report. With the parameter ``timing_log`` set to a path, the driver writes there on shutdown when
each joint state was stamped and when its publish call returned, when the tick that published it
took the commands waiting (the ones it applied), and when each command arrived and was published
(its DDS source timestamp, :mod:`hexapod_control.ros.timing_log`): with the robot stack's own log,
benchmarks/bench_loop.py finds each command's latency and the tick that first applied it.

What the drive side must do. The controller node is the last place that decides a force: if
its process dies or is silenced, nothing sends another command and ros2_control's
JointGroupEffortController keeps writing the last force to the drives for ever. The drive side
therefore needs a command timeout of its own, in the ros2_control hardware interface (compare
the time of the last command with each write) or in the drives (their fieldbus or analog
watchdog): when no new command arrived for the timeout, it must command zero force. The
controller's own watchdog cannot do this, since it dies with the controller. This driver models
that timeout: the latest valid command is applied while it is at most ``command_timeout`` old
(age measured on arrival in this process) and zero force before the first command and after the
timeout, so the force is zero at the latest ``command_timeout`` plus one tick after the last
command arrived, plus the loop's lateness on a loaded PC (drive firmware does not share the PC's
load). A timeout longer than a few control periods lets a hiccup pass; one shorter
than the time the platform needs to hurt anything bounds the damage.

End stops. After every plant step a slider beyond ``limits.actuator_position_min``/``_max`` is
put back on the limit with its velocity into the stop set to zero (a perfectly plastic stop: the
other sliders keep their velocities, the impulse is not passed through the mass matrix). The
stop re-seats the simulator with ``EmbeddedSimulator.reset``, which also restarts its noise
sequence and fills its measurement delay line with the stopped state (no effect with the ideal
sensor of the shipped file). With zero force the platform sinks and the sliders of each side
spread apart; if a pair spans twice the leg length (legs straight) before a slider reaches its
stop, the model ends there (SimulationDivergedError). The plant then freezes at its last valid
state, at rest, and /diagnostics reports ERROR "platform collapsed" until the driver is
restarted (effort still shows the commanded forces; the model cannot lift the platform). The
shipped travel limits are placeholders that lie beyond that point (a symmetric sink straightens
the legs at q = L < ``actuator_position_max``); the robot's stops catch the platform earlier, so
set the limits to its measured travel (the tests use ``actuator_position_max`` = 0.30 m, where the
platform rests on its stops and the controller can arm).
"""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.time import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from hexapod_control.control.loop import DiagnosticThrottle
from hexapod_control.conventions import TOPICS
from hexapod_control.drive.core import CommandHold, DriveCore, DriveState
from hexapod_control.drive.simulated_board import EndStopPlant, SimulatedBoard, whole_plant_steps
from hexapod_control.errors import BoardError, InvalidInputError, ParameterError
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.ros import native_driver
from hexapod_control.ros.common import (
    LEVEL_ERROR,
    LEVEL_OK,
    LEVEL_WARN,
    RELIABLE_QOS,
    DiagnosticsPublisher,
    HexapodNode,
    declare_choice,
    declare_realtime_priority,
    declare_timing_log,
    run_node,
    use_realtime_priority,
)
from hexapod_control.ros.timing_log import TimingLog
from hexapod_control.ros.wait_set_loop import WaitSetLoop
from hexapod_control.ros.wire import JointStateWriter
from hexapod_control.simulation.embedded import EmbeddedSimulator

NODE_NAME = "hexapod_fake_driver"
# 50 periods at 1 kHz: long against the gaps of a Python controller on a loaded PC, which then
# keeps control; a dead one lets go within 50 ms. The robot's drives want the shortest timeout
# their controller's measured gaps allow, since the last force acts for that long.
DEFAULT_COMMAND_TIMEOUT_S = 0.05
# The driver's services (parameters, ~/reset) are served this often between ticks [s]: a request
# waits at most this long. A poll of rclpy's executor can outlast a period at the higher rates and
# holds up the tick after it, so it is not done more often.
SERVICE_POLL_PERIOD_S = 0.1
DRIVE_NODE_NAME = "hexapod_drive"
NO_BOARD, SIMULATED_BOARD, QUANSER_BOARD = "none", "simulated", "quanser"
STATUS_NAMES = {NO_BOARD: "fake ros2_control driver", SIMULATED_BOARD: "drive on a simulated board",
                QUANSER_BOARD: "drive on a Quanser board"}
BOARD_KINDS = (NO_BOARD, SIMULATED_BOARD, QUANSER_BOARD)
EXECUTORS = ("native", "wait_set")
EXECUTOR_DESCRIPTION = (
    "native (default): while a command is held and the plant moves freely, the ticks run in C "
    "(ros/native_driver.py), the Python ticks otherwise; wait_set: the Python ticks only"
)
BOARD_DESCRIPTION = (
    "none: the forces act on the embedded plant directly; simulated: the embedded plant behind a simulated board, "
    "with the drive's power-up and faults (hexapod_control.drive); quanser: a Quanser HIL board (not run on "
    "hardware). Both boards need the hexapod.board section of params_file"
)
PERIOD_PERCENTILE = 99.0  # reported tick-period percentile
# Two clock reads further apart than this were preempted: their offset is not taken.
CLOCK_READ_BRACKET_S = 20e-6


def declare_positive(node, name: str, default: float, description: str) -> float:
    """A read-only number ROS parameter that must be positive and finite (``-p rate:=500`` is fine too)."""
    descriptor = ParameterDescriptor(description=description, read_only=True, dynamic_typing=True)
    value = node.declare_parameter(name, float(default), descriptor).value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ParameterError(f"ROS parameter {name!r} of node {node.get_name()!r}: expected a positive number, got {value!r}")
    return float(value)


def steps_per_tick(plant_rate: float, rate: float, source: str) -> int:
    """Plant steps per loop tick; ParameterError unless ``rate`` divides ``simulation.rate``."""
    steps = whole_plant_steps(plant_rate, rate)
    if steps is None:
        raise ParameterError(
            f"ROS parameter 'rate' = {rate} Hz must divide hexapod.simulation.rate = {plant_rate} Hz of {source} "
            f"(a whole number of plant steps per tick)"
        )
    return steps


# ------------------------------------------------------------------------------------------ loop timing
class TickSchedule:
    """Absolute tick deadlines ``period`` apart from ``start``, the overruns, and the tick start
    times over a sliding window of ``window_ticks``."""

    def __init__(self, period: float, start: float, window_ticks: int):
        self.period = period
        self.deadline = start  # of the next tick
        self.starts: deque[float] = deque(maxlen=max(window_ticks, 2))
        self.ticks = 0
        self.overruns = 0  # ticks skipped because the loop was a whole period or more late

    def begin(self, now: float) -> int:
        """Start a tick at ``now``; return the periods it covers (1 + the ticks it skipped)."""
        missed = max(0, int((now - self.deadline) // self.period))
        self.overruns += missed
        self.deadline += (missed + 1) * self.period
        self.starts.append(now)
        self.ticks += 1
        return missed + 1

    def ticked(self, starts: np.ndarray, overruns: int, deadline: float) -> None:
        """Ticks begun elsewhere (the loop in C, ros/native_driver.py) at ``starts``, having skipped
        ``overruns``; the next one is due at ``deadline``."""
        self.starts.extend(starts.tolist())
        self.ticks += len(starts)
        self.overruns += overruns
        self.deadline = deadline

    @property
    def scheduled(self) -> float:
        """The deadline of the tick begun last, the latest one due when it began (of the ticks it
        covers): the time a plant stepped by the schedule has reached."""
        return self.deadline - self.period

    def summary(self) -> dict:
        """Achieved rate [Hz] and tick periods [s] over the window (NaN before two ticks)."""
        if len(self.starts) < 2:
            return {"achieved_rate": math.nan, "period_median": math.nan, "period_p99": math.nan, "period_max": math.nan}
        starts = np.array(self.starts)
        periods = np.diff(starts)
        return {
            "achieved_rate": periods.size / (starts[-1] - starts[0]),
            "period_median": float(np.median(periods)),
            "period_p99": float(np.percentile(periods, PERIOD_PERCENTILE)),
            "period_max": float(periods.max()),
        }


class CommandInjection:
    """Faults injected between DDS and the command interface (module doc, Injected faults): each
    command admitted at a tick is released ``extra`` ticks later, ``extra`` drawn from 0..``extra_ticks``
    but never releasing it before the one admitted before it; or lost with probability ``loss``."""

    def __init__(self, extra_ticks: int, loss: float, seed: int):
        self.extra_ticks, self.loss = extra_ticks, loss
        self.random = np.random.default_rng(seed)
        self.waiting: deque[tuple[int, object, float]] = deque()  # (release tick, data, arrival)
        self.lost = 0

    def admit(self, tick: int, data, arrival: float) -> None:
        """A command taken at ``tick`` (its data and its monotonic arrival)."""
        if self.random.random() < self.loss:
            self.lost += 1
            return
        self.waiting.append((tick + int(self.random.integers(0, self.extra_ticks + 1)), data, arrival))

    def released(self, tick: int) -> list[tuple[object, float]]:
        """The commands due at ``tick``, oldest first: (data, arrival). One waits for those before it."""
        due = []
        while self.waiting and self.waiting[0][0] <= tick:
            _, data, arrival = self.waiting.popleft()
            due.append((data, arrival))
        return due


def declare_injection(node) -> CommandInjection | None:
    """The ``inject_*`` parameters (module doc); None when they inject nothing."""
    def declare(name, default, description):
        return node.declare_parameter(name, default, ParameterDescriptor(description=description, read_only=True)).value

    extra = declare("inject_extra_ticks", 0, "test only: take each command 0..N ticks later, drawn per command, in order")
    loss = declare("inject_command_loss", 0.0, "test only: lose each command with this probability")
    seed = declare("inject_seed", 0, "the injected draws' seed")
    for name, value, valid in (("inject_extra_ticks", extra, isinstance(extra, int) and extra >= 0),
                               ("inject_command_loss", loss, isinstance(loss, float) and 0.0 <= loss < 1.0),
                               ("inject_seed", seed, isinstance(seed, int) and seed >= 0)):
        if isinstance(value, bool) or not valid:
            raise ParameterError(f"ROS parameter {name!r} of node {node.get_name()!r}: got {value!r}, expected "
                                 + ("a probability in [0, 1)" if name == "inject_command_loss" else "an integer >= 0"))
    return CommandInjection(extra, loss, seed) if extra or loss else None


# ------------------------------------------------------------------------------------------ node
class FakeDriverNode(HexapodNode):
    default_name = NODE_NAME
    default_board = NO_BOARD

    def _setup(self, parameters: HexapodParameters) -> None:
        self.joint_names = list(parameters.ros.joint_names)
        self.board_kind = declare_choice(self, "board", self.default_board, BOARD_KINDS, BOARD_DESCRIPTION)
        self.drive = make_drive(self.board_kind, parameters)
        if self.drive is None:
            self.rate = declare_positive(self, "rate", parameters.simulation.rate,
                                         "loop rate [Hz]; must divide simulation.rate")
            self.steps_per_tick = steps_per_tick(parameters.simulation.rate, self.rate, parameters.source)
        else:  # the board section rules the rate and the command timeout
            self.rate, self.steps_per_tick = parameters.board.limits.sample_rate, 1
        self.period = 1.0 / self.rate
        if self.drive is None:
            timeout = declare_positive(
                self, "command_timeout", DEFAULT_COMMAND_TIMEOUT_S, "zero force when the last command is older than this [s]"
            )
            if timeout < self.period:
                raise ParameterError(
                    f"ROS parameter 'command_timeout' = {timeout} s of node {self.get_name()!r} is shorter than one loop "
                    f"period ({self.period} s): every command would expire before the next tick"
                )
            self.command = CommandHold(len(self.joint_names), timeout)
        else:
            self.command = self.drive.command
            self.create_service(Trigger, "~/reset", self._on_reset)
        self.injection = declare_injection(self)
        timing_log = declare_timing_log(self, "state stamps and publications, and command takes and arrivals")
        self.realtime_priority = declare_realtime_priority(self, 0)
        self.timing_log = TimingLog(timing_log, ("state_stamps", "state_publications", "command_takes",
                                                 "command_arrivals", "command_sources"))
        self.window_states = self.window_commands = 0  # since the last /diagnostics
        if self.drive is None:
            self.plant = EndStopPlant(EmbeddedSimulator(parameters), parameters.limits)
        else:  # the simulated board's own plant; none behind a real board
            self.plant = getattr(self.drive.board, "plant", None)
        self.timing = TickSchedule(self.period, time.monotonic(), round(parameters.safety.diagnostics_period * self.rate))

        self._clock_offset = None  # [ns] ROS time - time.monotonic(), for the stamps
        zeros = [0.0] * len(self.joint_names)
        self._state_writer = JointStateWriter(serialize_message(JointState(name=self.joint_names, position=zeros,
                                                                    velocity=zeros, effort=zeros)))
        self.state_publisher = self.create_publisher(JointState, TOPICS["joint_states"], RELIABLE_QOS)
        self.diagnostics = DiagnosticsPublisher(
            self, TOPICS["diagnostics"], f"{self.get_name()}: {STATUS_NAMES[self.board_kind]}",
            parameters.safety.diagnostics_period
        )
        self._throttle = DiagnosticThrottle(parameters.safety.diagnostics_period)
        self.executor_choice = declare_choice(self, "executor", "native", EXECUTORS, EXECUTOR_DESCRIPTION)
        self.native_ticks = 0  # ticks the C loop ran to their end
        library = self._native_library()
        self.loop = WaitSetLoop(self, Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS, self._on_commands,
                                self._deadline, self._on_deadline, SERVICE_POLL_PERIOD_S, at_deadline=True,
                                serve=self._serve_native if library is not None else None)
        self._native = None if library is None else native_driver.DriverLoop(
            library, self.context, self.loop.subscription, self.state_publisher, self._state_writer.template,
            self._state_writer.offsets, self.plant.plant.compiled, native_driver.DriverSchedule(
                self.period, self.command.timeout, parameters.limits.actuator_force_max, self.plant.lower,
                self.plant.upper, self.steps_per_tick))

    def _native_library(self) -> native_driver.DriverLibrary | None:
        """The C loop's functions when it can serve this driver (native_driver.py's module doc), else None."""
        if self.executor_choice != "native" or self.drive is not None or self.injection is not None:
            return None
        if self.plant.plant.compiled is None or not self.plant.plant.ideal_sensor:
            library = "the plant has no C step with an ideal sensor (hexapod.simulation)"
        else:
            library = native_driver.build()
        if isinstance(library, str):
            self.get_logger().warning(f"ticks run in Python, not by the rcl loop in C: {library}")
            return None
        return library

    def _deadline(self) -> float:
        """When the next tick is due: never here while the C loop ticks; a board paced by its own
        clock is always due once it samples (its blocking read waits for the next sample); otherwise
        the PC's schedule."""
        if self._native is not None and self._native.running:
            return math.inf
        if self.board_kind == QUANSER_BOARD and self.drive.sampling:
            return 0.0
        return self.timing.deadline

    def spin(self, executor) -> None:
        use_realtime_priority(self, self.realtime_priority)
        if self.drive is not None:
            self.drive.start(time.monotonic())
        self.loop.spin(executor)

    def _on_reset(self, request, response):
        """The operator's reset of a latched drive fault (std_srvs/Trigger)."""
        before = self.drive.state
        try:
            response.message = self.drive.reset(time.monotonic())
            response.success = before is DriveState.FAULT
        except BoardError as error:  # the board refused: the fault stays latched
            response.message, response.success = f"reset refused by the board: {error}", False
        self.get_logger().warning(f"~/reset: {response.message}")
        return response

    # -------------------------------------------------------------- the rcl loop in C
    def _serve_native(self, until: float, poll: float) -> bool:
        """Let the ticks run in C, starting them if they are not running, and take over what they did
        by ``poll`` or when one needs Python (native_driver.py); False when the plant cannot be
        stepped there now or no command is to be applied (the wait-set loop then sleeps to ``until``
        and runs the Python tick)."""
        native = self._native
        self._update_clock_offset()
        if not native.running:
            held, state = self.command.held, self.plant.compiled_state()
            # Without a command to apply the C loop would hand its first tick back at once.
            if state is None or not self.command.applies(time.monotonic()):
                return False
            native.start(self.timing.deadline, self._clock_offset, native_driver.PlantState(*state),
                         native_driver.Held(*held))
        ticked = native.collect(poll - time.monotonic(), self._clock_offset)
        self.timing.ticked(ticked.starts, ticked.overruns, ticked.deadline)
        plant = ticked.plant
        self.plant.resume_compiled(plant.q, plant.qd, plant.phi, plant.warm, plant.applied, plant.last_start,
                                   ticked.steps)
        self.command.held_elsewhere(ticked.received, None if ticked.held is None else
                                    (ticked.held.forces, ticked.held.arrival), ticked.held_ticks > 0)
        if ticked.oversized:
            self.command.refuse(ticked.oversized)
            self.get_logger().warning(f"rejecting {ticked.oversized} effort command(s) of over "
                                      f"{native_driver.PENDING_BYTES} bytes, not applied", throttle_duration_sec=1.0)
        self.window_states += ticked.ticks
        self.window_commands += ticked.commands
        self._log_ticked(ticked)
        if ticked.reason == "rest":
            self.native_ticks += ticked.ticks - 1
            self._finish_tick(ticked)
        else:
            self.native_ticks += ticked.ticks
            if ticked.ticks:
                self._report(time.monotonic(), True)
        return True  # "late": the wait-set loop runs that tick; "shutdown", "stopped": it ends

    def _log_ticked(self, ticked: native_driver.Ticked) -> None:
        """The timing log's entries of the ticks and commands the C loop handed over."""
        if self.timing_log.path:
            for column, values in (("state_stamps", ticked.stamps), ("state_publications", ticked.publications),
                                   ("command_takes", ticked.takes), ("command_arrivals", ticked.arrivals),
                                   ("command_sources", ticked.sources)):
                self.timing_log.extend(column, values)

    def _finish_tick(self, ticked: native_driver.Ticked) -> None:
        """The rest of a tick the C loop published and took for: as _plant_tick from its take on."""
        taken = ticked.taken
        for data, arrived in ticked.pending:
            try:
                message = deserialize_message(data, Float64MultiArray)
            except _rclpy.RMWError as error:  # bytes that are no Float64MultiArray
                self.command.refuse()
                self.get_logger().warning(f"rejecting effort command, not applied: unreadable: {error}",
                                          throttle_duration_sec=1.0)
                continue
            self._receive(message.data, arrived)
        forces, commanded = self.command.forces(taken)
        self.plant.advance(forces, ticked.steps_left)
        self._report(taken, commanded)

    # -------------------------------------------------------------- commands
    def _on_commands(self, messages: list[Float64MultiArray], infos: list[dict]) -> None:
        """The commands waiting at a tick, with their message infos (WaitSetLoop)."""
        now, taken = time.monotonic(), time.time_ns()
        for message, info in zip(messages, infos):  # every one is counted; the last valid one is held
            arrival = info.get("received_timestamp") or taken  # a middleware that gives none: when taken
            self.timing_log.record("command_arrivals", arrival * 1e-9)
            self.timing_log.record("command_sources", (info.get("source_timestamp") or math.nan) * 1e-9)
            self.window_commands += 1
            # Its age counts from its arrival, not from the tick that took it.
            arrived = now - max(taken - arrival, 0) * 1e-9
            if self.injection is None:
                self._receive(message.data, arrived)
            else:
                self.injection.admit(self.timing.ticks, message.data, arrived)

    def _receive(self, data, arrived: float) -> None:
        """A command into the command interface (monotonic arrival ``arrived``)."""
        try:
            self.command.receive(data, arrived)
        except InvalidInputError as error:
            self.get_logger().warning(f"rejecting effort command, not applied: {error}", throttle_duration_sec=1.0)

    # -------------------------------------------------------------- ticks
    def _on_deadline(self, now: float) -> None:
        periods = self.timing.begin(now)
        if self.drive is None:
            self._plant_tick(periods)
        else:
            self._drive_tick(now, periods)

    def _take_commands(self) -> float:
        """Take the commands waiting now, the ones this tick applies; return when (time.monotonic)."""
        taken = time.monotonic()
        self.loop.take_waiting()
        if self.injection is not None:
            for data, arrived in self.injection.released(self.timing.ticks):
                self._receive(data, arrived)
        return taken

    def _plant_tick(self, periods: int) -> None:
        """Publish the state at the scheduled time, then apply the commands (module doc, Loop)."""
        plant = self.plant
        if periods > 1:  # the missed ticks applied nothing new: the plant went on under the forces it had
            plant.advance(plant.applied_forces, (periods - 1) * self.steps_per_tick)
        self._publish_state(plant.joint_positions(), plant.joint_velocities(), plant.applied_forces,
                            self.timing.scheduled)
        taken = self._take_commands()
        self._log_take(taken)
        forces, commanded = self.command.forces(taken)
        plant.advance(forces, self.steps_per_tick)  # to the next tick's scheduled time
        self._report(taken, commanded)

    def _drive_tick(self, now: float, periods: int) -> None:
        drive = self.drive
        taken = self._take_commands()
        if self.board_kind == SIMULATED_BOARD:
            drive.board.elapse(periods)
        drive.tick(now)
        if drive.calibrated:  # before, the encoders' zero is unknown: no position to publish
            # The simulated board's plant stepped by the schedule; a Quanser board was read now.
            read = self.timing.scheduled if self.board_kind == SIMULATED_BOARD else now
            self._publish_state(drive.positions(), drive.velocities(), drive.acted_forces, read)
            self._log_take(taken)
        self._report(now, drive.commanded)

    def _log_take(self, taken: float) -> None:
        """Log when the tick of the state published last took its commands (system-clock seconds)."""
        if self.timing_log.path:
            self.timing_log.record("command_takes", self._ros_time_at(taken).nanoseconds * 1e-9)

    def _publish_state(self, positions: np.ndarray, velocities: np.ndarray, efforts: np.ndarray, read: float) -> None:
        """Publish the state read at the monotonic time ``read``, stamped with the ROS time then (module doc, Loop)."""
        stamp = self._ros_time_at(read).nanoseconds
        self.timing_log.record("state_stamps", stamp * 1e-9)
        self.window_states += 1
        # Serialized here (ros/wire.py): no message object per tick.
        message = self._state_writer.message(stamp, positions.tolist(), velocities.tolist(), efforts.tolist())
        self.state_publisher.publish(message)
        if self.timing_log.path:
            self.timing_log.record("state_publications", time.time())

    def _ros_time_at(self, monotonic: float) -> Time:
        """The ROS time at a past ``time.monotonic()`` instant, through the clocks' offset."""
        clock_type = self._update_clock_offset()
        return Time(nanoseconds=round(monotonic * 1e9) + self._clock_offset, clock_type=clock_type)

    def _update_clock_offset(self):
        """Take the offset [ns] of the ROS time from ``time.monotonic()`` afresh when two reads come close
        together (a preemption between them would shift the stamps); return the ROS clock's type."""
        before = time.monotonic()
        now = self.get_clock().now()
        after = time.monotonic()
        if self._clock_offset is None or after - before < CLOCK_READ_BRACKET_S:
            self._clock_offset = now.nanoseconds - round(0.5 * (before + after) * 1e9)
        return now.clock_type

    def _report(self, now: float, commanded: bool) -> None:
        drive = self.drive
        plant = self.plant
        if plant is not None and plant.collapse:
            level, text = LEVEL_ERROR, "platform collapsed past the end of the model: frozen, restart the driver"
        elif drive is not None and drive.state is DriveState.FAULT:
            level, text = LEVEL_ERROR, f"drive fault: {drive.fault}; latched until ~/reset"
        elif drive is not None and drive.state is not DriveState.ENABLED:
            level, text = LEVEL_WARN, f"powering up: {drive.state.value}"
        elif commanded:
            level, text = LEVEL_OK, "applying commands"
        elif self.command.received == self.command.rejected:
            level, text = LEVEL_WARN, "no valid command yet: zero force"
        else:
            level, text = LEVEL_WARN, "command timed out: zero force"
        if not self._throttle.due(now, level, text):
            return
        values = {
            "rate": self.rate,
            "command_timeout": self.command.timeout,
            "commands_received": self.command.received,
            "commands_rejected": self.command.rejected,
            "command_timeouts": self.command.timeouts,
            "loop_ticks": self.timing.ticks,
            "loop_overruns": self.timing.overruns,
            **self.timing.summary(),
            "commands_per_state": self.window_commands / self.window_states if self.window_states else math.nan,
            "native_ticks": self.native_ticks,
        }
        if self.injection is not None:
            values["commands_lost_injected"] = self.injection.lost
        if plant is not None:
            values |= {"plant_steps": plant.steps, "end_stop_contacts": plant.end_stop_contacts,
                       "collapse": plant.collapse}
        if drive is not None:
            values |= {"board": self.board_kind, "drive_state": drive.state.value, "drive_fault": drive.fault,
                       "drive_faults": drive.faults, "board_errors": drive.board_errors,
                       "last_board_error": drive.last_board_error,
                       "pwm_zeroed_on_watchdog_expiry": drive.board.pwm_expiration_set}
        self.window_states = self.window_commands = 0
        self.diagnostics.publish(self.get_clock().now().nanoseconds * 1e-9, level, text, values)

    def destroy_node(self) -> None:
        try:
            # Its thread uses the node's publisher and subscription; what it did last goes to the log.
            ticked = self._native.stop() if getattr(self, "_native", None) is not None else None
            if ticked is not None:
                self._log_ticked(ticked)
        finally:
            if getattr(self, "drive", None) is not None:
                try:
                    self.drive.close()  # outputs safe and the board released, whatever else fails
                except BoardError as error:
                    self.get_logger().error(f"closing the board: {error}")
            if hasattr(self, "timing_log"):
                self.timing_log.save()
            super().destroy_node()


def make_drive(kind: str, parameters: HexapodParameters) -> DriveCore | None:
    """The driver core over the board ``kind`` (opened), or None for no board."""
    if kind == NO_BOARD:
        return None
    if parameters.board is None:
        raise ParameterError(
            f"{parameters.source}: hexapod.board: missing section: the {kind} board needs it "
            f"(config/quanser_board.example.yaml shows it, doc/quanser_driver.md how to measure it)"
        )
    if kind == SIMULATED_BOARD:
        board = SimulatedBoard(parameters)
    else:
        from hexapod_control.drive.quanser_board import QuanserBoard  # imports quanser.hardware: only when chosen

        board = QuanserBoard(parameters.board)
    board.open()
    return DriveCore(board, parameters.board)


class DriveNode(FakeDriverNode):
    """``hexapod_drive``: the same node, on a Quanser board unless told otherwise."""

    default_name = DRIVE_NODE_NAME
    default_board = QUANSER_BOARD


def main(args=None) -> int:
    return run_node(FakeDriverNode, NODE_NAME, args)


def drive_main(args=None) -> int:
    """The robot's driver: the drive core on its board (Quanser by default), power-up and latched faults."""
    return run_node(DriveNode, DRIVE_NODE_NAME, args)


if __name__ == "__main__":
    raise SystemExit(main())
