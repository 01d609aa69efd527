"""The Quanser board binding against a stand-in of ``quanser.hardware`` that records every call.

Call order (expiration states before the watchdog starts, commands served only after homing, safe
outputs on every fault path) and the scaling of force to PWM, with mixed polarities so that a sign
slip shows.
"""

import numpy as np
import pytest
from drive_helpers import EXAMPLE, board_overlay
from quanser_standin import COMMUNICATION_LOST, PWM_EXPIRATION_NOT_SUPPORTED, HILError, StandInPlant, hardware_module

from hexapod_control.drive.core import DriveCore, DriveState
from hexapod_control.drive.quanser_board import HIL_INFINITE, QuanserBoard
from hexapod_control.errors import BoardError, ParameterError

UPPER_STOP, LOWER_STOP, START = 0.30, 0.02, 0.17  # the stand-in's sliders [m]
BOARD = EXAMPLE.replace(
    board={"scaling": {"encoder_polarity": [1, -1, 1, -1, 1, -1], "motor_polarity": [-1, -1, 1, 1, -1, 1]},
           "levels": {"enable_active_high": False, "reverse_direction_high": False},
           **board_overlay(UPPER_STOP)},
).board
PERIOD = 1.0 / BOARD.limits.sample_rate
POWER_UP_SAMPLES = 8000


class Rig:
    """The core over the binding over the stand-in; ``prepare(card)`` may change the stand-in card first."""

    def __init__(self, prepare=None):
        self.plant = StandInPlant(BOARD, LOWER_STOP, UPPER_STOP, START, PERIOD)
        module, self.calls = hardware_module(BOARD, self.plant)
        self.board = QuanserBoard(BOARD, hil_module=module)
        self.board.open()
        if prepare is not None:
            prepare(self.board.card)
        self.core = DriveCore(self.board, BOARD)
        self.now = 0.0
        self.core.start(self.now)
        self.homed_at = None  # index in calls where ENABLED began

    def tick(self, samples=1):
        for _ in range(samples):
            self.now += PERIOD
            before = self.core.state
            self.core.tick(self.now)
            if before is DriveState.HOMING and self.core.state is DriveState.ENABLED:
                self.homed_at = len(self.calls)

    def until(self, state):
        for _ in range(POWER_UP_SAMPLES):
            if self.core.state is state:
                return self
            self.tick()
        pytest.fail(f"not {state.value}: {self.core.state.value} {self.core.fault!r}")

    def names(self, start=0):
        return [name for name, _ in self.calls[start:]]

    def writes(self, lines, start=0):
        """The values written to exactly ``lines`` by write_digital, from call ``start`` on."""
        return [arguments[2] for call, arguments in self.calls[start:]
                if call == "write_digital" and list(arguments[0]) == list(lines)]

    def duty_writes(self, start=0):
        """(PWM amplitudes, direction lines) of every sample's write, from call ``start`` on."""
        return [(arguments[9], arguments[10]) for call, arguments in self.calls[start:] if call == "write"]


@pytest.fixture
def rig():
    return Rig().until(DriveState.ENABLED)


def test_expiration_states_come_before_the_watchdog_and_the_amplifiers_after_it(rig):
    assert rig.board.pwm_expiration_set is True  # the stand-in accepts a PWM expiration state
    names = rig.names()
    start = names.index("watchdog_start")
    assert names.index("watchdog_set_pwm_expiration_state") < start
    assert names.index("watchdog_set_digital_expiration_state") < start
    analog = next(args for name, args in rig.calls if name == "watchdog_set_analog_expiration_state")
    assert names.index("watchdog_set_analog_expiration_state") < start
    assert analog == (list(BOARD.channels.analog_outputs), len(BOARD.channels.analog_outputs),
                      [0.0] * len(BOARD.channels.analog_outputs))  # 0 V: a Q8 board needs every output set
    expiration = next(args for name, args in rig.calls if name == "watchdog_set_digital_expiration_state")
    assert set(expiration[0]) == set(BOARD.channels.digital_lines) >= {
        *BOARD.channels.direction_channels, *BOARD.channels.enable_channels, *BOARD.channels.brake_channels}
    assert set(expiration[2]) == {2}  # TRISTATE: a Q8 board zeroes its outputs on expiry only so
    enable_line = int(BOARD.levels.enable_active_high)  # the level that enables (active low here)
    enables = [index for index, (name, args) in enumerate(rig.calls)
               if name == "write_digital" and list(args[0]) == list(BOARD.channels.enable_channels)
               and set(args[2]) == {enable_line}]
    assert enables and enables[0] > start > names.index("HIL")
    assert names.index("task_start") > start
    assert names.index("task_read") > names.index("task_start")


