"""The robot model: parameters schema, rotations, closed-chain kinematics, assembly modes, dynamics.

Pure Python and NumPy (the generated dynamics optionally compiled to C); imports nothing from ROS.
"""

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it, imported on first use (lazy_exports.py).
_EXPORTS = {
    "hexapod_control.model.hexapod": ("HexapodModel", "JOINT_NAMES", "JacobianResult"),
    "hexapod_control.model.kinematics": (
        "ForwardKinematicsResult", "InverseKinematicsResult", "KinematicState",
    ),
    "hexapod_control.model.parameters": (
        "HexapodParameters", "default_parameters_path", "load_parameters",
        "parameters_from_mapping",
    ),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

# The board section of the parameters schema builds on its field types and completes it on import.
from hexapod_control.model import board_parameters  # noqa: F401, E402
