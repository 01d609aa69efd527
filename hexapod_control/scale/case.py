"""One case of a sweep in closed loop, and its row.

The loop is the main job's direct transport: ``make_plant`` behind its loop delay
(``simulation/delay.py``), the controller node's logic (``control/loop.py``: supervisor, controller,
delay compensation), armed at the first joint state, stepped in lockstep
(``simulation/lockstep.py``). The plant's parameters are the plant file's with the case's payload,
drives, delay, jitter, drops, sensor noise and seed; the controller keeps its own file, with the
case's delay compensation (the delay taken as known, as ``hexapod_margins`` takes it).

The row holds the inputs, the pose error e = xi_d - xi (angles wrapped) per axis (RMS and max over
the run, mean over the stability window at the end: the quasi-static error; the spread about that
mean there and over the window before), the peak commanded force and measured slider speed, the
time at the force limit, the faults, whether the plant stopped, the simulated verdict
(spec.StabilityCriterion) and, with ``linear_analysis``, the spectral radius of the same loop
linearised at home (control/margins.py) with its verdict. A case that raises is a row with its
error: a sweep goes on.
"""

from __future__ import annotations

import functools
import math
import time
import traceback
from pathlib import Path

import numpy as np

from hexapod_control.bags import BagWriter, RunInfo
from hexapod_control.bags.run_info import parameters_yaml
from hexapod_control.control import margins
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.safety import SupervisorState
from hexapod_control.control.trajectories import HoldTrajectory, home_pose, make_trajectory
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.kinematics import POSE_NAMES
from hexapod_control.model.parameters import HexapodParameters, load_parameters
from hexapod_control.model.rotations import wrap_angle
from hexapod_control.scale.spec import Case
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import loop_delay_words, with_loop_delay
from hexapod_control.simulation.lockstep import LockstepLoop
from hexapod_control.simulation.lockstep_recording import RecordWriter

# Per worker process: a sweep reuses few files and parameter sets, and a model costs a build.
CACHED_MODELS = 32


@functools.lru_cache(maxsize=CACHED_MODELS)
def cached_parameters(path: str) -> HexapodParameters:
    return load_parameters(path)


@functools.lru_cache(maxsize=CACHED_MODELS)
def cached_model(parameters: HexapodParameters) -> HexapodModel:
    return HexapodModel(parameters)


@functools.lru_cache(maxsize=CACHED_MODELS)
def cached_linear_plant(parameters: HexapodParameters) -> margins.Plant:
    return margins.linearised_plant(cached_model(parameters))


@functools.lru_cache(maxsize=CACHED_MODELS)
def cached_law(parameters: HexapodParameters, controller: str, gain_set: str) -> margins.Law:
    return margins.linearised_law(cached_model(parameters), controller, gain_set)


def with_payload(parameters: HexapodParameters, mass: float, height: float) -> HexapodParameters:
    """The platform carrying a point mass ``mass`` [kg] ``height`` [m] above its centre of mass along z_F.

    The platform's centre of mass moves to the combined one (H* + m h / (m_p + m)) and its
    transverse inertias gain both bodies' parallel-axis terms about it.
    """
    if mass == 0.0:
        return parameters
    platform = parameters.bodies.platform
    total = platform.mass + mass
    shift = mass * height / total  # the combined centre above the platform's own
    ixx, iyy, izz = platform.inertia
    transverse = platform.mass * shift**2 + mass * (height - shift) ** 2
    return parameters.replace(
        bodies={"platform": {"mass": total, "inertia": [ixx + transverse, iyy + transverse, izz]}},
        geometry={"platform_com_offset": parameters.geometry.platform_com_offset + shift},
    )


def plant_parameters(case: Case) -> HexapodParameters:
    """The plant file with the case's payload, drives, transport, sensor noise and seed."""
    values = case.values
    base = cached_parameters(case.plant_parameters_file)
    changes: dict = {"simulation": {
        "seed": case.seed,
        "loop_delay": {"periods": values["loop_delay"], "jitter_periods": values["jitter"],
                       "drop_probability": values["drop_probability"]},
        "sensor": {"noise_std": values["sensor_noise"]},
    }}
    drives = {key: values[key] for key in ("reflected_inertia", "viscous_friction", "coulomb_friction")
              if values[key] is not None}
    if "coulomb_friction" in drives:  # the breakaway force stays at or above the sliding one
        drives["static_friction"] = max(max(base.actuators.static_friction), drives["coulomb_friction"])
    if drives:
        changes["actuators"] = drives
    return with_payload(base.replace(**changes), values["payload_mass"], values["payload_height"])


