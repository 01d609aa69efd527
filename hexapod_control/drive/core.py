"""The driver core: the power-up state machine, then force commands to PWM, on any board.

States and rules (checked every sample, in this order; a rule that fires ends the sample):

==================  ==============================================  ==================================
state               rule                                            then
==================  ==============================================  ==================================
(start)             ``start()``: outputs zero, amplifiers           BRAKED
                    disabled, brakes applied
BRAKED              ``start()`` goes on: expiration states set,     CALIBRATING
                    then the watchdog started, then sampling
                    (afresh); then amplifiers enabled, brakes
                    released
any but FAULT       the board's watchdog had expired when the       FAULT "watchdog expired"
                    sample's reload came
any but FAULT       an amplifier's fault line is active             FAULT "amplifier k fault"
any but FAULT       an encoder moved faster than                    FAULT "encoder k lost"
                    ``limits.encoder_loss_speed`` in one sample
HOMING, ENABLED     a slider outside [travel_min, travel_max]       FAULT "slider k outside travel"
HOMING, ENABLED     q_2i + q_2i+1 < ``min_slider_separation``       FAULT "side i: sliders too close"
CALIBRATING,        not done within ``power_up.power_up_timeout``   FAULT "calibration/homing timed out"
HOMING
CALIBRATING         every slider at rest for ``settle_time`` while  HOMING (encoders zeroed there)
                    pushed towards its stop at the current limit
HOMING              every slider within ``homing_tolerance`` of     ENABLED
                    ``homing_position``, at rest, for settle_time
ENABLED             no valid command for ``command_timeout``        zero force (stays ENABLED)
ENABLED             a slider faster than ``speed_limit``            no force along its motion
any                 a board operation fails (a HIL error)           FAULT "board error: ..."
FAULT               ``reset()`` by the operator                     BRAKED, then ``start()`` again
==================  ==============================================  ==================================

Entering FAULT writes zero duty, disables the amplifiers and applies the brakes, each attempted
even if another fails (after a watchdog expiry the board refuses writes until cleared: its
expiration states already did the same). FAULT latches: only ``reset()`` leaves it, which clears
the watchdog and runs the whole power-up again (calibration included, since a lost encoder or a
watchdog expiry leaves the zero in doubt).

Forces become duty cycles as the lab guide gives it: motor torque tau = F r (r = lead / 2 pi),
current I = tau / k_t, duty = I / amplifier_gain, the current saturated at the state's limit
(``scaling.current_limit`` serving commands, lower ones while calibrating and homing). The force
reported (the joint state's effort) is the one that saturated current applies.

Calibration drives every slider slowly (``calibration_speed``, current-limited) onto its reference
stop; a slider at rest there for ``settle_time`` while pushing at ``calibration_current`` is zeroed:
its position is ``reference_position`` at the counts read then. Friction weaker than that current
only delays it; a jam stronger than it would be taken for the stop, which is why the bring-up
(doc/quanser_driver.md) checks the positions after calibration.
Homing then moves every slider along a ramp at ``homing_speed`` to ``homing_position`` with a PID
that holds the platform's weight. Commands are served from its end; before the first one the force
is zero.
"""

from __future__ import annotations

import enum
import math

import numpy as np

from hexapod_control.conventions import effort_array
from hexapod_control.drive.board import Board, BoardSample
from hexapod_control.errors import BoardError, InvalidInputError
from hexapod_control.model.board_parameters import BoardParameters

SLIDERS = 6  # the sliders of side i are q_2i and q_2i+1


class DriveState(enum.Enum):
    BRAKED = "braked"
    CALIBRATING = "calibrating"
    HOMING = "homing"
    ENABLED = "enabled"
    FAULT = "fault"


