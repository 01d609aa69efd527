"""DART plant: the package's Gazebo description in DART, loops closed as gz-physics closes them.

DART is Gazebo Sim's default physics engine (gz-physics' ``dartsim`` plugin). This plant loads the
URDF of :mod:`hexapod_control.simulation.gazebo_description` with DART's own URDF loader (the
``dartpy`` wheel from PyPI) and closes the five loops the way gz-physics does when gz-sim's
DetachableJoint system attaches a fixed joint to a child link that already has a parent
(``AttachFixedJoint`` -> ``SplitAndWeldLink``, gz-physics dartsim/src/Base.hh and JointFeatures.cc):

* the child link is split: a non-collidable *mirror* body is created, the link's inertia (mass
  and moments, same centre of mass) is divided equally between the link and its mirror;
* the mirror hangs from the weld's parent link by a WeldJoint at the relative pose of the two
  links when the weld is made (gz-sim: poseParent^-1 poseChild), the assembled home pose;
* a ``WeldJointConstraint`` between the link and its mirror, solved by the world's constraint
  solver each step, holds the loop closed; the world uses the PGS boxed-LCP solver, as the
  generated world asks (``<solver_type>pgs</solver_type>``).

What differs from a gz-sim run:

* the tree: DART's URDF loader builds it here, sdformat's URDF-to-SDF conversion there; sdformat
  lumps the massless frames ``hexapod_base`` and ``hexapod_platform`` into their parents, DART
  gives a massless link 1 kg, so they are made massless here;
* the forces: set on the slider joints before each step; gz_ros2_control's GazeboSimSystem writes
  the effort command in PreUpdate and reads the state in PostUpdate, so a command answering the
  state of step k acts from step k + 1 on at best: that is the loop delay, modelled apart
  (simulation/delay.py);
* versions: dartpy 6.20.0 (PyPI); gz-sim links the DART of its platform's packages through
  gz-physics, which may be older; the constraint settings are DART's defaults in both (weld error
  reduction, PGS iterations), none set here or in the generated world;
* no contacts (the description has no collision geometry), no joint damping or friction, no
  sensors or real-time factor: the world is stepped as fast as the caller asks.
"""

from __future__ import annotations

import math

import dartpy as dart
import numpy as np

from hexapod_control.errors import SimulationDivergedError
from hexapod_control.model.hexapod import JOINT_NAMES, HexapodModel
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.model.rotations import euler_zyx_from_rotation, wrap_angle
from hexapod_control.model.validation import as_vector
from hexapod_control.simulation import gazebo_description as gd
from hexapod_control.simulation.plant import Plant

# Central differences of the assembled joint values give the passive joints' rates at reset.
RATE_STEP = 1e-6  # [s]
MIRROR_SUFFIX = "_welded_mirror_0"  # gz-physics' name for a link's first mirror


def dart_version() -> str:
    """The DART version of the dartpy wheel (its distribution version)."""
    from importlib.metadata import version

    return version("dartpy")


