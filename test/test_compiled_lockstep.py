"""The compiled lockstep loop against the Python lockstep, its reference (simulation/compiled_lockstep.py).

Two loops of the same plant, controller and trajectory: one yields its steps as records
(:meth:`LockstepLoop.run`, every step in Python, the trajectory sampled at each step), the other
as blocks whose tracking steps run in C (:meth:`LockstepLoop.run_blocks`, the reference off the
trajectory's grid). Their measured states, forces, transports and diagnostics must agree, with C
having run most steps; plants it does not have run in Python, and a diverging plant stops both
loops at the same step with the same message.
"""

import numpy as np
import pytest

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant
from hexapod_control.simulation.lockstep import ROW, LockstepLoop

DURATION_S = 2.0
# The grid's interpolation and the C code's rounding (~1e-16 in the reference) reach the forces
# through the gains: measured up to 2e-8 N (double loop, jittered transport) and 2e-13 m.
FORCE_AGREEMENT_N = 1e-6
POSITION_AGREEMENT_M = 1e-10


def loop_of(parameters, controller, jitter=0.0, drop=0.0, delay=1):
    plant = make_plant("embedded", parameters)
    if delay or jitter or drop:
        plant = DelayedPlant(plant, delay, jitter, drop, seed=3)
    model = HexapodModel(parameters)
    control = ControlLoop(model, controller, gain_set="simulated_plant", arm_on_start=True)
    return LockstepLoop(plant, control, make_trajectory("operational_space", model))


def both(parameters, controller, duration=DURATION_S, **transport):
    python, compiled = loop_of(parameters, controller, **transport), loop_of(parameters, controller, **transport)
    records = list(python.run(duration))
    blocks = list(compiled.run_blocks(duration))
    return python, records, compiled, blocks


def diagnostics_of(blocks):
    found, offset = [], 0
    for block in blocks:
        found += [(offset + row, status.level, status.message) for row, status in block.diagnostics]
        offset += len(block.rows)
    return found


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
@pytest.mark.parametrize("transport", [{"delay": 1}, {"delay": 1, "jitter": 2.0, "drop": 0.05}, {"delay": 0}])
def test_the_compiled_lockstep_steps_as_the_python_lockstep(controller, transport):
    parameters = load_parameters()
    python, records, compiled, blocks = both(parameters, controller, **transport)
    rows = np.concatenate([block.rows for block in blocks])
    assert len(rows) == len(records) == round(DURATION_S * parameters.controllers.rate)
    # C ran the steps after the arming ramp; Python the others.
    assert compiled.compiled.finished >= 0.7 * len(records)
    np.testing.assert_array_equal(rows[:, ROW["t"].start], [record.t for record in records])
    forces = np.array([record.step.forces for record in records])
    np.testing.assert_allclose(rows[:, ROW["forces"]], forces, rtol=0, atol=FORCE_AGREEMENT_N)
    np.testing.assert_allclose(rows[:, ROW["applied"]], [record.applied_forces for record in records], rtol=0,
                               atol=FORCE_AGREEMENT_N)
    np.testing.assert_allclose(rows[:, ROW["q"]], [record.step.q for record in records], rtol=0,
                               atol=POSITION_AGREEMENT_M)
    np.testing.assert_allclose(rows[1:, ROW["reference"]][:, :6], [record.reference.pose for record in records[1:]],
                               rtol=0, atol=POSITION_AGREEMENT_M)
    assert diagnostics_of(blocks) == [(k, record.step.diagnostic.level, record.step.diagnostic.message)
                                      for k, record in enumerate(records) if record.step.diagnostic is not None]
    if isinstance(python.plant, DelayedPlant):
        assert (compiled.plant.sent, compiled.plant.lost) == (python.plant.sent, python.plant.lost)
        assert compiled.plant.in_flight == python.plant.in_flight
    assert blocks[-1].action == records[-1].step.decision.action.value == "control"
    # The control loop's accounts read as if Python had taken every state.
    for loop in (python, compiled):
        loop.control.synchronize()
    assert compiled.control.supervisor.last_stamp == python.control.supervisor.last_stamp
    assert compiled.control.status_values()["joint_state_rate"] == pytest.approx(
        python.control.status_values()["joint_state_rate"], rel=1e-9)


def test_a_plant_without_a_compiled_step_runs_every_step_in_python():
    parameters = load_parameters().replace(simulation={"embedded": {"integrator": "rk4"}})
    python, records, compiled, blocks = both(parameters, "computed_torque", duration=0.6)
    assert compiled.compiled is None
    rows = np.concatenate([block.rows for block in blocks])
    np.testing.assert_array_equal(rows[:, ROW["forces"]], [record.step.forces for record in records])


