"""A sweep spec (YAML, ``sweep:`` at the top) and its expansion into cases.

The cases are every controller x every combination of the ``grid`` values x ``samples`` draws
of the ``random`` distributions (one draw when there are none). Case k draws from its own
generator, seeded with (``seed``, k): a case gives the same row whether it runs alone, in another
order or on another machine. Files named in the spec are taken relative to the spec's folder.
doc/sweeps_and_tuning.md describes every key; the swept quantities are :data:`QUANTITIES`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.errors import ParameterError
from hexapod_control.model.parameters import GAIN_SETS, default_parameters_path, read_yaml
from hexapod_control.simulation import BACKENDS

SPEC_KEY = "sweep"
TRAJECTORIES = ("operational_space", "joint_space", "hold")  # hold: rest at home (quasi-static errors)
# name -> (kind, default, what it changes). Plant quantities change the simulated robot only, so
# the controllers keep their model: a payload is then a model mismatch, as on the robot.
QUANTITIES: dict[str, tuple[type, Any, str]] = {
    "payload_mass": (float, 0.0, "mass added to the plant's platform [kg]"),
    "payload_height": (float, 0.0, "the payload's centre above the platform's centre of mass, along z_F [m]"),
    "reflected_inertia": (float, None, "the plant's drives: reflected inertia per slider [kg] (default: the plant file's)"),
    "viscous_friction": (float, None, "the plant's drives: viscous friction [N*s/m] (default: the plant file's)"),
    "coulomb_friction": (float, None, "the plant's drives: Coulomb friction [N] (default: the plant file's)"),
    "loop_delay": (int, 0, "periods from a joint state to the force answering it acting on the plant"),
    "jitter": (float, 0.0, "extra latency of each command, up to this many periods (simulation/delay.py)"),
    "drop_probability": (float, 0.0, "chance that a command is lost"),
    "sensor_noise": (float, 0.0, "white noise on the measured positions [m] (embedded plant)"),
    "delay_compensation": (bool, True, "the controller acts on the state predicted for when its force applies"),
    "compensation_delay": (int, None, "the delay the compensation assumes [periods] (default: loop_delay)"),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ControllerEntry(_Strict):
    name: Literal[CONTROLLER_NAMES]  # type: ignore[valid-type]
    gain_set: Literal[GAIN_SETS] = "simulated_plant"  # type: ignore[valid-type]
    parameters: str | None = Field(None, description="the controller's parameters file (a gains overlay); default: the sweep's")
    label: str | None = None

    @property
    def shown(self) -> str:
        return self.label or f"{self.name} ({self.gain_set})"


class Uniform(_Strict):
    uniform: tuple[float, float]


class Normal(_Strict):
    normal: tuple[float, float] = Field(description="(mean, standard deviation)")


class Choice(_Strict):
    choice: list[bool | int | float] = Field(min_length=1)


Distribution = Union[Uniform, Normal, Choice]


class StabilityCriterion(_Strict):
    """A run is stable when the plant never stopped, no fault latched and, over the last ``window``,
    the pose error stayed within these bounds (an unstable loop grows out of them or diverges) and
    no force was at its limit (the saturation bounds a linearly unstable loop in a limit cycle).

    With ``max_growth`` (for runs at rest: a moving reference changes the error by itself), the
    position error's spread about its mean over the last window must also stay below
    ``max_growth`` x that over the window before, unless both are below ``growth_floor``: a mode
    growing by 0.1 % a period takes seconds to leave the bounds, but grows 28 % over 0.25 s.
    """

    window: Annotated[float, Field(gt=0.0)] = 0.25  # [s]
    max_position_error: Annotated[float, Field(gt=0.0)] = 0.005  # [m]
    max_orientation_error: Annotated[float, Field(gt=0.0)] = 0.05  # [rad]
    max_growth: Annotated[float, Field(gt=1.0)] | None = None
    growth_floor: Annotated[float, Field(gt=0.0)] = 1e-6  # [m] spreads below this are round-off and noise


class ReportSettings(_Strict):
    map: tuple[str, str] | None = Field(None, description="two swept quantities of the stability map")
    panels: str | None = Field(None, description="a swept quantity: one map per controller and value of it")
    worst: Annotated[int, Field(ge=0)] = 3  # cases saved as bags, worst tracking first


class SweepSpec(_Strict):
    name: str = "sweep"
    parameters: str | None = None  # the controllers' parameters (default: the shipped file)
    plant_parameters: str | None = None  # the plant's base file (default: the controllers')
    plant: Literal[BACKENDS] = "embedded"  # type: ignore[valid-type]
    trajectory: Literal[TRAJECTORIES] = "joint_space"  # type: ignore[valid-type]
    duration: Annotated[float, Field(gt=0.0)] = 2.0  # [s] simulated per case
    # The plant starts this far from home [m], in a direction drawn per case: an exact start at home
    # on an exact model leaves a mode of an unstable loop unexcited for longer than a short run.
    start_offset: Annotated[float, Field(ge=0.0)] = 0.0005
    seed: Annotated[int, Field(ge=0)] = 0
    linear_analysis: bool = True  # each row also gets the verdict of the linearised loop (margins.py)
    controllers: list[ControllerEntry] = Field(min_length=1)
    grid: dict[str, list[bool | int | float]] = Field(default_factory=dict)
    random: dict[str, Distribution] = Field(default_factory=dict)
    samples: Annotated[int, Field(ge=1)] = 1
    stability: StabilityCriterion = StabilityCriterion()
    report: ReportSettings = ReportSettings()

    @model_validator(mode="after")
    def _known_quantities(self) -> SweepSpec:
        for section in ("grid", "random"):
            for key in getattr(self, section):
                if key not in QUANTITIES:
                    raise ValueError(f"{section}.{key}: unknown quantity; expected one of {list(QUANTITIES)}")
        for key, values in self.grid.items():
            if not values:
                raise ValueError(f"grid.{key}: no values")
            if key in self.random:
                raise ValueError(f"random.{key}: also in grid")
        for key in (*(self.report.map or ()), *([self.report.panels] if self.report.panels else [])):
            if key not in self.grid and key not in self.random:
                raise ValueError(f"report: {key} is not swept")
        return self


@dataclass(frozen=True)
class Case:
    """One closed-loop run: a controller, the values of every quantity, a seed."""

    index: int
    controller: str
    gain_set: str
    label: str  # the controller entry's name in the report
    parameters_file: str
    plant_parameters_file: str
    plant: str
    trajectory: str
    duration: float
    seed: int
    start: tuple  # (6,) [m] the plant's start relative to home
    values: dict = field(default_factory=dict)  # every quantity of QUANTITIES (None: the file's)
    stability: StabilityCriterion = StabilityCriterion()
    linear_analysis: bool = True

    def inputs(self) -> dict:
        """The row's input columns."""
        return {"case": self.index, "controller": self.label, "law": self.controller, "gain_set": self.gain_set,
                "trajectory": self.trajectory, "plant": self.plant, "duration": self.duration, "seed": self.seed,
                **{key: _column(value) for key, value in self.values.items()}}


