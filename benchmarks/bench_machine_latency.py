"""How late this machine wakes a real-time thread that does nothing else: the floor under any loop.

    python benchmarks/bench_machine_latency.py [--seconds 20] [--rate 1000] [--realtime-priority 90]
                                               [--runs 3]

As cyclictest does: one thread under SCHED_FIFO (``--realtime-priority``; 0 keeps the normal
scheduler) sleeps until each absolute deadline 1/``--rate`` apart and records how late it woke.
It does no work, so what it sees is the machine's: the scheduler, interrupts and, on a virtual
machine, the time the hypervisor gave the virtual CPU to someone else (steal time, read from
/proc/stat over the run). A deadline passed by a whole period or more is skipped, as the fake
driver's loop skips it.

Printed per run: wake-up lateness median, p99, p99.9 and max; how many wake-ups came one, five and
twenty periods late or more; and the steal time as a share of the run. Any loop at this rate,
however little it does per period, is late at least this often on this machine: the stack and the
fake driver together see these stalls from both sides (doc/benchmarks.md, "The machine's own
stalls").
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

STALL_PERIODS = (1, 5, 20)  # lateness counted in whole periods
PERCENTILES = (50.0, 99.0, 99.9)


def steal_seconds() -> float:
    """The machine's steal time so far [s] (0 where /proc/stat has no such column)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def measure(seconds: float, period: float) -> tuple[np.ndarray, float]:
    """Wake-up lateness [s] of each period over ``seconds``, and the steal time over the run [s]."""
    lateness = []
    steal = steal_seconds()
    deadline = time.monotonic() + period
    end = deadline + seconds
    while deadline < end:
        time.sleep(max(0.0, deadline - time.monotonic()))
        late = time.monotonic() - deadline
        lateness.append(late)
        deadline += (1 + int(late // period)) * period
    return np.array(lateness), steal_seconds() - steal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="[Hz]")
    parser.add_argument("--realtime-priority", type=int, default=90, help="SCHED_FIFO priority; 0: normal scheduler")
    parser.add_argument("--runs", type=int, default=3)
    arguments = parser.parse_args()
    period = 1.0 / arguments.rate
    if arguments.realtime_priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(arguments.realtime_priority))
        except OSError as error:
            print(f"# SCHED_FIFO {arguments.realtime_priority} not permitted ({error}): normal scheduler")
    print(f"# {os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"{arguments.rate:g} Hz, {arguments.seconds:g} s per run, scheduler {os.sched_getscheduler(0)} "
          f"priority {os.sched_getparam(0).sched_priority}")
    print(f"{'run':>3} " + " ".join(f"{f'p{p:g} ms':>9}" for p in PERCENTILES) + f" {'max ms':>8} "
          + " ".join(f"{f'>={n} per.':>9}" for n in STALL_PERIODS) + f" {'steal %':>8}")
    for run in range(arguments.runs):
        lateness, steal = measure(arguments.seconds, period)
        print(f"{run + 1:>3} " + " ".join(f"{np.percentile(lateness, p) * 1e3:>9.3f}" for p in PERCENTILES)
              + f" {lateness.max() * 1e3:>8.2f} "
              + " ".join(f"{int(np.sum(lateness >= n * period)):>9d}" for n in STALL_PERIODS)
              + f" {100.0 * steal / arguments.seconds:>8.2f}")
    print(f"# load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
