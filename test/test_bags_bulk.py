"""Bags read in bulk: the MCAP and SQLite readers against the independent rosbags reader, the fixed-layout
CDR decoding against rosbags' deserialisation, the bulk evaluation decoding against the one-by-one one,
and the custom data a bag records about its run."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
from test_evaluation import JOINT_NAMES, PARAMETERS, synthetic_run, write_bag

from hexapod_control.bags import (
    BagWriter,
    RunInfo,
    StepMessages,
    cdr,
    deserialize,
    diagnostics_cdr,
    effort_cdr,
    joint_state_cdr,
    pose_cdr,
    read_bag,
    reference_cdr,
    twist_cdr,
)
from hexapod_control.bags.contents import block_of
from hexapod_control.bags.messages import typestore
from hexapod_control.bags.reader import read_custom_data
from hexapod_control.bags.run_info import parameters_yaml
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.evaluation.bag import load_run

RUN = synthetic_run(0.3)


def rosbags_records(path) -> dict:
    """{topic: [(log ns, bytes)]} through rosbags' own reader, in file order per topic."""
    records: dict = {}
    with Reader(path) as reader:
        for connection, timestamp, data in reader.messages():
            records.setdefault(connection.topic, []).append((timestamp, bytes(data)))
    return {topic: sorted(items, key=lambda item: item[0]) for topic, items in records.items()}


def ours(path) -> dict:
    contents = read_bag(path)
    return {topic: sorted(records.records, key=lambda item: item[0]) for topic, records in contents.topics.items()}


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_reader_gives_what_rosbags_reads(tmp_path, storage):
    bag = write_bag(tmp_path / storage, RUN, storage=storage)
    expected = rosbags_records(bag)
    assert ours(bag) == expected and sum(map(len, expected.values())) == 4 * RUN.t.size - 0
    # A lone storage file (no metadata.yaml next to it) reads the same.
    (storage_file,) = [p for p in bag.iterdir() if p.suffix in (".mcap", ".db3")]
    lone = tmp_path / f"lone{storage_file.suffix}"
    lone.write_bytes(storage_file.read_bytes())
    assert ours(lone) == expected


def test_compressed_chunks_read_like_rosbags(tmp_path):
    """zstd-compressed chunks (what `ros2 bag record --compression-mode file` does not use, but MCAP
    writers may) are decompressed and indexed like plain ones."""
    path = tmp_path / "zstd"
    store = typestore()
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    writer.open()
    joints = writer.add_connection(TOPICS["joint_states"], MESSAGE_TYPES["joint_states"], typestore=store)
    efforts = writer.add_connection(TOPICS["effort_commands"], MESSAGE_TYPES["effort_commands"], typestore=store)
    for k, t in enumerate(RUN.t):
        writer.write(joints, int(t * 1e9), joint_state_cdr(t, JOINT_NAMES, RUN.q[k], RUN.qd[k]))
        writer.write(efforts, int(t * 1e9) + 1, effort_cdr(RUN.forces[k]))
    writer.close()
    expected = rosbags_records(path)
    assert ours(path) == expected and len(expected[TOPICS["joint_states"]]) == RUN.t.size


