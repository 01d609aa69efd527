"""The example board section, calibrated on a test's simulated stops (test_drive, test_quanser_board, over DDS)."""

from hexapod_control.model.parameters import default_parameters_path, load_parameters

EXAMPLE = load_parameters(default_parameters_path("quanser_board.example.yaml"))
TRAVEL_MARGIN = 0.005  # [m] the travel bound just beyond the stop the sliders rest on
# The example's gains are Quanser's for the robot, whose motors add inertia; on light simulated
# sliders their damping makes the 1 ms loop oscillate, as the double loop's robot gains do
# (gain_set simulated_plant). Faster moves and a short settle time keep the tests short.
SIMULATED_POWER_UP = {"calibration_speed": 0.2, "homing_speed": 0.4, "settle_time": 0.02,
                      "homing_stiffness": 10000.0, "homing_damping": 300.0, "homing_integral": 10000.0}


def board_overlay(stop: float, **limits) -> dict:
    """The changes to the example's board section for sliders calibrated on an upper stop at ``stop`` [m]."""
    return {"limits": {"travel_max": stop + TRAVEL_MARGIN, **limits},
            "power_up": {"reference_position": stop, **SIMULATED_POWER_UP}}


def simulated_parameters(stop: float, **limits):
    """The example parameters with the embedded plant's upper stops at ``stop`` and the board calibrated there."""
    return EXAMPLE.replace(limits={"actuator_position_max": stop}, board=board_overlay(stop, **limits))
