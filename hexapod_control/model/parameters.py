"""The one parameters object of the package: a declared schema of the whole YAML file, validated at load.

Every section of ``config/hexapod.yaml`` is a frozen pydantic model below. Types, units (in the
field descriptions), ranges, choices and the few checks across fields are stated here once; the
modules that use a section read its typed model and check nothing themselves. :func:`load_parameters`
validates the whole file at once, so a typo in any section fails at load rather than when the
section's consumer first runs. Errors are one line, ``<file>: hexapod.<key.path>: <message>``,
because a lab edits these files by hand.

A file may extend another: ``extends: hexapod.yaml`` (relative to the file) loads that base, merges
the file's ``hexapod:`` tree onto it (mappings merge key by key, lists and scalars replace) and
validates the merged tree, so a variant holds only what differs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    model_validator,
)

from hexapod_control.errors import InvalidInputError, ParameterError

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
ROOT_KEY = "hexapod"
EXTENDS_KEY = "extends"
IN_MEMORY = "<in memory>"
# libyaml's loader where PyYAML has it: the same documents, about ten times faster than the pure
# Python one (every test, node and command loads the parameters).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Plausibility windows that catch wrong units (mm for m, kg*cm^2 for kg*m^2), not design limits.
_MAX_LENGTH_M = 5.0
_MAX_MASS_KG = 100.0
_MAX_BODY_RADIUS_M = 1.0  # no part of the robot reaches farther than this from its centre of mass


class _Invalid(ValueError):
    """A failed check across fields, raised at ``key`` (dotted, relative to the model that raised it)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


# ------------------------------------------------------------------------------------------ field types
def _plausible_length(value: float) -> float:
    if value > _MAX_LENGTH_M:
        raise ValueError(f"{value!r} m is implausibly large: lengths are in metres")
    return value


def _plausible_mass(value: float) -> float:
    if value > _MAX_MASS_KG:
        raise ValueError(f"{value!r} kg is implausibly large: masses are in kg")
    return value


def _broadcast(size: int) -> BeforeValidator:
    def broadcast(value: Any) -> Any:
        # One number in the file stands for all entries (the same gain for every joint).
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return [value] * size
        return value

    return BeforeValidator(broadcast)


def _distinct(values: tuple) -> tuple:
    if len(set(values)) != len(values):
        raise ValueError(f"entries must be distinct, got {list(values)}")
    return values


# Strict: a bool or a string in the file is an error, not a number (ints are fine for floats).
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Positive = Annotated[Number, Field(gt=0.0)]
NonNegative = Annotated[Number, Field(ge=0.0)]
Length = Annotated[Positive, AfterValidator(_plausible_length)]
Count = Annotated[int, Strict(), Field(ge=0)]
AtLeastOne = Annotated[int, Strict(), Field(ge=1)]
Name = Annotated[str, Strict(), Field(min_length=1)]
Vector6 = Annotated[tuple[Number, ...], Field(min_length=6, max_length=6), _broadcast(6)]
PositiveVector6 = Annotated[tuple[Positive, ...], Field(min_length=6, max_length=6), _broadcast(6)]
NonNegativeVector6 = Annotated[tuple[NonNegative, ...], Field(min_length=6, max_length=6), _broadcast(6)]

Waveform = Literal["sin", "cos"]
AntiWindup = Literal["conditional_integration", "none"]
GainSet = Literal["robot", "simulated_plant"]
DelayPredictor = Literal["model", "none"]
EmbeddedIntegrator = Literal["semi_implicit_euler", "rk4"]
# smooth: F_c tanh(q_d / v_s) always; stick_slip: a slider slower than v_s sticks until static_friction is exceeded.
PlantFriction = Literal["smooth", "stick_slip"]
MujocoIntegrator = Literal["Euler", "implicit", "implicitfast", "RK4"]
MujocoSolver = Literal["Newton", "CG", "PGS"]
StorageFormat = Literal["mcap", "sqlite3"]
MatchingMethod = Literal["interpolate", "latest"]
# The package's topics by role, as recording.topics names them; conventions.py gives each its
# default name (TOPICS) and message type (MESSAGE_TYPES). The model imports nothing above it.
TopicKey = Literal[
    "joint_states", "reference", "platform_pose", "platform_twist", "passive_joint_states",
    "description_joint_states", "effort_commands", "predicted_forces", "force_residual", "feedforward_forces",
    "diagnostics", "clock",
]

GAIN_SETS = get_args(GainSet)
STORAGE_FORMATS = get_args(StorageFormat)
MATCHING_METHODS = get_args(MatchingMethod)


