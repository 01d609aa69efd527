"""JointStateWire against rclpy's own deserialization of the same bytes (the oracle)."""

import math
import struct

import numpy as np
import pytest

pytest.importorskip("rclpy")
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState

from hexapod_control import load_parameters
from std_msgs.msg import Float64MultiArray

from hexapod_control.codegen.control_step import WIRE_FIELDS
from hexapod_control.ros.wire import (
    MAX_LAYOUTS,
    JointStateFields,
    JointStateWire,
    JointStateWriter,
    float64_array_message,
)

JOINTS = list(load_parameters().ros.joint_names)


def joint_state(names=JOINTS, frame_id="", effort=True, seed=0, sec=1_795_000_000, nanosec=123_456_789):
    rng = np.random.default_rng(seed)
    message = JointState(name=list(names), position=rng.uniform(-1, 1, len(names)).tolist(),
                         velocity=rng.uniform(-1, 1, len(names)).tolist(),
                         effort=rng.uniform(-300, 300, len(names)).tolist() if effort else [])
    message.header.stamp.sec, message.header.stamp.nanosec = sec, nanosec
    message.header.frame_id = frame_id
    return message


def as_tuples(fields: JointStateFields):
    return (fields.stamp, tuple(fields.names), tuple(fields.positions), tuple(fields.velocities), tuple(fields.efforts))


# Frame ids of every length modulo 8 move the numbers across each alignment; with and without effort.
@pytest.mark.parametrize("frame_id", ["", "b", "base", "base_lin", "hexapod_base_link"])
@pytest.mark.parametrize("effort", [True, False])
def test_the_numbers_read_at_the_layouts_offsets_are_rclpys(frame_id, effort):
    wire = JointStateWire(JOINTS)
    for seed in range(5):  # the first message teaches the layout, the others are read by it
        message = joint_state(frame_id=frame_id, effort=effort, seed=seed, sec=1_795_000_000 + seed,
                              nanosec=999_999_999 - seed)
        data = serialize_message(message)
        fields = wire.read(data)
        assert fields is not None
        oracle = JointStateFields.of(deserialize_message(data, JointState))
        assert as_tuples(fields) == as_tuples(oracle)  # bit for bit: the same doubles, the same stamp arithmetic


@pytest.mark.parametrize("names", [
    JOINTS[::-1],  # the robot's joints in another order
    JOINTS[:5],  # one missing
    JOINTS + ["gripper"],  # one more
    JOINTS[:5] + JOINTS[:1],  # one twice
], ids=["reordered", "short", "extra", "duplicate"])
def test_a_message_of_other_names_is_left_to_the_full_decoder(names):
    wire = JointStateWire(JOINTS)
    for seed in range(3):  # also once its layout is known
        assert wire.read(serialize_message(joint_state(names=names, seed=seed))) is None
    assert wire.read(serialize_message(joint_state())) is not None  # the robot's own is still learned


def test_a_message_differing_in_a_layout_byte_is_not_read_by_a_learned_layout():
    """Same size, same layout, one name changed: the layout-fixing bytes differ, so it is not read."""
    wire = JointStateWire(JOINTS)
    assert wire.read(serialize_message(joint_state())) is not None
    renamed = JOINTS[:2] + [JOINTS[2][:-1] + "9"] + JOINTS[3:]
    data = serialize_message(joint_state(names=renamed))
    assert len(data) == len(serialize_message(joint_state()))
    assert wire.read(data) is None


def test_lengths_that_disagree_with_the_names_are_left_to_the_full_decoder():
    wire = JointStateWire(JOINTS)
    message = joint_state()
    message.position = message.position[:5]
    assert wire.read(serialize_message(message)) is None


def test_a_message_naming_thousands_of_joints_is_not_walked():
    huge = joint_state(names=[f"joint_{k}" for k in range(10_000)])
    assert JointStateWire(JOINTS).read(serialize_message(huge)) is None


