"""The period of a stream of stamps: the median spacing of the recent ones.

Shared by the delay compensation (the horizon of its prediction) and the safety supervisor (the
joint-state rate it checks at arming and while armed). A dropped state (one spacing of two
periods) or a late one moves the median not at all.
"""

from __future__ import annotations

import itertools
from collections import deque

# Stamp spacings the median is taken over.
WINDOW = 15


class StampPeriod:
    """The median spacing of the last ``window`` increasing stamps (a stamp not after the last one adds none)."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self._spacings: deque[float] = deque(maxlen=window)
        self._last: float | None = None

    def add(self, stamp: float) -> None:
        if self._last is not None and stamp > self._last:
            self._spacings.append(stamp - self._last)
        self._last = stamp

    @property
    def spacings(self) -> int:
        """How many spacings the median is taken over (at most ``window``)."""
        return len(self._spacings)

    def slow_run(self, slowest: float) -> list[float]:
        """The newest spacings [s] longer than ``slowest``, in a row, newest first."""
        return list(itertools.takewhile(lambda spacing: spacing > slowest, reversed(self._spacings)))

    def snapshot(self) -> tuple[list[float], float | None]:
        """The spacings, oldest first, and the last stamp: all the state (the compiled step packs it)."""
        return list(self._spacings), self._last

    def restore(self, spacings, last: float | None) -> None:
        """The state of a :meth:`snapshot` (the last ``window`` spacings of ``spacings`` are kept)."""
        self._spacings = deque((float(s) for s in spacings), maxlen=self.window)
        self._last = last

    @property
    def full(self) -> bool:
        """The window holds ``window`` spacings."""
        return len(self._spacings) == self.window

    def median(self, default: float) -> float:
        """The median spacing [s], ``default`` before two stamps."""
        spacings = sorted(self._spacings)
        count = len(spacings)
        if not count:
            return default
        middle = count // 2
        return spacings[middle] if count % 2 else (spacings[middle - 1] + spacings[middle]) / 2.0