class _Section(BaseModel):
    """One mapping of the file: every key declared, none extra, immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ------------------------------------------------------------------------------------------ robot
class Geometry(_Section):
    base_side: Length = Field(description="L_B: side of the base triangle T1T2T3 [m]")
    leg_length: Length = Field(description="L: length of every leg D->P [m]")
    platform_offset: Length = Field(description="H_PQ: from the P1P2P3 plane to the platform frame F along z_F [m]")
    platform_com_offset: Length = Field(description="H*: from the centroid of P1P2P3 to the platform centre of mass [m]")
    pu_part1_com_offset: Length = Field(description="l_c1: below D_k along -Z0 to the PU part-1 centre of mass [m]")
    s_part2_com_offset: Length = Field(description="l_c2: from P_i along z_F to the S part-2 centre of mass [m]")

    @property
    def platform_side(self) -> float:
        """L_P = L_B / 2: side of the rigid triangle P1P2P3."""
        return self.base_side / 2.0

    @property
    def side_offset(self) -> float:
        """d = -L_B / (2 sqrt 3): Y coordinate of the side midpoint B_i in its side frame."""
        return -self.base_side / (2.0 * math.sqrt(3.0))


class RigidBody(_Section):
    mass: Annotated[Positive, AfterValidator(_plausible_mass)] = Field(description="[kg]")
    inertia: Annotated[tuple[Positive, ...], Field(min_length=3, max_length=3)] = Field(
        description="principal moments (Ixx, Iyy, Izz) in the body's own frame [kg*m^2]"
    )

    @model_validator(mode="after")
    def _physical_inertia(self) -> RigidBody:
        moments = list(self.inertia)
        # A body of this mass within a 1 m sphere cannot exceed m * (1 m)^2: catches kg*cm^2.
        if max(moments) > self.mass * _MAX_BODY_RADIUS_M**2:
            raise _Invalid("inertia", f"{moments} is implausible for {self.mass} kg: inertias are in kg*m^2")
        ixx, iyy, izz = moments
        if ixx + iyy < izz or iyy + izz < ixx or izz + ixx < iyy:
            raise _Invalid("inertia", f"{moments} violates the triangle inequality")
        return self


class Bodies(_Section):
    platform: RigidBody
    leg: RigidBody = Field(description="leg frame with the leg along Y")
    pu_part1: RigidBody
    pu_part2: RigidBody
    s_part1: RigidBody
    s_part2: RigidBody


class Limits(_Section):
    actuator_position_min: Number = Field(description="lower end of every slider's travel [m]")
    actuator_position_max: Length = Field(description="upper end of every slider's travel [m]")
    min_slider_separation: Length = Field(
        description="lower bound on q_{2i-2} + q_{2i-1}: below it the two carriages of a side touch [m]"
    )
    actuator_speed_max: Positive = Field(description="[m/s]")
    actuator_force_max: Positive = Field(description="[N]")

    @model_validator(mode="after")
    def _ordered(self) -> Limits:
        if self.actuator_position_min >= self.actuator_position_max:
            raise _Invalid(
                "actuator_position_min",
                f"{self.actuator_position_min} m must be below actuator_position_max {self.actuator_position_max} m",
            )
        return self


class ActuatorSettings(_Section):
    """The drive of each slider (motor and lead screw) as seen on the slider, entry k = actuator q_k.

    The model adds M_bar += diag(reflected_inertia) and the friction force (model/actuators.py)
    viscous_friction q_dot + coulomb_friction tanh(q_dot / coulomb_smoothing_speed), with the lead
    screw's terms when set: Coulomb friction by direction (coulomb_asymmetry), a Stribeck hump
    (static_friction over stribeck_speed) and a viscous ripple with the screw position. All zero
    is the rigid-body model exactly; zero asymmetry, Stribeck speed and ripple the symmetric model.
    """

    reflected_inertia: NonNegativeVector6 = Field(description="rotor (and screw) inertia through the lead, J (2 pi / lead)^2 [kg]")
    viscous_friction: NonNegativeVector6 = Field(description="b: force per slider speed [N*s/m]")
    coulomb_friction: NonNegativeVector6 = Field(description="F_c: dry friction force while sliding [N]")
    coulomb_smoothing_speed: PositiveVector6 = Field(
        description="v_s of the smooth Coulomb law F_c tanh(q_dot / v_s); a stick_slip plant sticks below it [m/s]"
    )
    static_friction: NonNegativeVector6 = Field(
        description="F_s >= F_c: breakaway force; the smooth law's Stribeck level where stribeck_speed > 0, "
        "and a stick_slip plant's breakaway [N]"
    )
    coulomb_asymmetry: Vector6 = Field(
        description="A, |A| <= F_c: Coulomb friction F_c + A moving up (q_dot > 0), F_c - A moving down [N]"
    )
    stribeck_speed: NonNegativeVector6 = Field(
        description="v_st of the Stribeck hump (F_s - F_c) exp(-(q_dot / v_st)^2); 0 = no hump in the smooth law [m/s]"
    )
    viscous_ripple_cos: Vector6 = Field(
        description="b_c: viscous friction b + b_c cos(2 pi q / p) + b_s sin(2 pi q / p) [N*s/m]"
    )
    viscous_ripple_sin: Vector6 = Field(description="b_s of that ripple [N*s/m]")
    viscous_ripple_period: Length = Field(description="p of that ripple: the screw's lead [m]")
    plant_friction: PlantFriction = Field(
        description="simulation only, the embedded plant's friction law: smooth (the model's) or stick_slip"
    )
    continuous_force: PositiveVector6 = Field(description="motor continuous torque through the lead [N]")
    peak_force: PositiveVector6 = Field(description="motor peak torque through the lead [N]")
    rated_speed: PositiveVector6 = Field(description="motor rated speed through the lead [m/s]")

    @model_validator(mode="after")
    def _ordered(self) -> ActuatorSettings:
        for slider, (static, coulomb) in enumerate(zip(self.static_friction, self.coulomb_friction)):
            if static < coulomb:
                raise _Invalid(f"static_friction[{slider}]", f"{static} N is below coulomb_friction {coulomb} N")
        for slider, (asymmetry, coulomb) in enumerate(zip(self.coulomb_asymmetry, self.coulomb_friction)):
            if abs(asymmetry) > coulomb:
                raise _Invalid(f"coulomb_asymmetry[{slider}]", f"|{asymmetry}| N exceeds coulomb_friction {coulomb} N")
        for slider, (cos, sin, viscous) in enumerate(zip(self.viscous_ripple_cos, self.viscous_ripple_sin,
                                                         self.viscous_friction)):
            if math.hypot(cos, sin) > viscous:
                raise _Invalid(f"viscous_ripple_cos[{slider}]",
                               f"the ripple's amplitude {math.hypot(cos, sin):g} N*s/m exceeds viscous_friction {viscous}")
        for slider, (peak, continuous) in enumerate(zip(self.peak_force, self.continuous_force)):
            if peak < continuous:
                raise _Invalid(f"peak_force[{slider}]", f"{peak} N is below continuous_force {continuous} N")
        return self

    @property
    def rigid(self) -> bool:
        """No inertia and no friction (a Stribeck hump counts even without Coulomb friction): the rigid-body model."""
        hump = any(speed > 0.0 and static > 0.0 for speed, static in zip(self.stribeck_speed, self.static_friction))
        return not any(self.reflected_inertia) and not any(self.viscous_friction) and not any(self.coulomb_friction) \
            and not hump

    @property
    def symmetric(self) -> bool:
        """No asymmetry, Stribeck hump or ripple: J q_dd + b q_dot + F_c tanh(q_dot / v_s) alone."""
        return not (any(self.coulomb_asymmetry) or any(self.stribeck_speed) or any(self.viscous_ripple_cos)
                    or any(self.viscous_ripple_sin))


# ------------------------------------------------------------------------------------------ trajectories
class OperationalSpaceSettings(_Section):
    """xi_k = xi_home_k + s(t) (c_k w_k(omega t) - o_k), s = 1 - exp(-kappa t^3), w_k = sin or cos (thesis 6.5)."""

    ramp_rate: Positive = Field(description="kappa [s^-3]")
    angular_frequency: Number = Field(description="omega [rad/s]")
    amplitudes: Vector6 = Field(description="c_1..c_6 in the order (x, y, z, lambda, mu, nu) [m, m, m, rad, rad, rad]")
    waveforms: Annotated[tuple[Waveform, ...], Field(min_length=6, max_length=6)] = Field(
        description="w_k per axis: sin or cos"
    )
    offsets: Vector6 = Field(description="o_k, multiplied by s: z_0 on z [m, rad]")


class JointSpaceSettings(_Section):
    """q_k = q_home + s(t) c_k sin(omega_k t) (thesis 6.82)."""

    ramp_rate: Positive = Field(description="kappa [s^-3]")
    amplitudes: Vector6 = Field(description="c_k [m]")
    angular_frequencies: Vector6 = Field(description="omega_k [rad/s]")


class MoveSettings(_Section):
    speed_fraction: Annotated[Positive, Field(le=1.0)] = Field(
        description="peak actuator speed as a fraction of limits.actuator_speed_max, in (0, 1]"
    )
    minimum_duration: Positive = Field(description="also the duration of a zero-length move [s]")
    path_samples: Annotated[int, Strict(), Field(ge=2)] = Field(
        description="poses along the path where IK and J_A bound the actuator speed"
    )


class ExcitationSettings(_Section):
    """Identification run: q_k = q_home + s(t) a_k sum_j sin(h_j omega_f t + phase_kj) / peak, s = 1 - exp(-kappa t^3).

    Periodic with period 2 pi / omega_f; control/trajectories.py gives the phases and checks the limits.
    """

    ramp_rate: Positive = Field(description="kappa [s^-3]")
    fundamental_frequency: Positive = Field(description="omega_f [rad/s]")
    harmonics: Annotated[tuple[Annotated[int, Strict(), Field(ge=1)], ...], Field(min_length=1), AfterValidator(_distinct)] = (
        Field(description="h_j: the harmonics of omega_f in every slider's sum")
    )
    amplitudes: PositiveVector6 = Field(description="a_k: peak displacement of each slider from home [m]")


class TrajectorySettings(_Section):
    operational_space: OperationalSpaceSettings
    joint_space: JointSpaceSettings
    move: MoveSettings
    excitation: ExcitationSettings
    sample_period: Positive = Field(
        description="the robot stack samples its trajectory every this many seconds and interpolates "
                    "between (quintic Hermite) at each joint state's stamp [s]",
    )


# ------------------------------------------------------------------------------------------ controllers
class SingularitySettings(_Section):
    """Thresholds on jacobian_conditioning = sigma_min / sigma_max of J_A (a ratio in [0, 1])."""

    damping_threshold: Annotated[Positive, Field(lt=1.0)] = Field(
        description="below: damped least squares instead of J_A^-1, status near_singular"
    )
    stop_threshold: NonNegative = Field(description="below: safe output (zero forces), status singular")
    max_damping: Positive = Field(description="damping factor at conditioning 0, as a fraction of sigma_max")
    constraint_stop_threshold: Annotated[NonNegative, Field(lt=1.0)] = Field(
        description="below this constraint conditioning of the forward kinematics: safe output"
    )

    @model_validator(mode="after")
    def _ordered(self) -> SingularitySettings:
        if self.stop_threshold >= self.damping_threshold:
            raise _Invalid(
                "stop_threshold", f"{self.stop_threshold} must be below damping_threshold {self.damping_threshold}"
            )
        return self


class RateRange(_Section):
    """The control rates at which a gain set is valid [Hz]: a rate outside is refused at start.

    The shipped ranges come from the linearised closed loop (control/margins.py); how each was
    found is written beside it in config/hexapod.yaml.
    """

    min: Positive = Field(description="lowest control rate [Hz]")
    max: Positive = Field(description="highest control rate [Hz]")

    @model_validator(mode="after")
    def _ordered(self) -> RateRange:
        if self.min > self.max:
            raise _Invalid("min", f"{self.min} Hz is above max {self.max} Hz")
        return self

    def __contains__(self, rate: float) -> bool:
        return self.min <= rate <= self.max

    @property
    def longest_period(self) -> float:
        """1 / min [s]"""
        return 1.0 / self.min

    def __str__(self) -> str:
        return f"[{self.min:g}, {self.max:g}] Hz"


class VelocityGains(_Section):
    """Gains of the PI velocity loop, one per actuator, and the control rates they are valid at."""

    velocity_proportional_gain: PositiveVector6 = Field(description="K_p [N*s/m]")
    velocity_integral_gain: PositiveVector6 = Field(description="K_i [N/m]")
    valid_rates: RateRange


class DoubleLoopSettings(_Section):
    """RMRC + PI velocity loop (thesis 6.85-6.87); the velocity gains here are the real robot's."""

    kinematic_gain: PositiveVector6 = Field(description="K [1/s]")
    velocity_proportional_gain: PositiveVector6 = Field(description="K_p of the real robot [N*s/m]")
    velocity_integral_gain: PositiveVector6 = Field(description="K_i of the real robot [N/m]")
    valid_rates: RateRange = Field(description="control rates at which the real robot's K_p and K_i are valid")
    anti_windup: AntiWindup
    simulated_plant: VelocityGains = Field(description="velocity gains for the simulated plants")

    def velocity_gains(self, gain_set: str) -> VelocityGains:
        """K_p and K_i of gain set "robot" (the thesis) or "simulated_plant".

        The rigid-body model (``actuators`` all zero) has no rotor inertia: at 1 kHz its lightest
        actuator mode (~0.83 kg) makes the thesis K_p = 3000 N*s/m unstable (needs K_p < 2 m / dt),
        where the drives' reflected inertia keeps it stable (from 0.673 kg per slider, 2.19 kg with
        one period of loop delay: test_actuators.py); rigid simulators get their own gains.
        """
        if gain_set == "robot":
            return VelocityGains(
                velocity_proportional_gain=self.velocity_proportional_gain,
                velocity_integral_gain=self.velocity_integral_gain,
                valid_rates=self.valid_rates,
            )
        if gain_set == "simulated_plant":
            return self.simulated_plant
        raise InvalidInputError(f"unknown gain set {gain_set!r}; expected one of {list(GAIN_SETS)}")


