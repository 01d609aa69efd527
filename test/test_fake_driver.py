"""The fake ros2_control driver: its parts without ROS, then the executable over DDS.

Over DDS the driver runs as its own process (python -m hexapod_control.ros.fake_driver), with
travel limits that catch the sinking platform (``STOP``) as a real robot's stops do, at the robot
stack's SCHED_FIFO priority where the machine permits it (other processes' load then does not
stall it for whole command timeouts). Waits spin an executor against generous deadlines. No
duration is asserted: the tests check the order of events, comparing the driver's stamps (system
time) with each other or with this process's system clock.
"""

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from drive_helpers import simulated_parameters
from rclpy.serialization import serialize_message
from ros_helpers import DELIVERY_TIMEOUT_S, DISCOVERY_TIMEOUT_S, SPIN_STEP_S, NodeProcess, Starver, spin_until
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, MultiArrayLayout
from std_srvs.srv import Trigger

from hexapod_control.conventions import TOPICS, time_from_stamp
from hexapod_control.drive.core import CommandHold, effort_array
from hexapod_control.drive.simulated_board import EndStopPlant
from hexapod_control.errors import InvalidInputError, ParameterError
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.ros import native_driver
from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY, RELIABLE_QOS
from hexapod_control.ros.fake_driver import (
    CLOCK_READ_BRACKET_S,
    NODE_NAME,
    CommandInjection,
    TickSchedule,
    steps_per_tick,
)
from hexapod_control.ros.wire import JointStateWriter
from hexapod_control.simulation.embedded import EmbeddedSimulator

PARAMETERS = load_parameters()
HOME_Q = np.full(6, PARAMETERS.home_actuator_position)
# Upper stop of the DDS tests: the shipped 0.40 m lies beyond the straight-leg collapse (q = L).
STOP = 0.30
RATE = PARAMETERS.simulation.rate
TIMEOUT = 0.05  # the driver's command_timeout in the DDS tests [s]
COLLECTION_S = 1.0  # joint states collected at rest [s]
COMMANDER_RATE = 500.0  # [Hz] the killed commanding process
STEADY_STATES = 50  # states with the command applied before the commander is killed
SIGINT_STOPS = 6  # Ctrl-C after Ctrl-C: the crash seen was on some stops, not all
STATES_BEFORE_STOP = 100  # the loop, the diagnostics and the executor's services all ran
POWER_UP_TIMEOUT_S = 60.0  # calibration and homing take a few simulated seconds, slower on a loaded machine
RESETS_ALLOWED = 4  # power-ups a loaded machine's stalls may fault before one completes
LIFT = 1.05  # the lifting command: this many times the force that holds the platform at rest on its stops
LIFT_S = 0.4  # how long it is sent [s]: the platform rises off the upper stops and reaches the lower ones
LIFT_RATE = 200.0  # [Hz] of the lifting commands
ODD_EVERY = 20  # every this many lifting commands one is odd: a rejected one, or one the C loop leaves to Python
STEP_TOLERANCE = 1e-9  # [m], [m/s]: a state against the plant stepped offline from the state before
STARVE_S, STARVE_EVERY_S = 0.005, 0.05  # the driver is stopped this long this often while lifting: late ticks
HAND_OVERS, HAND_OVER_S = 4, 0.05  # the C loop's hand-overs while it runs, this far apart [s]


