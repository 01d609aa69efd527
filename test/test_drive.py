"""The driver core against the simulated board: the power-up sequence and every fault row.

The simulated board hides the plant behind counts, duty cycles and lines; the tests compare what
the core concludes (its state, its positions, its forces) with the plant's own state.
"""

import numpy as np
import pytest
import yaml
from drive_helpers import simulated_parameters

from hexapod_control.drive.core import DriveCore, DriveState
from hexapod_control.drive.simulated_board import SimulatedBoard
from hexapod_control.errors import ParameterError
from hexapod_control.model.parameters import default_parameters_path, load_parameters

STOP = 0.30  # the simulated upper stops, where the platform rests (the shipped 0.40 m is past collapse)
PARAMETERS = simulated_parameters(STOP)
PERIOD = 1.0 / PARAMETERS.board.limits.sample_rate
POWER_UP_TICKS = 6000  # 6 s of board samples: the sequence ends well before
COUNT = 1.0 / PARAMETERS.board.scaling.counts_per_metre[0]  # one encoder count [m]


class Rig:
    """The core over a simulated board, one board sample per ``tick``; the states it went through."""

    def __init__(self, parameters=PARAMETERS):
        self.board = SimulatedBoard(parameters)
        self.core = DriveCore(self.board, parameters.board)
        self.now = 0.0
        self.states = [self.core.state]
        self.core.start(self.now)
        self.states.append(self.core.state)

    def tick(self, ticks=1):
        for _ in range(ticks):
            self.board.elapse(1)
            self.now += PERIOD
            self.core.tick(self.now)
            if self.core.state is not self.states[-1]:
                self.states.append(self.core.state)

    def until(self, state, ticks=POWER_UP_TICKS):
        for _ in range(ticks):
            if self.core.state is state:
                return self
            self.tick()
        pytest.fail(f"not {state.value} after {ticks} samples: {self.core.state.value} {self.core.fault!r}")

    def command(self, forces):
        self.core.command.receive(list(forces), self.now)

    def assert_safe(self):
        """What every fault path leaves on the board: zero duty, amplifiers disabled, brakes applied."""
        assert self.core.state is DriveState.FAULT
        assert not self.board.amplifiers_enabled and not self.board.brakes_released
        assert np.all(self.board.duty == 0.0) and np.all(self.board.forces() == 0.0)
        assert np.all(self.core.applied_forces == 0.0)


@pytest.fixture
def rig():
    """A fresh rig powered up to ENABLED (the power-up is run once per test: faults change it)."""
    return Rig().until(DriveState.ENABLED)


def test_power_up_calibrates_on_the_stops_homes_to_mid_stroke_then_serves(rig):
    assert rig.states == [DriveState.BRAKED, DriveState.CALIBRATING, DriveState.HOMING, DriveState.ENABLED]
    # The encoders count from power-on; calibration found where the sliders are: the plant's own positions.
    np.testing.assert_allclose(rig.core.positions(), rig.board.plant.joint_positions(), atol=2 * COUNT)
    np.testing.assert_allclose(rig.core.positions(), PARAMETERS.board.power_up.homing_position,
                               atol=PARAMETERS.board.power_up.homing_tolerance)
    assert rig.board.amplifiers_enabled and rig.board.brakes_released and not rig.board.watchdog_expired
    assert rig.board.expiration_states_set and rig.board.watchdog_timeout == PARAMETERS.board.limits.watchdog_timeout


def test_calibration_zeroes_a_slider_only_while_it_pushes_on_its_stop_at_the_current_limit():
    rig = Rig()
    limit = rig.core.scaling.force_limit(PARAMETERS.board.power_up.calibration_current)
    pushes = []
    while rig.core.state is DriveState.CALIBRATING:
        pushes.append(rig.core.applied_forces.copy())
        rig.tick()
    assert rig.core.state is DriveState.HOMING
    settle = round(PARAMETERS.board.power_up.settle_time / PERIOD)
    # Upper reference stop: the last settle_time of calibration pushed up at the full calibration current.
    np.testing.assert_allclose(pushes[-settle:], np.broadcast_to(limit, (settle, 6)), rtol=1e-12)
    assert np.any(np.abs(np.array(pushes[1:-settle])) < limit * (1 - 1e-9))  # the slow move itself pushed less


