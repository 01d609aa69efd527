"""Reference trajectories, the two tracking controllers and the safety supervisor (no ROS)."""

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it, imported on first use (lazy_exports.py).
_PUBLIC = {
    "Action": "hexapod_control.control.safety",
    "CONTROLLER_NAMES": "hexapod_control.control.controllers",
    "CheckedTrajectory": "hexapod_control.control.trajectories",
    "ControlLoop": "hexapod_control.control.loop",
    "ControlOutput": "hexapod_control.control.controllers",
    "ControlStatus": "hexapod_control.control.controllers",
    "Decision": "hexapod_control.control.safety",
    "DelayCompensatedController": "hexapod_control.control.delay_compensation",
    "DiagnosticStatus": "hexapod_control.control.loop",
    "Level": "hexapod_control.control.loop",
    "Reference": "hexapod_control.control.trajectories",
    "SafetySupervisor": "hexapod_control.control.safety",
    "StepRecord": "hexapod_control.control.loop",
    "SupervisorState": "hexapod_control.control.safety",
    "TRAJECTORY_NAMES": "hexapod_control.control.trajectories",
    "TrajectoryPlayer": "hexapod_control.control.trajectory_player",
    "make_controller": "hexapod_control.control.controllers",
    "make_trajectory": "hexapod_control.control.trajectories",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)
