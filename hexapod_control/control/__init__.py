"""Reference trajectories, the two tracking controllers and the safety supervisor (no ROS)."""

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it, imported on first use (lazy_exports.py).
_EXPORTS = {
    "hexapod_control.control.controllers": (
        "CONTROLLER_NAMES", "ControlOutput", "ControlStatus", "make_controller",
    ),
    "hexapod_control.control.delay_compensation": ("DelayCompensatedController",),
    "hexapod_control.control.loop": ("ControlLoop", "DiagnosticStatus", "Level", "StepRecord"),
    "hexapod_control.control.safety": ("Action", "Decision", "SafetySupervisor", "SupervisorState"),
    "hexapod_control.control.trajectories": (
        "CheckedTrajectory", "Reference", "TRAJECTORY_NAMES", "make_trajectory",
    ),
    "hexapod_control.control.trajectory_player": ("TrajectoryPlayer",),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
