"""A controller tracking the thesis's 6.5 trajectory on the simulated robot, without ROS.

    python examples/closed_loop.py [--duration 2] [--controller double_loop] [--plant mujoco]
"""

import argparse

import numpy as np

from hexapod_control import ControlLoop, HexapodModel, LockstepLoop, make_plant, make_trajectory

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--duration", type=float, default=2.0, help="simulated seconds (default: %(default)s)")
parser.add_argument("--controller", default="computed_torque", choices=["computed_torque", "double_loop"])
parser.add_argument("--plant", default="embedded", choices=["embedded", "mujoco"])
args = parser.parse_args()

model = HexapodModel.from_yaml()
plant = make_plant(args.plant, model.parameters)
# The simulated plants have no drives: the double loop needs its "simulated_plant" gains there.
control = ControlLoop(model, args.controller, gain_set="simulated_plant", arm_on_start=True)
loop = LockstepLoop(plant, control, make_trajectory("operational_space", model))

errors = [record.step.decision.control.position_error_norm
          for record in loop.run(args.duration) if record.step.decision.control]
print(f"{args.controller} on the {args.plant} plant, {args.duration:g} s at {model.parameters.controllers.rate:g} Hz:")
print(f"  {len(errors)} control steps, position error RMS {np.sqrt(np.mean(np.square(errors))):.3e} m, "
      f"max {np.max(errors):.3e} m")
print("  safety supervisor:", control.supervisor.state.value)