def test_commands_are_served_only_after_homing():
    command = [40.0, -40.0, 40.0, -40.0, 40.0, -40.0]
    fresh = Rig()
    for _ in range(POWER_UP_SAMPLES):  # a controller commanding all along
        fresh.core.command.receive(command, fresh.now)
        fresh.tick()
        if fresh.core.state is DriveState.ENABLED:
            break
    assert fresh.homed_at is not None
    fresh.core.command.receive(command, fresh.now)
    fresh.tick()
    np.testing.assert_allclose(fresh.core.applied_forces, command, rtol=1e-12)
    expected = list(np.abs(command) * np.array(BOARD.scaling.lead_radius) / np.array(BOARD.scaling.torque_constant)
                    / np.array(BOARD.scaling.amplifier_gain))
    first_served_call = next(i for i, (name, args) in enumerate(fresh.calls)
                             if name == "write" and np.allclose(args[9], expected, rtol=1e-12))
    assert first_served_call > fresh.homed_at


def test_force_to_pwm_scaling_and_direction_with_the_polarities(rig):
    command = np.array([100.0, -50.0, 25.0, -12.5, 0.0, 1e6])  # the last beyond the current limit
    rig.core.command.receive(command.tolist(), rig.now)
    rig.tick()
    amplitudes, directions = rig.duty_writes()[-1]
    scaling = BOARD.scaling
    newtons_per_duty = np.array(scaling.amplifier_gain) * np.array(scaling.torque_constant) / np.array(scaling.lead_radius)
    current = np.clip(command * np.array(scaling.lead_radius) / np.array(scaling.torque_constant),
                      -np.array(scaling.current_limit), np.array(scaling.current_limit))  # I = F r / k_t, saturated
    np.testing.assert_allclose(amplitudes, np.abs(current) / np.array(scaling.amplifier_gain), rtol=1e-12)
    motor_negative = current * np.array(scaling.motor_polarity) < 0.0
    assert list(directions) == [int(n == BOARD.levels.reverse_direction_high) for n in motor_negative]
    # The stand-in's motors get the forces the core reports (its own scaling and polarities).
    np.testing.assert_allclose(rig.plant.motor_forces(), rig.core.applied_forces, rtol=1e-12)
    np.testing.assert_allclose(rig.core.applied_forces[-1], scaling.current_limit[-1] / scaling.amplifier_gain[-1]
                               * newtons_per_duty[-1], rtol=1e-12)


@pytest.mark.parametrize("fault", ["amplifier", "watchdog", "encoder"])
def test_every_fault_path_zeroes_the_outputs_disables_the_amplifiers_and_applies_the_brakes(rig, fault):
    rig.core.command.receive([30.0] * 6, rig.now)
    rig.tick()
    mark = len(rig.calls)
    if fault == "amplifier":
        rig.plant.fault_lines[4] = 1
    elif fault == "watchdog":
        rig.plant.watchdog_expired = True
    else:
        rig.plant.count_jumps[1] = 1e5
    rig.tick()
    assert rig.core.state is DriveState.FAULT
    duty = rig.duty_writes(mark)
    assert duty and list(duty[-1][0]) == [0.0] * 6
    disabled = int(not BOARD.levels.enable_active_high)  # the level that disables (high here)
    assert [list(v) for v in rig.writes(BOARD.channels.enable_channels, mark)] == [[disabled] * 6]
    applied = int(not BOARD.levels.brake_release_high)
    assert [list(v) for v in rig.writes(BOARD.channels.brake_channels, mark)] == [
        [applied] * len(BOARD.channels.brake_channels)]
    if fault == "watchdog":  # the protected board refused them; each was still tried, the refusals kept
        assert rig.core.board_errors == 3
    else:
        assert not rig.plant.enabled.any() and not rig.plant.brakes_released and not rig.plant.amplitude.any()