class ComputedTorqueSettings(_Section):
    """Operational-space inverse dynamics (thesis 6.89, erratum 9)."""

    position_gain: PositiveVector6 = Field(description="K_P [1/s^2]")
    velocity_gain: PositiveVector6 = Field(description="K_V [1/s]")
    valid_rates: RateRange = Field(description="control rates at which K_P and K_V are valid (either gain set name)")


def _whole_hertz(value: float) -> float:
    if value != round(value):
        raise ValueError(f"must be a whole number of Hz (ros2_control's update_rate is an integer), got {value!r}")
    return value


class DelayCompensationSettings(_Section):
    """The loop delay the controllers compensate (control/delay_compensation.py)."""

    predictor: DelayPredictor = Field(
        description="model: act on the state the model predicts for when the force applies; none: on the measured state"
    )
    delay_periods: Count = Field(
        description="control periods from a joint state's stamp to the moment the force answering it acts "
        "(the start value when estimated)"
    )
    estimate: Annotated[bool, Strict()] = Field(
        description="follow the delay the measured motion shows (which past command explains each period's acceleration)"
    )
    max_delay_periods: Count = Field(description="the longest delay the estimator considers [control periods]")
    estimator_time_constant: Positive = Field(description="memory of the estimator's misfits [s]")

    @model_validator(mode="after")
    def _within_range(self) -> DelayCompensationSettings:
        if self.estimate and self.delay_periods > self.max_delay_periods:
            raise _Invalid(
                "delay_periods", f"{self.delay_periods} exceeds max_delay_periods {self.max_delay_periods}"
            )
        return self


