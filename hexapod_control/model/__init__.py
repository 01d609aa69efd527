"""The robot model: parameters schema, rotations, closed-chain kinematics, assembly modes, dynamics.

Pure Python and NumPy (the generated dynamics optionally compiled to C); imports nothing from ROS.
"""

# The board section of the parameters schema builds on its field types and completes it on import.
from hexapod_control.model import board_parameters  # noqa: F401, E402
