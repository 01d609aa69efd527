"""The drive side of the robot without ROS: one driver core over a pluggable board.

:mod:`.core` runs the power-up state machine and serves force commands; :mod:`.board` is what it
asks of a board; :mod:`.simulated_board` puts the embedded plant behind encoder counts, PWM and
amplifier fault lines; :mod:`.quanser_board` is a Quanser HIL board through ``quanser.hardware``
(imported only when that board is chosen). The node ``hexapod_control.ros.fake_driver`` is the
thin ROS shell around it.
"""

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it, imported on first use (lazy_exports.py).
_EXPORTS = {
    "hexapod_control.drive.board": ("Board", "BoardSample"),
    "hexapod_control.drive.core": ("DriveCore", "DriveState"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
