"""Ray as the engine of the sweeps, the tuning and the bag archives; the only module importing ``ray``.

Without an address Ray starts on this machine's cores (``workers``, default all) and stops with the
command: no setup, nothing left running. With ``address`` (``host:port`` of a ``ray start --head``)
the same calls run on that cluster, whose nodes must import this package (install it, or start
each node with its PYTHONPATH). The dashboard and Ray's usage statistics stay off, and a local
Ray listens on 127.0.0.1 only.

:meth:`Engine.map` runs a function on every item and yields (index, result) as results come
back; a task that dies (a worker crash, a lost node) yields an :class:`Failure` instead, and the
rest go on.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

LOOPBACK = "127.0.0.1"
# Progress lines at most this often [s] (and at the last result): a line per case floods a terminal.
PROGRESS_PERIOD_S = 2.0


@dataclass(frozen=True)
class Failure:
    """A task that Ray could not bring back."""

    error: str


def quiet_environment() -> None:
    """No usage statistics (set before Ray is imported, and inherited by its processes)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


class Engine:
    """Ray for the duration of a ``with`` block (see the module doc)."""

    def __init__(self, address: str | None = None, workers: int | None = None):
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.address, self.workers = address, workers

    def __enter__(self) -> Engine:
        quiet_environment()
        import ray

        if self.address:
            ray.init(address=self.address, logging_level="ERROR", log_to_driver=False)
        else:
            # "local": a Ray of its own even where `ray start` left one running (None would join it).
            ray.init(address="local", num_cpus=self.workers or os.cpu_count(), include_dashboard=False,
                     _node_ip_address=LOOPBACK, logging_level="ERROR", log_to_driver=False)
        self.ray = ray
        return self

    def __exit__(self, *exc) -> None:
        self.ray.shutdown()

    @property
    def cpus(self) -> int:
        return int(self.ray.cluster_resources().get("CPU", 1))

    def map(self, function: Callable, items: Sequence, *args: Any) -> Iterator[tuple[int, Any]]:
        """(index, function(item, *args)) in order of completion; a lost task gives a Failure."""
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=0)(function)
        shared = [ray.put(arg) for arg in args]
        pending = {remote.remote(item, *shared): index for index, item in enumerate(items)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    yield index, ray.get(ref)
                except (ray.exceptions.RayError, OSError) as error:
                    yield index, Failure(f"{type(error).__name__}: {' '.join(str(error).split())[:500]}")


class Progress:
    """Items done, rate and time left, on stderr (at most every PROGRESS_PERIOD_S)."""

    def __init__(self, label: str, total: int, emit: Callable[[str], None] | None = None):
        self.label, self.total = label, total
        self.emit = emit or (lambda line: print(line, file=sys.stderr, flush=True))
        self.start = time.monotonic()
        self.done = self.failed = 0
        self._last = -PROGRESS_PERIOD_S

    def update(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += failed
        now = time.monotonic() - self.start
        if now - self._last < PROGRESS_PERIOD_S and self.done < self.total:
            return
        self._last = now
        rate = self.done / now if now > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        failures = f", {self.failed} failed" if self.failed else ""
        self.emit(f"[{self.label}] {self.done}/{self.total} done{failures}, {rate:.2f}/s, "
                  f"wall {now:.0f} s, ~{left:.0f} s left")
