"""Clocks, sampling and gaps of a recording: what the evaluation aligned, and how the data were sampled.

One clock. Every series is put on the clock of the joint states' header stamps. A topic stamped
on another clock (a driver stamping with the time since boot, a node on simulated time, a second
computer) is recognised by comparing each topic's offset between the bag's log (receive) times
and its stamps: stamps of one clock keep the same offset up to the transport latency
(milliseconds), stamps of different clocks differ by the clocks' difference. When two offsets
differ by more than ``CLOCK_MISMATCH_S``, the topic's stamps are moved onto the joint-state clock
by that difference (the medians over the recording, so jitter and a few late messages do not
count), and the report says so.

Sampling. A topic's period is the median step between its stamps; jitter is stated as the 1st
and 99th percentiles of the steps; a step longer than ``GAP_FACTOR`` periods is a gap (dropped
messages, not jitter): its start, length and the number of messages missing are reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

# Offsets (receive time - stamp) of two topics differing by more than this put them on different
# clocks. Transport and recorder latencies are milliseconds (a loaded recorder: tens of ms);
# clocks of different origins differ by seconds to decades.
CLOCK_MISMATCH_S = 0.5
# A step longer than this many median periods is a gap: jitter stays well below two periods.
GAP_FACTOR = 2.0
JITTER_PERCENTILES = (1.0, 99.0)
GAPS_LISTED = 5  # gaps listed one by one in the report (the rest are counted)
NS = 1e-9


@dataclass
class Sampling:
    """How one topic was sampled, on the run clock."""

    key: str
    topic: str
    samples: int
    period: float = float("nan")  # [s] median step
    step_percentiles: tuple[float, float] = (float("nan"), float("nan"))  # [s] (1st, 99th)
    gaps: list[tuple[float, float]] = field(default_factory=list)  # [(start t [s], length [s])]
    missing: int = 0  # messages missing in the gaps (at the median period)
    clock: str = ""  # where its times come from (header stamps, log times, moved by an offset)

    @property
    def rate(self) -> float:
        return 1.0 / self.period if self.period > 0.0 else float("nan")

    @property
    def gap_time(self) -> float:
        return float(sum(length for _, length in self.gaps))


def sampling(key: str, topic: str, t: np.ndarray, clock: str = "") -> Sampling:
    """Period, jitter and gaps of the sorted times ``t`` [s]."""
    result = Sampling(key, topic, int(t.size), clock=clock)
    if t.size < 2:
        return result
    steps = np.diff(t)
    result.period = float(np.median(steps))
    result.step_percentiles = tuple(float(v) for v in np.percentile(steps, JITTER_PERCENTILES))
    if result.period > 0.0:
        long = np.flatnonzero(steps > GAP_FACTOR * result.period)
        result.gaps = [(float(t[k]), float(steps[k])) for k in long]
        result.missing = int(np.sum(np.round(steps[long] / result.period) - 1))
    return result


def gap_mask(t: np.ndarray, period: float) -> np.ndarray:
    """Steps of ``t`` longer than GAP_FACTOR periods (True at the sample *after* the gap)."""
    mask = np.zeros(t.size, dtype=bool)
    if t.size > 1 and period > 0.0:
        mask[1:] = np.diff(t) > GAP_FACTOR * period
    return mask


def receive_offset(log_ns: np.ndarray, stamp_ns: np.ndarray) -> Optional[int]:
    """Median (log time - stamp) [ns] (the upper one of an even count), or None without messages."""
    if log_ns.size == 0:
        return None
    difference = log_ns - stamp_ns
    # In integers: a float median of epoch-sized nanoseconds would round to 256 ns.
    return int(np.partition(difference, difference.size // 2)[difference.size // 2])


def clock_shift(reference_offset: Optional[int], offset: Optional[int]) -> int:
    """[ns] to add to a topic's stamps to put them on the reference topic's clock (0: same clock)."""
    if reference_offset is None or offset is None:
        return 0
    difference = offset - reference_offset
    return difference if abs(difference) * NS > CLOCK_MISMATCH_S else 0


def describe(s: Sampling) -> str:
    """One line: rate, jitter, gaps."""
    if s.samples < 2:
        return f"{s.topic}: {s.samples} message(s)"
    low, high = s.step_percentiles
    text = (f"{s.topic}: {s.samples} messages at {s.rate:.6g} Hz (median step {s.period * 1e3:.4g} ms; "
            f"1-99 % of steps within {low * 1e3:.4g}-{high * 1e3:.4g} ms)")
    if s.gaps:
        longest = max(s.gaps, key=lambda g: g[1])
        text += (f"; {len(s.gaps)} gap(s) longer than {GAP_FACTOR:g} periods, {s.gap_time:.4g} s in all, "
                 f"~{s.missing} message(s) missing, longest {longest[1] * 1e3:.4g} ms at t = {longest[0]:.4g} s")
    else:
        text += "; no gaps"
    return text
