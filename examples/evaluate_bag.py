"""Record a simulated run to a bag, then evaluate it as a bag from the robot would be.

    python examples/evaluate_bag.py [--duration 3] [--output DIR]

The bag holds the topics `hexapod record` records on the robot; `hexapod evaluate` writes the
report, tables and figures from it.
"""

import argparse
import tempfile
from pathlib import Path

from hexapod_control import load_parameters
from hexapod_control.evaluation.cli import main as evaluate
from hexapod_control.identification.simulated_run import record_simulated_run

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--duration", type=float, default=3.0, help="simulated seconds (default: %(default)s)")
parser.add_argument("--output", type=Path, help="folder for the bag and the report (default: a new temporary one)")
parser.add_argument("--no-plots", action="store_true", help="report and tables without figures")
args = parser.parse_args()

folder = args.output or Path(tempfile.mkdtemp(prefix="hexapod_example_"))
parameters = load_parameters()  # the robot and the controller share one parameter set here
bag = folder / "run1"
summary = record_simulated_run(parameters, parameters, bag, args.duration, controller="computed_torque",
                               trajectory="operational_space")
print(f"recorded {bag}: {summary}")

# The same as `hexapod evaluate <bag> -o <folder>` on the command line.
status = evaluate([str(bag), "-o", str(folder / "run1_report"), *(["--no-plots"] if args.no_plots else [])])
raise SystemExit(status)