class DartPlant(Plant):
    """The Hexapod's Gazebo description in DART, driven by six slider forces at ``simulation.rate``."""

    def __init__(self, parameters: HexapodParameters):
        self.parameters = parameters
        self.dt = parameters.simulation.dt
        self.model = HexapodModel(parameters)  # initial conditions only (the assembled pose)
        self.kinematic_state = self.model.create_state()
        self.description = gd.build_description(parameters)
        self._force_limit = parameters.limits.actuator_force_max
        loader = dart.utils.DartLoader()
        self.skeleton = loader.parseSkeletonString(gd.build_urdf(parameters, None, self.description), dart.common.Uri())
        for frame in (parameters.ros.base_frame, parameters.ros.platform_frame):
            body = self.skeleton.getBodyNode(frame)  # a frame, not a body: sdformat lumps it
            body.setMass(0.0)
            body.setMomentOfInertia(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        self.world = dart.simulation.World()
        self.world.setTimeStep(self.dt)
        self.world.setGravity([0.0, 0.0, -parameters.gravity])
        self.world.addSkeleton(self.skeleton)
        solver = self.world.getConstraintSolver()
        # PGS first, as gz-physics sets it for <solver_type>pgs</solver_type>; dartpy exposes no
        # constructor, but DART's default secondary (fallback) solver is a PGS one.
        solver.setBoxedLcpSolver(solver.getSecondaryBoxedLcpSolver())
        self.sliders = [self.skeleton.getJoint(name) for name in parameters.ros.joint_names]
        self.movable = [self.skeleton.getJoint(name) for name in gd.joint_positions(parameters)]
        self._assemble()  # the home pose, where the welds are made
        self._welds = [self._split_and_weld(weld) for weld in self.description.welds]
        self.reset(np.full(6, parameters.home_actuator_position))

    # -------------------------------------------------------------- construction
    def _assemble(self, q=None, qd=None) -> None:
        """Every joint at the assembled configuration of q (default home) and its rates for qd."""
        q = self.model.home_q if q is None else np.asarray(q, dtype=float)
        values = self._joint_values(q)
        rates = {name: 0.0 for name in values}
        if qd is not None and np.any(qd):
            ahead, behind = self._joint_values(q + RATE_STEP * qd), self._joint_values(q - RATE_STEP * qd)
            rates = {name: wrap_angle(ahead[name] - behind[name]) / (2.0 * RATE_STEP) for name in values}
        rates.update(zip(self.parameters.ros.joint_names, np.zeros(6) if qd is None else qd))  # exact for the sliders
        for joint in self.movable:
            joint.setPosition(0, values[joint.getName()])
            joint.setVelocity(0, rates[joint.getName()])

    def _joint_values(self, q) -> dict[str, float]:
        fk = self.model.forward_kinematics(q, self.kinematic_state)  # raises if q cannot assemble
        now = gd.assembled_angles(self.model.kinematics.chains, q, fk)
        return gd.joint_values(self.parameters.ros, self.description.home, now)

    def _split_and_weld(self, weld: gd.Weld):
        """gz-physics' SplitAndWeldLink and AttachFixedJoint for one DetachableJoint (module doc)."""
        child, parent = self.skeleton.getBodyNode(weld.child), self.skeleton.getBodyNode(weld.parent)
        mirror_joint, mirror = self.skeleton.createWeldJointAndBodyNodePair(parent)
        mirror.setName(weld.child + MIRROR_SUFFIX)
        mirror.setCollidable(False)
        mirror_joint.setTransformFromParentBodyNode(parent.getWorldTransform().inverse().multiply(child.getWorldTransform()))
        mass, moments, com = child.getMass(), child.getInertia().getMoment(), child.getLocalCOM()
        for body in (child, mirror):  # the link's inertia divided between the two, same centre of mass
            body.setMass(mass / 2.0)
            body.setMomentOfInertia(moments[0, 0] / 2.0, moments[1, 1] / 2.0, moments[2, 2] / 2.0,
                                    moments[0, 1] / 2.0, moments[0, 2] / 2.0, moments[1, 2] / 2.0)
            body.setLocalCOM(com)
        constraint = dart.constraint.WeldJointConstraint(child, mirror)
        self.world.getConstraintSolver().addConstraint(constraint)
        return child, mirror

    # -------------------------------------------------------------- Plant
    @property
    def time(self) -> float:
        return self._steps * self.dt

    def reset(self, q, qd=None) -> None:
        """Every joint assembled at q (the loops closed, passive rates from qd), time 0, zero force."""
        q = as_vector(q, 6, "q", JOINT_NAMES)
        qd = np.zeros(6) if qd is None else np.array(as_vector(qd, 6, "qd", JOINT_NAMES))
        self.kinematic_state.reset()
        self._assemble(np.array(q), qd)
        self._forces = np.zeros(6)
        self._steps = 0
        self.world.setTime(0.0)

    def apply_forces(self, forces) -> None:
        forces = np.array(as_vector(forces, 6, "forces", JOINT_NAMES))
        self._forces = np.clip(forces, -self._force_limit, self._force_limit)

    @property
    def applied_forces(self) -> np.ndarray:
        return self._forces.copy()

    def step(self, steps: int = 1) -> None:
        for _ in range(steps):
            for joint, force in zip(self.sliders, self._forces):
                joint.setForce(0, float(force))  # World.step clears the commands after each step
            self.world.step()
            self._steps += 1
            state = np.concatenate((self.skeleton.getPositions(), self.skeleton.getVelocities()))
            if not np.all(np.isfinite(state)):
                raise SimulationDivergedError(f"DART simulation diverged at t = {self.time:.4f} s")

    def joint_positions(self) -> np.ndarray:
        return np.array([joint.getPosition(0) for joint in self.sliders])

    def joint_velocities(self) -> np.ndarray:
        return np.array([joint.getVelocity(0) for joint in self.sliders])

    # -------------------------------------------------------------- checks
    def platform_pose(self) -> np.ndarray:
        """xi = (x, y, z, lambda, mu, nu) of the platform frame from DART's own bodies."""
        transform = self.skeleton.getBodyNode(self.parameters.ros.platform_frame).getWorldTransform()
        return np.concatenate((transform.translation(), euler_zyx_from_rotation(transform.rotation())))

    def closure_error(self) -> float:
        """The largest gap between a welded link and its mirror [m]: how far the loops are open."""
        return max(float(np.linalg.norm(child.getWorldTransform().translation() - mirror.getWorldTransform().translation()))
                   for child, mirror in self._welds)

    def closure_rotation_error(self) -> float:
        """The largest angle between a welded link and its mirror [rad]."""
        worst = 0.0
        for child, mirror in self._welds:
            r = child.getWorldTransform().rotation().T @ mirror.getWorldTransform().rotation()
            axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])  # 2 sin(angle) n
            worst = max(worst, math.atan2(0.5 * float(np.linalg.norm(axis)), 0.5 * (np.trace(r) - 1.0)))
        return worst