def test_reset_clears_the_watchdog_and_writes_the_safe_outputs_at_once_before_powering_up_again(rig):
    rig.plant.watchdog_expired = True
    rig.tick()
    mark = len(rig.calls)
    rig.core.reset(rig.now)
    names = rig.names(mark)
    assert names.index("watchdog_clear") < names.index("watchdog_set_digital_expiration_state") < names.index(
        "watchdog_start")
    # A clear may restore the outputs from before the expiry: the next calls make them safe again.
    cleared = names.index("watchdog_clear")
    assert names[cleared + 1:cleared + 4] == ["write", "write_digital", "write_digital"]
    disabled, applied = int(not BOARD.levels.enable_active_high), int(not BOARD.levels.brake_release_high)
    assert list(rig.duty_writes(mark + cleared)[0][0]) == [0.0] * 6
    assert list(rig.writes(BOARD.channels.enable_channels, mark + cleared)[0]) == [disabled] * 6
    assert set(rig.writes(BOARD.channels.brake_channels, mark + cleared)[0]) == {applied}
    rig.until(DriveState.ENABLED)


def test_close_leaves_the_outputs_safe_and_releases_the_board(rig):
    mark = len(rig.calls)
    rig.core.close()
    names = rig.names(mark)
    assert names[-1] == "close" and "task_stop" in names and "watchdog_stop" in names
    assert not rig.plant.enabled.any() and not rig.plant.brakes_released
    assert rig.board.card is None


def test_close_after_a_watchdog_expiry_writes_the_safe_outputs_once_the_watchdog_is_cleared(rig):
    rig.core.command.receive([30.0] * 6, rig.now)
    rig.tick()
    rig.plant.watchdog_expired = True
    rig.tick()
    mark = len(rig.calls)
    rig.core.close()  # the refusals before the clear are expected: no error
    names = rig.names(mark)
    cleared = names.index("watchdog_clear")
    assert names[cleared + 1:cleared + 4] == ["write", "write_digital", "write_digital"]
    assert names.index("task_stop") > cleared and names[-1] == "close"
    assert not rig.plant.enabled.any() and not rig.plant.brakes_released and not rig.plant.amplitude.any()


def test_a_board_that_cannot_set_a_pwm_expiration_state_powers_up_on_its_tristated_enables():
    def not_supported(*arguments):
        raise HILError(-PWM_EXPIRATION_NOT_SUPPORTED)

    rig = Rig(prepare=lambda card: setattr(card, "_watchdog_set_pwm_expiration_state", not_supported))
    assert rig.board.pwm_expiration_set is False
    names = rig.names()
    assert names.index("watchdog_set_digital_expiration_state") < names.index("watchdog_start")
    rig.until(DriveState.ENABLED)


def test_any_other_refusal_of_the_pwm_expiration_state_latches_at_power_up():
    def refused(*arguments):
        raise HILError(-COMMUNICATION_LOST)

    rig = Rig(prepare=lambda card: setattr(card, "_watchdog_set_pwm_expiration_state", refused))
    assert rig.core.state is DriveState.FAULT
    assert rig.core.fault == "board error: watchdog_set_pwm_expiration_state: the board stopped answering"
    assert "watchdog_start" not in rig.names() and not rig.plant.enabled.any()


def test_a_failed_configuration_closes_the_board_it_opened():
    def refused(*arguments):
        raise HILError(-COMMUNICATION_LOST)

    plant = StandInPlant(BOARD, LOWER_STOP, UPPER_STOP, START, PERIOD)
    module, calls = hardware_module(BOARD, plant)
    board = QuanserBoard(BOARD, hil_module=module)
    original = module.HIL.__init__

    def prepared(card, *arguments):
        original(card, *arguments)
        card._set_pwm_mode = refused

    module.HIL.__init__ = prepared
    with pytest.raises(BoardError, match="set_pwm_mode: the board stopped answering"):
        board.open()
    assert [name for name, _ in calls][-1] == "close" and board.card is None
    board.close()  # nothing left to close: no call, no error
    assert [name for name, _ in calls][-1] == "close" and calls[-2][0] == "set_pwm_mode"