def test_bytes_that_are_no_joint_state_are_not_read():
    wire = JointStateWire(JOINTS)
    for data in (b"", b"\x00\x01\x00\x00", b"\x00\x01\x00\x00" + b"\xff" * 40, b"\x00\x00\x00\x00" + b"\x00" * 300):
        assert wire.read(data) is None


def test_the_layouts_kept_are_bounded():
    """A stream whose frame_id changes every message does not grow the list of layouts for ever;
    layouts that are not read here take room too."""
    wire = JointStateWire(JOINTS)
    assert wire.read(serialize_message(joint_state(names=JOINTS[::-1]))) is None
    frames = [f"frame_{k}" for k in range(MAX_LAYOUTS + 2)]
    read = [wire.read(serialize_message(joint_state(frame_id=frame))) is not None for frame in frames]
    assert read == [True] * (MAX_LAYOUTS - 1) + [False] * 3
    assert wire.read(serialize_message(joint_state(frame_id=frames[0]))) is not None  # a learned one still is


def test_non_finite_numbers_are_read_as_they_are():
    """The reader does not judge: a NaN reaches the supervisor, which rejects it (test_safety)."""
    wire = JointStateWire(JOINTS)
    message = joint_state()
    message.position[3] = math.nan
    fields = wire.read(serialize_message(message))
    assert math.isnan(fields.positions[3])


def test_the_writers_messages_are_rclpys_serialization_of_the_same_values():
    zeros = [0.0] * len(JOINTS)
    writer = JointStateWriter(serialize_message(JointState(name=JOINTS, position=zeros, velocity=zeros, effort=zeros)))
    for seed in range(5):
        message = joint_state(seed=seed, sec=1_795_000_000 + seed, nanosec=999_999_999 - seed)
        stamp = message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec
        written = writer.message(stamp, message.position, message.velocity, message.effort)
        assert written == serialize_message(message)


def test_a_writer_needs_every_array_as_long_as_the_names():
    with pytest.raises(ValueError, match="must each hold 6 values"):
        JointStateWriter(serialize_message(joint_state(effort=False)))


@pytest.mark.parametrize("frame_id", ["", "base_lin"])
@pytest.mark.parametrize("effort", [True, False])
def test_the_layout_handed_to_the_compiled_step_locates_rclpys_numbers(frame_id, effort):
    wire = JointStateWire(JOINTS)
    message = joint_state(frame_id=frame_id, effort=effort)
    data = serialize_message(message)
    wire.read(data)
    layout, learned = wire.native_layout(command_offset=20)
    fields = dict(zip(WIRE_FIELDS, layout[: len(WIRE_FIELDS)].tolist()))
    assert fields["size"] == len(data) == len(learned) and fields["command"] == 20
    assert struct.unpack_from("<iI", data, fields["stamp"]) == (message.header.stamp.sec, message.header.stamp.nanosec)
    for name in ("position", "velocity", "effort"):
        values = getattr(message, name)
        if fields[name] < 0:
            assert not effort and name == "effort"
            continue
        assert list(struct.unpack_from("<6d", data, fields[name])) == list(values)
    runs = layout[len(WIRE_FIELDS):].reshape(-1, 2)
    assert len(runs) == fields["runs"]
    for start, stop in runs:  # the learned bytes are the message's where its layout is fixed
        assert learned[start:stop] == data[start:stop]
    renamed = serialize_message(joint_state(names=JOINTS[:-1] + ["slider_x"], frame_id=frame_id, effort=effort))
    assert len(renamed) == len(data)
    assert any(renamed[start:stop] != learned[start:stop] for start, stop in runs)  # another name is seen


def test_the_command_template_is_rclpys_float64_multi_array():
    template, offset = float64_array_message(6)
    assert list(deserialize_message(template, Float64MultiArray).data) == [0.0] * 6
    values = [1.5, -2.25, 3.0, -4.0, 5.125, -333.0]
    written = bytearray(template)
    written[offset:offset + 48] = np.array(values, dtype="<f8").tobytes()
    decoded = deserialize_message(bytes(written), Float64MultiArray)
    assert list(decoded.data) == values and list(decoded.layout.dim) == [] and decoded.layout.data_offset == 0