class ControllerSettings(_Section):
    rate: Annotated[Positive, AfterValidator(_whole_hertz)] = Field(description="control loop rate [Hz]")
    singularity: SingularitySettings
    double_loop: DoubleLoopSettings
    computed_torque: ComputedTorqueSettings
    delay_compensation: DelayCompensationSettings

    @property
    def period(self) -> float:
        """[s]"""
        return 1.0 / self.rate

    def valid_rates(self, controller: str, gain_set: str) -> tuple[str, RateRange]:
        """The key path (below ``hexapod.``) and the range of control rates of a controller's gain set.

        Computed torque has one set of gains, whichever gain set is named.
        """
        if controller == "computed_torque":
            return "controllers.computed_torque.valid_rates", self.computed_torque.valid_rates
        if controller != "double_loop":
            raise InvalidInputError(f"unknown controller {controller!r}; expected double_loop or computed_torque")
        rates = self.double_loop.velocity_gains(gain_set).valid_rates
        if gain_set == "robot":
            return "controllers.double_loop.valid_rates", rates
        return f"controllers.double_loop.{gain_set}.valid_rates", rates


# ------------------------------------------------------------------------------------------ simulation
class SensorSettings(_Section):
    """Measurement model of the embedded simulator; all zero = ideal."""

    encoder_resolution: NonNegative = Field(description="quantisation step of the measured q, 0 = none [m]")
    noise_std: NonNegative = Field(description="standard deviation of white noise on the measured q, 0 = none [m]")
    delay_steps: Count = Field(description="measurement delay [plant steps]")


class LoopDelaySettings(_Section):
    """Transport delay of the simulated loop (simulation/delay.py); all zero = lockstep."""

    periods: Count = Field(description="plant steps from a joint state to the moment the force answering it acts")
    jitter_periods: NonNegative = Field(
        description="extra latency of each command: floor(u) more steps, u uniform in [0, this + 1)"
    )
    drop_probability: Annotated[NonNegative, Field(lt=1.0)] = Field(description="chance that a command is lost, in [0, 1)")


class EmbeddedSettings(_Section):
    """The reduced-model simulator (simulation/embedded.py)."""

    integrator: EmbeddedIntegrator
    substeps: AtLeastOne = Field(description="integration steps per plant step")
    max_actuator_speed: Positive = Field(description="beyond this the run has diverged [m/s]")