def test_fixed_layout_decoding_matches_deserialisation():
    """Every numeric field read in bulk equals rosbags' value; a message of another shape gets its
    own layout, one that fits none is left to the one-by-one decoder."""
    rng = np.random.default_rng(3)
    q, qd, f = rng.normal(size=(3, 20, 6))
    messages = [joint_state_cdr(0.001 * k + 1e3, JOINT_NAMES, q[k], qd[k], f[k]) for k in range(18)]
    messages.append(joint_state_cdr(5.0, list(reversed(JOINT_NAMES)), q[18], qd[18]))  # other order, no efforts
    messages.append(b"\x00\x01\x00\x00" + b"\x07" * 3)  # too short for any layout
    block = block_of("/joint_states", np.arange(20), messages)
    groups, unfit = cdr.group_by_layout(block, cdr.joint_state_layout, [])
    assert sorted(rows.tolist() for _, rows, _ in groups) == [list(range(18)), [18]] and unfit.tolist() == [19]
    for layout, rows, data in groups:
        for row, k in enumerate(rows):
            message = deserialize(messages[k], MESSAGE_TYPES["joint_states"])
            assert layout.info["names"] == list(message.name)
            np.testing.assert_array_equal(cdr.float64_field(data, layout, "position")[row], message.position)
            np.testing.assert_array_equal(cdr.float64_field(data, layout, "velocity")[row], message.velocity)
            stamp = cdr.time_field(data, layout, "stamp")[row]
            assert stamp == message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
    reference = reference_cdr(2.5, rng.normal(size=6) * 0.1, rng.normal(size=6), rng.normal(size=6), "base")
    (layout, rows, data), = cdr.group_by_layout(block_of("/r", [0], [reference]), cdr.reference_layout, [])[0]
    point = deserialize(reference, MESSAGE_TYPES["reference"]).points[0]
    rotation = point.transforms[0].rotation
    np.testing.assert_array_equal(cdr.float64_field(data, layout, "points[0].transforms[0].rotation")[0],
                                  [rotation.x, rotation.y, rotation.z, rotation.w])
    np.testing.assert_array_equal(cdr.float64_field(data, layout, "points[0].accelerations[0].angular")[0],
                                  [point.accelerations[0].angular.x, point.accelerations[0].angular.y,
                                   point.accelerations[0].angular.z])
    for builder, walk, field, values in (
        (lambda v: effort_cdr(v), cdr.float64_array_layout, "data", rng.normal(size=6)),
        (lambda v: pose_cdr(1.0, v[:3], (0.0, 0.0, 0.0, 1.0)), cdr.pose_stamped_layout, "position", rng.normal(size=3)),
    ):
        (layout, _, data), = cdr.group_by_layout(block_of("/x", [0], [builder(values)]), walk, [])[0]
        np.testing.assert_array_equal(cdr.float64_field(data, layout, field)[0], values[: layout.float64[field][1]])


def test_step_messages_are_the_bytes_the_message_builders_give():
    """Written in place or built through the rosbags type store: the same bytes, for the stamps and
    numbers of a run (negative, fractional and zero values, a NaN) and for a stamp before 1970."""
    frame = "hexapod_base"
    messages = StepMessages(JOINT_NAMES, frame)
    for k, t in enumerate((0.0, 0.0125, 1_700_000_000.123456789, -2.5)):
        q, qd = RUN.q[k], RUN.qd[k]
        forces = np.array([1.5, -333.0, 0.0, np.nan, 2e-300, -7.25])
        pose, velocity, acceleration = RUN.q[k + 1], RUN.qd[k + 1], RUN.qd[k + 2]
        quaternion = (0.1, -0.2, 0.3, 0.9)
        assert messages.joint_state(t, q, qd, forces) == joint_state_cdr(t, JOINT_NAMES, q, qd, forces)
        assert messages.effort(forces) == effort_cdr(forces)
        assert messages.pose(t, q[:3], quaternion) == pose_cdr(t, q[:3], quaternion, frame)
        assert messages.twist(t, qd[:3], qd[3:]) == twist_cdr(t, qd[:3], qd[3:], frame)
        assert (messages.reference(t, pose, velocity, acceleration)
                == reference_cdr(t, pose, velocity, acceleration, frame))


def test_step_message_rows_are_the_bytes_the_message_builders_give():
    """The rows of many steps at once: the bytes of the builders, step by step (the rotations of the
    reference and the pose through numpy may round their last bit otherwise: compared as numbers)."""
    frame = "hexapod_base"
    messages = StepMessages(JOINT_NAMES, frame)
    t = np.array([0.0, 0.0125, 1_700_000_000.123456789, -2.5])
    q, qd = RUN.q[:4], RUN.qd[:4]
    forces = np.array([[1.5, -333.0, 0.0, np.nan, 2e-300, -7.25]] * 4)
    quaternions = np.array([[0.1, -0.2, 0.3, 0.9]] * 4)
    rows = (messages.joint_states(t, q, qd, forces), messages.efforts(forces), messages.poses(t, q[:, :3], quaternions),
            messages.references(t, RUN.q[1:5], RUN.qd[1:5], RUN.qd[2:6]))
    for k in range(4):
        assert rows[0][k].tobytes() == joint_state_cdr(t[k], JOINT_NAMES, q[k], qd[k], forces[k])
        assert rows[1][k].tobytes() == effort_cdr(forces[k])
        assert rows[2][k].tobytes() == pose_cdr(t[k], q[k, :3], quaternions[k], frame)
        built = deserialize(reference_cdr(t[k], RUN.q[k + 1], RUN.qd[k + 1], RUN.qd[k + 2], frame), MESSAGE_TYPES["reference"])
        row = deserialize(rows[3][k].tobytes(), MESSAGE_TYPES["reference"])
        assert (row.header.stamp.sec, row.header.stamp.nanosec) == (built.header.stamp.sec, built.header.stamp.nanosec)
        for part in ("transforms", "velocities", "accelerations"):
            for a, b in zip(_numbers(getattr(row.points[0], part)[0]), _numbers(getattr(built.points[0], part)[0])):
                assert a == pytest.approx(b, rel=1e-15, abs=1e-15)