class CommandHold:
    """The latest valid effort command, applied for ``timeout`` seconds after it arrived.

    ``receive`` takes each command as the loop takes it and ``forces`` is asked at each tick; the
    command and its arrival time are kept together as one tuple.
    """

    def __init__(self, size: int, timeout: float):
        self.size = size
        self.timeout = timeout
        self.zero = np.zeros(size)
        self._latest: tuple[np.ndarray, float] | None = None  # (forces [N], monotonic arrival [s])
        self.received = 0  # every command, valid or not
        self.rejected = 0
        self.timeouts = 0  # times a held command expired
        self._active = False

    def receive(self, data, now: float) -> None:
        """Take a command's data arriving at ``now``; InvalidInputError (counted) if malformed."""
        self.received += 1
        try:
            forces = effort_array(data, self.size)
        except InvalidInputError:
            self.rejected += 1
            raise
        self._latest = (forces, now)

    def refuse(self, count: int = 1) -> None:
        """Count ``count`` commands refused before their values could be read (unreadable bytes, too
        large to hand over): received and rejected, never held."""
        self.received += count
        self.rejected += count

    @property
    def held(self) -> tuple[np.ndarray, float] | None:
        """The latest valid command and its arrival, or None."""
        return self._latest

    def held_elsewhere(self, received: int, latest: tuple[np.ndarray, float] | None, applied: bool) -> None:
        """What a loop in C did with this hold's commands meanwhile (ros/native_driver.py): it read
        ``received`` valid ones, holds ``latest``, and ``applied`` it at its ticks (before any timeout)."""
        self.received += received
        self._latest = latest
        if applied:
            self._active = True

    def applies(self, now: float) -> bool:
        """A held command is to be applied at ``now``: one is held and it has not timed out."""
        return self._latest is not None and now - self._latest[1] <= self.timeout

    def forces(self, now: float) -> tuple[np.ndarray, bool]:
        """(forces to apply at ``now``, whether they are a held command rather than zero)."""
        latest = self._latest
        active = self.applies(now)
        if self._active and not active:
            self.timeouts += 1
        self._active = active
        return (latest[0], True) if active else (self.zero, False)

    def clear(self) -> None:
        """Forget the held command (a command from before a fault is never applied after it)."""
        self._latest = None
        self._active = False


class ForceScaling:
    """Slider force [N] <-> signed duty cycle, and counts <-> slider position and speed."""

    def __init__(self, board: BoardParameters):
        scaling = board.scaling
        # newtons per unit duty: F = duty * gain * k_t / r, signed by the motor's polarity
        self.newtons_per_duty = (np.array(scaling.amplifier_gain) * np.array(scaling.torque_constant)
                                 / np.array(scaling.lead_radius))
        self.motor_polarity = np.array(scaling.motor_polarity, dtype=float)
        self.amplifier_gain = np.array(scaling.amplifier_gain)
        self.metres_per_count = np.array(scaling.encoder_polarity, dtype=float) / np.array(scaling.counts_per_metre)

    def duty(self, forces: np.ndarray, current_limit) -> tuple[np.ndarray, np.ndarray]:
        """(signed duty cycles, the forces they apply) for ``forces``, current saturated at ``current_limit`` [A]."""
        max_duty = np.asarray(current_limit) / self.amplifier_gain
        duty = np.clip(forces / self.newtons_per_duty, -max_duty, max_duty)
        return duty * self.motor_polarity, duty * self.newtons_per_duty

    def force_limit(self, current_limit) -> np.ndarray:
        """The force each slider gets at ``current_limit`` [A]."""
        return np.asarray(current_limit) / self.amplifier_gain * self.newtons_per_duty