def compensation_delay(case: Case) -> int:
    assumed = case.values["compensation_delay"]
    return case.values["loop_delay"] if assumed is None else assumed


def controller_parameters(case: Case) -> HexapodParameters:
    """The controller's file with the case's delay compensation (the delay known, not estimated)."""
    base = cached_parameters(case.parameters_file)
    compensated = case.values["delay_compensation"]
    return base.replace(controllers={"delay_compensation": {
        "predictor": "model" if compensated else "none",
        "delay_periods": compensation_delay(case),
        "estimate": False,
    }})


def trajectory_of(name: str, model: HexapodModel):
    return HoldTrajectory(home_pose(model)) if name == "hold" else make_trajectory(name, model)


def linear_verdict(case: Case, controller: HexapodParameters, plant: HexapodParameters) -> tuple[float, bool | None]:
    """Spectral radius of the loop linearised at home, and whether it is below 1 (NaN, None when the
    linear analysis does not describe the case: the compensation assumes another delay than the plant's)."""
    delay, compensated = case.values["loop_delay"], case.values["delay_compensation"]
    if compensated and compensation_delay(case) != delay:
        return math.nan, None
    # The bare laws: the compensation is part of closed_loop (margins.py linearises it itself).
    bare = controller.replace(controllers={"delay_compensation": {"predictor": "none"}})
    law = cached_law(bare, case.controller, case.gain_set)
    a, _ = margins.closed_loop(law, cached_linear_plant(plant), cached_linear_plant(bare),
                               controller.controllers.period, delay, compensated)
    radius = margins.spectral_radius(a)
    return radius, bool(radius < 1.0)


class RowMetrics:
    """Running sums of the step records; :meth:`columns` gives the row's outputs."""

    def __init__(self, force_limit: float, period: float, window: float):
        self.force_limit, self.period = force_limit, period
        self.window_steps = max(1, round(window / period))
        self.errors: list[np.ndarray] = []
        self.peak_force = self.peak_speed = 0.0
        self.saturated: list[bool] = []

    def add(self, record) -> None:
        forces = np.abs(record.step.forces)
        self.peak_force = max(self.peak_force, float(np.max(forces)))
        # The controllers clamp to exactly the limit: round-off is all this tolerance absorbs.
        self.saturated.append(bool(np.any(forces >= self.force_limit * (1.0 - 1e-9))))
        speed = float(np.max(np.abs(record.step.qd)))
        if math.isfinite(speed):  # NaN where the joint state was invalid
            self.peak_speed = max(self.peak_speed, speed)
        if record.reference is not None and record.step.pose is not None:
            error = record.reference.pose - record.step.pose
            error[3:] = wrap_angle(error[3:])
            self.errors.append(error)

    def columns(self) -> dict:
        errors = np.array(self.errors) if self.errors else np.full((1, 6), np.nan)
        final, before = errors[-self.window_steps:], errors[-2 * self.window_steps:-self.window_steps]
        columns = {}
        for k, axis in enumerate(POSE_NAMES):
            columns[f"rms_{axis}"] = float(np.sqrt(np.mean(errors[:, k] ** 2)))
            columns[f"max_{axis}"] = float(np.max(np.abs(errors[:, k])))
            columns[f"final_{axis}"] = float(np.mean(final[:, k]))
        position, orientation = np.linalg.norm(errors[:, :3], axis=1), np.linalg.norm(errors[:, 3:], axis=1)
        columns.update(
            position_rms=float(np.sqrt(np.mean(position**2))), position_max=float(np.max(position)),
            orientation_rms=float(np.sqrt(np.mean(orientation**2))), orientation_max=float(np.max(orientation)),
            final_position_max=float(np.max(np.linalg.norm(final[:, :3], axis=1))),
            final_orientation_max=float(np.max(np.linalg.norm(final[:, 3:], axis=1))),
            final_spread=_spread(final), spread_before=_spread(before) if len(before) else math.nan,
            peak_force=self.peak_force, peak_speed=self.peak_speed, saturated_time=sum(self.saturated) * self.period,
            final_saturated_time=sum(self.saturated[-self.window_steps:]) * self.period,
        )
        return columns


