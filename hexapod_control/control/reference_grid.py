"""A reference source sampled on a fixed grid and interpolated at any instant (quintic Hermite).

Why. The loop needs the reference at every joint state's stamp, at 1-4 kHz, and a sample can cost
more than the rest of the step: the joint-space trajectories solve the forward kinematics and the
analytic Jacobian for each one. On a grid of ``trajectories.sample_period`` the source is sampled
once per knot, whatever the joint-state rate, and between two knots the pose, the velocity and the
acceleration at both ends fix the one quintic through them, which the loop evaluates at the stamp.
It reproduces a quintic move exactly and errs by at most max|xi^(6)| h^6 / 46080 on a smooth
trajectory (h: the grid's period; the ``h^6/(6! 2^6)`` bound of Hermite interpolation), far below
the model's accuracy at the shipped period (test_reference_grid.py measures it on each trajectory).

The knots live in one array, :attr:`ReferenceGrid.array`, laid out as the header ``GRID_FIELDS``
then ``capacity`` knots of :data:`KNOT` values (pose, velocity, acceleration): the compiled step
(codegen/control_step.py, which defines that layout) interpolates the same knots with the same
arithmetic, in the same order, so that both give the same numbers. The grid only holds knots; :meth:`ReferenceGrid.extend` adds
the ones a stamp needs, and whoever owns the source (trajectory_player.py) decides what a source
that fails to sample means.
"""

from __future__ import annotations

import math

import numpy as np

from hexapod_control.codegen.control_step import GRID_FIELDS, GRID_KNOT
from hexapod_control.control.trajectories import Reference, sample_rows

KNOT = GRID_KNOT  # pose (6), velocity (6), acceleration (6)
_ORIGIN, _PERIOD, _FIRST, _COUNT = (GRID_FIELDS.index(name) for name in ("origin", "period", "first", "count"))
_DATA = len(GRID_FIELDS)


def knot_interval(grid: np.ndarray, t: float) -> tuple[int, float]:
    """(index k of the knot at or before ``t``, fraction s of the way to knot k + 1) on ``grid``."""
    position = (t - grid[_ORIGIN]) / grid[_PERIOD]
    k = math.floor(position)
    return k, position - k


