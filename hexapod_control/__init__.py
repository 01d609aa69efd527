"""Control of the Quanser Hexapod (6-3-PUS parallel robot).

The model, control, simulation and evaluation code imports nothing from ROS, so it can be used
from a notebook::

    from hexapod_control import HexapodModel
    model = HexapodModel.from_yaml()          # the shipped experiments parameter set
    pose = model.forward_kinematics([0.1765] * 6)

Every exception class of the package derives from :class:`HexapodError` and is defined in
``hexapod_control.errors``; all of them are importable from here too.
"""

from hexapod_control.errors import (
    AssemblyError,
    AssemblyModeJumpError,
    BagError,
    CompilationError,
    ConvergenceError,
    HexapodError,
    InvalidInputError,
    ParameterError,
    SimulationDivergedError,
    SingularityError,
    StackStalledError,
    UnreachablePoseError,
)
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import HexapodParameters, load_parameters

__all__ = [
    "AssemblyError",
    "AssemblyModeJumpError",
    "BagError",
    "CompilationError",
    "ConvergenceError",
    "HexapodError",
    "HexapodModel",
    "HexapodParameters",
    "InvalidInputError",
    "ParameterError",
    "SimulationDivergedError",
    "SingularityError",
    "StackStalledError",
    "UnreachablePoseError",
    "load_parameters",
]
