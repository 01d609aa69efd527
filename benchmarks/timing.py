"""Timing helpers shared by the benchmark scripts: per-call wall time, median and p99."""

from __future__ import annotations

import os
import platform
import time
from typing import Callable, Iterable

import numpy as np


def time_calls(function: Callable[[], object], calls: int, warmup: int = 50) -> np.ndarray:
    """Wall time of each call [us]; the warm-up calls are not recorded."""
    for _ in range(warmup):
        function()
    samples = np.empty(calls)
    for k in range(calls):
        start = time.perf_counter_ns()
        function()
        samples[k] = (time.perf_counter_ns() - start) / 1e3
    return samples


def time_sequence(function: Callable[[object], object], inputs: Iterable[object]) -> np.ndarray:
    """Wall time [us] of function(x) for each x in order (for warm-started calls along a path)."""
    samples = []
    for x in inputs:
        start = time.perf_counter_ns()
        function(x)
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return np.array(samples)


def print_header(title: str) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# {title}")
    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.2f}")
    print(f"{'what':<44} {'median us':>10} {'p99 us':>10} {'calls':>7}")


def print_row(name: str, samples: np.ndarray) -> None:
    print(f"{name:<44} {np.median(samples):>10.1f} {np.percentile(samples, 99):>10.1f} {samples.size:>7d}")
