"""The Hexapod's dynamics reduced to the six sliders: static forces, mass matrix, a round trip.

    python examples/dynamics.py
"""

import numpy as np

from hexapod_control import HexapodModel

model = HexapodModel.from_yaml()
q = [model.parameters.home_actuator_position] * 6
zero = np.zeros(6)

# The forces that hold the platform still at home: gravity alone.
print("static forces at home [N]:", np.round(model.inverse_dynamics(q, zero, zero), 4))

# The reduced mass matrix M_bar = A^T M A of the 25 bodies, seen from the sliders [kg].
mass = model.mass_matrix(q)
print("mass matrix eigenvalues [kg]:", np.round(np.linalg.eigvalsh(mass), 3))

# Forward dynamics undoes inverse dynamics: the acceleration asked for comes back.
qd = np.array([0.05, -0.02, 0.0, 0.03, 0.01, -0.04])
qdd = np.array([0.5, 0.0, -0.3, 0.2, 0.1, 0.0])
forces = model.inverse_dynamics(q, qd, qdd)
print("forces for that motion [N]:", np.round(forces, 3))
print("forward dynamics error [m/s^2]:", np.max(np.abs(model.forward_dynamics(q, qd, forces) - qdd)))

# The energy at that state: the forces' power is the rate of change of their sum.
kinetic, potential = model.energy(q, qd)
print(f"kinetic energy {kinetic:.6f} J, potential energy {potential:.4f} J")
