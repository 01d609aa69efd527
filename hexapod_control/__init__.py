"""Control of the Quanser Hexapod (6-3-PUS parallel robot).

The model, control, simulation and evaluation code imports nothing from ROS, so it can be used
from a notebook; the public API is importable from here, whatever the module layout::

    from hexapod_control import HexapodModel, make_controller, make_trajectory
    model = HexapodModel.from_yaml()          # the shipped experiments parameter set
    state = model.create_state()              # the FK warm start of one robot
    pose = model.forward_kinematics([0.1765] * 6, state)

Every exception class of the package derives from :class:`HexapodError` and is defined in
``hexapod_control.errors``; all of them are importable from here too.
"""

from hexapod_control.control.controllers import make_controller
from hexapod_control.control.loop import ControlLoop, StepRecord
from hexapod_control.control.safety import SafetySupervisor
from hexapod_control.control.trajectories import Reference, make_trajectory
from hexapod_control.errors import (
    AssemblyError,
    AssemblyModeJumpError,
    BagError,
    BoardError,
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
from hexapod_control.model.kinematics import KinematicState
from hexapod_control.model.parameters import HexapodParameters, load_parameters
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.lockstep import LockstepLoop, LoopRecord

__all__ = [
    "AssemblyError",
    "AssemblyModeJumpError",
    "BagError",
    "BoardError",
    "CompilationError",
    "ControlLoop",
    "ConvergenceError",
    "HexapodError",
    "HexapodModel",
    "HexapodParameters",
    "InvalidInputError",
    "KinematicState",
    "LockstepLoop",
    "LoopRecord",
    "ParameterError",
    "Reference",
    "SafetySupervisor",
    "SimulationDivergedError",
    "SingularityError",
    "StackStalledError",
    "StepRecord",
    "UnreachablePoseError",
    "load_parameters",
    "make_controller",
    "make_plant",
    "make_trajectory",
]