# ------------------------------------------------------------------------------------------ without ROS
def test_command_hold_applies_the_latest_valid_command_until_the_timeout():
    hold = CommandHold(6, timeout=0.05)
    forces, commanded = hold.forces(0.0)
    assert not commanded and np.array_equal(forces, np.zeros(6))  # nothing received: zero force

    hold.receive([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], now=1.0)
    for now in (1.0, 1.03, 1.0499):
        forces, commanded = hold.forces(now)
        assert commanded and forces.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # A wrong size or a NaN is rejected: it neither replaces the held command nor refreshes its age.
    with pytest.raises(InvalidInputError):
        hold.receive([9.0] * 7, now=1.04)
    with pytest.raises(InvalidInputError):
        hold.receive([9.0, 9.0, math.nan, 9.0, 9.0, 9.0], now=1.045)
    assert hold.forces(1.049)[0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    forces, commanded = hold.forces(1.0501)
    assert not commanded and np.array_equal(forces, np.zeros(6))
    assert hold.forces(2.0)[1] is False
    assert (hold.received, hold.rejected, hold.timeouts) == (3, 2, 1)  # one expiry, counted once

    hold.receive([-1.0] * 6, now=3.0)  # a new command after a timeout is applied again
    assert hold.forces(3.01) == (pytest.approx([-1.0] * 6), True)


def test_the_c_loop_reads_exactly_the_commands_an_effort_controller_applies():
    """The C loop holds a command itself only when it is six finite values with an empty layout, and
    then the values the Python hold would hold; anything else is left to the Python hold."""
    reader = native_driver.command_reader()
    if isinstance(reader, str):
        pytest.skip(f"no rcl loop in C here: {reader}")
    dimension = MultiArrayDimension(label="joints", size=6, stride=6)
    random = np.random.default_rng(0)
    datas = [[], [1.0] * 5, [1.0] * 7, [-0.0] * 6, [1e300, -1e300, 5e-324, 1.0, 2.0, 3.0],
             *([value if j == 2 else 1.0 for j in range(6)] for value in (math.nan, math.inf, -math.inf)),
             *(random.normal(0.0, 100.0, 6).tolist() for _ in range(50))]
    layouts = [MultiArrayLayout(), MultiArrayLayout(data_offset=3), MultiArrayLayout(dim=[dimension])]
    accepted_count = 0
    for layout in layouts:
        for data in datas:
            message = serialize_message(Float64MultiArray(layout=layout, data=data))
            forces = np.full(6, math.nan)
            accepted = reader(message, len(message), forces.ctypes.data)
            try:
                held = effort_array(data, 6)
            except InvalidInputError:
                held = None
            assert bool(accepted) == (held is not None and not layout.dim), (layout, data)
            if accepted:
                accepted_count += 1
                assert forces.tobytes() == np.asarray(held, dtype=float).tobytes()
    assert accepted_count == 2 * 52  # the six finite values of both empty layouts


@pytest.mark.parametrize(("rate", "steps"), [(RATE, 1), (RATE / 4, 4), (RATE / 10, 10)])
def test_a_tick_advances_a_whole_number_of_plant_steps(rate, steps):
    assert steps_per_tick(RATE, rate, "file.yaml") == steps


@pytest.mark.parametrize("rate", [RATE * 0.3, RATE * 2])
def test_a_rate_that_does_not_divide_the_plant_rate_is_refused(rate):
    with pytest.raises(ParameterError, match=r"'rate'.*hexapod\.simulation\.rate.*file\.yaml"):
        steps_per_tick(RATE, rate, "file.yaml")


def test_schedule_skips_the_ticks_a_late_loop_missed_and_reports_the_periods():
    schedule = TickSchedule(period=0.25, start=0.0, window_ticks=3)  # binary-exact times
    assert schedule.begin(0.1) == 1 and schedule.deadline == 0.25 and schedule.scheduled == 0.0
    # Ticks due at 0.25 and 0.5 were missed: the plant steps through 0.75, the time its state is stamped.
    assert schedule.begin(0.9) == 3 and schedule.deadline == 1.0 and schedule.scheduled == 0.75
    assert schedule.begin(1.0) == 1 and schedule.deadline == 1.25 and schedule.scheduled == 1.0
    assert schedule.begin(1.5) == 2 and schedule.deadline == 1.75 and schedule.scheduled == 1.5  # 1.25 was missed
    assert (schedule.ticks, schedule.overruns) == (4, 3)
    summary = schedule.summary()  # over the last three starts 0.9, 1.0, 1.5: periods 0.1 and 0.5
    assert summary["achieved_rate"] == pytest.approx(2 / 0.6)
    assert summary["period_median"] == pytest.approx(0.3) and summary["period_max"] == 0.5
    assert summary["period_p99"] == pytest.approx(0.1 + 0.99 * 0.4)  # linear between the two periods


INJECTED_COMMANDS = 20000


@pytest.mark.parametrize(("extra_ticks", "loss"), [(2, 0.0), (0, 0.01), (2, 0.01)])
def test_injected_commands_come_in_order_up_to_the_extra_ticks_late_or_are_lost(extra_ticks, loss):
    """One command per tick, as the stack answers: each released 0..extra_ticks ticks after its own,
    never before the one before it, every extra delay drawn; lost at the rate asked (binomial, 5 sigma)."""
    injection = CommandInjection(extra_ticks, loss, seed=3)
    released = []  # (tick released, tick admitted)
    for tick in range(INJECTED_COMMANDS + extra_ticks + 1):
        if tick < INJECTED_COMMANDS:
            injection.admit(tick, tick, float(tick))
        for data, arrival in injection.released(tick):
            assert arrival == data  # each command's data with its own arrival
            released.append((tick, data))
    admitted = np.array([data for _, data in released])
    extra = np.array([tick - data for tick, data in released])
    assert np.all(np.diff(admitted) > 0)  # in order, none twice
    assert admitted.size + injection.lost == INJECTED_COMMANDS and not injection.waiting
    assert set(extra.tolist()) == set(range(extra_ticks + 1))
    sigma = math.sqrt(INJECTED_COMMANDS * loss * (1 - loss))
    assert abs(injection.lost - INJECTED_COMMANDS * loss) <= 5 * sigma


def test_upper_stops_catch_the_sinking_platform_and_change_nothing_before():
    parameters = PARAMETERS.replace(limits={"actuator_position_max": STOP})
    stopped = EndStopPlant(EmbeddedSimulator(parameters), parameters.limits)
    free = EmbeddedSimulator(parameters)
    zero = np.zeros(6)
    while free.true_state[0].max() <= STOP:  # the free plant sinks past the stop height
        stopped.advance(zero, 1)
        free.apply_forces(zero)
        free.step()
        if free.true_state[0].max() <= STOP:
            np.testing.assert_array_equal(stopped.joint_positions(), free.joint_positions())
            np.testing.assert_array_equal(stopped.joint_velocities(), free.joint_velocities())
    assert stopped.end_stop_contacts == 1
    stopped.advance(zero, round(RATE))  # one more second pressed onto the stops by gravity
    assert stopped.joint_positions().tolist() == [STOP] * 6
    assert stopped.joint_velocities().tolist() == [0.0] * 6
    assert stopped.collapse == "" and stopped.steps == free.time * RATE + RATE


def test_the_stops_keep_the_plant_clock_and_its_sensor_delay_and_noise_going():
    """Sinking onto the stops and resting on them, the plant is re-seated at every contact: its time
    still counts the steps, the measurement still lags the true state by the sensor's delay, and its
    noise is not drawn afresh from the seed at each contact (which would repeat one draw)."""
    delay, noise = 2, 1e-5
    parameters = PARAMETERS.replace(limits={"actuator_position_max": STOP},
                                    simulation={"sensor": {"delay_steps": delay, "noise_std": noise}})
    plant = EndStopPlant(EmbeddedSimulator(parameters), parameters.limits)
    zero = np.zeros(6)
    true_positions, errors = [], []
    for _ in range(round(1.5 * RATE)):
        plant.advance(zero, 1)
        true_positions.append(plant.plant.true_state[0])
        if len(true_positions) > delay:
            errors.append(plant.joint_positions() - true_positions[-1 - delay])
    assert plant.end_stop_contacts > RATE / 2
    assert plant.plant.time == pytest.approx(plant.steps / RATE, rel=1e-12)
    errors = np.array(errors)
    assert np.abs(errors).max() < 6 * noise  # lagging by exactly the delay: what is left is noise
    resting = errors[-round(RATE / 4):, 0]  # slider 0 in the last quarter second, on its stop
    assert len(np.unique(resting)) == len(resting)
    assert 0.5 * noise < resting.std() < 2 * noise


def test_lower_stop_stops_only_the_slider_that_reaches_it():
    limits = PARAMETERS.limits
    q = HOME_Q.copy()
    q[0] = limits.actuator_position_min + 1e-4
    qd = np.zeros(6)
    qd[0] = -1.0  # reaches the stop within one 1 ms step
    forces = HexapodModel(PARAMETERS).gravity_term(q)
    free = EmbeddedSimulator(PARAMETERS)
    free.reset(q, qd)
    free.apply_forces(forces)
    free.step()
    stopped_simulator = EmbeddedSimulator(PARAMETERS)
    stopped_simulator.reset(q, qd)
    stopped = EndStopPlant(stopped_simulator, limits)
    stopped.advance(forces, 1)

    q_free, qd_free = free.true_state
    assert q_free[0] < limits.actuator_position_min and qd_free[0] < 0.0
    q_stopped, qd_stopped = stopped_simulator.true_state
    assert q_stopped[0] == limits.actuator_position_min and qd_stopped[0] == 0.0
    np.testing.assert_array_equal(q_stopped[1:], q_free[1:])
    np.testing.assert_array_equal(qd_stopped[1:], qd_free[1:])
    np.testing.assert_array_equal(stopped.applied_forces, forces)  # the drives still push
    assert stopped.end_stop_contacts == 1


def test_a_platform_sinking_past_the_end_of_the_model_freezes_at_rest():
    """Shipped limits: the legs straighten (q0 + q1 = 2L) before any slider reaches 0.40 m."""
    plant = EndStopPlant(EmbeddedSimulator(PARAMETERS), PARAMETERS.limits)
    push = np.full(6, 7.0)  # outwards, with gravity
    plant.advance(push, round(RATE))  # 1 s: the platform collapses within ~0.3 s
    assert "cannot assemble" in plant.collapse
    frozen = plant.joint_positions()
    plant.advance(-push, 10)
    np.testing.assert_array_equal(plant.joint_positions(), frozen)
    assert plant.joint_velocities().tolist() == [0.0] * 6
    np.testing.assert_array_equal(plant.applied_forces, -push)
    HexapodModel(PARAMETERS).forward_kinematics(frozen)  # the frozen state assembles (raises otherwise)
    two_leg_lengths = 2.0 * PARAMETERS.geometry.leg_length
    assert all(frozen[2 * i] + frozen[2 * i + 1] < two_leg_lengths for i in range(3))


# ------------------------------------------------------------------------------------------ over DDS
def test_the_c_loop_hands_over_whole_ticks_while_it_runs_and_stops_when_asked(context):
    """The driver's C loop in its thread, the platform floating at home under the force that holds
    it there: each hand-over while it runs, and the one of its stop, gives whole ticks. Summed, they
    are every tick due from the first, run one period apart or counted as overruns; and at each
    hand-over its plant is the plant stepped here under that force as many times as the hand-overs
    counted so far."""
    library = native_driver.build()
    if isinstance(library, str):
        pytest.skip(f"no rcl loop in C here: {library}")
    node = rclpy.create_node("c_loop_hand_overs", context=context)
    try:
        names, zeros = list(PARAMETERS.ros.joint_names), [0.0] * 6
        writer = JointStateWriter(serialize_message(JointState(name=names, position=zeros, velocity=zeros,
                                                               effort=zeros)))
        plant = EndStopPlant(EmbeddedSimulator(PARAMETERS), PARAMETERS.limits)
        plant.plant.reseat(HOME_Q, np.zeros(6))
        offline = EndStopPlant(EmbeddedSimulator(PARAMETERS), PARAMETERS.limits)
        offline.plant.reseat(HOME_Q, np.zeros(6))
        holding = np.asarray(offline.plant.model.dynamics.inverse_dynamics(HOME_Q, np.zeros(6), np.zeros(6),
                                                                           offline.plant.passive_angles))
        # Both under that force already: ticks the loop skips (a late first one) go on under it.
        plant.advance(holding, 1)
        offline.advance(holding, 1)
        loop = native_driver.DriverLoop(
            library, context, node.create_subscription(Float64MultiArray, "c_loop_commands", lambda _: None,
                                                       RELIABLE_QOS, raw=True),
            node.create_publisher(JointState, "c_loop_states", RELIABLE_QOS), writer.template, writer.offsets,
            plant.plant.compiled, native_driver.DriverSchedule(1.0 / RATE, TIMEOUT, PARAMETERS.limits.actuator_force_max,
                                                               plant.lower, plant.upper, 1))
        # A command that never times out: the loop ticks in C until it is stopped.
        first_due = time.monotonic()
        loop.start(first_due, 0, native_driver.PlantState(*plant.compiled_state()), native_driver.Held(holding, math.inf))
        handed = [loop.collect(HAND_OVER_S, 0) for _ in range(HAND_OVERS)]
        handed.append(loop.stop())
        assert not loop.running
    finally:
        node.destroy_node()
    assert [ticked.reason for ticked in handed] == [native_driver.RUNNING] * HAND_OVERS + ["stopped"]
    stamps = np.concatenate([ticked.stamps for ticked in handed])
    ticks, overruns = sum(ticked.ticks for ticked in handed), sum(ticked.overruns for ticked in handed)
    assert all(ticked.ticks > 0 for ticked in handed[:-1]) and stamps.size == ticks > HAND_OVERS * HAND_OVER_S * RATE / 2
    # Stamped with the monotonic clock (offset 0): the ticks due from the first one, run or skipped
    # (the first can be late already), end at the last stamp.
    periods = np.diff(np.concatenate([[first_due], stamps])) * RATE
    assert np.allclose(periods, np.round(periods), atol=0.01) and int(np.round(periods).sum()) + 1 == ticks + overruns
    steps = 0
    for ticked in handed:
        offline.advance(holding, ticked.steps)
        steps += ticked.steps
        true_q, true_qd = offline.plant.true_state
        assert np.max(np.abs(ticked.plant.q - true_q)) <= STEP_TOLERANCE, steps
        assert np.max(np.abs(ticked.plant.qd - true_qd)) <= STEP_TOLERANCE, steps
    assert steps == ticks + overruns  # one plant step a tick at the plant's rate, the skipped ones included
    assert sum(ticked.held_ticks for ticked in handed) == ticks and not any(ticked.pending for ticked in handed)


def test_every_ctrl_c_ends_the_driver_with_exit_code_zero(tmp_path, context, executor):
    """Started and stopped again and again, each after it has published (before the module's driver starts)."""
    node = rclpy.create_node("fake_driver_stops", context=context)
    executor.add_node(node)
    states = []
    node.create_subscription(JointState, TOPICS["joint_states"], lambda message: states.append(message), RELIABLE_QOS)
    for stop in range(SIGINT_STOPS):
        process = NodeProcess("hexapod_control.ros.fake_driver", tmp_path / f"driver_{stop}.log")
        published = len(states)
        deadline = time.monotonic() + DISCOVERY_TIMEOUT_S
        while len(states) < published + STATES_BEFORE_STOP and process.process.poll() is None:
            if time.monotonic() > deadline:
                process.stop()
                pytest.fail(f"stop {stop}: no joint states from the driver:\n{process.output()}")
            executor.spin_once(timeout_sec=SPIN_STEP_S)
        code = process.stop()
        assert code == 0, f"stop {stop}: the driver exited with {code} on SIGINT:\n{process.output()}"


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fake_driver")
    document = yaml.safe_load(default_parameters_path().read_text())
    document["hexapod"]["limits"]["actuator_position_max"] = STOP
    params_file = folder / "stops.yaml"
    params_file.write_text(yaml.safe_dump(document))
    timing_log = folder / "timing.npz"
    process = NodeProcess("hexapod_control.ros.fake_driver", folder / "driver.log", ("params_file", params_file),
                          ("command_timeout", TIMEOUT), ("timing_log", timing_log),
                          ("realtime_priority", CONTROL_LOOP_PRIORITY))
    yield process
    code = process.stop()
    assert code == 0, f"the driver exited with {code} on SIGINT:\n{process.output()}"
    # On Ctrl-C the driver wrote when it stamped and published each state (ticks 1/rate apart,
    # system time), when each tick took its commands, and when each command arrived (the tests
    # below sent some).
    log = np.load(timing_log)
    stamps = log["state_stamps"]
    assert stamps.size > RATE and np.all(np.diff(stamps) > 0)
    # Each state was stamped with the time its plant steps reached, the latest deadline due when its
    # tick began, then published, and then its tick took the commands waiting (ros2_control's
    # order): stamp <= publication <= take, within the clocks' offset, which each time is taken from
    # two reads at most CLOCK_READ_BRACKET_S apart.
    # Ctrl-C can end the last tick between its stamp, its publication and its take.
    published, takes, tolerance = log["state_publications"], log["command_takes"], CLOCK_READ_BRACKET_S
    n = takes.size
    assert 0 <= stamps.size - published.size <= 1 and 0 <= published.size - n <= 1
    assert np.all(stamps[:n] <= published[:n] + tolerance), np.max(stamps[:n] - published[:n])
    assert np.all(published[:n] <= takes + tolerance), np.max(published[:n] - takes)
    assert log["command_arrivals"].size >= 3 and stamps[0] < log["command_arrivals"][0] < time.time()


class Listener:
    """The driver's joint states (stamp, position, velocity, effort) and diagnostics, as they arrive."""

    def __init__(self, context, executor, driver):
        self.node = rclpy.create_node("fake_driver_test", context=context)
        executor.add_node(self.node)
        self.executor, self.driver = executor, driver
        self.states: list[tuple[float, tuple, tuple, tuple]] = []
        self.names: list[str] = []
        self.diagnostics: list[tuple[float, DiagnosticStatus]] = []  # (stamp, status)
        self.node.create_subscription(JointState, TOPICS["joint_states"], self._on_state, RELIABLE_QOS)
        self.node.create_subscription(DiagnosticArray, TOPICS["diagnostics"], self._on_diagnostics, RELIABLE_QOS)
        self.commands = self.node.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)

    def _on_state(self, message: JointState) -> None:
        self.states.append((time_from_stamp(message.header.stamp), tuple(message.position),
                            tuple(message.velocity), tuple(message.effort)))
        self.names = list(message.name)

    def _on_diagnostics(self, message: DiagnosticArray) -> None:
        stamp = time_from_stamp(message.header.stamp)
        self.diagnostics.extend((stamp, s) for s in message.status if s.name.startswith(NODE_NAME))

    def wait(self, condition, what, timeout=DELIVERY_TIMEOUT_S) -> None:
        """spin_until, with the driver's output in the failure message."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.driver.process.poll() is not None:
                pytest.fail(f"the driver exited with {self.driver.process.returncode} while waiting for {what}:\n"
                            f"{self.driver.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout} s waiting for {what}; driver output:\n{self.driver.output()}")
            self.executor.spin_once(timeout_sec=SPIN_STEP_S)

    def first_state_from(self, index: int, predicate, what: str) -> int:
        """Index of the first state from ``index`` on that satisfies ``predicate`` (waits for it)."""
        position = [index]

        def found() -> bool:
            while position[0] < len(self.states):
                if predicate(self.states[position[0]]):
                    return True
                position[0] += 1
            return False

        self.wait(found, what)
        return position[0]

    def latest_values(self) -> dict:
        return values_of(self.diagnostics[-1][1])


@pytest.fixture
def listener(context, executor, driver):
    node = Listener(context, executor, driver)
    node.wait(lambda: node.states and node.diagnostics, "the driver's first joint state and diagnostics",
              DISCOVERY_TIMEOUT_S)
    yield node
    node.node.destroy_node()


def values_of(status: DiagnosticStatus) -> dict:
    return {kv.key: kv.value for kv in status.values}


def effort_is(values):
    return lambda state: state[3] == tuple(values)


def test_joint_states_with_the_platform_resting_on_its_stops_and_every_tick_counted(listener):
    # No command since the start: zero force, and the platform sank onto the upper stops.
    listener.wait(lambda: listener.states[-1][1] == (STOP,) * 6, "the platform on its stops")
    start, diagnostics_start = len(listener.states), len(listener.diagnostics)
    deadline = time.monotonic() + COLLECTION_S
    listener.wait(lambda: time.monotonic() > deadline and len(listener.diagnostics) >= diagnostics_start + 2,
                  "a second of joint states, between two diagnostics reports",
                  COLLECTION_S + 2.0 * PARAMETERS.safety.diagnostics_period + DELIVERY_TIMEOUT_S)
    states = listener.states[start:]
    stamps = np.array([s[0] for s in states])
    assert np.all(np.diff(stamps) > 0.0)
    # Stamped with the time the plant's steps reached: whole periods apart, however late a tick ran.
    periods = np.diff(stamps) * RATE
    assert np.max(np.abs(periods - np.round(periods))) < 0.01
    assert listener.names == list(PARAMETERS.ros.joint_names)
    for _, position, velocity, effort in states:
        assert position == (STOP,) * 6 and velocity == (0.0,) * 6 and effort == (0.0,) * 6

    # Each state is a tick: the states stamped between two reports were counted by the later one
    # (a tick stamps its state before it reports; a report reads its counts before its stamp),
    # except for one: a tick's stamp, the latest deadline due when it began, is less than a period
    # before it began, so of the ticks after a report only the next can be stamped before it. How
    # many periods were skipped, and how evenly the ticks come, is the machine's, not the code's:
    # benchmarks/bench_loop.py measures it; the diagnostics only have to report it.
    (first_stamp, first), (last_stamp, last) = listener.diagnostics[diagnostics_start], listener.diagnostics[-1]
    between = sum(1 for stamp in stamps if first_stamp < stamp <= last_stamp)
    assert between > 0 and int(values_of(last)["loop_ticks"]) - int(values_of(first)["loop_ticks"]) + 1 >= between
    assert all(float(values_of(status)["period_median"]) > 0.0 for _, status in listener.diagnostics[diagnostics_start:])
    assert last.level == DiagnosticStatus.WARN and last.message.endswith("zero force")
    assert int(values_of(last)["end_stop_contacts"]) > 0 and values_of(last)["collapse"] == ""


def test_a_command_is_applied_until_the_timeout_and_a_malformed_one_never(listener):
    listener.wait(lambda: listener.commands.get_subscription_count() >= 1, "the driver's command subscription",
                  DISCOVERY_TIMEOUT_S)
    before = listener.latest_values()
    command = [10.0, -20.0, 30.0, -40.0, 50.0, -60.0]  # [N], inside the force limit: applied as sent
    start = len(listener.states)
    published_at = time.time()
    listener.commands.publish(Float64MultiArray(data=command))
    listener.commands.publish(Float64MultiArray(data=[99.0] * 7))  # wrong size
    listener.commands.publish(Float64MultiArray(data=[99.0, 99.0, math.nan, 99.0, 99.0, 99.0]))
    first = listener.first_state_from(start, effort_is(command), "the command in the effort field")
    zero = listener.first_state_from(first, effort_is([0.0] * 6), "zero force after the timeout")

    # Order, not duration: the driver takes the command after it was published, and the tick that
    # first applies zero force took its commands more than the timeout after that. The state that
    # shows it comes from a later tick, which began after that take and is stamped with the latest
    # deadline due when it began (less than a period before), converted to system time through an
    # offset read within CLOCK_READ_BRACKET_S. How soon after is the machine's (benchmarks/).
    assert listener.states[zero][0] > published_at + TIMEOUT - 1.0 / RATE - CLOCK_READ_BRACKET_S
    assert zero > first and all(listener.states[i][3] == tuple(command) for i in range(first, zero))
    for _, _, _, effort in listener.states[start:]:
        assert effort in (tuple(command), (0.0,) * 6)  # the malformed values never appear

    def counted():  # the timeout's status follows the state that shows zero force: wait for it too
        values = listener.latest_values()
        return (int(values["commands_received"]) - int(before["commands_received"]) == 3
                and int(values["command_timeouts"]) > int(before["command_timeouts"]))

    listener.wait(counted, "the three commands and the timeout counted in the diagnostics")
    after = listener.latest_values()
    assert int(after["commands_rejected"]) - int(before["commands_rejected"]) == 2
    assert int(after["command_timeouts"]) - int(before["command_timeouts"]) == 1


def test_every_state_is_the_plant_stepped_under_the_effort_it_reports(listener):
    """Each joint state the driver publishes is the one before it stepped under the forces the later
    one reports, once per period between their stamps: in the ticks its C loop runs (a command held,
    the platform off its stops) and in its Python ticks alike (on the stops, a command the C loop
    leaves to Python, after the timeout), with the end stops, the saturation, and the ticks a late
    tick skipped (the driver is stopped now and then: the plant went on under the forces it had).
    The plant is stepped here from the published state, with another warm start of its kinematics
    than the driver's: equal to STEP_TOLERANCE."""
    parameters = PARAMETERS.replace(limits={"actuator_position_max": STOP})
    listener.wait(lambda: listener.states[-1][1] == (STOP,) * 6, "the platform on its stops")
    listener.wait(lambda: listener.commands.get_subscription_count() >= 1, "the driver's command subscription",
                  DISCOVERY_TIMEOUT_S)
    resting = EmbeddedSimulator(parameters)
    resting.reseat(np.full(6, STOP), np.zeros(6))
    holding = resting.model.dynamics.inverse_dynamics(np.full(6, STOP), np.zeros(6), np.zeros(6),
                                                      resting.passive_angles)
    lift = (LIFT * np.asarray(holding)).tolist()
    odd = [Float64MultiArray(data=[math.nan] * 6),
           Float64MultiArray(layout=MultiArrayLayout(dim=[MultiArrayDimension(label="j", size=6, stride=6)]),
                             data=lift)]
    before = listener.latest_values()
    start = len(listener.states)
    sent = 0

    def send():
        nonlocal sent
        listener.commands.publish(odd[(sent // ODD_EVERY) % 2] if sent % ODD_EVERY == 0 else
                                  Float64MultiArray(data=lift))
        sent += 1

    def counted():
        values = listener.latest_values()
        return (int(values["commands_received"]) - int(before["commands_received"]) == sent
                and int(values["command_timeouts"]) > int(before["command_timeouts"]))

    with Starver(listener.driver.process.pid, STARVE_S, STARVE_EVERY_S, CONTROL_LOOP_PRIORITY + 1):
        timer = listener.node.create_timer(1.0 / LIFT_RATE, send)
        try:
            end = time.monotonic() + LIFT_S
            listener.wait(lambda: time.monotonic() > end, "the lifting commands sent", LIFT_S + DELIVERY_TIMEOUT_S)
        finally:
            listener.node.destroy_timer(timer)
        rejected = (sent + ODD_EVERY - 1) // (2 * ODD_EVERY)  # the NaN commands: the first odd one, then every other
        listener.wait(counted, f"the {sent} commands and the timeout after them counted in the diagnostics")
        # Late ticks go on while the platform, without a command, falls back onto its stops.
        back = listener.first_state_from(start, lambda state: state[1] == (STOP,) * 6 and state[3] == (0.0,) * 6
                                         and state[0] > listener.states[start][0] + LIFT_S,
                                         "the platform back on its stops")
    listener.wait(lambda: listener.diagnostics[-1][0] > listener.states[back][0], "a report after that")
    after = listener.latest_values()
    assert int(after["commands_rejected"]) - int(before["commands_rejected"]) == rejected
    states = listener.states[start:]
    # A timeout for each held command that gave way to zero force (one, unless this process's
    # commands paused longer than the timeout): the late ticks without a command counted none.
    zero = (0.0,) * 6
    expired = sum(1 for (*_, effort), (*_, next_effort) in zip(states, states[1:]) if effort != zero == next_effort)
    assert int(after["command_timeouts"]) - int(before["command_timeouts"]) == expired >= 1
    plant = EndStopPlant(EmbeddedSimulator(parameters), parameters.limits)
    pairs = lifted = skips = 0
    worst = 0.0
    for (stamp, q, qd, previous), (next_stamp, next_q, next_qd, effort) in zip(states, states[1:]):
        periods = round((next_stamp - stamp) * RATE)
        assert abs((next_stamp - stamp) * RATE - periods) < 0.01 and periods >= 1  # whole periods apart
        if periods > 1 and effort != previous:
            continue  # the force changed within a gap: which tick applied it is not known here
        plant.plant.reseat(q, qd)
        plant.advance(np.array(effort), periods)
        true_q, true_qd = plant.plant.true_state
        worst = max(worst, np.max(np.abs(true_q - next_q)), np.max(np.abs(true_qd - next_qd)))
        pairs += 1
        skips += periods > 1
        lifted += effort == tuple(lift) and STOP not in next_q
    assert worst <= STEP_TOLERANCE and pairs > len(states) / 2, (worst, pairs, len(states))
    assert lifted > LIFT_S * RATE / 4  # the platform moved under the lift, off its stops
    assert skips > 0 and int(after["loop_overruns"]) > int(before["loop_overruns"])
    if not isinstance(native_driver.build(), str):  # the driver's default executor ran those ticks in C
        assert int(after["native_ticks"]) - int(before["native_ticks"]) > lifted / 2, (after, before)


COMMANDER = """
import sys
import rclpy
from std_msgs.msg import Float64MultiArray
from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY, RELIABLE_QOS
from hexapod_control.conventions import TOPICS

rclpy.init()
node = rclpy.create_node("doomed_commander")
publisher = node.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS)
message = Float64MultiArray(data=[float(v) for v in sys.argv[2:]])
node.create_timer(1.0 / float(sys.argv[1]), lambda: publisher.publish(message))
rclpy.spin(node)
"""


def test_a_killed_commanding_process_leads_to_zero_force_within_the_timeout(listener):
    command = [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]  # [N] outwards: the platform stays on its stops
    commander = subprocess.Popen(
        [sys.executable, "-c", COMMANDER, str(COMMANDER_RATE), *map(str, command)], env=os.environ.copy(),
    )
    commanded = effort_is(command)

    def steady() -> bool:
        recent = listener.states[-STEADY_STATES:]
        return len(recent) == STEADY_STATES and all(commanded(state) for state in recent)

    try:
        listener.wait(steady, f"{STEADY_STATES} states in a row under the commander's force", DISCOVERY_TIMEOUT_S)
        commander.send_signal(signal.SIGKILL)
        index = len(listener.states)
    finally:
        commander.kill()
        commander.wait()
    assert commander.returncode == -signal.SIGKILL
    zero = listener.first_state_from(index, effort_is([0.0] * 6), "zero force after the kill")
    listener.wait(lambda: listener.diagnostics[-1][1].message == "command timed out: zero force",
                  "the timeout in the diagnostics")
    # Once timed out the dead commander's force never comes back.
    assert all(state[3] == (0.0,) * 6 for state in listener.states[zero:])


@pytest.mark.slow
def test_the_executable_refuses_a_rate_that_does_not_divide_the_plant_rate():
    result = subprocess.run(
        [sys.executable, "-m", "hexapod_control.ros.fake_driver", "--ros-args", "-p", f"rate:={RATE * 0.3}"],
        check=False, capture_output=True, text=True, timeout=60, env=os.environ.copy(),
    )
    assert result.returncode == 1
    assert "'rate'" in result.stderr and "hexapod.simulation.rate" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("board", "params_file", "named"), [
    ("simulated", default_parameters_path(), "hexapod.board: missing section"),
    ("quanser", default_parameters_path("quanser_board.example.yaml"), "quanser.hardware"),
])
def test_a_board_without_its_section_or_sdk_is_refused_naming_what_is_missing(board, params_file, named):
    result = subprocess.run(
        [sys.executable, "-m", "hexapod_control.ros.fake_driver", "--ros-args", "-p", f"board:={board}",
         "-p", f"params_file:={params_file}"],
        check=False, capture_output=True, text=True, timeout=60, env=os.environ.copy(),
    )
    assert result.returncode == 1
    assert named in result.stderr and "Traceback" not in result.stderr


def test_on_the_simulated_board_the_driver_powers_up_serves_and_resets_its_faults(tmp_path, context, executor):
    """The node shell around the drive core: power-up reported, joint states once calibrated, ~/reset.

    A loop stall on this loaded machine can fault the power-up (the board holds its outputs through
    the stall, as a real one does until its watchdog expires): the operator's reset powers up again.
    """
    params_file = tmp_path / "board.yaml"
    # A long simulated watchdog: the loaded test machine's start-up stalls would expire a 10 ms one.
    board = simulated_parameters(STOP, watchdog_timeout=0.5).board.model_dump(mode="json")
    document = yaml.safe_load(default_parameters_path().read_text())
    document["hexapod"]["limits"]["actuator_position_max"] = STOP
    document["hexapod"]["board"] = board
    params_file.write_text(yaml.safe_dump(document))
    node = rclpy.create_node("drive_node_test", context=context)
    executor.add_node(node)
    messages, states = [], []
    node.create_subscription(DiagnosticArray, TOPICS["diagnostics"],
                             lambda m: messages.extend(s.message for s in m.status if s.name.startswith(NODE_NAME)),
                             RELIABLE_QOS)
    node.create_subscription(JointState, TOPICS["joint_states"], states.append, RELIABLE_QOS)
    client = node.create_client(Trigger, f"/{NODE_NAME}/reset")
    driver = NodeProcess("hexapod_control.ros.fake_driver", tmp_path / "driver.log", ("params_file", params_file),
                         ("board", "simulated"), ("realtime_priority", CONTROL_LOOP_PRIORITY))

    def reset() -> Trigger.Response:
        spin_until(executor, client.service_is_ready, DISCOVERY_TIMEOUT_S, "~/reset")
        future = client.call_async(Trigger.Request())
        spin_until(executor, future.done, DELIVERY_TIMEOUT_S, "the answer of ~/reset")
        return future.result()

    try:
        for _ in range(RESETS_ALLOWED + 1):
            since = len(messages)
            spin_until(executor, lambda: driver.process.poll() is not None or any(
                m == "no valid command yet: zero force" or m.startswith("drive fault") for m in messages[since:]),
                DISCOVERY_TIMEOUT_S + POWER_UP_TIMEOUT_S, "the drive enabled after its power-up, or its fault")
            assert driver.process.poll() is None, driver.output()
            if "no valid command yet: zero force" in messages[since:]:
                break
            answer = reset()  # a fault latched: reset it and power up again
            assert answer.success and answer.message.startswith("reset after"), answer.message
        else:
            pytest.fail(f"no power-up completed in {RESETS_ALLOWED + 1} attempts: {messages[-3:]}")
        # Enabled, no command yet: zero force, and the platform sinks back onto the stops where the
        # encoders were zeroed: there the positions are the reference, exactly.
        spin_until(executor, lambda: list(states[-1].effort) == [0.0] * 6 and list(states[-1].position) == [STOP] * 6,
                   DELIVERY_TIMEOUT_S, "zero effort, the platform on the stops where it was calibrated")
        assert list(states[-1].name) == list(PARAMETERS.ros.joint_names)
        answer = reset()
        assert not answer.success and answer.message == "nothing to reset: the drive is enabled"
    finally:
        code = driver.stop()
    assert code == 0, driver.output()
