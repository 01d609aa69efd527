"""A simulated identification run recorded to a bag, as the robot's would be.

The plant runs on its own parameters (the "true" drives to recover, its sensor model and loop
delay from ``simulation``), the controller on the model's; the bag holds the topics the recorder
records, written as the main job writes its runs (``simulation.lockstep_recording``), so
``hexapod_identify`` reads it like a bag recorded on the robot. Used by the tests and the
benchmark, and by anyone checking the identification on a simulator before a robot run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hexapod_control.bags import BagWriter
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant
from hexapod_control.simulation.lockstep import LockstepLoop
from hexapod_control.simulation.lockstep_recording import RecordWriter


def record_simulated_run(
    plant_parameters: HexapodParameters,
    model_parameters: HexapodParameters,
    bag_path: str | Path,
    duration: float,
    controller: str = "computed_torque",
    trajectory: str = "excitation",
    gain_set: str = "simulated_plant",
    backend: str = "embedded",
    storage: str | None = None,
    external_forces=None,
) -> dict:
    """Run ``trajectory`` for ``duration`` s and record it; returns counts and the plant's failure ("" if none).

    ``external_forces(t) -> (6,) or None``, optional: forces on the sliders from outside the
    drives at plant time t (embedded plant only), e.g. a collision to see in the residual.
    """
    model = HexapodModel(model_parameters)
    plant = make_plant(backend, plant_parameters)
    if not isinstance(plant, DelayedPlant):
        plant = DelayedPlant.from_settings(plant, plant_parameters.simulation)
    plant.reset(np.full(6, plant_parameters.home_actuator_position))
    control = ControlLoop(model, controller, gain_set=gain_set, arm_on_start=True)
    loop = LockstepLoop(plant, control, make_trajectory(trajectory, model))
    keys = list(model_parameters.recording.topics)
    writer = BagWriter(Path(bag_path), storage or model_parameters.recording.storage)
    for key in keys:
        writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
    recorder = RecordWriter(writer, keys, model_parameters.ros)
    inner = plant.plant
    try:
        for record in loop.run(duration):
            recorder.write(record)
            if external_forces is not None:
                push = external_forces(inner.time)
                inner.set_external_forces(np.zeros(6) if push is None else push)
    finally:
        writer.close()
    return {"steps": loop.steps, "failure": loop.failure, "counts": dict(writer.counts)}
