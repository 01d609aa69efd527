"""The robot model: parameters schema, rotations, closed-chain kinematics, assembly modes, dynamics.

Pure Python and NumPy (the generated dynamics optionally compiled to C); imports nothing from ROS.
"""

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it, imported on first use (lazy_exports.py).
_PUBLIC = {
    "ForwardKinematicsResult": "hexapod_control.model.kinematics",
    "HexapodModel": "hexapod_control.model.hexapod",
    "HexapodParameters": "hexapod_control.model.parameters",
    "InverseKinematicsResult": "hexapod_control.model.kinematics",
    "JOINT_NAMES": "hexapod_control.model.hexapod",
    "JacobianResult": "hexapod_control.model.hexapod",
    "KinematicState": "hexapod_control.model.kinematics",
    "default_parameters_path": "hexapod_control.model.parameters",
    "load_parameters": "hexapod_control.model.parameters",
    "parameters_from_mapping": "hexapod_control.model.parameters",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)

# The board section of the parameters schema builds on its field types and completes it on import.
from hexapod_control.model import board_parameters  # noqa: F401, E402