def _column(value):
    """None (the file's value) as NaN: a Parquet column keeps one type."""
    return math.nan if value is None else value


def load_spec(path: str | Path) -> tuple[SweepSpec, Path]:
    """The validated spec and its folder; ParameterError naming the file and the key path."""
    path = Path(path)
    document = read_yaml(path, "sweep spec")
    if not isinstance(document, dict) or SPEC_KEY not in document or len(document) != 1:
        raise ParameterError(f"{path}: expected one mapping '{SPEC_KEY}:' at the top")
    try:
        return SweepSpec.model_validate(document[SPEC_KEY]), path.parent
    except ValidationError as error:
        raise ParameterError(f"{path}: {spec_errors(error)}") from None


def spec_errors(error: ValidationError) -> str:
    items = []
    for item in error.errors():
        key = ".".join(str(part) for part in (SPEC_KEY, *item["loc"]))
        items.append(f"{key}: {item['msg']}")
    return "; ".join(items)


def _resolve(name: str | None, folder: Path, default: str) -> str:
    if name is None:
        return default
    path = Path(name)
    return str(path if path.is_absolute() else (folder / path).resolve())


def draw(distribution, rng: np.random.Generator):
    if isinstance(distribution, Uniform):
        low, high = distribution.uniform
        return float(rng.uniform(low, high))
    if isinstance(distribution, Normal):
        mean, std = distribution.normal
        return float(rng.normal(mean, std))
    return distribution.choice[int(rng.integers(len(distribution.choice)))]


def typed(key: str, value):
    """A quantity's value as its kind (YAML gives 1 for 1.0); None stays None (the file's value)."""
    kind = QUANTITIES[key][0]
    if value is None:
        return None
    if kind is bool:
        if not isinstance(value, bool):
            raise ParameterError(f"{key}: expected true or false, got {value!r}")
        return value
    if kind is int:
        if float(value) != round(float(value)):
            raise ParameterError(f"{key}: expected a whole number, got {value!r}")
        return round(float(value))
    return float(value)


def expand(spec: SweepSpec, folder: Path) -> list[Case]:
    """Every case of the spec, numbered from 0 in a fixed order (controller, grid, sample)."""
    parameters = _resolve(spec.parameters, folder, str(default_parameters_path()))
    plant_default = _resolve(spec.plant_parameters, folder, parameters)
    grid_keys = list(spec.grid)
    combinations = list(itertools.product(*(spec.grid[key] for key in grid_keys))) or [()]
    cases = []
    for entry in spec.controllers:
        for combination in combinations:
            for _ in range(spec.samples):
                index = len(cases)
                rng = np.random.default_rng([spec.seed, index])
                values = {key: default for key, (_, default, _) in QUANTITIES.items()}
                values.update(zip(grid_keys, combination))
                values.update({key: draw(distribution, rng) for key, distribution in spec.random.items()})
                values = {key: typed(key, value) for key, value in values.items()}
                direction = rng.normal(size=6)
                start = tuple((spec.start_offset * direction / np.linalg.norm(direction)).tolist())
                cases.append(Case(
                    index=index, controller=entry.name, gain_set=entry.gain_set, label=entry.shown,
                    parameters_file=_resolve(entry.parameters, folder, parameters), plant_parameters_file=plant_default,
                    plant=spec.plant, trajectory=spec.trajectory, duration=spec.duration,
                    seed=int(rng.integers(2**31)), start=start, values=values, stability=spec.stability,
                    linear_analysis=spec.linear_analysis,
                ))
    return cases


def swept(spec: SweepSpec) -> list[str]:
    """The quantities that vary, grid first."""
    return [key for key in spec.grid if len(spec.grid[key]) > 1] + list(spec.random)
