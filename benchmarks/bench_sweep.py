"""Closed-loop cases per second against the number of Ray workers, and the scaling it implies.

Run: source scripts/env.sh && python benchmarks/bench_sweep.py [--workers 1 2] [--cases 16] [--duration 1.0]
     [--controller double_loop] [--address HOST:PORT]

Each row runs the same cases (the controller on the embedded plant, the joint-space trajectory for
``--duration`` simulated seconds, one period of loop delay compensated, payload 0-2 kg drawn per
case) with Ray started on that many local workers (or on a cluster with ``--address``, whose CPUs
are used once). It prints the per-case wall time inside the worker (median and p99 [s]), the
throughput over the whole batch (cases/s, Ray's start excluded), the speed-up over the first row,
and the load average before and after: on a shared machine the load says how much of the cores
the sweep really had.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from hexapod_control.scale.engine import Engine
from hexapod_control.scale.spec import SweepSpec, expand
from hexapod_control.scale.sweep import run_cases


def cases(count: int, duration: float, controller: str):
    gain_set = "robot" if controller == "computed_torque" else "simulated_plant"
    spec = SweepSpec.model_validate({
        "name": "bench", "trajectory": "joint_space", "duration": duration, "samples": count, "linear_analysis": False,
        "controllers": [{"name": controller, "gain_set": gain_set}],
        "grid": {"loop_delay": [1], "delay_compensation": [True]}, "random": {"payload_mass": {"uniform": [0.0, 2.0]}},
    })
    return expand(spec, Path("."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cases", type=int, default=16)
    parser.add_argument("--duration", type=float, default=1.0, help="simulated seconds per case")
    parser.add_argument("--controller", default="double_loop", choices=("double_loop", "computed_torque"))
    parser.add_argument("--address", help="a Ray cluster instead of local workers (one row)")
    args = parser.parse_args()
    batch = cases(args.cases, args.duration, args.controller)
    print(f"# {args.cases} cases of {args.duration:g} s ({args.controller}, joint space, 1 period compensated), "
          f"{os.cpu_count()} CPUs here")
    print(f"{'workers':>8} {'case median s':>14} {'case p99 s':>11} {'cases/s':>8} {'speed-up':>9} {'load before':>12} {'load after':>11}")
    first = None
    for workers in ([None] if args.address else args.workers):
        load_before = os.getloadavg()[0]
        with Engine(args.address, workers) as engine:
            run_cases(batch[:1], engine, "warm-up", emit=lambda line: None)  # imports and model builds per worker
            started = time.monotonic()
            rows = run_cases(batch, engine, "bench", emit=lambda line: None)
            wall = time.monotonic() - started
            cpus = engine.cpus
        failed = [r for r in rows if r["error"]]
        if failed:
            raise SystemExit(f"{len(failed)} case(s) failed: {failed[0]['error']}")
        per_case = np.array([r["wall_time"] for r in rows])
        rate = len(rows) / wall
        first = first or rate
        print(f"{workers or cpus:>8} {np.median(per_case):>14.2f} {np.percentile(per_case, 99):>11.2f} {rate:>8.3f} "
              f"{rate / first:>9.2f} {load_before:>12.2f} {os.getloadavg()[0]:>11.2f}")


if __name__ == "__main__":
    main()
