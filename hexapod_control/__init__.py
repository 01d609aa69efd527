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

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it. They are imported on first use (PEP 562), so
# that `import hexapod_control` and the `hexapod` command's --help load neither NumPy nor rclpy.
_PUBLIC = {
    "AssemblyError": "hexapod_control.errors",
    "AssemblyModeJumpError": "hexapod_control.errors",
    "BagError": "hexapod_control.errors",
    "BoardError": "hexapod_control.errors",
    "CompilationError": "hexapod_control.errors",
    "ControlLoop": "hexapod_control.control.loop",
    "ConvergenceError": "hexapod_control.errors",
    "HexapodError": "hexapod_control.errors",
    "HexapodModel": "hexapod_control.model.hexapod",
    "HexapodParameters": "hexapod_control.model.parameters",
    "InvalidInputError": "hexapod_control.errors",
    "KinematicState": "hexapod_control.model.kinematics",
    "LockstepLoop": "hexapod_control.simulation.lockstep",
    "LoopRecord": "hexapod_control.simulation.lockstep",
    "ParameterError": "hexapod_control.errors",
    "Reference": "hexapod_control.control.trajectories",
    "SafetySupervisor": "hexapod_control.control.safety",
    "SimulationDivergedError": "hexapod_control.errors",
    "SingularityError": "hexapod_control.errors",
    "StackStalledError": "hexapod_control.errors",
    "StepRecord": "hexapod_control.control.loop",
    "UnreachablePoseError": "hexapod_control.errors",
    "load_parameters": "hexapod_control.model.parameters",
    "make_controller": "hexapod_control.control.controllers",
    "make_plant": "hexapod_control.simulation",
    "make_trajectory": "hexapod_control.control.trajectories",
}


__all__ = sorted(_PUBLIC)


__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)
