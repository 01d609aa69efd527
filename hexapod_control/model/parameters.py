"""The one parameters object of the package, loaded from YAML and validated.

Everything that needs geometry, inertia, gravity or limits takes a :class:`HexapodParameters`.
Errors name the offending key and the file, because a lab edits these files by hand.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from hexapod_control.errors import ParameterError

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
BODY_NAMES = ("platform", "leg", "pu_part1", "pu_part2", "s_part1", "s_part2")
# Sections owned by the modules that use them; each validates its own through ``section()``.
EXTENSION_SECTIONS = ("controllers", "trajectories", "simulation", "safety", "recording", "ros")
CORE_KEYS = ("geometry", "bodies", "limits", "gravity", "home_actuator_position")

# Plausibility windows that catch wrong units (mm for m, kg*cm^2 for kg*m^2), not design limits.
_MAX_LENGTH_M = 5.0
_MAX_MASS_KG = 100.0


@dataclass(frozen=True)
class Geometry:
    base_side: float  # L_B [m]
    leg_length: float  # L [m]
    platform_offset: float  # H_PQ [m]
    platform_com_offset: float  # H* [m]
    pu_part1_com_offset: float  # l_c1 [m]
    s_part2_com_offset: float  # l_c2 [m]

    @property
    def platform_side(self) -> float:
        """L_P = L_B / 2: side of the rigid triangle P1P2P3."""
        return self.base_side / 2.0

    @property
    def side_offset(self) -> float:
        """d = -L_B / (2 sqrt 3): Y coordinate of the side midpoint B_i in its side frame."""
        return -self.base_side / (2.0 * math.sqrt(3.0))


@dataclass(frozen=True)
class RigidBody:
    mass: float  # [kg]
    inertia: tuple[float, float, float]  # principal moments in the body's own frame [kg m^2]


@dataclass(frozen=True)
class Bodies:
    platform: RigidBody
    leg: RigidBody
    pu_part1: RigidBody
    pu_part2: RigidBody
    s_part1: RigidBody
    s_part2: RigidBody


@dataclass(frozen=True)
class Limits:
    actuator_position_min: float  # [m]
    actuator_position_max: float  # [m]
    min_slider_separation: float  # [m], lower bound on q_{2i-2} + q_{2i-1}
    actuator_speed_max: float  # [m/s]
    actuator_force_max: float  # [N]


@dataclass(frozen=True)
class HexapodParameters:
    geometry: Geometry
    bodies: Bodies
    gravity: float  # [m/s^2] along -Z0
    home_actuator_position: float  # [m]
    limits: Limits
    source: str = "<in memory>"
    extensions: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def section(self, name: str) -> "SectionReader":
        """Typed, validated access to an extension section such as ``controllers``.

        Errors name the key path and the parameters file, like those of the core sections.
        """
        if name not in EXTENSION_SECTIONS:
            raise ParameterError(f"unknown section {name!r}; expected one of {EXTENSION_SECTIONS}")
        reader = _Reader(self.source)
        if name not in self.extensions:
            raise reader.fail(f"hexapod.{name}", "missing section")
        return SectionReader(reader, self.extensions[name], f"hexapod.{name}")

    def replace(self, **sections: Any) -> "HexapodParameters":
        """A copy with whole sections or fields replaced, validated again."""
        updated = dataclasses.replace(self, **sections)
        _validate(updated)
        return updated

    def with_geometry(self, **fields: float) -> "HexapodParameters":
        return self.replace(geometry=dataclasses.replace(self.geometry, **fields))


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
    """Load and validate a parameters file (default: the shipped experiments set)."""
    path = Path(path) if path is not None else default_parameters_path()
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ParameterError(f"cannot read parameters file {path}: {error}") from error
    except yaml.YAMLError as error:
        raise ParameterError(f"{path}: not valid YAML: {error}") from error
    return parameters_from_mapping(document, source=str(path))


def parameters_from_mapping(document: Any, source: str = "<in memory>") -> HexapodParameters:
    reader = _Reader(source)
    root = reader.section(document, "hexapod", "")
    geometry_map = reader.section(root, "geometry", "hexapod")
    geometry = Geometry(
        **{
            field.name: reader.length(geometry_map, field.name, "hexapod.geometry")
            for field in dataclasses.fields(Geometry)
        }
    )
    bodies_map = reader.section(root, "bodies", "hexapod")
    bodies = Bodies(**{name: reader.body(bodies_map, name) for name in BODY_NAMES})
    limits_map = reader.section(root, "limits", "hexapod")
    limits = Limits(
        actuator_position_min=reader.number(limits_map, "actuator_position_min", "hexapod.limits"),
        actuator_position_max=reader.length(limits_map, "actuator_position_max", "hexapod.limits"),
        min_slider_separation=reader.length(limits_map, "min_slider_separation", "hexapod.limits"),
        actuator_speed_max=reader.positive(limits_map, "actuator_speed_max", "hexapod.limits"),
        actuator_force_max=reader.positive(limits_map, "actuator_force_max", "hexapod.limits"),
    )
    reader.reject_unknown(geometry_map, {f.name for f in dataclasses.fields(Geometry)}, "hexapod.geometry")
    reader.reject_unknown(limits_map, {f.name for f in dataclasses.fields(Limits)}, "hexapod.limits")
    reader.reject_unknown(bodies_map, set(BODY_NAMES), "hexapod.bodies")
    reader.reject_unknown(root, set(CORE_KEYS) | set(EXTENSION_SECTIONS), "hexapod")
    extensions = {name: reader.section(root, name, "hexapod") for name in EXTENSION_SECTIONS if name in root}
    parameters = HexapodParameters(
        geometry=geometry,
        bodies=bodies,
        gravity=reader.positive(root, "gravity", "hexapod"),
        home_actuator_position=reader.length(root, "home_actuator_position", "hexapod"),
        limits=limits,
        source=source,
        extensions=extensions,
    )
    _validate(parameters)
    return parameters


class SectionReader:
    """Reads one YAML section with the same checks and error messages as the core sections."""

    def __init__(self, reader: "_Reader", mapping: Mapping[str, Any], path: str):
        self._reader, self.mapping, self.path = reader, mapping, path

    def has(self, key: str) -> bool:
        return key in self.mapping

    def subsection(self, key: str) -> "SectionReader":
        return SectionReader(self._reader, self._reader.section(self.mapping, key, self.path), f"{self.path}.{key}")

    def number(self, key: str) -> float:
        return self._reader.number(self.mapping, key, self.path)

    def positive(self, key: str) -> float:
        return self._reader.positive(self.mapping, key, self.path)

    def non_negative(self, key: str) -> float:
        value = self.number(key)
        if value < 0.0:
            raise self._reader.fail(f"{self.path}.{key}", f"must not be negative, got {value!r}")
        return value

    def integer(self, key: str, minimum: int = 0) -> int:
        value = self.mapping.get(key)
        if key not in self.mapping:
            raise self._reader.fail(f"{self.path}.{key}", "missing key")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._reader.fail(f"{self.path}.{key}", f"expected an integer >= {minimum}, got {value!r}")
        return value

    def text(self, key: str, choices: tuple[str, ...] | None = None) -> str:
        if key not in self.mapping:
            raise self._reader.fail(f"{self.path}.{key}", "missing key")
        value = self.mapping[key]
        if not isinstance(value, str) or (choices is not None and value not in choices):
            expected = f"one of {list(choices)}" if choices else "a string"
            raise self._reader.fail(f"{self.path}.{key}", f"expected {expected}, got {value!r}")
        return value

    def vector(self, key: str, size: int, positive: bool = False) -> tuple[float, ...]:
        """A list of ``size`` finite numbers; a single number is broadcast to all entries."""
        if key not in self.mapping:
            raise self._reader.fail(f"{self.path}.{key}", "missing key")
        value = self.mapping[key]
        values = [value] * size if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        if (
            not isinstance(values, (list, tuple))
            or len(values) != size
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in values)
        ):
            raise self._reader.fail(f"{self.path}.{key}", f"expected {size} finite numbers, got {value!r}")
        if positive and any(v <= 0.0 for v in values):
            raise self._reader.fail(f"{self.path}.{key}", f"every entry must be positive, got {list(values)}")
        return tuple(float(v) for v in values)

    def reject_unknown(self, known: set[str]) -> None:
        self._reader.reject_unknown(self.mapping, known, self.path)


class _Reader:
    """Typed access to the YAML tree; every error names the key path and the file."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, message: str) -> ParameterError:
        return ParameterError(f"{self.source}: {key}: {message}")

    def section(self, mapping: Any, name: str, parent: str) -> Mapping[str, Any]:
        key = f"{parent}.{name}" if parent else name
        if not isinstance(mapping, Mapping) or name not in mapping:
            raise self.fail(key, "missing section")
        value = mapping[name]
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        return value

    def number(self, mapping: Mapping[str, Any], name: str, parent: str) -> float:
        key = f"{parent}.{name}"
        if name not in mapping:
            raise self.fail(key, "missing key")
        value = mapping[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"expected a number, got {value!r}")
        if not math.isfinite(value):
            raise self.fail(key, f"must be finite, got {value!r}")
        return float(value)

    def positive(self, mapping: Mapping[str, Any], name: str, parent: str) -> float:
        value = self.number(mapping, name, parent)
        if value <= 0.0:
            raise self.fail(f"{parent}.{name}", f"must be positive, got {value!r}")
        return value

    def length(self, mapping: Mapping[str, Any], name: str, parent: str) -> float:
        value = self.positive(mapping, name, parent)
        if value > _MAX_LENGTH_M:
            raise self.fail(
                f"{parent}.{name}", f"{value!r} m is implausibly large: lengths are in metres"
            )
        return value

    def body(self, mapping: Mapping[str, Any], name: str) -> RigidBody:
        key = f"hexapod.bodies.{name}"
        entry = self.section(mapping, name, "hexapod.bodies")
        self.reject_unknown(entry, {"mass", "inertia"}, key)
        mass = self.positive(entry, "mass", key)
        if mass > _MAX_MASS_KG:
            raise self.fail(f"{key}.mass", f"{mass!r} kg is implausibly large: masses are in kg")
        inertia = entry.get("inertia")
        if (
            not isinstance(inertia, (list, tuple))
            or len(inertia) != 3
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in inertia)
        ):
            raise self.fail(f"{key}.inertia", f"expected three numbers [Ixx, Iyy, Izz], got {inertia!r}")
        moments = tuple(float(v) for v in inertia)
        if any(not math.isfinite(v) or v <= 0.0 for v in moments):
            raise self.fail(f"{key}.inertia", f"moments must be positive and finite, got {list(moments)}")
        # A body of this mass within a 1 m sphere cannot exceed m * (1 m)^2: catches kg*cm^2.
        if max(moments) > mass * 1.0:
            raise self.fail(
                f"{key}.inertia",
                f"{list(moments)} is implausible for {mass} kg: inertias are in kg*m^2",
            )
        ixx, iyy, izz = moments
        if ixx + iyy < izz or iyy + izz < ixx or izz + ixx < iyy:
            raise self.fail(f"{key}.inertia", f"{list(moments)} violates the triangle inequality")
        return RigidBody(mass=mass, inertia=moments)  # type: ignore[arg-type]

    def reject_unknown(self, mapping: Mapping[str, Any], known: set[str], parent: str) -> None:
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise self.fail(parent, f"unknown key(s) {unknown}; expected {sorted(known)}")


