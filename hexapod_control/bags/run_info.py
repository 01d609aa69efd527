"""What a bag records about its run, in the rosbag2 metadata's ``custom_data``: controller, gain set,
parameters (the file's name and the whole validated tree), plant, trajectory and loop delay.

The main job writes all of it; on the robot the same keys go on the record line
(``ros2 bag record ... --custom-data hexapod.controller=double_loop hexapod.gain_set=robot``).
Replay and evaluation take the controller, the gain set and the parameters from here by default,
so a bag replays with what produced it (command-line options still override).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping, Optional

import yaml

from hexapod_control.errors import ParameterError
from hexapod_control.model.parameters import ROOT_KEY, HexapodParameters, parameters_from_mapping, safe_load_yaml

PREFIX = "hexapod."  # custom_data keys of this package: hexapod.<field>


@dataclass(frozen=True)
class RunInfo:
    controller: Optional[str] = None  # double_loop | computed_torque
    gain_set: Optional[str] = None  # robot | simulated_plant
    parameters_file: Optional[str] = None  # the file the controller's parameters came from
    parameters: Optional[str] = None  # the controller's validated parameter tree, as YAML
    plant: Optional[str] = None  # embedded | mujoco | robot
    plant_parameters_file: Optional[str] = None  # the plant's parameters (differ under a model mismatch)
    trajectory: Optional[str] = None
    loop_delay: Optional[str] = None  # the transport delay the plant applied, in words
    sensor_noise: Optional[str] = None  # [m] standard deviation of the simulated position noise

    def custom_data(self) -> dict[str, str]:
        """The fields that are set, as ``hexapod.<field>`` string pairs."""
        return {PREFIX + f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_custom_data(cls, data: Mapping[str, str]) -> RunInfo:
        names = {f.name for f in fields(cls)}
        return cls(**{key[len(PREFIX):]: value for key, value in data.items()
                      if key.startswith(PREFIX) and key[len(PREFIX):] in names})

    def controller_parameters(self, bag_label: str) -> Optional[HexapodParameters]:
        """The recorded parameter tree, validated (None when the bag has none); ParameterError naming
        the bag when it does not validate."""
        if self.parameters is None:
            return None
        source = f"{bag_label} (custom_data {PREFIX}parameters, recorded from {self.parameters_file or 'an unnamed file'})"
        try:
            document = safe_load_yaml(self.parameters)
        except yaml.YAMLError as error:
            raise ParameterError(f"{source}: not valid YAML: {' '.join(str(error).split())}") from None
        return parameters_from_mapping(document, source=source)

    def described(self) -> list[str]:
        """One line per recorded field (the parameter tree by its file name only)."""
        return [f"{f.name.replace('_', ' ')}: {getattr(self, f.name)}" for f in fields(self)
                if getattr(self, f.name) is not None and f.name != "parameters"]


def parameters_yaml(parameters: HexapodParameters) -> str:
    """The whole validated tree as a self-contained parameters file (no ``extends``)."""
    return yaml.safe_dump({ROOT_KEY: parameters.model_dump(mode="json")}, sort_keys=False)