@pytest.mark.slow
def test_no_command_yet_means_zero_force_and_the_platform_sinks_to_its_stops(rig):
    rig.tick(2000)
    assert rig.core.state is DriveState.ENABLED
    assert np.all(rig.core.applied_forces == 0.0)
    np.testing.assert_allclose(rig.core.positions(), STOP, atol=2 * COUNT)


def test_a_command_is_applied_through_the_board_then_times_out_to_zero(rig):
    command = np.array([10.0, -20.0, 30.0, -40.0, 50.0, -60.0])
    rig.command(command)
    before = rig.core.applied_forces.copy()  # written at the sample before: acting until the next one
    rig.tick()
    # Through duty cycles of finite resolution: the plant gets the command to within one duty step.
    step = rig.core.scaling.newtons_per_duty / PARAMETERS.board.scaling.pwm_resolution
    np.testing.assert_allclose(rig.core.applied_forces, command, rtol=1e-12)
    assert np.all(np.abs(rig.board.forces() - command) <= step / 2 + 1e-9)
    # The effort a joint state reports is the force that acted until its sample: one sample behind.
    np.testing.assert_array_equal(rig.core.acted_forces, before)
    rig.tick()
    np.testing.assert_allclose(rig.core.acted_forces, command, rtol=1e-12)
    timeout_ticks = round(PARAMETERS.board.limits.command_timeout / PERIOD)
    rig.tick(timeout_ticks + 1)
    assert rig.core.state is DriveState.ENABLED  # a timeout is not a fault
    assert np.all(rig.core.applied_forces == 0.0) and np.all(rig.board.forces() == 0.0)
    assert rig.core.command.timeouts == 1


def test_force_saturates_at_the_current_limit(rig):
    rig.command([1e6, -1e6, 0.0, 0.0, 0.0, 0.0])
    rig.tick()
    scaling = PARAMETERS.board.scaling
    limit = scaling.current_limit[0] * scaling.torque_constant[0] / scaling.lead_radius[0]  # I k_t / r
    np.testing.assert_allclose(rig.core.applied_forces[:2], [limit, -limit], rtol=1e-12)


def test_a_slider_faster_than_the_speed_limit_gets_no_force_along_its_motion(rig):
    push = np.zeros(6)
    push[0] = -300.0  # upwards against gravity, fast
    limit = PARAMETERS.board.limits.speed_limit
    for _ in range(1000):
        rig.command(push)
        rig.tick()  # the force of this sample is decided on this sample's speed
        if abs(rig.core.velocities()[0]) > limit:
            assert rig.core.applied_forces[0] == 0.0 and rig.core.state is DriveState.ENABLED
            return
        assert rig.core.applied_forces[0] == push[0]
    pytest.fail("the slider never exceeded the speed limit")


@pytest.mark.slow
@pytest.mark.parametrize("slider", [0, 5])
def test_an_amplifier_fault_latches_safe_until_the_operator_resets(rig, slider):
    rig.command([5.0] * 6)
    rig.board.inject_amplifier_fault(slider)
    rig.tick()
    rig.assert_safe()
    assert rig.core.fault == f"amplifier {slider} fault"
    rig.board.amplifier_faults[:] = False  # the cause goes away: the fault stays latched
    rig.command([5.0] * 6)
    rig.tick(100)
    rig.assert_safe()
    rig.core.reset(rig.now)
    assert rig.core.state is DriveState.CALIBRATING and rig.board.amplifiers_enabled
    rig.until(DriveState.ENABLED)


def test_watchdog_expiry_sets_the_expiration_states_and_latches(rig):
    rig.command([5.0] * 6)
    rig.tick()
    rig.board.elapse(round(2 * PARAMETERS.board.limits.watchdog_timeout / PERIOD))  # the loop stalls
    assert rig.board.watchdog_expired and not rig.board.amplifiers_enabled  # the board's own doing
    rig.tick()
    rig.assert_safe()
    assert rig.core.fault == "watchdog expired"
    assert rig.core.board_errors > 0  # the protected board refused the fault path's writes: counted, not raised
    rig.core.reset(rig.now)
    assert not rig.board.watchdog_expired and rig.core.state is DriveState.CALIBRATING


