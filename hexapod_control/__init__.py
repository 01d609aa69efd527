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
_EXPORTS = {
    "hexapod_control.control.controllers": ("make_controller",),
    "hexapod_control.control.loop": ("ControlLoop", "StepRecord"),
    "hexapod_control.control.safety": ("SafetySupervisor",),
    "hexapod_control.control.trajectories": ("Reference", "make_trajectory"),
    "hexapod_control.errors": (
        "AssemblyError", "AssemblyModeJumpError", "BagError", "BoardError", "CompilationError",
        "ConvergenceError", "HexapodError", "InvalidInputError", "ParameterError",
        "SimulationDivergedError", "SingularityError", "StackStalledError", "UnreachablePoseError",
    ),
    "hexapod_control.model.hexapod": ("HexapodModel",),
    "hexapod_control.model.kinematics": ("KinematicState",),
    "hexapod_control.model.parameters": ("HexapodParameters", "load_parameters"),
    "hexapod_control.simulation": ("make_plant",),
    "hexapod_control.simulation.lockstep": ("LockstepLoop", "LoopRecord"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
