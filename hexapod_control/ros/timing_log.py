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
    """Appends to named columns; ``path`` "" keeps nothing (the hot path then pays one test)."""

    def __init__(self, path: str, columns: tuple[str, ...]):
        self.path = path
        self.columns: dict[str, list[float]] = {name: [] for name in columns} if path else {}

    def record(self, column: str, value: float) -> None:
        if self.path:
            self.columns[column].append(value)

    def extend(self, column: str, values: list[float]) -> None:
        if self.path:
            self.columns[column].extend(values)

    def save(self) -> None:
        if self.path:
            np.savez(self.path, **{name: np.array(values, dtype=float) for name, values in self.columns.items()})


class LatencyWindow:
    """Latencies [s] since the last :meth:`report`."""

    def __init__(self):
        self._values: list[float] = []

    def add(self, latency: float) -> None:
        self._values.append(latency)

    def extend(self, latencies: list[float]) -> None:
        self._values.extend(latencies)

    def report(self) -> dict[str, float]:
        """{latency_median, latency_p99, latency_max} [s] of the window (NaN when empty); starts a new one.
        The percentiles interpolate linearly between the order statistics, as NumPy's default, on one
        sort of a plain list: a loop's status pays a few hundred values, not NumPy's dispatch."""
        ordered, self._values = sorted(self._values), []
        if not ordered:
            return {"latency_median": math.nan, "latency_p99": math.nan, "latency_max": math.nan}
        return {"latency_median": _quantile(ordered, 0.5), "latency_p99": _quantile(ordered, PERCENTILE / 100.0),
                "latency_max": ordered[-1]}


def _quantile(ordered: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of sorted values, linearly interpolated (NumPy's default method)."""
    position = (len(ordered) - 1) * fraction
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)
