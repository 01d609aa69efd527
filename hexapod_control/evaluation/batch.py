"""The model on whole arrays: rotations, forward kinematics and inverse dynamics of a recording at once.

The 1 kHz loop calls the model one sample at a time in plain floats; an hour of joint states is
3.6 million samples, far too many for that. Here the same formulas run on whole arrays:

* rotations: model.rotation_rows (the ZYX Euler conversions of ``model.rotations``, row by row);
* forward kinematics, in C where the control cycle's library is: the loop's own forward kinematics
  (``hexapod_measure_rows``) row after row, each warm-started from the rows before it; a row it
  does not finish (the continuation, a failure) is solved one by one (``Kinematics.solve_passive``)
  and the C code goes on from there;
* forward kinematics in NumPy otherwise (``HEXAPOD_CONTROL_CYCLE=python``): Newton on the closure
  equations of ``model.kinematics`` for every sample together. The physical assembly mode is
  tracked as the loop tracks it: every ``ANCHOR_SPACING``-th sample is solved one by one,
  warm-started along the motion (``Kinematics.solve_passive``), and the samples between start
  from the passive angles interpolated between those anchors. A sample whose batch Newton fails,
  strays farther than ``MAX_BRANCH_JUMP`` from its start or leaves the physical mode is solved one
  by one from its converged neighbour; a sample that fails there too is a failure with the scalar
  error's message;
* inverse dynamics: the generated code of ``model.generated.dynamics_terms`` (the Python twin of
  the compiled C) evaluated with numpy's sqrt, sin and cos in place of ``math``'s, on blocks of
  ``DYNAMICS_BLOCK`` samples (the generated function keeps its ~1500 intermediate values alive
  until it returns).

Both agree with the one-sample model to round-off (the tests check it, and check the batch forward
kinematics against the leg lengths it must close).

A long series is solved in pieces of ``PIECE_ROWS`` rows (:func:`forward_kinematics_pieces`, and the
model check's points), each tracked from its own first row as a run is from its start, so that the
pieces can run on several processes (``evaluation.parallel``) with the same result.
"""

from __future__ import annotations

import functools
import math
import types
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from hexapod_control.control import compiled_prediction
from hexapod_control.errors import AssemblyError, AssemblyModeJumpError, ConvergenceError, InvalidInputError
from hexapod_control.evaluation import parallel
from hexapod_control.model.dynamics import pack_parameters
from hexapod_control.model.kinematics import (
    FK_TOLERANCE,
    MAX_BRANCH_JUMP,
    MAX_NEWTON_ITERATIONS,
    MAX_NEWTON_STEP,
    Kinematics,
)
from hexapod_control.model.rotation_rows import euler_zyx_from_axes

FK_ERRORS = (ConvergenceError, AssemblyModeJumpError, AssemblyError, InvalidInputError)
# Samples between two anchors solved one by one. At 1 kHz that is 0.1 s of motion: the passive
# angles move by milliradians to centiradians, so the interpolated start is within a Newton step or
# two of the solution, far inside MAX_BRANCH_JUMP.
ANCHOR_SPACING = 100
FK_BLOCK = 16_384  # samples per batch Newton: its ~50 temporaries of (N, 3) stay in the CPU cache
DYNAMICS_BLOCK = 10_000  # samples per generated-code call (its intermediates: ~1500 arrays of this length)
# Rows of a long series solved on their own (its forward kinematics tracked from its first row), in
# turn or on several cores: fixed, so that the result does not depend on the number of workers.
PIECE_ROWS = 262_144
# The cyclic solve of the scalar code treats |det| <= this fraction of the row-norm product as singular.
SINGULAR_DETERMINANT = 1e-14


# ------------------------------------------------------------------------------------------ forward kinematics
@dataclass
class BatchForwardKinematics:
    pose: np.ndarray  # (N, 6) xi, NaN where the forward kinematics failed
    phi: np.ndarray  # (N, 3) passive angles, NaN where it failed
    failures: list = field(default_factory=list)  # [(sample index, "Error: message")]
    one_by_one: int = 0  # samples solved one by one (anchors and fallbacks)


