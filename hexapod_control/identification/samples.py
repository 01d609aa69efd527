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
        "coulomb_asymmetry": 0.0, "stribeck_speed": 0.0, "viscous_ripple_cos": 0.0, "viscous_ripple_sin": 0.0,
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
    # The lead screw's columns (model/actuators.py), filtered like the others: H |tanh(q_d / v_s)|,
    # H q_d cos(2 pi q / p), H q_d sin(2 pi q / p); the Stribeck column of a speed v_st by :func:`stribeck_column`.
    asymmetry: np.ndarray | None = None  # (N, 6)
    ripple: np.ndarray | None = None  # (2, N, 6)
    raw_velocity: np.ndarray | None = None  # (N, 6) q_d on the grid, unfiltered [m/s]
    raw_shape: np.ndarray | None = None  # (N, 6) tanh(q_d / v_s) on the grid, unfiltered
    filter_order: int = 0  # the Savitzky-Golay polynomial order
    _stribeck: dict = field(default_factory=dict)  # v_st -> its column (N, 6)
    # The joint states' effort (the force applied, as ros2_control reads it back), held and
    # filtered like the commands; None when the bag has none.
    applied: np.ndarray | None = None  # (N, 6) [N]
    effort_delay: int | None = None  # measured periods from a command to the effort that shows it
    effort_mismatch: float = float("nan")  # RMS |effort - command that delay earlier| [N]


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
    drives = parameters.actuators
    shape = coulomb_shape(qd, np.array(drives.coulomb_smoothing_speed))
    angle = 2.0 * np.pi / drives.viscous_ripple_period * q

    samples = RunSamples(
        label=run.label, period=period, window=window, t=grid, valid=valid,
        position=smooth(q), velocity=smooth(qd), acceleration=smooth(qd, 1),
        coulomb=smooth(shape), forces=smooth(held), commanded=commanded,
        saturated=saturated, rigid=np.full((grid.size, 6), np.nan),
        payload=np.full((grid.size, 6), np.nan) if with_payload else None, notes=notes,
        asymmetry=smooth(np.abs(shape)),
        ripple=np.stack([smooth(qd * np.cos(angle)), smooth(qd * np.sin(angle))]),
        raw_velocity=qd, raw_shape=shape, filter_order=settings.derivative_order,
    )
    _applied_efforts(samples, run, grid, index, held, smooth, settings.max_delay_steps)
    _rigid_body_forces(samples, parameters)
    return samples


def stribeck_column(samples: RunSamples, speed: float) -> np.ndarray:
    """H exp(-(q_d / v_st)^2) tanh(q_d / v_s) (N, 6) for v_st = ``speed`` [m/s], kept once computed."""
    column = samples._stribeck.get(speed)
    if column is None:
        hump = np.exp(-((samples.raw_velocity / speed) ** 2)) * samples.raw_shape
        column = savgol_filter(hump, samples.window, samples.filter_order, axis=0, mode="interp")
        samples._stribeck[speed] = column
    return column


def _applied_efforts(samples: RunSamples, run: RunData, grid, command_index, held, smooth, max_delay: int) -> None:
    """The effort of the joint states on the grid, and the delay from a command to the effort showing it.

    Used when every joint state of the run carries one. The delay is the shift k (0..max_delay + 1)
    that best matches the effort at grid point n with the command answering point n - k.
    """
    applied = run.applied
    if applied.shape != run.q.shape or applied.size == 0 or not np.all(np.isfinite(applied)):
        return
    index = np.clip(np.searchsorted(run.joint_t, grid + 0.5 * (grid[1] - grid[0]), side="right") - 1, 0, None)
    effort = applied[index]
    best, mismatch = None, np.inf
    for shift in range(max_delay + 2):
        later, earlier = effort[shift:], held[: held.shape[0] - shift]
        known = command_index[: held.shape[0] - shift] >= 0
        if not known.any():
            continue
        rms = float(np.sqrt(np.mean((later[known] - earlier[known]) ** 2)))
        if rms < mismatch:
            best, mismatch = shift, rms
    samples.applied = smooth(effort)
    samples.effort_delay, samples.effort_mismatch = best, mismatch


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


def aligned_forces(samples: RunSamples, delay: int, applied: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(forces (N, 6), usable (N,), saturated (N, 6)) with the forces ``delay`` periods earlier.

    The command F_k acts over [t_k, t_k+1) (``delay`` = 0) and the centred derivative at t_k spans
    the intervals of F_k-1 and F_k: the force at t_k is their mean, shifted by the delay. With
    ``applied`` the joint states' effort replaces the commands (``delay`` = -1: the effort of a
    joint state is the force that acted over the period before it, as ros2_control reads it back).
    """
    source = samples.applied if applied else samples.forces
    n = samples.t.size
    forces = np.full((n, 6), np.nan)
    usable = np.zeros(n, dtype=bool)
    saturated = np.zeros((n, 6), dtype=bool)
    first, last = max(delay + 1, 0), min(n, n + delay)  # grid points k with k - delay - 1 >= 0 and k - delay < n
    if last > first:
        later, earlier = slice(first - delay, last - delay), slice(first - delay - 1, last - delay - 1)
        forces[first:last] = 0.5 * (source[later] + source[earlier])
        usable[first:last] = True if applied else samples.commanded[earlier]
        saturated[first:last] = samples.saturated[later] | samples.saturated[earlier]
    return forces, usable & samples.valid, saturated