def _numbers(message) -> list[float]:
    values = []
    for name in message.__dataclass_fields__:
        if name == "__msgtype__":
            continue
        value = getattr(message, name)
        values += _numbers(value) if hasattr(value, "__dataclass_fields__") else [float(value)]
    return values


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_blocks_write_the_bag_messages_written_one_by_one_write(tmp_path, storage):
    """write_blocks against write: MCAP files byte for byte (over several chunks, after a message
    written alone, topics interleaved at equal times), and what a reader reads from either."""
    rng = np.random.default_rng(5)
    count = 12_000  # about 2.4 MB of messages: three chunks
    times = np.arange(count, dtype=np.int64) * 1_000_000 + 7
    states = np.stack([np.frombuffer(joint_state_cdr(k * 1e-3, JOINT_NAMES, *rng.normal(size=(3, 6))), np.uint8)
                       for k in range(count)])
    forces = np.stack([np.frombuffer(effort_cdr(rng.normal(size=6)), np.uint8) for _ in range(count)])
    late = times[::97]
    blocks = [(TOPICS["joint_states"], times, states), (TOPICS["effort_commands"], times, forces),
              (TOPICS["joint_states"], late, states[::97])]
    order = np.lexsort((np.repeat([0, 1, 2], [count, count, len(late)]), np.concatenate([times, times, late])))
    messages = [(topic, int(t), row.tobytes()) for topic, block_times, rows in blocks for t, row in zip(block_times, rows)]
    for name, bulk in (("bulk", True), ("single", False)):
        (tmp_path / name).mkdir()
        with BagWriter(tmp_path / name / "bag", storage) as writer:
            for key in ("joint_states", "effort_commands"):
                writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
            writer.write(TOPICS["effort_commands"], 1, forces[0].tobytes())
            if bulk:
                writer.write_blocks(blocks)
            else:
                for index in order:
                    writer.write(*messages[index])
    bulk, single = (tmp_path / name / "bag" for name in ("bulk", "single"))
    if storage == "mcap":
        assert (bulk / "bag.mcap").read_bytes() == (single / "bag.mcap").read_bytes()
        assert (bulk / "metadata.yaml").read_text() == (single / "metadata.yaml").read_text()
    read = []
    for path in (bulk, single):
        with Reader(path) as reader:
            read.append([(connection.topic, t, bytes(data)) for connection, t, data in reader.messages()])
    assert read[0] == read[1] == [(TOPICS["effort_commands"], 1, forces[0].tobytes())] + [messages[i] for i in order]


def test_encode_block_writes_what_deserialisation_reads():
    template = joint_state_cdr(0.0, JOINT_NAMES, np.zeros(6), np.zeros(6), np.zeros(6))
    layout = cdr.joint_state_layout(template)
    stamps = np.array([1_700_000_000_123_456_789, 5, 10**9])
    rows = cdr.encode_block(template, layout, {"position": RUN.q[:3], "velocity": RUN.qd[:3]}, {"stamp": stamps})
    for k in range(3):
        message = deserialize(rows[k].tobytes(), MESSAGE_TYPES["joint_states"])
        np.testing.assert_array_equal(message.position, RUN.q[k])
        np.testing.assert_array_equal(message.velocity, RUN.qd[k])
        assert message.header.stamp.sec * 10**9 + message.header.stamp.nanosec == stamps[k]


def test_message_rows_gathers_every_alignment_and_the_buffer_end():
    rng = np.random.default_rng(5)
    buffer = rng.integers(0, 256, 997, dtype=np.uint8)
    size = 37
    offsets = np.array(sorted(rng.choice(997 - size, 40, replace=False)) + [997 - size])
    block = block_of("/x", np.zeros(1), [b""])  # only for its type; the buffer below is what matters
    block = type(block)("/x", np.zeros(offsets.size, np.int64), buffer, offsets, np.full(offsets.size, size))
    rows = cdr.message_rows(block, np.arange(offsets.size), size)
    expected = np.array([buffer[o : o + size] for o in offsets])
    np.testing.assert_array_equal(rows, expected)


