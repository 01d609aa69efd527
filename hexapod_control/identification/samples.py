"""From a recorded run to the rows of the identification: filtered motion, forces and rigid-body forces.

The joint states are put on a uniform grid at their median period (grid points whose filter window
reaches into a gap, a step longer than ``GAP_FACTOR`` periods, or past either end are invalid).
One zero-phase Savitzky-Golay filter H (``identification.derivative_window`` / ``derivative_order``)
is applied to every signal of the regression, so that both sides of

    H tau = H tau_rigid(q, q_d, q_dd) + J H q_dd + b H q_d + F_c H tanh(q_d / v_s) [+ m_payload H p]

see the same band: H q, H q_d and q_dd = (H q_d)' for the rigid bodies (smooth, so H commutes with
them to well below the noise), and the drive columns filtered as they are, the Coulomb one after
the tanh of the measured q_d (the shape jumps at a reversal; filtering it afterwards keeps the
jump where the filtered force has it). The force is the command held until the next one (what an
effort controller applies), filtered alike; :func:`aligned_forces` shifts it by the force-to-motion
delay the fit chooses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import maximum_filter1d
from scipy.signal import savgol_filter

from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.bag import RunData
from hexapod_control.model.actuators import coulomb_shape
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import HexapodParameters

# A step longer than this many median periods is a gap in the joint states, not jitter.
GAP_FACTOR = 2.0
# The payload column is d tau / d m_platform, exact as a difference: tau is linear in the masses.
PAYLOAD_PROBE_MASS = 1.0  # [kg]


def window_samples(window: float, period: float, order: int) -> int:
    """Odd number of samples nearest ``window`` seconds, at least order + 2 (savgol's minimum)."""
    samples = max(int(round(window / period)), order + 2)
    return samples if samples % 2 else samples + 1


def rigid_parameters(parameters: HexapodParameters) -> HexapodParameters:
    """``parameters`` without drives: the rigid-body model the regression adds them to."""
    drives = parameters.actuators
    return parameters.replace(actuators={
        "reflected_inertia": 0.0, "viscous_friction": 0.0, "coulomb_friction": 0.0, "static_friction": 0.0,
        "coulomb_smoothing_speed": list(drives.coulomb_smoothing_speed),
    })


def payload_parameters(parameters: HexapodParameters) -> HexapodParameters:
    """The rigid model with ``PAYLOAD_PROBE_MASS`` more on the platform, at its centre of mass."""
    platform = parameters.bodies.platform
    return parameters.replace(bodies={"platform": {"mass": platform.mass + PAYLOAD_PROBE_MASS}})


@dataclass
class RunSamples:
    """One run on its uniform grid (N points); rows are (grid point, slider) pairs."""

    label: str
    period: float  # [s]
    window: int  # filter window [samples]
    t: np.ndarray  # (N,) [s]
    valid: np.ndarray  # (N,) motion filtered over a full window, rigid-body forces evaluated
    position: np.ndarray  # (N, 6) H q [m]
    velocity: np.ndarray  # (N, 6) H q_d [m/s]
    acceleration: np.ndarray  # (N, 6) (H q_d)' [m/s^2]
    coulomb: np.ndarray  # (N, 6) H tanh(q_d / v_s)
    forces: np.ndarray  # (N, 6) H (held command) [N], before the delay shift
    commanded: np.ndarray  # (N,) a command is held at this point
    saturated: np.ndarray  # (N, 6) a saturated command lies within the filter window
    rigid: np.ndarray  # (N, 6) tau_rigid(H q, H q_d, q_dd) [N]
    payload: np.ndarray | None  # (N, 6) d tau / d m_platform [N/kg], when asked for
    notes: list[str] = field(default_factory=list)


def prepare_run(run: RunData, parameters: HexapodParameters, with_payload: bool) -> RunSamples | str:
    """The filtered samples of ``run``, or why there are none (a sentence)."""
    settings = parameters.identification
    if not run.has_joint_states:
        return "fewer than 2 joint states"
    if not run.has_forces:
        return "no force commands (effort_commands) in the bag"
    steps = np.diff(run.joint_t)
    period = float(np.median(steps))
    if not period > 0.0:
        return "joint-state stamps do not advance"
    window = window_samples(settings.derivative_window, period, settings.derivative_order)
    grid = run.joint_t[0] + period * np.arange(int(np.floor((run.joint_t[-1] - run.joint_t[0]) / period)) + 1)
    if grid.size < window:
        return f"shorter than the {window}-sample derivative window ({settings.derivative_window:g} s)"

    def on_grid(values):
        return np.column_stack([np.interp(grid, run.joint_t, values[:, k]) for k in range(6)])

    def smooth(values, derivative=0):
        return savgol_filter(values, window, settings.derivative_order, deriv=derivative, delta=period, axis=0,
                             mode="interp")

    q, qd = on_grid(run.q), on_grid(run.qd)
    half = window // 2
    valid = np.zeros(grid.size, dtype=bool)
    valid[half : grid.size - half] = True
    gaps = steps > GAP_FACTOR * period
    for start, end in zip(run.joint_t[:-1][gaps], run.joint_t[1:][gaps]):
        valid &= ~((grid + half * period > start) & (grid - half * period < end))
    notes = []
    if gaps.any():
        notes.append(f"{int(gaps.sum())} gap(s) in the joint states: the grid points around them are left out")

    # Commands carry the stamp of the joint state they answer; half a period of slack keeps float
    # round-off in the grid (t_0 + k period against the stamps) from pairing a point with the command before.
    index = np.searchsorted(run.effort_t, grid + 0.5 * period, side="right") - 1
    commanded = index >= 0
    held = run.forces[np.maximum(index, 0)]
    limits, tolerance = parameters.limits, parameters.recording.evaluation.saturation_tolerance
    at_limit = np.abs(held) >= (1.0 - tolerance) * limits.actuator_force_max
    saturated = maximum_filter1d(at_limit.astype(np.uint8), size=window, axis=0).astype(bool)
    smoothing_speed = np.array(parameters.actuators.coulomb_smoothing_speed)

    samples = RunSamples(
        label=run.label, period=period, window=window, t=grid, valid=valid,
        position=smooth(q), velocity=smooth(qd), acceleration=smooth(qd, 1),
        coulomb=smooth(coulomb_shape(qd, smoothing_speed)), forces=smooth(held), commanded=commanded,
        saturated=saturated, rigid=np.full((grid.size, 6), np.nan),
        payload=np.full((grid.size, 6), np.nan) if with_payload else None, notes=notes,
    )
    _rigid_body_forces(samples, parameters)
    return samples


def _rigid_body_forces(samples: RunSamples, parameters: HexapodParameters) -> None:
    """tau_rigid (and the payload column) at every valid point; a point where FK or the dynamics fail is invalid."""
    rigid = HexapodModel(rigid_parameters(parameters))
    heavier = HexapodModel(payload_parameters(rigid.parameters)) if samples.payload is not None else None
    state = rigid.create_state()
    failures = 0
    for k in np.flatnonzero(samples.valid):
        q, qd, qdd = samples.position[k], samples.velocity[k], samples.acceleration[k]
        try:
            phi = rigid.kinematics.solve_passive(q, state).phi
            samples.rigid[k] = rigid.inverse_dynamics(q, qd, qdd, phi=phi)
            if heavier is not None:
                samples.payload[k] = (heavier.inverse_dynamics(q, qd, qdd, phi=phi) - samples.rigid[k]) / PAYLOAD_PROBE_MASS
        except HexapodError:
            samples.valid[k] = False  # FK or dynamics failed here: counted, not fatal
            state.reset()
            failures += 1
    if failures:
        samples.notes.append(f"forward kinematics or dynamics failed at {failures} grid point(s): left out")


def aligned_forces(samples: RunSamples, delay: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(forces (N, 6), usable (N,), saturated (N, 6)) with the commands ``delay`` periods earlier.

    The command F_k acts over [t_k, t_k+1) (``delay`` = 0) and the centred derivative at t_k spans
    the intervals of F_k-1 and F_k: the force at t_k is their mean, shifted by the delay.
    """
    n = samples.t.size
    forces = np.full((n, 6), np.nan)
    usable = np.zeros(n, dtype=bool)
    saturated = np.zeros((n, 6), dtype=bool)
    first = delay + 1
    if n > first:
        later, earlier = slice(1, n - delay), slice(0, n - first)
        forces[first:] = 0.5 * (samples.forces[later] + samples.forces[earlier])
        usable[first:] = samples.commanded[earlier]
        saturated[first:] = samples.saturated[later] | samples.saturated[earlier]
    return forces, usable & samples.valid, saturated