def _closure(kinematics: Kinematics, q: np.ndarray, phi: np.ndarray):
    """gamma, the rows (a, b) of dgamma/dphi and the apexes' coordinates (px, py, pz), each (3, N),
    of q (6, N) and phi (3, N): ClosedChainKinematics.closure_residual_and_slopes on arrays, one
    side per row so that every operation runs on a contiguous array."""
    chains = kinematics.chains
    (c0, c1, c2), (s0, s1, s2), d = chains.side_cos, chains.side_sin, chains.side_offset
    cos_side, sin_side = np.array([[c0], [c1], [c2]]), np.array([[s0], [s1], [s2]])
    qbar = q[0::2] + q[1::2]
    r = 0.5 * np.sqrt(chains.four_leg_length_squared - qbar * qbar)
    k = np.cos(phi)
    x, y, z = 0.5 * (q[1::2] - q[0::2]), d + r * k, r * np.sin(phi)
    px, py = cos_side * x - sin_side * y, sin_side * x + cos_side * y
    tx, ty, tz = sin_side * z, -cos_side * z, r * k
    # Edge k runs from vertex k to vertex k + 1 (SIDE_PAIRS); rolling the rows brings vertex k + 1 up.
    nx, ny, nz = np.roll(px, -1, axis=0), np.roll(py, -1, axis=0), np.roll(z, -1, axis=0)
    ex, ey, ez = nx - px, ny - py, nz - z
    gamma = 0.5 * (ex * ex + ey * ey + ez * ez) - chains.half_platform_side_squared
    a = -(ex * tx + ey * ty + ez * tz)
    b = ex * np.roll(tx, -1, axis=0) + ey * np.roll(ty, -1, axis=0) + ez * np.roll(tz, -1, axis=0)
    return gamma, a, b, (px, py, z)


