"""Recording: bag writer/reader round trips, topic overrides, and the recorder node with
real rclpy publishers (fresh Context per test, matching awaited by spinning, never sleeping)."""

from __future__ import annotations

import numpy as np
import pytest

from hexapod_control.bags import BagWriter, deserialize, effort_cdr, joint_state_cdr, read_bag
from hexapod_control.bags.topics import parse_topic_overrides, resolve_topic_names
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.errors import InvalidInputError

JOINT_NAMES = [f"slider_{k}" for k in range(6)]


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_writer_reader_round_trip(tmp_path, storage):
    sent = [(1_000 * k + 7, joint_state_cdr(0.001 * k, JOINT_NAMES, np.full(6, 0.17 + k), np.arange(6.0))) for k in range(50)]
    with BagWriter(tmp_path / "bag", storage) as writer:
        writer.add_topic(TOPICS["joint_states"], MESSAGE_TYPES["joint_states"])
        writer.add_topic(TOPICS["effort_commands"], MESSAGE_TYPES["effort_commands"])
        for log, data in sent:
            writer.write(TOPICS["joint_states"], log, data)
        writer.write(TOPICS["effort_commands"], 5, effort_cdr(np.ones(6)))
    contents = read_bag(tmp_path / "bag")
    assert contents.storage == storage and contents.notes == []
    assert contents.topics[TOPICS["joint_states"]].records == sent
    assert contents.available[TOPICS["effort_commands"]] == (MESSAGE_TYPES["effort_commands"], 1)
    message = deserialize(sent[3][1], MESSAGE_TYPES["joint_states"])
    assert list(message.name) == JOINT_NAMES and message.position[0] == pytest.approx(3.17)
    # Only the wanted topics keep their bytes; the others are listed.
    partial = read_bag(tmp_path / "bag", {TOPICS["effort_commands"]})
    assert set(partial.topics) == {TOPICS["effort_commands"]} and TOPICS["joint_states"] in partial.available


def test_writer_refuses_to_overwrite_and_unknown_types(tmp_path):
    (tmp_path / "exists").mkdir()
    with pytest.raises(InvalidInputError, match="exists"):
        BagWriter(tmp_path / "exists")
    with pytest.raises(InvalidInputError, match="storage"):
        BagWriter(tmp_path / "x", "rosbag1")
    with BagWriter(tmp_path / "y") as writer, pytest.raises(InvalidInputError, match="unknown"):
        writer.add_topic("/a", "no_msgs/msg/Nothing")


def test_topic_overrides():
    assert parse_topic_overrides(["joint_states=robot/joint_states"]) == {"joint_states": "robot/joint_states"}
    assert resolve_topic_names({"joint_states": "robot/joint_states"})["joint_states"] == "/robot/joint_states"
    for bad in (["joint_states"], ["=x"], ["nope=/x"]):
        with pytest.raises(InvalidInputError):
            parse_topic_overrides(bad)


# ------------------------------------------------------------------------------------------ recorder node
rclpy = pytest.importorskip("rclpy")
from ros_helpers import DELIVERY_TIMEOUT_S, DISCOVERY_TIMEOUT_S, spin_until  # noqa: E402

MESSAGES_PER_TOPIC = 20








@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_recorder_node_writes_what_publishers_send(context, executor, tmp_path, storage):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from hexapod_control.ros.common import RELIABLE_QOS
    from hexapod_control.ros.recorder_node import RecorderNode, recorded_topics

    keys = ("joint_states", "effort_commands", "diagnostics")
    topics = recorded_topics(keys, {"joint_states": "/test/joint_states"})
    recorder = RecorderNode(tmp_path / "bag", topics, storage, context=context)
    talker = rclpy.create_node("recorder_test_talker", context=context)
    try:
        publishers = {
            "/test/joint_states": talker.create_publisher(JointState, "/test/joint_states", RELIABLE_QOS),
            TOPICS["effort_commands"]: talker.create_publisher(Float64MultiArray, TOPICS["effort_commands"], RELIABLE_QOS),
            TOPICS["diagnostics"]: talker.create_publisher(DiagnosticArray, TOPICS["diagnostics"], RELIABLE_QOS),
        }
        executor.add_node(recorder)
        executor.add_node(talker)
        spin_until(
            executor,
            lambda: all(p.get_subscription_count() >= 1 for p in publishers.values())
            and all(s.get_publisher_count() >= 1 for s in recorder.subscriptions_by_topic.values()),
            DISCOVERY_TIMEOUT_S,
            "recorder and publishers to match",
        )
        sent = {topic: [] for topic in publishers}
        for k in range(MESSAGES_PER_TOPIC):
            joint_state = JointState(name=JOINT_NAMES, position=[0.17 + 1e-3 * k] * 6, velocity=[0.01 * k] * 6)
            joint_state.header.stamp.sec, joint_state.header.stamp.nanosec = 100, 1000 * k
            command = Float64MultiArray(data=[float(k + j) for j in range(6)])
            status = DiagnosticArray(status=[DiagnosticStatus(level=DiagnosticStatus.WARN, name="n", message=f"m{k}")])
            for topic, message in zip(publishers, (joint_state, command, status)):
                publishers[topic].publish(message)
                sent[topic].append(message)
        spin_until(
            executor,
            lambda: all(recorder.counts[t] >= MESSAGES_PER_TOPIC for t in publishers),
            DELIVERY_TIMEOUT_S,
            "every message in the bag",
        )
    finally:
        executor.remove_node(recorder)
        recorder.destroy_node()  # closes the bag
        talker.destroy_node()

    contents = read_bag(tmp_path / "bag")
    assert contents.notes == []
    for topic, messages in sent.items():
        records = contents.topics[topic]
        assert records.msgtype == topics[topic]
        # The raw CDR as received (padding bytes may differ from a fresh serialization) decodes to
        # exactly the published messages, in publication order (reliable, one publisher).
        assert [deserialize_message(data, type(messages[0])) for _, data in records.records] == messages
        logs = [log for log, _ in records.records]
        assert logs == sorted(logs) and logs[0] > 0
    decoded = deserialize(contents.topics["/test/joint_states"].records[4][1], MESSAGE_TYPES["joint_states"])
    assert decoded.header.stamp.nanosec == 4000 and decoded.position[0] == pytest.approx(0.174)
