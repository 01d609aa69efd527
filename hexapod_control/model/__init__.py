"""The robot model: parameters schema, rotations, closed-chain kinematics, assembly modes, dynamics.

Pure Python and NumPy (the generated dynamics optionally compiled to C); imports nothing from ROS.
"""
