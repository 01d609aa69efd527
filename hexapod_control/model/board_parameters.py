"""The ``board:`` section of a parameters file: every constant of the drive side, none defaulted.

A drive of the robot (hexapod_control/drive) reads the encoders and the amplifiers' fault lines
through a data-acquisition board, and drives each slider's motor by PWM through an amplifier. The
numbers that tie these to metres and newtons belong to one robot's wiring and hardware, which no
public document gives (board model, channels, counts per metre, polarities, current scaling,
stroke). So every key below is required: a drive refuses to start while one is missing or
implausible, naming the key and the file. ``config/quanser_board.example.yaml`` holds an example
of the section, with how to measure each value; doc/quanser_driver.md is the bring-up procedure.

Conventions: entry k of a list of six is slider q_k (``ros.joint_names`` order). Positions are the
slider coordinates of the model (metres from the base corner), forces act along them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, Strict, model_validator

from hexapod_control.model import parameters as schema
from hexapod_control.model.parameters import (
    AtLeastOne,
    Length,
    Name,
    Number,
    Positive,
    PositiveVector6,
    _broadcast,
    _distinct,
    _Invalid,
    _Section,
)

# A channel number of the board (zero-based, as the HIL API numbers them).
Channel = Annotated[int, Strict(), Field(ge=0)]
Channels6 = Annotated[tuple[Channel, ...], Field(min_length=6, max_length=6)]
Sign = Literal[-1, 1]

ReferenceStop = Literal["lower", "upper"]

# A duty cycle can never exceed 1: an amplifier gain below its current limit is a unit slip.
FULL_DUTY = 1.0
# Fewer than one count per millimetre is counts per millimetre or per revolution, not per metre.
_MIN_COUNTS_PER_METRE = 1000.0
# A lead screw's r = lead / (2 pi) of more than 5 cm is a lead, or millimetres, not r in metres.
_MAX_LEAD_RADIUS_M = 0.05


def _plausible_counts(value: float) -> float:
    if value < _MIN_COUNTS_PER_METRE:
        raise ValueError(f"{value!r} counts/m is implausibly few: counts per metre of slider travel")
    return value


def _plausible_radius(value: float) -> float:
    if value > _MAX_LEAD_RADIUS_M:
        raise ValueError(f"{value!r} m is implausibly large for r = lead / (2 pi) in metres")
    return value


def _six(entry) -> object:
    """Six entries of type ``entry``; one number in the file stands for all six."""
    return Annotated[tuple[entry, ...], Field(min_length=6, max_length=6), _broadcast(6)]


CountsPerMetre6 = _six(Annotated[Positive, AfterValidator(_plausible_counts)])
LeadRadius6 = _six(Annotated[Positive, AfterValidator(_plausible_radius)])
Signs6 = _six(Sign)


def _distinct_channels(*names: str):
    """A check that the channel lists ``names`` hold no channel twice, within or across them."""

    def check(section: BoardChannels) -> BoardChannels:
        seen: dict[int, str] = {}
        for name in names:
            for index, channel in enumerate(getattr(section, name)):
                if channel in seen:
                    raise _Invalid(f"{name}[{index}]", f"channel {channel} is also {seen[channel]}")
                seen[channel] = f"{name}[{index}]"
        return section

    return check


class BoardChannels(_Section):
    """Which channel of the board carries each signal."""

    encoder_channels: Annotated[Channels6, _distinct] = Field(description="encoder input of each slider")
    velocity_channels: Annotated[Channels6, _distinct] = Field(
        description="'other' input holding each encoder's velocity in counts/s (a Q8-USB: 14000 + encoder channel)"
    )
    pwm_channels: Annotated[Channels6, _distinct] = Field(description="PWM output (amplitude) of each amplifier")
    direction_channels: Channels6 = Field(description="digital output setting each amplifier's direction")
    enable_channels: Channels6 = Field(description="digital output enabling each amplifier")
    brake_channels: Annotated[tuple[Channel, ...], Field(min_length=1)] = Field(
        description="digital outputs releasing the brakes (one or more lines)"
    )
    fault_channels: Annotated[Channels6, _distinct] = Field(description="digital input of each amplifier's fault line")
    analog_outputs: Annotated[tuple[Channel, ...], _distinct] = Field(
        description="every analog output of the board ([] if it has none): the drive uses none, and sets each to 0 V "
                    "on a watchdog expiry (a Q8-series board starts its watchdog only when every analog and digital "
                    "output has an expiration state)"
    )
    digital_lines: Annotated[tuple[Channel, ...], Field(min_length=1), _distinct] = Field(
        description="every digital line of the board: each goes tristate on a watchdog expiry; the direction, enable, "
                    "brake and fault channels are among them"
    )

    @model_validator(mode="after")
    def _outputs_distinct(self) -> BoardChannels:
        return _distinct_channels("direction_channels", "enable_channels", "brake_channels")(self)

    @model_validator(mode="after")
    def _lines_on_the_board(self) -> BoardChannels:
        for name in ("direction_channels", "enable_channels", "brake_channels", "fault_channels"):
            for index, channel in enumerate(getattr(self, name)):
                if channel not in self.digital_lines:
                    raise _Invalid(f"{name}[{index}]", f"channel {channel} is not among digital_lines")
        return self


class BoardLevels(_Section):
    """The logic level that means 'on' for each kind of digital line (true: high)."""

    enable_active_high: Annotated[bool, Strict()] = Field(description="an amplifier is enabled by a high line")
    brake_release_high: Annotated[bool, Strict()] = Field(description="the brakes release on a high line")
    fault_active_high: Annotated[bool, Strict()] = Field(description="a high fault line means an amplifier fault")
    reverse_direction_high: Annotated[bool, Strict()] = Field(
        description="a high direction line drives the motor in its negative direction"
    )


class BoardScaling(_Section):
    """From counts to metres and from newtons to PWM duty cycle."""

    counts_per_metre: CountsPerMetre6 = Field(description="encoder counts per metre of slider travel [1/m]")
    encoder_polarity: Signs6 = Field(description="+1 if counts grow as q grows, else -1")
    motor_polarity: Signs6 = Field(description="+1 if a positive duty cycle pushes q up, else -1")
    lead_radius: LeadRadius6 = Field(
        description="r = lead / (2 pi): motor torque tau = F r [m]"
    )
    torque_constant: PositiveVector6 = Field(description="k_t: motor torque per ampere [N*m/A]")
    amplifier_gain: PositiveVector6 = Field(description="motor current at full duty cycle [A]")
    current_limit: PositiveVector6 = Field(description="the drive never asks for more motor current than this [A]")
    pwm_frequency: Positive = Field(description="PWM carrier frequency [Hz]")
    pwm_resolution: AtLeastOne = Field(description="distinct duty-cycle steps from 0 to full duty")

    @model_validator(mode="after")
    def _limit_reachable(self) -> BoardScaling:
        for slider, (limit, gain) in enumerate(zip(self.current_limit, self.amplifier_gain)):
            if limit > gain * FULL_DUTY:
                raise _Invalid(f"current_limit[{slider}]", f"{limit} A exceeds amplifier_gain {gain} A (full duty)")
        return self


class BoardLimits(_Section):
    """What the drive enforces itself, whatever the commands."""

    sample_rate: Positive = Field(description="rate of the board clock that paces the loop [Hz]")
    watchdog_timeout: Positive = Field(description="the board disables its outputs when not reloaded for this [s]")
    command_timeout: Positive = Field(description="zero force when the last command is older than this [s]")
    speed_limit: Positive = Field(description="a slider faster than this gets no force along its motion [m/s]")
    encoder_loss_speed: Positive = Field(
        description="a count change between two samples faster than this is a lost encoder, not motion [m/s]"
    )
    travel_min: Number = Field(description="a position below this is a travel violation [m]")
    travel_max: Length = Field(description="a position above this is a travel violation [m]")
    min_slider_separation: Length = Field(description="q_{2i} + q_{2i+1} below this is a separation violation [m]")

    @model_validator(mode="after")
    def _consistent(self) -> BoardLimits:
        if self.travel_min >= self.travel_max:
            raise _Invalid("travel_min", f"{self.travel_min} m must be below travel_max {self.travel_max} m")
        if self.watchdog_timeout <= 1.0 / self.sample_rate:
            raise _Invalid("watchdog_timeout", f"{self.watchdog_timeout} s must exceed one sample period")
        if self.command_timeout <= 1.0 / self.sample_rate:
            raise _Invalid("command_timeout", f"{self.command_timeout} s must exceed one sample period")
        if self.encoder_loss_speed <= self.speed_limit:
            raise _Invalid("encoder_loss_speed", f"{self.encoder_loss_speed} m/s must exceed speed_limit")
        return self


class PowerUpSettings(_Section):
    """Calibration (each encoder zeroed at its reference stop) and homing to mid-stroke."""

    reference_stop: ReferenceStop = Field(description="the stop each slider is driven to for calibration")
    reference_position: Number = Field(description="the slider position at that stop [m]")
    calibration_speed: Positive = Field(description="speed of the slow move to the stop [m/s]")
    calibration_current: Positive = Field(description="motor current limit while calibrating [A]")
    calibration_damping: Positive = Field(description="force per speed error of the slow move [N*s/m]")
    settle_time: Positive = Field(description="at rest this long, a slider is on its stop or homed [s]")
    rest_speed: Positive = Field(description="a slider slower than this is at rest [m/s]")
    homing_position: Length = Field(description="mid-stroke: where homing leaves every slider [m]")
    homing_speed: Positive = Field(description="speed of the homing move [m/s]")
    homing_current: Positive = Field(description="motor current limit while homing [A]")
    homing_stiffness: Positive = Field(description="position gain of the homing move [N/m]")
    homing_damping: Positive = Field(description="velocity gain of the homing move [N*s/m]")
    homing_integral: Positive = Field(description="integral gain holding the platform's weight [N/(m*s)]")
    homing_tolerance: Positive = Field(description="homed when every slider is this close to homing_position [m]")
    power_up_timeout: Positive = Field(description="calibration or homing not done within this is a fault [s]")


class BoardParameters(_Section):
    """The ``board:`` section: one robot's board, wiring and drive limits (see the module doc)."""

    board_type: Name = Field(description="the HIL board type, e.g. q8_usb")
    board_identifier: Name = Field(description="which board of that type, e.g. 0")
    channels: BoardChannels
    levels: BoardLevels
    scaling: BoardScaling
    limits: BoardLimits
    power_up: PowerUpSettings

    @model_validator(mode="after")
    def _power_up_inside_travel(self) -> BoardParameters:
        limits, power_up = self.limits, self.power_up
        for key in ("reference_position", "homing_position"):
            value = getattr(power_up, key)
            if not limits.travel_min <= value <= limits.travel_max:
                raise _Invalid(f"power_up.{key}", f"{value} m is outside limits.travel [{limits.travel_min}, "
                                                  f"{limits.travel_max}] m")
        for key in ("calibration_current", "homing_current"):
            if getattr(power_up, key) > min(self.scaling.current_limit):
                raise _Invalid(f"power_up.{key}", f"{getattr(power_up, key)} A exceeds scaling.current_limit")
        if power_up.calibration_speed >= limits.speed_limit or power_up.homing_speed >= limits.speed_limit:
            raise _Invalid("power_up.calibration_speed", "the power-up moves must be slower than limits.speed_limit")
        return self


# The parameters schema names this section by a forward reference: resolve it (the package
# hexapod_control.model imports this module, so any use of the schema finds it resolved).
schema.HexapodParameters.model_rebuild(_types_namespace={"BoardParameters": BoardParameters})
schema._Document.model_rebuild(force=True)
