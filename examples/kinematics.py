"""Forward and inverse kinematics, the Jacobian and the assembly modes of the Hexapod.

    python examples/kinematics.py
"""

import numpy as np

from hexapod_control import HexapodModel

model = HexapodModel.from_yaml()  # config/hexapod.yaml, the thesis's experiments set
state = model.create_state()  # the warm start of the forward kinematics along a motion

# Home: all six sliders at the same position.
q_home = [model.parameters.home_actuator_position] * 6
home = model.forward_kinematics(q_home, state)
print("home position [m]:", np.round(home.position, 4), " ZYX angles [rad]:", np.round(home.euler_zyx, 6))

# A pose off home, back to the sliders and forward again.
position = home.position + np.array([0.01, -0.005, 0.02])
euler = np.array([0.02, -0.01, 0.03])
ik = model.inverse_kinematics(position, euler)
fk = model.forward_kinematics(ik.q, state)
print("q for the pose [m]:", np.round(ik.q, 5))
print("FK(IK(pose)) - pose:", np.max(np.abs(fk.position - position)), "m,",
      np.max(np.abs(fk.euler_zyx - euler)), "rad")

# The analytic Jacobian J_A maps slider speeds to the pose rate.
jacobian = model.analytic_jacobian(ik.q, qd=[0.1, 0.0, 0.0, 0.0, 0.0, 0.0], phi=ik.phi)
print("pose rate for slider 1 at 0.1 m/s:", np.round(jacobian.analytic @ [0.1, 0, 0, 0, 0, 0], 4))
print("conditioning of J_A:", round(jacobian.jacobian_conditioning, 4))

# Every real assembly mode at these slider positions; the physical one is continuous with home.
modes = model.assembly_modes(ik.q)
print("real assembly modes:", len(modes), " the physical one is number", modes.physical_index)
