"""Identify the drives of the sliders from an excitation run on a plant whose drives are known.

    python examples/identify_drives.py [--duration 10]

The plant carries the drives of config/hexapod_actuators.yaml; the model the identification fits
on has none (the shipped config/hexapod.yaml). The estimates should come back near the plant's.
"""

import argparse
import tempfile
from pathlib import Path

from hexapod_control import load_parameters
from hexapod_control.identification import identify_bags
from hexapod_control.identification.simulated_run import record_simulated_run
from hexapod_control.model.parameters import default_parameters_path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--duration", type=float, default=10.0,
                    help="simulated seconds of the excitation trajectory (default: %(default)s)")
args = parser.parse_args()

model_parameters = load_parameters()
plant_parameters = load_parameters(default_parameters_path("hexapod_actuators.yaml"))
bag = Path(tempfile.mkdtemp(prefix="hexapod_example_")) / "excitation"
record_simulated_run(plant_parameters, model_parameters, bag, args.duration)

identified = identify_bags([str(bag)], model_parameters)
truth = plant_parameters.actuators
for estimate in identified.result.estimates:
    true_value = getattr(truth, estimate.name)[estimate.slider]
    found = f"{estimate.value:.4g} +- {estimate.half_width:.2g}" if estimate.identified else "not identifiable"
    print(f"slider {estimate.slider + 1} {estimate.name}: {found} {estimate.unit} (plant: {true_value:g})")
