"""Time to identify the drives from a 60 s bag at 1 kHz (hexapod_identify's work, without the report).

Run: ./scripts/bootstrap.sh && source scripts/env.sh && python benchmarks/bench_identify.py
The bag is an excitation run of the embedded plant with the drives of config/hexapod_actuators.yaml,
recorded once (about a minute of wall time) into --bag, then reused. Each repetition times the
three stages separately: reading the bag (load_run), filtering and the rigid-body forces at every
grid point (prepare_run: one forward kinematics and one inverse dynamics per sample, two with
--payload), and the robust least squares with the friction model chosen on held-out rows and intervals
(identify_samples).
Prints the median and the range over the repetitions, and the load average.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from hexapod_control import load_parameters
from hexapod_control.evaluation.bag import load_run
from hexapod_control.identification.regression import identify_samples
from hexapod_control.identification.samples import prepare_run
from hexapod_control.identification.simulated_run import record_simulated_run
from hexapod_control.model.parameters import default_parameters_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bag", default=str(Path(tempfile.gettempdir()) / "hexapod_identify_bench_60s"),
                        help="bag to identify from; recorded there first if absent (default: %(default)s)")
    parser.add_argument("--duration", type=float, default=60.0, help="simulated seconds of a new bag (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default: %(default)s)")
    parser.add_argument("--payload", action="store_true", help="also estimate a payload mass")
    args = parser.parse_args()
    base = load_parameters()
    bag = Path(args.bag)
    if not bag.exists():
        plant = load_parameters(default_parameters_path("hexapod_actuators.yaml"))
        started = time.perf_counter()
        summary = record_simulated_run(plant, base, bag, args.duration)
        print(f"# recorded {summary['steps']} steps to {bag} in {time.perf_counter() - started:.1f} s")
    print(f"# identification from {bag}" + (" with the payload" if args.payload else ""))
    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} before, ", end="")
    stages = {"read bag": [], "filter + rigid-body forces": [], "robust fits, model choice": [], "total": []}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        run = load_run(bag, base.ros.joint_names)
        t1 = time.perf_counter()
        samples = prepare_run(run, base, args.payload)
        t2 = time.perf_counter()
        result = identify_samples([samples], base, args.payload)
        t3 = time.perf_counter()
        for name, seconds in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
            stages[name].append(seconds)
    recorded = run.joint_t[-1] - run.joint_t[0]
    print(f"{os.getloadavg()[0]:.2f} after")
    print(f"# {run.joint_t.size} joint states over {recorded:.1f} s; "
          f"{sum(e.identified for e in result.estimates)} of {len(result.estimates)} parameters identified")
    print(f"{'stage':<32} {'median s':>9} {'min s':>8} {'max s':>8}")
    for name, values in stages.items():
        print(f"{name:<32} {np.median(values):>9.2f} {min(values):>8.2f} {max(values):>8.2f}")


if __name__ == "__main__":
    main()