def test_bulk_and_one_by_one_decoding_agree(tmp_path):
    """A bag with good messages, bad sizes, NaN and two joint orders: the same arrays and notes both ways."""
    path = tmp_path / "mixed"
    with BagWriter(path) as writer:
        for key in ("reference", "joint_states", "effort_commands", "platform_pose", "diagnostics"):
            writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
        for k, t in enumerate(RUN.t):
            r = RUN.references[k]
            pose = r.pose.copy()
            if k == 40:
                pose[1] = np.nan
            writer.write(TOPICS["reference"], int(t * 1e9), reference_cdr(t, pose, r.velocity, r.acceleration))
            reverse = k % 7 == 0  # the driver lists its joints in another order now and then
            names = list(reversed(JOINT_NAMES)) if reverse else JOINT_NAMES
            q, qd = (RUN.q[k][::-1].copy(), RUN.qd[k][::-1].copy()) if reverse else (RUN.q[k], RUN.qd[k])
            if k == 77:
                q = q[:5]
            writer.write(TOPICS["joint_states"], int(t * 1e9), joint_state_cdr(t, names, q, qd))
            forces = np.append(RUN.forces[k], 1.0) if k == 90 else RUN.forces[k]
            writer.write(TOPICS["effort_commands"], int(t * 1e9) + 1, effort_cdr(forces))
            writer.write(TOPICS["platform_pose"], int(t * 1e9), pose_cdr(t, RUN.q[k][:3], (0.0, 0.0, 0.6, 0.8)))
            if k % 25 == 0:  # key-values of varying lengths: no fixed layout, the diagnostics' own reader
                values = {f"key {j}": "v" * (j + k % 3) for j in range(k % 5)}
                writer.write(TOPICS["diagnostics"], int(t * 1e9) + 2,
                             diagnostics_cdr(t, [(k % 3, f"node {k}", f"message {k}", values), (0, "other", "", {})]))
    bulk, one_by_one = load_run(path, JOINT_NAMES, replay=True), load_run(path, JOINT_NAMES, bulk=False, replay=True)
    assert bulk.notes == one_by_one.notes and any("5 positions" in note for note in bulk.notes)
    assert bulk.diagnostics == one_by_one.diagnostics and len(bulk.diagnostics) == 2 * len(range(0, RUN.t.size, 25))
    for name in ("joint_t", "q", "qd", "ref_t", "ref_points", "effort_t", "forces", "pose_t"):
        np.testing.assert_array_equal(getattr(bulk, name), getattr(one_by_one, name), err_msg=name)
    for name in ("ref_pose", "ref_velocity", "ref_acceleration", "pose"):  # numpy's and libm's trigonometry
        np.testing.assert_allclose(getattr(bulk, name), getattr(one_by_one, name), rtol=0, atol=1e-15, err_msg=name)
    np.testing.assert_array_equal(bulk.q, np.delete(RUN.q, 77, axis=0))  # the reversed joint order is undone


def test_custom_data_round_trip(tmp_path):
    """What a bag records about its run comes back from metadata.yaml and, without it, from the MCAP file."""
    info = RunInfo(controller="double_loop", gain_set="robot", parameters_file="config/hexapod.yaml",
                   parameters=parameters_yaml(PARAMETERS), plant="robot", loop_delay="1 period(s)")
    bag = tmp_path / "bag"
    with BagWriter(bag, custom_data=info.custom_data()) as writer:
        writer.add_topic(TOPICS["effort_commands"], MESSAGE_TYPES["effort_commands"])
        writer.write(TOPICS["effort_commands"], 1, effort_cdr(np.zeros(6)))
    assert RunInfo.from_custom_data(read_custom_data(bag)) == info
    assert RunInfo.from_custom_data(read_bag(bag).custom_data) == info
    (bag / "metadata.yaml").unlink()
    (storage_file,) = bag.glob("*.mcap")
    assert RunInfo.from_custom_data(read_custom_data(storage_file)) == info
    assert info.controller_parameters("bag") == PARAMETERS  # the whole tree, validated again
