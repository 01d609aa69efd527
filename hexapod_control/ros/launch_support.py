"""What the launch files share: which optional ROS packages are installed; boolean arguments.

robot_state_publisher and rviz2 are optional for the simulation and the robot (TF and the viewer);
Gazebo's packages are required by gazebo.launch.py. A launch file asks here before it adds a
node of another package, so that a missing package is a warning (optional) or one clear error
before any process starts (required), never a half-started launch.
"""

from __future__ import annotations

from collections.abc import Iterable


def missing_packages(packages: Iterable[str]) -> list[str]:
    """The packages of ``packages`` that the ament index does not know, in the order given."""
    from ament_index_python.packages import get_package_prefix

    missing = []
    for package in packages:
        try:
            get_package_prefix(package)
        except KeyError:  # ament_index_python's PackageNotFoundError
            missing.append(package)
    return missing


def parse_flag(name: str, value: str) -> bool:
    """A boolean launch argument's value, ``true`` or ``false`` in any case; anything else is an error
    naming the argument, raised before any process starts."""
    word = value.strip().lower()
    if word not in ("true", "false"):
        raise ValueError(f"launch argument {name}: expected true or false, got {value!r}")
    return word == "true"
