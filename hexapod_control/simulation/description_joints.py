"""Every movable joint of the robot description at actuator positions q, from the model's FK.

The description (:mod:`hexapod_control.simulation.gazebo_description`) is a spanning tree of the
25 bodies: the six sliders, the two passive joints of each PU joint, the pin of each leg tip and
the remaining two revolutes of each S joint. robot_state_publisher needs a value for every one of
them to publish the TF of every body; the joint state of the robot gives only the sliders. Here the
model's forward kinematics gives the passive angles, and ``gazebo_description.joint_values`` turns
them into the description's joint values, the same ones that assemble it in Gazebo. Pure Python::

    joints = DescriptionJoints(parameters)
    state = joints.model.create_state()             # follows one robot (its assembly mode)
    positions = joints.positions(q, state)          # in the order of joints.names
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hexapod_control.model.hexapod import HexapodModel, KinematicState
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.simulation.gazebo_description import assembled_angles, build_description, joint_values


class DescriptionJoints:
    """Names and values of the description's movable joints; no working state: the caller carries it."""

    def __init__(self, parameters: HexapodParameters, model: HexapodModel | None = None):
        description = build_description(parameters)
        self.model = model or HexapodModel(parameters)
        self.names = tuple(joint.name for joint in description.joints if joint.type != "fixed")
        self._ros_names = parameters.ros
        self._home = description.home

    def positions(self, q: Sequence[float], state: KinematicState | None = None) -> np.ndarray:
        """Joint values in the order of ``names`` [m for the sliders, rad otherwise].

        The forward kinematics is warm-started from ``state`` (from home without one), so a series
        of calls stays in the robot's assembly mode; it raises as ``HexapodModel.forward_kinematics``
        does on an invalid q or a failed solve.
        """
        fk = self.model.forward_kinematics(q, state)
        now = assembled_angles(self.model.kinematics.chains, q, fk)
        values = joint_values(self._ros_names, self._home, now)
        return np.array([values[name] for name in self.names])