def hermite_weights(s: float, h: float) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The weights of (velocity0, acceleration0, acceleration1, velocity1, pose1 - pose0) in the pose
    change from pose0, the velocity and the acceleration at fraction ``s`` of an interval of ``h``
    seconds. Written from pose0 rather than with its own weight, so that a hold (equal knots, no
    motion) is its pose exactly; and as the C code writes them (codegen/control_step.py), so that
    each sum rounds alike."""
    s2 = s * s
    s3 = s2 * s
    s4 = s3 * s
    s5 = s4 * s
    h2 = h * h
    pose = ((s - 6.0 * s3 + 8.0 * s4 - 3.0 * s5) * h, 0.5 * (s2 - 3.0 * s3 + 3.0 * s4 - s5) * h2,
            0.5 * (s3 - 2.0 * s4 + s5) * h2, (-4.0 * s3 + 7.0 * s4 - 3.0 * s5) * h, 10.0 * s3 - 15.0 * s4 + 6.0 * s5)
    velocity = (1.0 - 18.0 * s2 + 32.0 * s3 - 15.0 * s4, 0.5 * (2.0 * s - 9.0 * s2 + 12.0 * s3 - 5.0 * s4) * h,
                0.5 * (3.0 * s2 - 8.0 * s3 + 5.0 * s4) * h, -12.0 * s2 + 28.0 * s3 - 15.0 * s4,
                (30.0 * s2 - 60.0 * s3 + 30.0 * s4) / h)
    acceleration = ((-36.0 * s + 96.0 * s2 - 60.0 * s3) / h, 0.5 * (2.0 - 18.0 * s + 36.0 * s2 - 20.0 * s3),
                    0.5 * (6.0 * s - 24.0 * s2 + 20.0 * s3), (-24.0 * s + 84.0 * s2 - 60.0 * s3) / h,
                    (60.0 * s - 180.0 * s2 + 120.0 * s3) / h2)
    return pose, velocity, acceleration


class ReferenceGrid:
    """Knots of one source every ``period`` seconds from its t = 0, ``capacity`` of them at most."""

    def __init__(self, period: float, capacity: int):
        if not period > 0.0 or capacity < 2:
            raise ValueError(f"a reference grid needs a positive period and two knots, got {period} s, {capacity}")
        self.capacity = capacity
        self.array = np.zeros(_DATA + capacity * KNOT)  # its address is kept by the compiled step: never replaced
        self.array[_PERIOD] = period
        self.source = None

    @property
    def period(self) -> float:
        return float(self.array[_PERIOD])

    def reset(self, source, origin: float) -> None:
        """Hold no knot, and sample ``source`` (an object with sample(t) -> Reference) from now on, its
        t = 0 at ``origin`` on the caller's clock."""
        self.source = source
        self.array[_ORIGIN], self.array[_FIRST], self.array[_COUNT] = origin, 0.0, 0.0

    def holds(self, t: float) -> bool:
        """Whether the two knots around ``t`` are held."""
        k, _ = knot_interval(self.array, t)
        first, count = int(self.array[_FIRST]), int(self.array[_COUNT])
        return count > 0 and first <= k and k + 1 < first + count

    def extend(self, t: float) -> None:
        """Hold the two knots around ``t`` (sampling the source where needed; its errors propagate),
        dropping the oldest beyond the capacity."""
        if self.holds(t):
            return
        array = self.array
        k, _ = knot_interval(array, t)
        first, count = int(array[_FIRST]), int(array[_COUNT])
        if not count or k < first or k + 2 - (first + count) > self.capacity:  # behind, or too far ahead
            first, count = k, 0  # to fill up to: start afresh at k
        for index in range(first + count, k + 2):
            if count == self.capacity:  # the oldest knot leaves
                array[_DATA:_DATA + (count - 1) * KNOT] = array[_DATA + KNOT:_DATA + count * KNOT]
                first, count = first + 1, count - 1
            array[_FIRST], array[_COUNT] = first, count  # consistent if the source fails below
            sample = self.source.sample(index * self.period)
            at = _DATA + count * KNOT
            array[at:at + 6], array[at + 6:at + 12], array[at + 12:at + 18] = (
                sample.pose, sample.velocity, sample.acceleration)
            count += 1
            array[_COUNT] = count

    def hold(self, start: float, stop: float) -> None:
        """Hold the knots around every instant from ``start`` to ``stop`` and none before: those held
        already are kept, the others sampled at once (the source's ``sample_rows``). ValueError when
        they are more than the capacity."""
        array = self.array
        first_needed, _ = knot_interval(array, start)
        last_needed = knot_interval(array, stop)[0] + 1
        if last_needed - first_needed + 1 > self.capacity:
            raise ValueError(f"{last_needed - first_needed + 1} knots needed, the grid holds {self.capacity}")
        first, count = int(array[_FIRST]), int(array[_COUNT])
        kept = 0
        if count and first <= first_needed < first + count:
            kept = min(first + count, last_needed + 1) - first_needed
            at = _DATA + (first_needed - first) * KNOT
            array[_DATA:_DATA + kept * KNOT] = array[at:at + kept * KNOT].copy()
        array[_FIRST], array[_COUNT] = first_needed, kept  # consistent if the source fails below
        indices = np.arange(first_needed + kept, last_needed + 1)
        if len(indices):
            rows = sample_rows(self.source, indices * self.period)
            array[_DATA + kept * KNOT:_DATA + (kept + len(indices)) * KNOT] = rows.ravel()
            array[_COUNT] = kept + len(indices)

    def sample(self, t: float) -> Reference:
        """The reference at ``t``, between the knots around it (sampled first where missing)."""
        self.extend(t)
        k, s = knot_interval(self.array, t)
        at = _DATA + (k - int(self.array[_FIRST])) * KNOT
        # On plain floats (a 1 kHz loop's fallback): each sum in the C code's order.
        p0, v0, a0, p1, v1, a1 = (self.array[at + i:at + i + 6].tolist() for i in range(0, 2 * KNOT, 6))
        change = [end - start for start, end in zip(p0, p1)]
        pose, velocity, acceleration = (
            [w1 * v0[i] + w2 * a0[i] + w3 * a1[i] + w4 * v1[i] + w5 * change[i] for i in range(6)]
            for w1, w2, w3, w4, w5 in hermite_weights(s, self.period))
        return Reference(t, np.array([start + step for start, step in zip(p0, pose)]), np.array(velocity),
                         np.array(acceleration))

