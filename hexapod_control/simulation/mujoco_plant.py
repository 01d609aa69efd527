"""MuJoCo plant: an independent multibody simulation of the Hexapod's 25 bodies.

MuJoCo derives the dynamics from the bodies, joints and loop closures of
:mod:`hexapod_control.simulation.mjcf`; nothing here uses the project's dynamics, so the plant is
an independent check of the reduced model. The project's kinematics only set initial conditions
(every joint from the forward kinematics, so the loops are closed at reset) and are the reference
the tests compare the MuJoCo platform pose with.

The loop closures are soft equality constraints (MuJoCo has no other kind), so they open slightly
under load; :meth:`MujocoPlant.closure_error` measures that opening and the plant raises
SimulationDivergedError when it, or a speed, leaves the bounds of the parameters file, or when
MuJoCo meets a NaN. After such an error the plant keeps the last good state and refuses to step
until the next reset, so no caller ever reads NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from hexapod_control.errors import InvalidInputError, SimulationDivergedError
from hexapod_control.model.actuators import ActuatorModel
from hexapod_control.model.kinematics import JOINT_NAMES, Kinematics
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.model.validation import as_vector
from hexapod_control.simulation import mjcf
from hexapod_control.simulation.plant import Plant

# MuJoCo resets the state to qpos0 by itself when it meets a bad number; these warnings say so.
_BAD_STATE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
)


@dataclass(frozen=True)
class PlatformPose:
    """Pose of the platform frame Sigma_F (origin r_F) in the base frame."""

    position: np.ndarray  # r_F [m], (3,)
    rotation: np.ndarray  # 0R_F, (3, 3)
    euler_zyx: np.ndarray  # (lambda, mu, nu) [rad], R = Rz(lambda) Ry(mu) Rx(nu)

    @property
    def pose(self) -> np.ndarray:
        return np.concatenate((self.position, self.euler_zyx))


def rot_x(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def zyx_euler(rotation: np.ndarray) -> tuple[float, float, float]:
    """(lambda, mu, nu) with rotation = Rz(lambda) Ry(mu) Rx(nu), atan2 throughout (erratum 2)."""
    r = rotation
    return (math.atan2(r[1, 0], r[0, 0]), math.atan2(-r[2, 0], math.hypot(r[0, 0], r[1, 0])), math.atan2(r[2, 1], r[2, 2]))


def xyz_euler(rotation: np.ndarray) -> tuple[float, float, float]:
    """(theta1, theta2, theta3) with rotation = Rx(theta1) Ry(theta2) Rz(theta3), (6.70)-(6.72)."""
    r = rotation
    return (
        math.atan2(-r[1, 2], r[2, 2]),
        math.atan2(r[0, 2], math.hypot(r[1, 2], r[2, 2])),
        math.atan2(-r[0, 1], r[0, 0]),
    )


class MujocoPlant(Plant):
    """The Hexapod in MuJoCo, driven by six actuator forces along +q_k at ``simulation.rate``."""

    def __init__(self, parameters: HexapodParameters):
        self.parameters = parameters
        self.settings = parameters.simulation.mujoco
        self.dt = parameters.simulation.dt
        self.xml = mjcf.build_mjcf(parameters)
        self.model = mujoco.MjModel.from_xml_string(self.xml)
        self.data = mujoco.MjData(self.model)
        self._kinematics = Kinematics(parameters)
        self._force_max = parameters.limits.actuator_force_max
        # MuJoCo's joint attributes carry J, b and F_c (mjcf.py); a lead screw's asymmetry, Stribeck
        # hump and ripple are applied here as forces on the sliders, updated every substep.
        self._lead_screw = None if parameters.actuators.symmetric else ActuatorModel(parameters.actuators)

        def joint(name: str) -> int:
            return mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)

        self._slider_qpos = np.array([self.model.jnt_qposadr[joint(mjcf.slider_joint(k))] for k in range(6)])
        self._slider_dof = np.array([self.model.jnt_dofadr[joint(mjcf.slider_joint(k))] for k in range(6)])
        self._joint_qpos = {
            self.model.joint(j).name: int(self.model.jnt_qposadr[j]) for j in range(self.model.njnt)
        }
        self._passive_dof = np.setdiff1d(np.arange(self.model.nv), self._slider_dof)
        self._speed_limits = np.full(self.model.nv, self.settings.max_angular_speed)
        self._speed_limits[self._slider_dof] = self.settings.max_actuator_speed
        self._actuator_ids = np.array(
            [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_ACTUATOR, name) for name in mjcf.ACTUATOR_NAMES]
        )

        def site(name: str) -> int:
            return mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, name)

        # Every point that must coincide with apex P_i: both leg tips and each shard's copy of P_i.
        self._apex_sites = np.array(
            [
                [site(mjcf.leg_tip_site(2 * i)), site(mjcf.leg_tip_site(2 * i + 1))]
                + [site(mjcf.platform_apex_site(shard, i)) for shard in range(mjcf.PLATFORM_SHARDS)]
                for i in range(3)
            ]
        )
        # Equality pairs (site1, site2, rotational?) for the constraint Jacobian of holding_forces.
        self._closures = [
            (site(mjcf.leg_tip_site(2 * i + 1)), site(mjcf.leg_tip_site(2 * i)), False) for i in range(3)
        ] + [
            (site(mjcf.platform_apex_site(s, s)), site(mjcf.platform_apex_site(0, s)), True)
            for s in range(1, mjcf.PLATFORM_SHARDS)
        ]
        self._shard0 = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, mjcf.BODY_GROUPS["platform"][0])
        g = parameters.geometry
        apexes = mjcf.platform_apexes_local(parameters)
        # r_F in the frame of shard 0 (origin P_0, axes of Sigma_F): centroid + H_PQ z_F.
        self._frame_offset = -apexes[0] + np.array([0.0, 0.0, g.platform_offset])
        self._max_closure_seen = 0.0
        self._diverged: str | None = None
        self.reset(np.array(self._kinematics.home_q))

    # ------------------------------------------------------------------ Plant interface
    @property
    def time(self) -> float:
        return float(self.data.time)

    def reset(self, q, qd=None) -> None:
        """Assemble every joint from the forward kinematics of q; qd maps through MuJoCo's constraints."""
        q = np.array(as_vector(q, 6, "q", JOINT_NAMES))
        fk = self._kinematics.forward_kinematics(q)  # from home: the physical mode
        qpos = self.joint_angles(q, fk.phi, fk.rotation)
        qd = np.zeros(6) if qd is None else np.array(as_vector(qd, 6, "qd", JOINT_NAMES))
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = qpos
        mujoco.mj_forward(self.model, self.data)  # the Jacobians below need the new positions
        self.data.qvel[:] = self.constraint_null_space() @ qd
        mujoco.mj_forward(self.model, self.data)
        self._diverged = None
        self._max_closure_seen = self.closure_error()
        try:
            self._check_state()  # e.g. qd so large, or so near a singularity, that a joint runs away
        except SimulationDivergedError as error:
            self._diverged = str(error)
            raise

    def apply_forces(self, forces) -> None:
        forces = np.array(as_vector(forces, 6, "forces", JOINT_NAMES))
        self.data.ctrl[self._actuator_ids] = np.clip(forces, -self._force_max, self._force_max)

    @property
    def applied_forces(self) -> np.ndarray:
        """The saturated forces the actuators apply [N]."""
        return self.data.ctrl[self._actuator_ids].copy()

    def step(self, steps: int = 1) -> None:
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise InvalidInputError(f"steps: expected a non-negative integer, got {steps!r}")
        if self._diverged is not None:
            raise SimulationDivergedError(f"the MuJoCo plant diverged earlier ({self._diverged}); reset it first")
        for _ in range(steps):
            good_qpos, good_qvel, good_time = self.data.qpos.copy(), self.data.qvel.copy(), self.data.time
            warnings = [self.data.warning[w].number for w in _BAD_STATE_WARNINGS]
            if self._lead_screw is None:
                mujoco.mj_step(self.model, self.data, nstep=self.settings.substeps)
            else:
                for _ in range(self.settings.substeps):
                    self._apply_lead_screw(self.data)
                    mujoco.mj_step(self.model, self.data)
            # mj_step leaves the positions-dependent quantities at the state before the last
            # substep; refresh them so the closure check and the pose describe the new state.
            mujoco.mj_kinematics(self.model, self.data)
            try:
                if any(self.data.warning[w].number != n for w, n in zip(_BAD_STATE_WARNINGS, warnings)):
                    raise SimulationDivergedError(
                        f"MuJoCo met a non-finite or huge acceleration at t = {self.data.time:.6g} s"
                    )
                self._check_state()
            except SimulationDivergedError as error:
                self._diverged = str(error)
                self.data.qpos[:], self.data.qvel[:], self.data.time = good_qpos, good_qvel, good_time
                mujoco.mj_forward(self.model, self.data)
                raise

    def _apply_lead_screw(self, data: mujoco.MjData) -> None:
        """The lead screw's friction terms at data's state, as forces on the sliders (none when symmetric)."""
        if self._lead_screw is not None:
            data.qfrc_applied[self._slider_dof] = -self._lead_screw.lead_screw_friction(
                data.qvel[self._slider_dof], data.qpos[self._slider_qpos])

    def joint_positions(self) -> np.ndarray:
        return self.data.qpos[self._slider_qpos].copy()

    def joint_velocities(self) -> np.ndarray:
        return self.data.qvel[self._slider_dof].copy()

    # ------------------------------------------------------------------ MuJoCo-side measurements
    def platform_pose(self) -> PlatformPose:
        """Pose of Sigma_F as MuJoCo has it (from platform shard 0, in the tree of side 0)."""
        rotation = self.data.xmat[self._shard0].reshape(3, 3).copy()
        position = self.data.xpos[self._shard0] + rotation @ self._frame_offset
        return PlatformPose(position=position.copy(), rotation=rotation, euler_zyx=np.array(zyx_euler(rotation)))

    def closure_error(self) -> float:
        """Largest distance [m] between two points that the closed chains make coincide.

        At each apex P_i: the tips of both legs and the copy of P_i on each platform shard (the
        shard copies also measure the welds' angular error, through the lever L_P).
        """
        points = self.data.site_xpos[self._apex_sites]  # (apex, point, xyz)
        gaps = points[:, :, None, :] - points[:, None, :, :]  # every pair at each apex
        return math.sqrt(float(np.max(np.einsum("apqx,apqx->apq", gaps, gaps))))

    @property
    def max_closure_error(self) -> float:
        """Largest closure_error() seen at a plant step since the last reset [m]."""
        return self._max_closure_seen

    def constraint_jacobian(self) -> np.ndarray:
        """Jacobian (21, nv) of the loop closures at the current state, from MuJoCo's site Jacobians."""
        nv = self.model.nv
        rows = []
        for site1, site2, rotational in self._closures:
            jacp1, jacr1 = np.zeros((3, nv)), np.zeros((3, nv))
            jacp2, jacr2 = np.zeros((3, nv)), np.zeros((3, nv))
            mujoco.mj_jacSite(self.model, self.data, jacp1, jacr1, site1)
            mujoco.mj_jacSite(self.model, self.data, jacp2, jacr2, site2)
            rows.append(jacp1 - jacp2)
            if rotational:
                rows.append(jacr1 - jacr2)
        return np.vstack(rows)

    def constraint_null_space(self) -> np.ndarray:
        """S (nv, 6) with J S = 0 and the actuator rows of S = I: all joint rates from q_dot.

        This is MuJoCo's counterpart of the thesis' A(q), built from the closure Jacobian alone.
        """
        jacobian = self.constraint_jacobian()
        null_space = np.zeros((self.model.nv, 6))
        null_space[self._slider_dof] = np.eye(6)
        null_space[self._passive_dof] = -np.linalg.solve(
            jacobian[:, self._passive_dof], jacobian[:, self._slider_dof]
        )
        return null_space

    def holding_forces(self) -> np.ndarray:
        """Actuator forces [N] that hold the current configuration at rest, by virtual work.

        At rest M qacc + bias = tau + J^T lambda with bias = gravity; projecting on the admissible
        motions S (J S = 0) removes the closure forces: tau = S^T bias. Positive = along +q_k.
        """
        scratch = mujoco.MjData(self.model)
        scratch.qpos[:] = self.data.qpos
        mujoco.mj_forward(self.model, scratch)  # qvel = 0: qfrc_bias is the gravity term alone
        null_space = self._null_space_at(scratch)
        return null_space.T @ scratch.qfrc_bias

    def _null_space_at(self, data: mujoco.MjData) -> np.ndarray:
        saved, self.data = self.data, data
        try:
            return self.constraint_null_space()
        finally:
            self.data = saved

    def joint_accelerations(self) -> np.ndarray:
        """q_ddot (6,) [m/s^2] MuJoCo computes for the current state and forces (no step taken)."""
        scratch = mujoco.MjData(self.model)
        scratch.qpos[:], scratch.qvel[:], scratch.ctrl[:] = self.data.qpos, self.data.qvel, self.data.ctrl
        self._apply_lead_screw(scratch)
        mujoco.mj_forward(self.model, scratch)
        return scratch.qacc[self._slider_dof].copy()

    # ------------------------------------------------------------------ assembly from kinematics
    def joint_angles(self, q, phi, rotation) -> np.ndarray:
        """Full MuJoCo qpos for actuator positions q, passive angles phi and platform rotation 0R_F."""
        leg_length = self.parameters.geometry.leg_length
        qpos = np.zeros(self.model.nq)
        for side in range(3):
            qbar = q[2 * side] + q[2 * side + 1]
            alpha = math.asin(qbar / (2.0 * leg_length))  # sin(alpha_i) = qbar_i / (2L)
            for j, psi in ((0, -alpha), (1, alpha)):
                k = 2 * side + j
                qpos[self._joint_qpos[mjcf.slider_joint(k)]] = q[k]
                qpos[self._joint_qpos[mjcf.phi_joint(k)]] = phi[side]
                qpos[self._joint_qpos[mjcf.leg_joint(k)]] = psi
            # (6.69): Rx(t1) Ry(t2) Rz(t3) = N^T Rx(phi)^T R_Ti^T R_F.
            relative = mjcf.N_MATRIX.T @ rot_x(phi[side]).T @ mjcf.side_rotation(side).T @ rotation
            theta1, theta2, theta3 = xyz_euler(relative)
            qpos[self._joint_qpos[mjcf.s_joint(side, 1)]] = theta1 + alpha  # theta1 - psi of leg 2i
            qpos[self._joint_qpos[mjcf.s_joint(side, 2)]] = theta2
            qpos[self._joint_qpos[mjcf.s_joint(side, 3)]] = theta3
        return qpos

    # ------------------------------------------------------------------ divergence guard
    def _check_state(self) -> None:
        """Raise SimulationDivergedError on a non-finite state, runaway speed or open loops."""
        data, settings = self.data, self.settings
        # The sum is non-finite exactly when an entry is (an overflowing sum needs speeds far past
        # the bounds below), so one pass covers NaN and inf.
        if not math.isfinite(float(np.sum(data.qpos)) + float(np.sum(data.qvel))):
            raise SimulationDivergedError(f"MuJoCo state became non-finite at t = {data.time:.6g} s")
        if np.any(np.abs(data.qvel) > self._speed_limits):  # the messages are built only on failure
            actuator_speed = float(np.max(np.abs(data.qvel[self._slider_dof])))
            angular_speed = float(np.max(np.abs(data.qvel[self._passive_dof])))
            raise SimulationDivergedError(
                f"runaway speed at t = {data.time:.6g} s: actuators {actuator_speed:.6g} m/s "
                f"(max_actuator_speed {settings.max_actuator_speed}), passive joints "
                f"{angular_speed:.6g} rad/s (max_angular_speed {settings.max_angular_speed})"
            )
        closure = self.closure_error()
        self._max_closure_seen = max(self._max_closure_seen, closure)
        if closure > settings.max_closure_error:
            raise SimulationDivergedError(
                f"loop closure error {closure:.6g} m exceeds max_closure_error "
                f"{settings.max_closure_error} m at t = {data.time:.6g} s: the loops came apart"
            )