def test_an_encoder_that_jumps_is_lost(rig):
    rig.board.inject_count_jump(3, 1e5)
    rig.tick()
    rig.assert_safe()
    assert rig.core.fault == "encoder 3 lost"


def test_a_slider_beyond_the_travel_latches():
    parameters = PARAMETERS.replace(board={"limits": {"travel_min": 0.15}})
    rig = Rig(parameters)
    rig.until(DriveState.ENABLED)
    push = np.zeros(6)
    push[2] = -200.0  # slider 2 towards the lower travel bound
    for _ in range(2000):
        if rig.core.state is DriveState.FAULT:
            break
        rig.command(push)
        rig.tick()
    rig.assert_safe()
    assert rig.core.fault == "slider 2 outside travel"
    assert rig.board.plant.joint_positions()[2] < 0.15 + 0.01


def test_sliders_of_a_side_closer_than_the_separation_latch():
    parameters = PARAMETERS.replace(board={"limits": {"min_slider_separation": 0.38}})
    rig = Rig(parameters)
    rig.until(DriveState.ENABLED)
    for _ in range(2000):
        if rig.core.state is DriveState.FAULT:
            break
        rig.command([0.0, 0.0, 0.0, 0.0, -150.0, -150.0])  # side 2's sliders towards each other
        rig.tick()
    rig.assert_safe()
    assert rig.core.fault == "side 2: sliders too close"
    q = rig.board.plant.joint_positions()
    assert q[4] + q[5] < 0.38


@pytest.mark.slow
def test_a_command_sent_before_the_fault_is_not_applied_after_the_reset(rig):
    rig.command([50.0] * 6)
    rig.board.inject_amplifier_fault(0)
    rig.tick()
    rig.board.amplifier_faults[:] = False
    rig.core.reset(rig.now)
    rig.until(DriveState.ENABLED)
    rig.tick()
    assert np.all(rig.core.applied_forces == 0.0)


def test_the_simulated_board_needs_a_board_section():
    with pytest.raises(ParameterError, match=r"hexapod\.board: missing section"):
        SimulatedBoard(load_parameters())


@pytest.mark.parametrize(("overlay", "message"), [
    ({"limits": {"watchdog_timeout": None}}, r"hexapod\.board\.limits\.watchdog_timeout: missing key"),
    ({"scaling": {"counts_per_metre": 409.6}}, r"hexapod\.board\.scaling\.counts_per_metre\[0\]: .*implausibly few"),
    ({"scaling": {"lead_radius": 1.59}}, r"hexapod\.board\.scaling\.lead_radius\[0\]: .*implausibly large"),
    ({"scaling": {"current_limit": 12.0}}, r"hexapod\.board\.scaling\.current_limit\[0\]: 12\.0 A exceeds amplifier_gain"),
    ({"power_up": {"homing_position": 0.5}}, r"hexapod\.board\.power_up\.homing_position: 0\.5 m is outside"),
    ({"channels": {"enable_channels": [8, 17, 18, 19, 20, 21]}}, r"enable_channels\[0\]: channel 8 is also direction_channels\[0\]"),
    ({"channels": {"brake_channels": [40]}}, r"hexapod\.board\.channels\.brake_channels\[0\]: channel 40 is not among digital_lines"),
    ({"channels": {"digital_lines": None}}, r"hexapod\.board\.channels\.digital_lines"),
    ({"channels": {"analog_outputs": None}}, r"hexapod\.board\.channels\.analog_outputs"),
])
def test_a_missing_or_implausible_board_value_is_refused_naming_the_key_and_the_file(tmp_path, overlay, message):
    board = {section: {key: value for key, value in keys.items() if value is not None} for section, keys in overlay.items()}
    document = {"extends": str(default_parameters_path("quanser_board.example.yaml")), "hexapod": {"board": board}}
    path = tmp_path / "board.yaml"
    if any(value is None for keys in overlay.values() for value in keys.values()):  # delete the key instead
        example = yaml.safe_load(default_parameters_path("quanser_board.example.yaml").read_text())
        for section, keys in overlay.items():
            for key in keys:
                del example["hexapod"]["board"][section][key]
        example["extends"] = str(default_parameters_path())
        document = example
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ParameterError, match=message) as raised:
        load_parameters(path)
    assert str(path) in str(raised.value)