def test_an_api_without_hil_infinite_samples_until_stopped():
    plant = StandInPlant(BOARD, LOWER_STOP, UPPER_STOP, START, PERIOD)
    module, calls = hardware_module(BOARD, plant)
    del module.HIL.INFINITE  # Quanser's older Python API documents INFINITE without defining it
    board = QuanserBoard(BOARD, hil_module=module)
    board.open()
    board.start_sampling(BOARD.limits.sample_rate)
    assert next(args for name, args in calls if name == "task_start")[3] == HIL_INFINITE


def test_without_the_sdk_the_quanser_board_refuses_to_start_naming_it():
    with pytest.raises(ParameterError, match="quanser.hardware"):
        QuanserBoard(BOARD)


def test_a_board_that_fails_to_read_latches_a_fault_with_the_outputs_safe(rig):
    def unplugged(*arguments):
        raise HILError(-COMMUNICATION_LOST)

    rig.board.card._task_read = unplugged
    rig.tick()
    assert rig.core.state is DriveState.FAULT and rig.core.fault.startswith("board error: task_read")
    assert not rig.plant.enabled.any() and not rig.plant.brakes_released and not rig.plant.amplitude.any()
    rig.tick()  # still failing: stays latched, counted
    assert rig.core.state is DriveState.FAULT and rig.core.board_errors == 2


def test_a_sampling_task_that_stops_latches_a_fault_and_a_reset_samples_on_a_new_task(rig):
    rig.board.card._task_read = lambda *arguments: 0  # a stopped task: no sample (an overflow stops it)
    rig.tick()
    assert rig.core.state is DriveState.FAULT and rig.core.fault.startswith("board error: task_read: no sample")
    assert not rig.plant.enabled.any() and not rig.plant.brakes_released and not rig.plant.amplitude.any()
    del rig.board.card._task_read
    mark = len(rig.calls)
    rig.core.reset(rig.now)
    names = rig.names(mark)
    assert names.index("task_stop") < names.index("task_delete") < names.index("task_create_reader") < names.index(
        "task_start")
    stopped = next(args for name, args in rig.calls[mark:] if name == "task_stop")[0]
    assert stopped == "reader task 1" and rig.board.task == "reader task 2"
    rig.until(DriveState.ENABLED)


def test_the_sampling_buffer_holds_the_samples_of_one_watchdog_timeout(rig):
    created = next(args for name, args in rig.calls if name == "task_create_reader")
    assert created[0] >= BOARD.limits.watchdog_timeout * BOARD.limits.sample_rate


def test_a_board_that_refuses_the_watchdog_latches_at_power_up_and_a_reset_samples_on_one_task():
    refusals = iter([HILError(-COMMUNICATION_LOST)])  # the first watchdog_start only

    def watchdog_start(timeout):
        error = next(refusals, None)
        if error is not None:
            raise error

    rig = Rig(prepare=lambda card: setattr(card, "_watchdog_start", watchdog_start))
    assert rig.core.state is DriveState.FAULT and rig.core.fault == "board error: watchdog_start: the board stopped answering"
    assert "task_create_reader" not in rig.names() and not rig.plant.enabled.any()
    rig.tick()  # nothing to read yet: no call
    rig.core.reset(rig.now)
    rig.until(DriveState.ENABLED)
    assert rig.names().count("task_create_reader") == 1
    rig.plant.fault_lines[0] = 1
    rig.tick()
    rig.plant.fault_lines[0] = 0
    rig.core.reset(rig.now)
    rig.until(DriveState.ENABLED)
    names = rig.names()  # one task at a time: each reset deletes the task before it makes the next
    assert names.count("task_create_reader") == 2 == names.count("task_delete") + 1
    assert names.index("task_delete") < len(names) - 1 - names[::-1].index("task_create_reader")


def test_a_stand_in_whose_reload_and_read_return_nothing_still_powers_up():
    """Quanser's watchdog_reload and task_read return a flag and a count; an API double that returns
    None is read as 'not expired' and 'one sample', not as a fault."""
    def prepare(card):
        fill = card._task_read
        card._task_read = lambda *arguments: fill(*arguments) and None
        card._watchdog_reload = lambda: None

    Rig(prepare=prepare).until(DriveState.ENABLED)