class DriveCore:
    """The state machine of the module doc over ``board``; ``tick(now)`` once per board sample.

    ``now`` is the loop's monotonic time [s] (command ages, settle times, power-up timeout).
    """

    def __init__(self, board: Board, parameters: BoardParameters):
        self.board = board
        self.parameters = parameters
        self.limits = parameters.limits
        self.power_up = parameters.power_up
        self.scaling = ForceScaling(parameters)
        self.period = 1.0 / self.limits.sample_rate
        self.command = CommandHold(SLIDERS, self.limits.command_timeout)
        self.state = DriveState.BRAKED
        self.fault = ""  # why FAULT latched
        self.faults = 0  # FAULT entries since start
        self.board_errors = 0  # board operations refused (on a fault path, or a failing board)
        self.last_board_error = ""
        self.zero_counts: np.ndarray | None = None  # counts at the reference stop, once calibrated
        self.applied_forces = np.zeros(SLIDERS)  # the force the outputs written at the last sample apply
        # The force that acted until the last sample (written at the one before): a joint state's
        # effort, as a drive reports what it applied, so that the delay estimate sees the real delay.
        self.acted_forces = np.zeros(SLIDERS)
        self.commanded = False  # the last sample applied a held command (not the timeout's zero)
        self.sample: BoardSample | None = None
        self.sampling = False  # the board's clock samples the inputs (a read can be made)
        self._previous_counts: np.ndarray | None = None
        self._phase_start = 0.0
        self._rest_since = np.full(SLIDERS, math.nan)  # per slider: at rest (and on target) since
        self._ramp = np.zeros(SLIDERS)  # homing reference [m]
        self._integral = np.zeros(SLIDERS)  # homing error integral [m*s]
        self._push = np.zeros(SLIDERS)  # calibration's growing push towards the stop [N]
        self._last_tick = math.nan

    # ---------------------------------------------------------------- power-up
    def start(self, now: float) -> None:
        """From BRAKED: the power-up sequence up to the slow move of the calibration."""
        if self.state is not DriveState.BRAKED:
            raise InvalidInputError(f"the drive starts from {DriveState.BRAKED.value}, not {self.state.value}")
        board = self.board
        self._previous_counts = None
        self.zero_counts = None
        try:
            board.write_duty(np.zeros(SLIDERS))
            board.set_amplifiers(False)
            board.set_brakes(False)
            board.set_expiration_states()
            board.start_watchdog(self.limits.watchdog_timeout)
            # Afresh after a reset: a board error may have been its sampling task stopping.
            self.sampling = False
            board.start_sampling(self.limits.sample_rate)
            self.sampling = True
            board.set_amplifiers(True)
            board.set_brakes(True)
        except BoardError as error:
            self._refused(error)
            self._latch(f"board error: {error}")
            return
        self._enter(DriveState.CALIBRATING, now)

    def reset(self, now: float) -> str:
        """The operator's reset: from FAULT, clear the watchdog and power up again; the outcome."""
        if self.state is not DriveState.FAULT:
            return f"nothing to reset: the drive is {self.state.value}"
        cleared = self.fault
        self.board.clear_watchdog()
        self.fault = ""
        self.state = DriveState.BRAKED
        self.command.clear()
        self.start(now)
        return f"reset after '{cleared}': powering up again"

    def _enter(self, state: DriveState, now: float) -> None:
        self.state = state
        self._phase_start = now
        self._rest_since[:] = math.nan
        self._integral[:] = 0.0
        self._push[:] = 0.0

    # ---------------------------------------------------------------- the loop
    def tick(self, now: float) -> None:
        """Read a sample, check the rules, write the outputs of the state; a board error is a fault."""
        try:
            self._tick(now)
        except BoardError as error:
            self._refused(error)
            if self.state is not DriveState.FAULT:
                self._latch(f"board error: {error}")

    def _tick(self, now: float) -> None:
        if not self.sampling:
            return  # the power-up failed before the board's clock started: nothing to read
        sample = self.board.read()
        self.sample = sample
        self.acted_forces = self.applied_forces
        dt = self.period if math.isnan(self._last_tick) else max(now - self._last_tick, self.period)
        self._last_tick = now
        if self.state is DriveState.BRAKED:
            return
        expired = self.board.reload_watchdog()  # also in FAULT, whose outputs are safe already
        if self.state is DriveState.FAULT:
            self._previous_counts = sample.counts.copy()
            return
        reason = self._violation(sample, expired, dt, now)
        self._previous_counts = sample.counts.copy()
        self.commanded = False
        if reason:
            self._latch(reason)
            return
        if self.state is DriveState.CALIBRATING:
            forces, current = self._calibrate(sample, dt, now)
        elif self.state is DriveState.HOMING:
            forces, current = self._home(dt, now)
        else:
            forces, current = self._serve(now)
        duty, self.applied_forces = self.scaling.duty(forces, current)
        self.board.write_duty(duty)

    def _violation(self, sample: BoardSample, watchdog_expired: bool, dt: float, now: float) -> str:
        if watchdog_expired:
            return "watchdog expired"
        if sample.amplifier_faults.any():
            return f"amplifier {int(np.flatnonzero(sample.amplifier_faults)[0])} fault"
        if self._previous_counts is not None:
            step = np.abs((sample.counts - self._previous_counts) * self.scaling.metres_per_count)
            lost = step > self.limits.encoder_loss_speed * dt
            if lost.any():
                return f"encoder {int(np.flatnonzero(lost)[0])} lost"
        if self.state in (DriveState.CALIBRATING, DriveState.HOMING) and \
                now - self._phase_start > self.power_up.power_up_timeout:
            return f"{self.state.value} timed out"
        if self.state in (DriveState.HOMING, DriveState.ENABLED):
            q = self.positions()
            outside = (q < self.limits.travel_min) | (q > self.limits.travel_max)
            if outside.any():
                return f"slider {int(np.flatnonzero(outside)[0])} outside travel"
            separation = q[0::2] + q[1::2]
            close = separation < self.limits.min_slider_separation
            if close.any():
                return f"side {int(np.flatnonzero(close)[0])}: sliders too close"
        return ""

    def _latch(self, reason: str) -> None:
        """FAULT: zero duty, amplifiers disabled, brakes applied; each tried whatever the others do."""
        self.state, self.fault = DriveState.FAULT, reason
        self.faults += 1
        self.applied_forces = np.zeros(SLIDERS)
        self.command.clear()
        for operation in (lambda: self.board.write_duty(np.zeros(SLIDERS)),
                          lambda: self.board.set_amplifiers(False),
                          lambda: self.board.set_brakes(False)):
            try:
                operation()
            except BoardError as error:
                self._refused(error)

    def _refused(self, error: BoardError) -> None:
        self.board_errors += 1
        self.last_board_error = str(error)

    # ---------------------------------------------------------------- states
    def _calibrate(self, sample: BoardSample, dt: float, now: float) -> tuple[np.ndarray, float]:
        power_up = self.power_up
        direction = 1.0 if power_up.reference_stop == "upper" else -1.0
        speed = sample.count_rates * self.scaling.metres_per_count
        error = direction * power_up.calibration_speed - speed
        limit = self.scaling.force_limit(power_up.calibration_current)
        # The push grows while a slider is slower than the calibration speed (by the damping's force
        # every settle_time), so a slider held by friction or by its stop ends up pushing at the
        # current limit: only then is it taken to be on the stop, never merely at rest.
        self._push = np.clip(self._push + power_up.calibration_damping * error * dt / power_up.settle_time, -limit, limit)
        forces = power_up.calibration_damping * error + self._push
        on_stop = (np.abs(speed) < power_up.rest_speed) & (direction * forces >= limit)
        self._settle(on_stop, now)
        if self._settled(now):
            self.zero_counts = sample.counts.copy()
            self._ramp = self.positions()
            self._enter(DriveState.HOMING, now)
        return forces, power_up.calibration_current

    def _home(self, dt: float, now: float) -> tuple[np.ndarray, float]:
        power_up = self.power_up
        q, qd = self.positions(), self.velocities()
        step = power_up.homing_speed * dt
        self._ramp += np.clip(power_up.homing_position - self._ramp, -step, step)
        error = self._ramp - q
        self._integral += error * dt
        forces = power_up.homing_stiffness * error - power_up.homing_damping * qd + power_up.homing_integral * self._integral
        # The integral stops growing where the current saturates, so it does not wind up.
        saturated = np.abs(forces) > self.scaling.force_limit(power_up.homing_current)
        self._integral -= np.where(saturated, error * dt, 0.0)
        on_target = (np.abs(power_up.homing_position - q) < power_up.homing_tolerance) & (np.abs(qd) < power_up.rest_speed)
        self._settle(on_target, now)
        if self._settled(now):
            self.command.clear()  # a command sent before the drive served is not applied now
            self._enter(DriveState.ENABLED, now)
        return forces, power_up.homing_current

    def _serve(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        forces, self.commanded = self.command.forces(now)
        qd = self.velocities()
        too_fast = np.abs(qd) > self.limits.speed_limit
        along_motion = forces * qd > 0.0
        return np.where(too_fast & along_motion, 0.0, forces), np.array(self.parameters.scaling.current_limit)

    def _settle(self, condition: np.ndarray, now: float) -> None:
        self._rest_since = np.where(condition, np.where(np.isnan(self._rest_since), now, self._rest_since), math.nan)

    def _settled(self, now: float) -> bool:
        return bool(np.all(now - self._rest_since >= self.power_up.settle_time))

    # ---------------------------------------------------------------- what the node publishes
    @property
    def calibrated(self) -> bool:
        return self.zero_counts is not None

    def positions(self) -> np.ndarray:
        """Slider positions from the encoders [m] (calibrated only)."""
        return (self.power_up.reference_position
                + (self.sample.counts - self.zero_counts) * self.scaling.metres_per_count)

    def velocities(self) -> np.ndarray:
        """Slider speeds from the encoders' velocity channels [m/s]."""
        return self.sample.count_rates * self.scaling.metres_per_count

    def close(self) -> None:
        """Outputs safe and the board released (on shutdown)."""
        if self.state is not DriveState.FAULT:
            self._latch("shut down")
        self.board.close()