def test_a_sensor_that_is_not_ideal_keeps_the_steps_in_python():
    parameters = load_parameters().replace(simulation={"sensor": {"noise_std": 1e-6}})
    python, records, compiled, blocks = both(parameters, "computed_torque", duration=0.6)
    assert compiled.compiled is None
    rows = np.concatenate([block.rows for block in blocks])
    np.testing.assert_array_equal(rows[:, ROW["q"]], [record.step.q for record in records])


def test_external_forces_keep_the_steps_in_python_while_they_act():
    parameters = load_parameters()
    python, compiled = loop_of(parameters, "computed_torque"), loop_of(parameters, "computed_torque")
    for loop in (python, compiled):
        loop.plant.plant.set_external_forces([3.0, -2.0, 0.0, 1.0, 0.5, -4.0])
    records = list(python.run(1.0))
    blocks = list(compiled.run_blocks(1.0))
    assert compiled.compiled is not None and compiled.compiled.finished == 0
    rows = np.concatenate([block.rows for block in blocks])
    np.testing.assert_allclose(rows[:, ROW["forces"]], [record.step.forces for record in records], rtol=0,
                               atol=FORCE_AGREEMENT_N)


def test_a_diverging_plant_stops_both_loops_at_the_same_step():
    # A speed guard the trajectory's sliders pass after the arming ramp, in a step C runs.
    parameters = load_parameters().replace(simulation={"embedded": {"max_actuator_speed": 5e-3}})
    python, records, compiled, blocks = both(parameters, "computed_torque", duration=3.0)
    assert "exceeds 0.005 m/s" in python.failure and "exceeds 0.005 m/s" in compiled.failure
    # The same step and time; the speed and q quoted differ in their last digits (the grid's reference).
    assert compiled.failure.split(": actuator speed")[0] == python.failure.split(": actuator speed")[0]
    assert compiled.steps == python.steps == len(records) < 3.0 * parameters.controllers.rate
    assert sum(len(block.rows) for block in blocks) == len(records)
    assert compiled.compiled.finished > 0.5 * len(records)


def test_a_block_is_recorded_as_its_steps_are_one_by_one(tmp_path):
    """RecordWriter.write_block against RecordWriter.write on the same steps (the Python lockstep's, as
    records and as blocks): the same messages, the rotations of the reference and the pose to
    round-off (numpy against math), everything else byte for byte."""
    from rosbags.rosbag2 import Reader

    from hexapod_control.bags import BagWriter, deserialize
    from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
    from hexapod_control.simulation.lockstep_recording import RecordWriter

    parameters = load_parameters()
    keys = parameters.recording.topics
    records = list(loop_of(parameters, "computed_torque").run(0.3))
    blocks = list(loop_of(parameters, "computed_torque").run_blocks(0.3, compiled=False))
    for name, items, write in (("steps", records, RecordWriter.write), ("blocks", blocks, RecordWriter.write_block)):
        with BagWriter(tmp_path / name) as writer:
            for key in keys:
                writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
            recorder = RecordWriter(writer, keys, parameters.ros)
            for item in items:
                write(recorder, item)
    read = {}
    for name in ("steps", "blocks"):
        with Reader(tmp_path / name) as reader:
            read[name] = [(connection.topic, connection.msgtype, t, bytes(data)) for connection, t, data in reader.messages()]
    assert [m[:3] for m in read["steps"]] == [m[:3] for m in read["blocks"]]
    assert any(topic == TOPICS["diagnostics"] for topic, *_ in read["steps"])
    for (topic, msgtype, _, one), (_, _, _, bulk) in zip(read["steps"], read["blocks"]):
        if topic not in (TOPICS["reference"], TOPICS["platform_pose"]):
            assert one == bulk, topic
            continue
        a, b = deserialize(one, msgtype), deserialize(bulk, msgtype)
        if topic == TOPICS["platform_pose"]:
            a, b = (np.array([m.pose.position.x, m.pose.position.y, m.pose.position.z, m.pose.orientation.x,
                              m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w]) for m in (a, b))
        else:
            a, b = (np.array([getattr(getattr(getattr(m.points[0], part)[0], field), axis)
                              for part, fields in (("transforms", ("translation", "rotation")),
                                                   ("velocities", ("linear", "angular")),
                                                   ("accelerations", ("linear", "angular")))
                              for field in fields for axis in ("xyzw" if field == "rotation" else "xyz")])
                    for m in (a, b))
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-15)
