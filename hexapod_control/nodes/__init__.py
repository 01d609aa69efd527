"""ROS 2 nodes of the Hexapod: thin shells that convert messages and call the pure-Python code.

* :mod:`.fk_node` - ``hexapod_fk_node``: /joint_states -> platform pose, twist, passive angles.
* :mod:`.trajectory_node` - ``hexapod_trajectory_node``: the reference at the control rate.
* :mod:`.controller_node` - ``hexapod_controller_node``: forces behind the safety supervisor.
* :mod:`.simulator_node` - ``hexapod_simulator_node``: a simulated plant and /clock.
* :mod:`.stack` - ``hexapod_sim_stack``: all four in one process, in lockstep.

Each module's docstring lists its topics, services and parameters.
"""