class MujocoSettings(_Section):
    """The MuJoCo multibody plant (simulation/mujoco_plant.py)."""

    substeps: AtLeastOne = Field(description="MuJoCo steps per plant step")
    integrator: MujocoIntegrator
    solver: MujocoSolver
    iterations: AtLeastOne = Field(description="constraint solver iteration cap per MuJoCo step")
    tolerance: Positive = Field(description="constraint solver tolerance")
    equality_solref: Annotated[tuple[Positive, ...], Field(min_length=2, max_length=2)] = Field(
        description="loop closures: (time constant [s], damping ratio)"
    )
    equality_solimp: Annotated[tuple[Positive, ...], Field(min_length=5, max_length=5)] = Field(
        description="loop closures: (d0, dwidth, width [m], midpoint, power)"
    )
    max_closure_error: Positive = Field(description="gap between joined points that counts as divergence [m]")
    max_actuator_speed: Positive = Field(description="actuator speed that counts as divergence [m/s]")
    max_angular_speed: Positive = Field(description="passive-joint speed that counts as divergence [rad/s]")

    @model_validator(mode="after")
    def _impedance(self) -> MujocoSettings:
        # d0 and dwidth are impedances in (0, 1); MuJoCo would silently clamp a wrong value.
        if not (self.equality_solimp[0] < 1.0 and self.equality_solimp[1] < 1.0):
            raise _Invalid("equality_solimp", f"d0 and dwidth must lie in (0, 1), got {list(self.equality_solimp[:2])}")
        return self


class SimulationSettings(_Section):
    rate: Positive = Field(description="plant step rate = control rate [Hz]")
    seed: Count = Field(description="seed of the simulated sensor noise and of the loop delay's jitter and drops")
    sensor: SensorSettings
    loop_delay: LoopDelaySettings
    embedded: EmbeddedSettings
    mujoco: MujocoSettings

    @property
    def dt(self) -> float:
        """Plant step [s]."""
        return 1.0 / self.rate

    @property
    def mujoco_timestep(self) -> float:
        """MuJoCo step [s]: the plant step split into ``mujoco.substeps``."""
        return 1.0 / (self.rate * self.mujoco.substeps)


# ------------------------------------------------------------------------------------------ ROS
class RosNames(_Section):
    """Joint and frame names the nodes, the bags and the robot description use."""

    joint_names: Annotated[tuple[Name, ...], Field(min_length=6, max_length=6), AfterValidator(_distinct)] = Field(
        description="the six actuated sliders, in the order q0..q5"
    )
    passive_joint_names: Annotated[tuple[Name, ...], Field(min_length=3, max_length=3), AfterValidator(_distinct)] = (
        Field(description="phi_1..phi_3")
    )
    base_frame: Name
    platform_frame: Name


# ------------------------------------------------------------------------------------------ recording
class EvaluationSettings(_Section):
    steady_state_start: NonNegative = Field(description="start of the steady-state window after the first reference [s]")
    reference_matching: MatchingMethod = Field(description="reference at each joint-state stamp")
    saturation_tolerance: Annotated[NonNegative, Field(lt=1.0)] = Field(
        description="a force counts as saturated when |F| >= (1 - this) * actuator_force_max"
    )
    derivative_window: Positive = Field(description="Savitzky-Golay window of the model check [s]")
    derivative_order: AtLeastOne = Field(description="polynomial order of the Savitzky-Golay fit")
    model_check_stride: AtLeastOne = Field(description="inverse dynamics at every n-th sample")


class ReplaySettings(_Section):
    reference_matching: MatchingMethod


class RecordingSettings(_Section):
    storage: StorageFormat = Field(description="rosbag2 storage plugin of the recorder")
    topics: Annotated[tuple[TopicKey, ...], Field(min_length=1), AfterValidator(_distinct)] = Field(
        description="topics recorded by the recorder node, by role (keys of conventions.TOPICS)"
    )
    output_directory: Name = Field(description="main job: output goes to <output_directory>/<timestamp>/")
    evaluation: EvaluationSettings
    replay: ReplaySettings