def _spread(errors: np.ndarray) -> float:
    """RMS of the position error about its mean [m]: what an oscillation adds to a steady offset."""
    return float(np.sqrt(np.mean(np.sum((errors[:, :3] - errors[:, :3].mean(axis=0)) ** 2, axis=1))))


def growing(columns: dict, criterion) -> bool:
    if criterion.max_growth is None or not max(columns["final_spread"], columns["spread_before"]) >= criterion.growth_floor:
        return False
    return columns["final_spread"] > criterion.max_growth * columns["spread_before"]


def run_case(case: Case, bag: Path | None = None) -> dict:
    """The case's row (module doc); never raises: an error becomes the row's ``error``."""
    started = time.monotonic()
    row = case.inputs()
    try:
        row.update(_run(case, bag))
        row["error"] = ""
    except Exception as error:  # noqa: BLE001 - a case's failure is a result of the sweep, not its end
        row["error"] = f"{type(error).__name__}: {' '.join(str(error).split())}"
        row["stable"] = False
        row["traceback"] = traceback.format_exc(limit=4)
    row["wall_time"] = time.monotonic() - started
    return row


def _run(case: Case, bag: Path | None) -> dict:
    controller_params, plant_params = controller_parameters(case), plant_parameters(case)
    model = cached_model(controller_params)
    plant = with_loop_delay(make_plant(case.plant, plant_params), plant_params.simulation)
    plant.reset(np.full(6, plant_params.home_actuator_position) + np.array(case.start))
    control = ControlLoop(model, case.controller, gain_set=case.gain_set, arm_on_start=True)
    loop = LockstepLoop(plant, control, trajectory_of(case.trajectory, model))
    criterion = case.stability
    metrics = RowMetrics(controller_params.limits.actuator_force_max, plant.dt, criterion.window)
    writer = None if bag is None else open_bag(bag, case, controller_params, plant_params)
    recorder = None if writer is None else RecordWriter(writer, controller_params.recording.topics, controller_params.ros)
    try:
        for record in loop.run(case.duration):
            metrics.add(record)
            if recorder is not None:
                recorder.write(record)
    finally:
        if writer is not None:
            writer.close()
    columns = metrics.columns()
    faulted = control.supervisor.state == SupervisorState.FAULT
    columns.update(
        steps=loop.steps, failure=loop.failure, faults=control.supervisor.faults,
        supervisor_state=control.supervisor.state.value,
    )
    columns["stable"] = bool(
        not loop.failure and not faulted
        and columns["final_position_max"] <= criterion.max_position_error
        and columns["final_orientation_max"] <= criterion.max_orientation_error
        and not growing(columns, criterion)
        and columns["final_saturated_time"] == 0.0  # a loop held at the force limit is not stable
    )
    radius, verdict = linear_verdict(case, controller_params, plant_params) if case.linear_analysis else (math.nan, None)
    columns.update(linear_radius=radius, linear_stable=verdict)
    return columns


def open_bag(bag: Path, case: Case, controller_params: HexapodParameters, plant_params: HexapodParameters) -> BagWriter:
    """A bag with the main job's topics and metadata, which ``hexapod_evaluate`` and ``hexapod_replay`` open.

    The case's parameter trees go next to it (``<bag>_controller.yaml``, ``<bag>_plant.yaml``): the
    metadata names them, and the controller's tree is recorded whole as well.
    """
    controller_file, plant_file = bag.with_name(bag.name + "_controller.yaml"), bag.with_name(bag.name + "_plant.yaml")
    controller_file.write_text(parameters_yaml(controller_params))
    plant_file.write_text(parameters_yaml(plant_params))
    info = RunInfo(
        controller=case.controller, gain_set=case.gain_set, parameters_file=str(controller_file),
        parameters=parameters_yaml(controller_params), plant=case.plant, plant_parameters_file=str(plant_file),
        trajectory=case.trajectory, loop_delay=loop_delay_words(plant_params),
        sensor_noise=f"{plant_params.simulation.sensor.noise_std:g} m",
    )
    storage = controller_params.recording.storage
    writer = BagWriter(bag, storage, custom_data=info.custom_data())
    for key in controller_params.recording.topics:
        writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
    return writer