def _validate(parameters: HexapodParameters) -> None:
    """Cross-field checks: the robot must assemble at home and the limits must be consistent."""
    source = parameters.source
    g = parameters.geometry
    limits = parameters.limits
    for field in dataclasses.fields(Geometry):
        value = getattr(g, field.name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0.0):
            raise ParameterError(f"{source}: hexapod.geometry.{field.name}: must be positive, got {value!r}")
    if limits.actuator_position_min >= limits.actuator_position_max:
        raise ParameterError(
            f"{source}: hexapod.limits: actuator_position_min {limits.actuator_position_min} "
            f"must be below actuator_position_max {limits.actuator_position_max}"
        )
    if limits.actuator_position_max >= g.base_side / 2.0:
        raise ParameterError(
            f"{source}: hexapod.limits.actuator_position_max: {limits.actuator_position_max} m "
            f"runs off the side (half side L_B/2 = {g.base_side / 2.0} m)"
        )
    home = parameters.home_actuator_position
    if not limits.actuator_position_min <= home <= limits.actuator_position_max:
        raise ParameterError(
            f"{source}: hexapod.home_actuator_position: {home} m is outside "
            f"[{limits.actuator_position_min}, {limits.actuator_position_max}]"
        )
    # At home every leg pair stands vertically under the platform vertex (phi = pi/2), so the
    # legs must reach: the isosceles height r_CP = sqrt(4L^2 - (2 q_home)^2)/2 must exist.
    if 2.0 * home >= 2.0 * g.leg_length:
        raise ParameterError(
            f"{source}: hexapod.geometry.leg_length: {g.leg_length} m is too short to assemble: "
            f"the two legs of a side must span 2*home_actuator_position = {2.0 * home} m"
        )
    if 2.0 * home < limits.min_slider_separation:
        raise ParameterError(
            f"{source}: hexapod.limits.min_slider_separation: {limits.min_slider_separation} m "
            f"exceeds the home separation {2.0 * home} m"
        )