# ------------------------------------------------------------------------------------------ safety
class SafetySettings(_Section):
    """The controller node's safety supervisor (control/safety.py)."""

    joint_state_timeout: Positive = Field(description="feedback older than this is stale [s]")
    watchdog_period: Positive = Field(description="how often staleness is checked [s]")
    sim_time_stall_timeout: Positive = Field(
        description="under use_sim_time: no valid joint state for this long of steady (wall) time is stale, "
        "whatever the simulated clock does [s]"
    )
    max_feedback_age: Positive = Field(description="a joint state stamped longer ago than this is stale [s]")
    max_future_stamp: NonNegative = Field(
        description="a joint state stamped further than this ahead of the node's clock is invalid [s]"
    )
    reference_timeout: Positive = Field(description="a reference older than this is stale [s]")
    hold_damping: NonNegative = Field(description="damping of the HOLD action [N*s/m]")
    hold_force_max: Positive = Field(
        description="bound on every HOLD force, below limits.actuator_force_max (the lower of the two applies) [N]"
    )
    plausible_position_margin: NonNegative = Field(
        description="a measured position beyond the travel, or a slider separation below the minimum, by more "
        "than this cannot be real: invalid joint state [m]"
    )
    plausible_speed_factor: Annotated[Number, Field(ge=1.0)] = Field(
        description="a measured speed above this times limits.actuator_speed_max cannot be real: invalid joint state"
    )
    max_reference_position_step: Positive = Field(
        description="while armed, a reference whose position is farther than this from the last one is "
        "rejected; at arming, a reference farther than this from the measured pose is reached by a ramp [m]"
    )
    max_reference_angle_step: Positive = Field(
        description="the same for the Euler angles (norm of the wrapped change) [rad]"
    )
    max_reference_acceleration: Positive = Field(
        description="bound on the actuator accelerations J_A^-1 xi_d_ddot of a reference's feed-forward [m/s^2]"
    )
    plausible_step_margin: NonNegative = Field(
        description="allowance for encoder noise and stamp jitter on the step between two consecutive joint "
        "states: a step beyond plausible_speed_factor x limits.actuator_speed_max x their stamp spacing, plus "
        "this, cannot be real: invalid joint state [m]"
    )
    max_joint_state_names: Annotated[int, Strict(), Field(ge=6)] = Field(
        description="a joint state naming more joints than this is rejected before its fields are read"
    )
    max_saturation_time: Positive = Field(
        description="while controlling, some force held at limits.actuator_force_max for longer than this is a "
        "HOLD fault [s]"
    )
    frozen_feedback_time: Positive = Field(
        description="while controlling, a measurement (every position and velocity) unchanged for this long while "
        "the forces could not leave the robot still (frozen_feedback_force) is a HOLD fault [s]"
    )
    frozen_feedback_force: Positive = Field(
        description="the net force, mean command less the model's gravity load, that the drives' static friction "
        "and the model's errors may hold still: beyond it on some actuator the robot must move [N]"
    )
    diagnostics_period: Positive = Field(description="between routine diagnostics messages [s]")

    @model_validator(mode="after")
    def _watchdog_fast_enough(self) -> SafetySettings:
        if self.watchdog_period >= self.joint_state_timeout:
            # A slower check could let stale feedback drive the robot for up to two timeouts.
            raise _Invalid(
                "watchdog_period",
                f"{self.watchdog_period} s must be shorter than joint_state_timeout {self.joint_state_timeout} s",
            )
        if self.max_future_stamp >= self.joint_state_timeout:
            # A state stamped that far ahead, once taken, makes the genuine states after it look old
            # (not answered) for as long: the watchdog would latch ZERO on a clock glitch.
            raise _Invalid(
                "max_future_stamp",
                f"{self.max_future_stamp} s must be shorter than joint_state_timeout {self.joint_state_timeout} s",
            )
        return self


# ------------------------------------------------------------------------------------------ identification
class IdentificationResolution(_Section):
    """The widest confidence interval (half-width) for which an identified value is reported."""

    reflected_inertia: Positive = Field(description="[kg]")
    viscous_friction: Positive = Field(description="[N*s/m]")
    coulomb_friction: Positive = Field(description="[N]")
    coulomb_asymmetry: Positive = Field(description="[N]")
    stribeck_friction: Positive = Field(description="F_s - F_c [N]")
    viscous_ripple_cos: Positive = Field(description="[N*s/m]")
    viscous_ripple_sin: Positive = Field(description="[N*s/m]")
    payload_mass: Positive = Field(description="[kg]")


class IdentificationSettings(_Section):
    """hexapod_identify (identification/): least squares of the actuator parameters on recorded bags."""

    derivative_window: Positive = Field(description="Savitzky-Golay window of the zero-phase q_dot derivative [s]")
    derivative_order: AtLeastOne = Field(description="polynomial order of the Savitzky-Golay fit")
    min_speed: NonNegative = Field(
        description="a slider slower than this throughout the filter window is at rest: left out of its rows [m/s]"
    )
    max_delay_steps: Count = Field(description="force-to-motion delays tried, 0..this [joint-state periods]")
    robust_threshold: Positive = Field(
        description="Huber's k: residuals beyond k robust standard deviations weigh k sigma / |r| instead of 1"
    )
    robust_iterations: AtLeastOne = Field(description="most reweighting rounds of the robust fit")
    validation_fraction: Annotated[Positive, Field(lt=1.0)] = Field(
        description="the share of each run held out of the model choice and predicted by it, in one-second blocks, in (0, 1)"
    )
    model_improvement: NonNegative = Field(
        description="a richer friction model is chosen when it lowers the held-out mean square residual by this fraction"
    )
    stribeck_speeds: Annotated[tuple[Positive, ...], Field(min_length=1), AfterValidator(_distinct)] = Field(
        description="the Stribeck speeds v_st tried [m/s]"
    )
    min_samples: AtLeastOne = Field(description="fewest rows per slider for its parameters to be identifiable")
    confidence_level: Annotated[Positive, Field(lt=1.0)] = Field(description="of the reported intervals, in (0, 1)")
    resolution: IdentificationResolution


# ------------------------------------------------------------------------------------------ inverse-dynamics node
class InverseDynamicsSettings(_Section):
    """The inverse-dynamics node (ros/inverse_dynamics_node.py, control/force_residual.py)."""

    filter_cutoff: Positive = Field(description="causal low-pass (2nd-order Butterworth) of q, q_dot, forces [Hz]")
    residual_band: PositiveVector6 = Field(description="|commanded - predicted| beyond this is out of band [N]")
    band_duration: Positive = Field(description="out of band this long -> WARN [s]")


