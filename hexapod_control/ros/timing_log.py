"""When things happened in a running loop: for the loop benchmark, and for a lab checking its PC.

A node given the ROS parameter ``timing_log`` (a path) keeps the times of its loop's events in
:class:`TimingLog` and writes them as an .npz of float64 columns when it shuts down. The fake
driver records when each joint state was stamped and each command arrived; the robot stack the
stamp each command answers and when it published it. All are system-clock seconds, so on one
machine the two logs line up (benchmarks/bench_loop.py matches them).

:class:`LatencyWindow` gives the median, 99th percentile and maximum of the latencies recorded
since the last report, for /diagnostics.
"""

from __future__ import annotations

import math

import numpy as np

PERCENTILE = 99.0


class TimingLog:
    """Appends to named columns; ``path`` "" keeps nothing (the hot path then pays one test). A column
    holds single values and whole arrays (:meth:`extend`: one append, however many), in order."""

    def __init__(self, path: str, columns: tuple[str, ...]):
        self.path = path
        self.columns: dict[str, list] = {name: [] for name in columns} if path else {}

    def record(self, column: str, value: float) -> None:
        if self.path:
            self.columns[column].append(value)

    def extend(self, column: str, values) -> None:
        if self.path:
            self.columns[column].append(np.array(values, dtype=float))

    def save(self) -> None:
        if self.path:
            np.savez(self.path, **{name: _joined(values) for name, values in self.columns.items()})


class LatencyWindow:
    """Latencies [s] since the last :meth:`report`, single values and whole arrays (:meth:`extend`)."""

    def __init__(self):
        self._values: list = []

    def add(self, latency: float) -> None:
        self._values.append(latency)

    def extend(self, latencies) -> None:
        self._values.append(np.array(latencies, dtype=float))

    def report(self) -> dict[str, float]:
        """{latency_median, latency_p99, latency_max} [s] of the window (NaN when empty); starts a new one.
        The percentiles interpolate linearly between the order statistics, as NumPy's default."""
        ordered, self._values = np.sort(_joined(self._values)), []
        if not ordered.size:
            return {"latency_median": math.nan, "latency_p99": math.nan, "latency_max": math.nan}
        return {"latency_median": _quantile(ordered, 0.5), "latency_p99": _quantile(ordered, PERCENTILE / 100.0),
                "latency_max": float(ordered[-1])}


def _joined(values: list) -> np.ndarray:
    """Single values and arrays, in order, as one float array: each run of single values converted at
    once (np.hstack would make an array of each, slow over a Python loop's many answers)."""
    pieces, singles = [], []
    for value in values:
        if isinstance(value, np.ndarray):
            if singles:
                pieces.append(np.array(singles, dtype=float))
                singles = []
            pieces.append(value)
        else:
            singles.append(value)
    if singles:
        pieces.append(np.array(singles, dtype=float))
    return np.concatenate(pieces) if pieces else np.empty(0)


def _quantile(ordered: np.ndarray, fraction: float) -> float:
    """The ``fraction`` quantile of sorted values, linearly interpolated (NumPy's default method)."""
    position = (len(ordered) - 1) * fraction
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return float(ordered[below] + (ordered[above] - ordered[below]) * (position - below))
