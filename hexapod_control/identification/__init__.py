"""Identification of the drives (reflected inertia, viscous and Coulomb friction, payload) from bags.

    hexapod_identify BAG... -o overlay.yaml        (also python -m hexapod_control.identification)

Reads the joint states and force commands of each bag (:func:`hexapod_control.evaluation.bag.load_run`),
filters them (samples.py), fits the parameters by robust (Huber) least squares with the friction
model chosen on held-out rows and confidence intervals (regression.py), and writes a parameters overlay of the schema's
``actuators`` keys and a report (report.py). Pure Python: nothing here imports ROS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hexapod_control.evaluation.bag import load_run
from hexapod_control.identification.regression import Identification, identify_samples
from hexapod_control.identification.samples import RunSamples, prepare_run
from hexapod_control.model.parameters import HexapodParameters

__all__ = ["BagIdentification", "Identification", "identify_bags"]


@dataclass
class BagIdentification:
    """The fit (None when no bag had usable data), the prepared runs and the bags that were skipped."""

    result: Identification | None
    runs: list[RunSamples]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (bag, why)


def identify_bags(
    bags: Sequence[str],
    parameters: HexapodParameters,
    with_payload: bool = False,
    topic_overrides: Mapping[str, str] | None = None,
) -> BagIdentification:
    """Identify the drives from ``bags`` on the rigid-body model of ``parameters``.

    BagError when a bag cannot be opened; a bag without usable data is skipped with its reason.
    """
    runs, skipped = [], []
    for bag in bags:
        run = load_run(bag, parameters.ros.joint_names, topic_overrides)
        samples = prepare_run(run, parameters, with_payload)
        if isinstance(samples, str):
            skipped.append((str(bag), "; ".join([samples, *run.notes])))
        else:
            samples.notes[:0] = run.notes
            runs.append(samples)
    result = identify_samples(runs, parameters, with_payload) if runs else None
    return BagIdentification(result, runs, skipped)