# ------------------------------------------------------------------------------------------ the file
class HexapodParameters(_Section):
    """The ``hexapod:`` tree of a parameters file; ``source`` is the file it came from."""

    geometry: Geometry
    gravity: Positive = Field(description="acting along -Z0 [m/s^2]")
    home_actuator_position: Length = Field(description="all six q at home [m]")
    bodies: Bodies
    limits: Limits
    trajectories: TrajectorySettings
    controllers: ControllerSettings
    simulation: SimulationSettings
    ros: RosNames
    recording: RecordingSettings
    safety: SafetySettings
    actuators: ActuatorSettings
    identification: IdentificationSettings
    inverse_dynamics: InverseDynamicsSettings
    # Completed by model/board_parameters.py, which the package hexapod_control.model imports first.
    board: BoardParameters | None = Field(  # noqa: F821
        default=None, description="the drive side's board (model/board_parameters.py); absent: the lab's own driver"
    )

    _source: str = PrivateAttr(default=IN_MEMORY)

    @property
    def source(self) -> str:
        """The parameters file (``<in memory>`` for a set built in code); not part of the value."""
        return self._source

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HexapodParameters):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))

    @model_validator(mode="after")
    def _assembles_and_runs(self) -> HexapodParameters:
        g, limits, home = self.geometry, self.limits, self.home_actuator_position
        if limits.actuator_position_max >= g.base_side / 2.0:
            raise _Invalid(
                "limits.actuator_position_max",
                f"{limits.actuator_position_max} m runs off the side (half side L_B/2 = {g.base_side / 2.0} m)",
            )
        if not limits.actuator_position_min <= home <= limits.actuator_position_max:
            raise _Invalid(
                "home_actuator_position",
                f"{home} m is outside [{limits.actuator_position_min}, {limits.actuator_position_max}]",
            )
        # At home every leg pair stands vertically under the platform vertex (phi = pi/2), so the
        # legs must reach: the isosceles height r_CP = sqrt(4L^2 - (2 q_home)^2)/2 must exist.
        if home >= g.leg_length:
            raise _Invalid(
                "geometry.leg_length",
                f"{g.leg_length} m is too short to assemble: the two legs of a side must span "
                f"2*home_actuator_position = {2.0 * home} m",
            )
        if 2.0 * home < limits.min_slider_separation:
            raise _Invalid(
                "limits.min_slider_separation",
                f"{limits.min_slider_separation} m exceeds the home separation {2.0 * home} m",
            )
        # The plant steps once per control period in the lockstep stacks and in Gazebo.
        if self.simulation.rate != self.controllers.rate:
            raise _Invalid(
                "simulation.rate", f"{self.simulation.rate} Hz must equal controllers.rate {self.controllers.rate} Hz"
            )
        return self

    @model_validator(mode="after")
    def _drives_deliver_the_limits(self) -> HexapodParameters:
        # The controllers command up to the limits: the motors must be able to deliver them.
        drives, limits = self.actuators, self.limits
        if limits.actuator_force_max > min(drives.peak_force):
            raise _Invalid(
                "limits.actuator_force_max",
                f"{limits.actuator_force_max} N exceeds the drives' actuators.peak_force {min(drives.peak_force)} N",
            )
        if limits.actuator_speed_max > min(drives.rated_speed):
            raise _Invalid(
                "limits.actuator_speed_max",
                f"{limits.actuator_speed_max} m/s exceeds the drives' actuators.rated_speed {min(drives.rated_speed)} m/s",
            )
        return self

    def replace(self, **changes: Any) -> HexapodParameters:
        """A validated copy with sections changed.

        Each value is a whole section (a model or a number) or a mapping of the keys to change,
        merged into the section as an overlay file would be:
        ``parameters.replace(controllers={"rate": 500.0}, simulation={"rate": 500.0})``.
        """
        update = {name: value.model_dump() if isinstance(value, BaseModel) else value for name, value in changes.items()}
        return parameters_from_mapping({ROOT_KEY: _merged(self.model_dump(), update)}, source=self.source)

    def with_geometry(self, **fields: float) -> HexapodParameters:
        return self.replace(geometry=fields)


class _Document(_Section):
    hexapod: HexapodParameters


# ------------------------------------------------------------------------------------------ loading
def default_parameters_path(name: str = "hexapod.yaml") -> Path:
    """Path of a parameters file shipped in ``config/`` (source tree or installed share/)."""
    candidates = [CONFIG_DIR / name]
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("hexapod_control")) / "config" / name)
    except Exception:  # noqa: BLE001 - ament_index is optional; any failure means "not installed"
        pass
    for path in candidates:
        if path.is_file():
            return path
    raise ParameterError(f"parameters file {name!r} not found in {', '.join(map(str, candidates))}")


def load_parameters(path: str | Path | None = None) -> HexapodParameters:
    """Load a parameters file (default: the shipped experiments set), following ``extends``,
    and validate the whole tree; any unknown, missing or invalid key raises ParameterError."""
    path = Path(path) if path is not None else default_parameters_path()
    document, origins = _read_document(path, ())
    return parameters_from_mapping(document, source=str(path), origins=origins)


def parameters_from_mapping(
    document: Any, source: str = IN_MEMORY, origins: Mapping[tuple[str, ...], str] | None = None
) -> HexapodParameters:
    """Validate a document ``{"hexapod": {...}}``; ``origins`` names the base file of inherited keys."""
    try:
        parameters = _Document.model_validate(document).hexapod
    except ValidationError as error:
        raise ParameterError(f"{source}: {_describe(error, origins or {})}") from None
    parameters._source = source
    return parameters


def safe_load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with libyaml's loader where available; yaml.YAMLError on invalid YAML."""
    return yaml.load(text, Loader=_YAML_LOADER)


def read_yaml(path: Path, kind: str = "parameters file") -> Any:
    """The YAML document of a file; ParameterError naming the file when it cannot be read or parsed."""
    try:
        return safe_load_yaml(path.read_text())
    except OSError as error:
        raise ParameterError(f"cannot read {kind} {path}: {error}") from error
    except yaml.YAMLError as error:
        raise ParameterError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from error


def _read_document(path: Path, chain: tuple[Path, ...]) -> tuple[Any, dict[tuple[str, ...], str]]:
    """The file's document with its ``extends`` chain merged under it, and which file set each key."""
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ParameterError(f"{chain[-1]}: {EXTENDS_KEY}: files extend each other in a cycle: {cycle}")
    document = read_yaml(path)
    if not isinstance(document, dict) or EXTENDS_KEY not in document:
        return document, {}  # the schema reports a document that is not a mapping
    document = dict(document)
    base_name = document.pop(EXTENDS_KEY)
    if not isinstance(base_name, str) or not base_name:
        raise ParameterError(f"{path}: {EXTENDS_KEY}: expected the name of a parameters file, got {base_name!r}")
    base_path = path.parent / base_name
    base, base_origins = _read_document(base_path, (*chain, resolved))
    if not isinstance(base, dict):
        raise ParameterError(f"{base_path}: expected a mapping with a '{ROOT_KEY}:' section, got {type(base).__name__}")
    origins = {key: str(base_path) for key in _key_paths(base)} | base_origins
    for key in _key_paths(document):
        origins.pop(key, None)  # set (again) by this file
    return _merged(base, document), origins


