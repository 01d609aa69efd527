"""Recorder node: raw subscriptions -> a rosbag2 bag (MCAP or sqlite3) through rosbags.

Subscribes  the topics of the ``recording.topics`` keys (default: /joint_states, the reference, the
            platform pose, /effort_controller/commands, /diagnostics) with ``raw=True``: the
            serialized CDR bytes are written as received, under the ROS type name of
            ``ros_conventions.MESSAGE_TYPES``, so the bag is what ``ros2 bag record`` would write
            and nothing is deserialized on the way.
Parameters  ``params_file`` (the ``recording`` section: storage, topics); ``use_sim_time``.
Log times   the node's clock when a message is received (simulated time under use_sim_time), as
            ``ros2 bag record`` does.
QoS         reliable, keep-last ``RECORDER_QUEUE_DEPTH``: matches the project's nodes and
            ros2_control's controllers; the deep queue absorbs 1 kHz bursts while the bag writes.

    hexapod_record --output runs/today_bag [--storage sqlite3] [--topic joint_states=/robot/joint_states]

The bag is closed (index and metadata.yaml written) by :meth:`RecorderNode.close`, which
``destroy_node`` and Ctrl-C call; a recorder killed harder leaves a bag without metadata, which
``hexapod_evaluate`` still reads (bags.read_bag salvages it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import rclpy
from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from hexapod_control.bags import BagWriter
from hexapod_control.bags.topics import parse_topic_overrides, resolve_topic_names
from hexapod_control.conventions import MESSAGE_TYPES
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.parameters import STORAGE_FORMATS, load_parameters
from hexapod_control.options import add_output, add_params, add_topic

NODE_NAME = "hexapod_recorder"
# Messages a subscription may hold while the executor is busy (1 s of a 1 kHz topic).
RECORDER_QUEUE_DEPTH = 1000
RECORDER_QOS = QoSProfile(depth=RECORDER_QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE)


def message_class(msgtype: str):
    """The rclpy message class of a rosbag2 type name such as ``sensor_msgs/msg/JointState``."""
    try:
        package, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ValueError, ImportError, AttributeError) as error:
        raise InvalidInputError(f"no message class for type {msgtype!r}: {error}") from error


def recorded_topics(keys, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """topic name -> ROS type for the given keys of ros_conventions.TOPICS (names remapped)."""
    names = resolve_topic_names(overrides)
    return {names[key]: MESSAGE_TYPES[key] for key in keys}


class RecorderNode(Node):
    """Writes every message of ``topics`` ({name: type}) to a new bag at ``bag_path``; ``custom_data``
    goes into its metadata (what the run was: ``bags.run_info``)."""

    def __init__(self, bag_path, topics: Mapping[str, str], storage: str = "mcap",
                 node_name: str = NODE_NAME, custom_data: Mapping[str, str] | None = None, **node_options):
        super().__init__(node_name, **node_options)
        self.bag_path = Path(bag_path)
        self.topics = dict(topics)
        self.writer = None
        self.subscriptions_by_topic = {}
        try:
            classes = {topic: message_class(msgtype) for topic, msgtype in self.topics.items()}
            self.writer = BagWriter(self.bag_path, storage, custom_data)
            for topic, msgtype in self.topics.items():
                self.writer.add_topic(topic, msgtype)
                self.subscriptions_by_topic[topic] = self.create_subscription(
                    classes[topic], topic, self._callback(topic), RECORDER_QOS, raw=True
                )
        except BaseException:
            self.close()
            super().destroy_node()
            raise

    def _callback(self, topic: str):
        def record(data: bytes) -> None:
            if self.writer is not None and not self.writer.closed:
                self.writer.write(topic, self.get_clock().now().nanoseconds, data)

        return record

    @property
    def counts(self) -> dict[str, int]:
        """Messages written per topic."""
        return dict(self.writer.counts) if self.writer is not None else {}

    def close(self) -> None:
        """Finish the bag (index, metadata.yaml); further messages are dropped. Idempotent."""
        if self.writer is not None:
            self.writer.close()

    def destroy_node(self) -> None:
        self.close()
        super().destroy_node()


def parse_custom_data(items) -> dict[str, str]:
    """``KEY=VALUE`` items -> {key: value}; InvalidInputError for an item without ``=``."""
    data = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"custom data {item!r}: expected KEY=VALUE, e.g. hexapod.controller=double_loop")
        data[key] = value
    return data


def default_bag_path(output_directory: str) -> Path:
    return Path(output_directory) / datetime.now().strftime("%Y%m%d_%H%M%S_bag")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hexapod_record", description="Record the hexapod topics to a rosbag2 bag (raw CDR).")
    add_output(parser, help="bag directory to create (default: <recording.output_directory>/<time>_bag)")
    parser.add_argument("--storage", choices=STORAGE_FORMATS, help="bag storage (default: recording.storage)")
    add_params(parser, help="parameters YAML with the recording section (default: config/hexapod.yaml)")
    parser.add_argument("--topics", nargs="+", metavar="KEY", help="keys of ros_conventions.TOPICS (default: recording.topics)")
    add_topic(parser, help="topic name for a key")
    parser.add_argument("--use-sim-time", action="store_true", help="log times from /clock")
    parser.add_argument("--custom-data", nargs="+", default=[], metavar="KEY=VALUE",
                        help="what the run is, into the bag's metadata as `ros2 bag record --custom-data` does, e.g. "
                        "hexapod.controller=double_loop hexapod.gain_set=robot (replay and evaluation use them)")
    args, ros_args = parser.parse_known_args(argv)
    try:
        settings = load_parameters(args.params).recording
        topics = recorded_topics(args.topics or settings.topics, parse_topic_overrides(args.topic))
        custom_data = parse_custom_data(args.custom_data)
        bag = Path(args.output) if args.output else default_bag_path(settings.output_directory)
    except (HexapodError, KeyError) as error:
        print(f"hexapod_record: {error}", file=sys.stderr)
        return 1
    context = Context()
    rclpy.init(args=ros_args, context=context)
    node = None
    try:
        from rclpy.parameter import Parameter

        try:
            node = RecorderNode(bag, topics, args.storage or settings.storage, context=context, custom_data=custom_data,
                                parameter_overrides=[Parameter("use_sim_time", value=args.use_sim_time)])
        except HexapodError as error:
            print(f"hexapod_record: {error}", file=sys.stderr)
            return 1
        print(f"hexapod_record: recording {', '.join(topics)} to {bag} (Ctrl-C to stop)", file=sys.stderr)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            executor.shutdown()
        counts = node.counts
        node.destroy_node()
        print(f"hexapod_record: wrote {bag}: " + ", ".join(f"{t} {n}" for t, n in counts.items()), file=sys.stderr)
        return 0
    finally:
        rclpy.try_shutdown(context=context)


if __name__ == "__main__":
    sys.exit(main())