def _determinant(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[0] * a[1] * a[2] + b[0] * b[1] * b[2]


def _solve_cyclic(a: np.ndarray, b: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """G x = rhs for G = [[a0, b0, 0], [0, a1, b1], [b2, 0, a2]] column by column (3, N); NaN where singular."""
    (a0, a1, a2), (b0, b1, b2), (r0, r1, r2) = a, b, rhs
    det = _determinant(a, b)
    scale = (np.abs(a0) + np.abs(b0)) * (np.abs(a1) + np.abs(b1)) * (np.abs(a2) + np.abs(b2))
    singular = (scale == 0.0) | (np.abs(det) <= SINGULAR_DETERMINANT * scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.array((
            (r0 * a1 * a2 - b0 * (r1 * a2 - b1 * r2)) / det,
            (a0 * (r1 * a2 - b1 * r2) + r0 * b1 * b2) / det,
            (a0 * a1 * r2 + b0 * b2 * r1 - a1 * b2 * r0) / det,
        ))
    x[:, singular] = np.nan
    return x


def _largest(values: np.ndarray) -> np.ndarray:
    """Largest |value| of each column of a (3, N) array."""
    return np.maximum(np.maximum(np.abs(values[0]), np.abs(values[1])), np.abs(values[2]))


def _newton(kinematics: Kinematics, q: np.ndarray, guess: np.ndarray):
    """(phi (N, 3), solved, apexes (N, 3, 3)) of Newton from ``guess`` for every row of q (N, 6), as
    Kinematics._newton does; ``solved`` rows converged in the physical assembly mode
    (kinematics.is_physical_mode)."""
    q_columns, phi = np.ascontiguousarray(q.T), np.ascontiguousarray(guess.T)
    count = q.shape[0]
    active = np.isfinite(phi).all(axis=0)
    solved = np.zeros(count, dtype=bool)
    apexes = np.full((count, 3, 3), np.nan)
    lp = kinematics.chains.platform_side
    for _ in range(MAX_NEWTON_ITERATIONS + 1):
        rows = np.flatnonzero(active)
        if not rows.size:
            break
        every = rows.size == count
        q_rows, phi_rows = (q_columns, phi) if every else (q_columns[:, rows], phi[:, rows])
        gamma, a, b, (px, py, pz) = _closure(kinematics, q_rows, phi_rows)
        done = _largest(gamma) / lp <= FK_TOLERANCE
        if done.any():
            finished = rows[done]
            active[finished] = False
            angles = phi_rows[:, done]
            solved[finished] = ((angles > 0.0) & (angles < math.pi)).all(axis=0) & (_determinant(a[:, done], b[:, done]) > 0.0)
            apexes[finished] = np.stack((px[:, done].T, py[:, done].T, pz[:, done].T), axis=2)
        going = ~done
        step = _solve_cyclic(a[:, going], b[:, going], gamma[:, going])
        largest = _largest(step)
        failed = ~np.isfinite(largest)
        active[rows[going][failed]] = False
        with np.errstate(invalid="ignore", divide="ignore"):
            shrink = np.where(largest > MAX_NEWTON_STEP, MAX_NEWTON_STEP / largest, 1.0)
        moving = rows[going][~failed]
        phi[:, moving] -= shrink[~failed] * step[:, ~failed]
    return phi.T, solved, apexes


def _platform_pose(kinematics: Kinematics, apexes: np.ndarray) -> np.ndarray:
    """(N, 6) xi from the apexes (N, 3 vertices, 3 coordinates): ClosedChainKinematics.platform_frame
    and the ZYX angles."""
    chains = kinematics.chains
    p0, p1, p2 = apexes[:, 0], apexes[:, 1], apexes[:, 2]
    e21, e01 = p2 - p1, p0 - p1
    y_axis = e21 / chains.platform_side
    z_axis = chains.normal_scale * np.cross(e21, e01)
    x_axis = np.cross(y_axis, z_axis)
    position = (p0 + p1 + p2) / 3.0 + chains.platform_offset * z_axis
    return np.hstack((position, euler_zyx_from_axes(x_axis, y_axis, z_axis)))


def _one_by_one(kinematics: Kinematics, q_row, state) -> tuple[np.ndarray | None, str]:
    """(phi, "") or (None, "Error: message") of the scalar forward kinematics."""
    try:
        return np.array(kinematics.solve_passive(q_row, state).phi), ""
    except FK_ERRORS as error:
        return None, f"{type(error).__name__}: {' '.join(str(error).split())}"


def forward_kinematics_batch(kinematics: Kinematics, q: np.ndarray, choice: str | None = None) -> BatchForwardKinematics:
    """Pose and passive angles of every row of ``q`` (N, 6), in the physical assembly mode tracked
    along the rows (module doc); failures are listed, not raised. In C where the control cycle's
    library is (``choice`` or ``$HEXAPOD_CONTROL_CYCLE``: auto, python or c), else in NumPy."""
    q = np.asarray(q, dtype=float)
    count = len(q)
    rows = compiled_prediction.row_kinematics(kinematics, choice) if count else None
    if rows is not None:
        return _forward_kinematics_compiled(rows, kinematics, np.ascontiguousarray(q))
    result = BatchForwardKinematics(np.full((count, 6), np.nan), np.full((count, 3), np.nan))
    if count == 0:
        return result
    anchors = np.unique(np.append(np.arange(0, count, ANCHOR_SPACING), count - 1))
    anchor_phi = np.full((anchors.size, 3), np.nan)
    state = kinematics.create_state()
    for i, k in enumerate(anchors):
        phi, _ = _one_by_one(kinematics, q[k], state)
        if phi is not None:
            anchor_phi[i] = phi
    result.one_by_one = int(anchors.size)
    good = np.all(np.isfinite(anchor_phi), axis=1)
    for start in range(0, count, FK_BLOCK):
        rows = np.arange(start, min(start + FK_BLOCK, count))
        guess = np.full((rows.size, 3), np.nan)
        if good.any():
            for side in range(3):
                guess[:, side] = np.interp(rows, anchors[good], anchor_phi[good, side])
        block_q = q[rows]
        assembles = np.all(np.isfinite(block_q), axis=1) & np.all(
            np.abs(block_q[:, 0::2] + block_q[:, 1::2]) < kinematics.two_leg_lengths, axis=1)
        guess[~assembles] = np.nan
        phi, converged, apexes = _newton(kinematics, np.where(assembles[:, None], block_q, kinematics.home_q), guess)
        converged &= np.max(np.abs(phi - guess), axis=1) <= MAX_BRANCH_JUMP
        result.phi[rows[converged]] = phi[converged]
        result.pose[rows[converged]] = _platform_pose(kinematics, apexes[converged])
    _solve_the_rest(kinematics, q, result)
    return result


def pieces(count: int) -> list[slice]:
    """Consecutive slices of PIECE_ROWS rows covering ``count`` rows."""
    return [slice(start, min(start + PIECE_ROWS, count)) for start in range(0, count, PIECE_ROWS)]


def forward_kinematics_pieces(kinematics: Kinematics, q: np.ndarray, workers: int = 1) -> BatchForwardKinematics:
    """:func:`forward_kinematics_batch` of each of the :func:`pieces` of ``q``, on up to ``workers``
    processes (``evaluation.parallel``), joined."""
    q = np.asarray(q, dtype=float)
    rows = pieces(len(q))
    if len(rows) <= 1:
        return forward_kinematics_batch(kinematics, q)
    solved = parallel.map_forked(lambda piece: forward_kinematics_batch(kinematics, q[piece]), rows, workers)
    return BatchForwardKinematics(
        np.concatenate([part.pose for part in solved]), np.concatenate([part.phi for part in solved]),
        [(piece.start + k, message) for piece, part in zip(rows, solved) for k, message in part.failures],
        sum(part.one_by_one for part in solved),
    )


def _forward_kinematics_compiled(rows: compiled_prediction.RowKinematics, kinematics: Kinematics,
                                 q: np.ndarray) -> BatchForwardKinematics:
    """The rows solved in C in turn, warm-started along the motion as the loop's forward kinematics
    is; a row the C code does not finish (the continuation, a failure) is solved one by one here,
    and the C code goes on from the state that leaves."""
    solved = np.full((len(q), rows.width), np.nan)
    failures, one_by_one = [], 0
    state = kinematics.create_state()
    k = 0
    while True:
        k += rows.solve(q[k:], solved[k:], state)
        if k == len(q):
            break
        phi, failure = _one_by_one(kinematics, q[k], state)
        one_by_one += 1
        if phi is None:
            failures.append((k, failure))
        else:
            solved[k, rows.phi], solved[k, rows.pose] = phi, _pose_of(kinematics, q[k], phi)
        k += 1
    return BatchForwardKinematics(np.ascontiguousarray(solved[:, rows.pose]), np.ascontiguousarray(solved[:, rows.phi]),
                                  failures, one_by_one)


def _pose_of(kinematics: Kinematics, q_row: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """xi (6,) of one row from its passive angles."""
    _, _, _, (px, py, pz) = _closure(kinematics, q_row[:, None], phi[:, None])
    return _platform_pose(kinematics, np.stack((px.T, py.T, pz.T), axis=2))[0]


def _solve_the_rest(kinematics: Kinematics, q: np.ndarray, result: BatchForwardKinematics) -> None:
    """Rows the batch left unsolved, one by one from the nearest solved row before them."""
    unsolved = np.flatnonzero(~np.all(np.isfinite(result.phi), axis=1))
    state, previous = kinematics.create_state(), None
    for k in unsolved:
        solved_before = k - 1 if k > 0 and np.isfinite(result.phi[k - 1, 0]) else None
        if solved_before is not None and solved_before != previous:
            state.last_q = state.previous_q = tuple(q[solved_before])
            state.last_phi = state.previous_phi = tuple(result.phi[solved_before])
        phi, failure = _one_by_one(kinematics, q[k], state)
        result.one_by_one += 1
        previous = k
        if phi is None:
            result.failures.append((int(k), failure))
            continue
        result.phi[k], result.pose[k] = phi, _pose_of(kinematics, q[k], phi)


# ------------------------------------------------------------------------------------------ dynamics
@functools.lru_cache(maxsize=1)
def _array_terms() -> types.ModuleType:
    """The generated dynamics terms compiled with numpy's sqrt, sin and cos in place of math's."""
    source = resources.files("hexapod_control.model.generated").joinpath("dynamics_terms.py").read_text()
    module = types.ModuleType("hexapod_control.model.generated.dynamics_terms_on_arrays")
    exec(compile(source, "<generated dynamics_terms on arrays>", "exec"), module.__dict__)  # noqa: S102 - our generated code
    module.math = types.SimpleNamespace(sqrt=np.sqrt, sin=np.sin, cos=np.cos)  # after its `import math`
    return module


def model_forces(parameters, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """(N, 6) :func:`inverse_dynamics_batch` at the forward kinematics of each row of q (tracked from
    its first row); NaN rows where either failed."""
    solved = forward_kinematics_batch(Kinematics(parameters), q)
    return inverse_dynamics_batch(parameters, q, solved.phi, qd, qdd)


def inverse_dynamics_batch(parameters, q: np.ndarray, phi: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """(N, 6) actuator forces tau = M_bar q_dd + C_bar q_d + g_bar for each row [N]; NaN rows where
    the model is singular or not finite (the scalar code raises SingularityError there)."""
    terms = _array_terms()
    packed = pack_parameters(parameters)
    forces = np.full((len(q), 6), np.nan)
    for start in range(0, len(q), DYNAMICS_BLOCK):
        rows = slice(start, start + DYNAMICS_BLOCK)
        with np.errstate(all="ignore"):
            columns = terms.reduced_inverse_dynamics(q[rows].T, phi[rows].T, qd[rows].T, qdd[rows].T, packed)
        forces[rows] = np.column_stack(np.broadcast_arrays(*columns))
    forces[~np.all(np.isfinite(forces), axis=1)] = np.nan
    return forces