def _merged(base: Any, overlay: Any) -> Any:
    """``overlay`` merged onto ``base``: mappings key by key, anything else replaces."""
    if not (isinstance(base, Mapping) and isinstance(overlay, Mapping)):
        return overlay
    merged = dict(base)
    for key, value in overlay.items():
        merged[key] = _merged(base[key], value) if key in base else value
    return merged


def _key_paths(tree: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if not isinstance(tree, Mapping):
        return []
    paths = []
    for key, value in tree.items():
        paths.append((*prefix, str(key)))
        paths.extend(_key_paths(value, (*prefix, str(key))))
    return paths


# ------------------------------------------------------------------------------------------ errors
def _describe(error: ValidationError, origins: Mapping[tuple[str, ...], str]) -> str:
    """pydantic's errors as ``hexapod.<key.path>: <message>``, in its order, joined by "; "."""
    described = []
    for item in error.errors():
        if item["type"] in ("too_short", "too_long") and _right_size(item):
            continue  # pydantic counts the valid entries only: the entry's own error says it all
        loc, message = item["loc"], _message(item)
        failure = item.get("ctx", {}).get("error")
        if isinstance(failure, _Invalid):
            loc = (*loc, *failure.key.split("."))
        key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
        keys = tuple(part for part in loc if isinstance(part, str))
        origin = origins.get(keys)
        described.append(f"{key or '<document>'}: {message}" + (f" (set in {origin})" if origin else ""))
    return "; ".join(described)


def _message(item: Mapping[str, Any]) -> str:
    kind, value, ctx = item["type"], item["input"], item.get("ctx", {})
    parent = _model_at(item["loc"][:-1])
    field = parent.model_fields.get(item["loc"][-1]) if parent is not None and item["loc"] else None
    messages = {
        "missing": lambda: "missing section" if _is_section(field) else "missing key",
        "extra_forbidden": lambda: "unknown key" + (f"; expected one of {list(parent.model_fields)}" if parent else ""),
        "model_type": lambda: f"expected a mapping, got {type(value).__name__}",
        "model_attributes_type": lambda: f"expected a mapping, got {type(value).__name__}",
        "float_type": lambda: f"expected a number, got {value!r}",
        "int_type": lambda: f"expected an integer, got {value!r}",
        "string_type": lambda: f"expected a string, got {value!r}",
        "tuple_type": lambda: f"expected a list, got {value!r}",
        "finite_number": lambda: f"must be finite, got {value!r}",
        "greater_than": lambda: (
            f"must be positive, got {value!r}" if ctx["gt"] == 0 else f"must be greater than {ctx['gt']}, got {value!r}"
        ),
        "greater_than_equal": lambda: (
            f"must not be negative, got {value!r}" if ctx["ge"] == 0 else f"must be at least {ctx['ge']}, got {value!r}"
        ),
        "less_than": lambda: f"must be below {ctx['lt']}, got {value!r}",
        "less_than_equal": lambda: f"must be at most {ctx['le']}, got {value!r}",
        "literal_error": lambda: f"expected {ctx['expected']}, got {value!r}",
        "too_short": lambda: f"expected {_size(field, ctx)}, got {value!r}",
        "too_long": lambda: f"expected {_size(field, ctx)}, got {value!r}",
        "string_too_short": lambda: f"must not be empty, got {value!r}",
        "value_error": lambda: str(ctx["error"]),
    }
    describe = messages.get(kind)
    return describe() if describe else f"{item['msg']}, got {value!r}"


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The section model at a key path of the document (None below a list or a number)."""
    model: type[BaseModel] = _Document
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if not _is_section(field):
            return None
        model = _section_model(field)  # type: ignore[assignment]
    return model


def _is_section(field: Any) -> bool:
    return _section_model(field) is not None


def _section_model(field: Any) -> type[BaseModel] | None:
    """The model of a section field, also of an optional section (``Model | None``)."""
    if field is None:
        return None
    for candidate in (field.annotation, *get_args(field.annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _size(field: Any, ctx: Mapping[str, Any]) -> str:
    """"6 entries" for a list of fixed size, else the violated bound ("at least 1 entry")."""
    low, high = _length_bounds(field)
    size = low if low is not None and low == high else None
    if size is None:
        size = ctx.get("min_length", ctx.get("max_length"))
        bound = "at least " if "min_length" in ctx else "at most "
    else:
        bound = ""
    return f"{bound}{size} {'entry' if size == 1 else 'entries'}"


def _length_bounds(field: Any) -> tuple[int | None, int | None]:
    rules = field.metadata if field is not None else ()
    low = next((rule.min_length for rule in rules if hasattr(rule, "min_length")), None)
    high = next((rule.max_length for rule in rules if hasattr(rule, "max_length")), None)
    return low, high


def _right_size(item: Mapping[str, Any]) -> bool:
    """Whether a list reported too short or too long has an allowed number of entries as written."""
    parent = _model_at(item["loc"][:-1])
    field = parent.model_fields.get(item["loc"][-1]) if parent is not None else None
    low, high = _length_bounds(field)
    value = item["input"]
    return isinstance(value, (list, tuple)) and (low is None or len(value) >= low) and (high is None or len(value) <= high)
