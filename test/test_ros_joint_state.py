"""rclpy smoke tests: JointState over DDS, kept on loopback by the project's Fast DDS profile."""

import ipaddress
import os
import socket
import struct
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
import ros_environment  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from ros_helpers import DELIVERY_TIMEOUT_S, DISCOVERY_TIMEOUT_S, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

# DDS discovery usually takes well under 3 s; the margin is for a loaded 2-core CI machine.
# How long one executor wait may block before the deadline is checked again.

JOINT_NAMES = [f"q{i}" for i in range(6)]
TOPIC = "joint_states"








def test_joint_state_round_trip(context, executor):
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    talker = rclpy.create_node("joint_state_talker", context=context)
    listener = rclpy.create_node("joint_state_listener", context=context)
    try:
        received = []
        publisher = talker.create_publisher(JointState, TOPIC, qos)
        subscription = listener.create_subscription(JointState, TOPIC, received.append, qos)
        executor.add_node(talker)
        executor.add_node(listener)

        # Both ends must know each other before publishing: a volatile reader only gets
        # samples written after it was matched.
        spin_until(
            executor,
            lambda: (
                publisher.get_subscription_count() >= 1 and subscription.get_publisher_count() >= 1
            ),
            DISCOVERY_TIMEOUT_S,
            "publisher/subscription matching",
        )

        sent = JointState()
        sent.header.stamp = talker.get_clock().now().to_msg()
        sent.header.frame_id = "base"
        sent.name = list(JOINT_NAMES)
        sent.position = [0.17 + 0.01 * i for i in range(6)]
        sent.velocity = [-0.5 + 0.2 * i for i in range(6)]
        sent.effort = [1.5 * i for i in range(6)]
        publisher.publish(sent)

        spin_until(executor, lambda: received, DELIVERY_TIMEOUT_S, "the JointState message")
        assert len(received) == 1
        assert received[0] == sent
        assert list(received[0].name) == JOINT_NAMES
    finally:
        talker.destroy_node()
        listener.destroy_node()


def _own_socket_inodes():
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed between listdir and readlink
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _udp_local_addresses(inodes):
    """Local addresses of this process's UDP sockets, from /proc/net/udp{,6}."""
    addresses = []
    for table, family in (("udp", socket.AF_INET), ("udp6", socket.AF_INET6)):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] not in inodes:
                continue
            hex_addr = fields[1].split(":")[0]
            # The kernel prints the address as 32-bit words read in host byte order.
            raw = b"".join(
                struct.pack("=I", int(hex_addr[i : i + 8], 16)) for i in range(0, len(hex_addr), 8)
            )
            addresses.append(ipaddress.ip_address(socket.inet_ntop(family, raw)))
    return addresses


@pytest.mark.skipif(not Path("/proc/net/udp").exists(), reason="needs Linux /proc/net/udp")
def test_dds_sockets_are_loopback_only(context):
    """The loopback profile is really in force: no DDS socket listens on a network interface."""
    assert os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] == str(ros_environment.FASTDDS_PROFILE)
    assert os.environ["RMW_IMPLEMENTATION"] == ros_environment.RMW_IMPLEMENTATION
    node = rclpy.create_node("loopback_probe", context=context)
    try:
        node.create_publisher(JointState, TOPIC, 10)
        addresses = _udp_local_addresses(_own_socket_inodes())
    finally:
        node.destroy_node()
    assert addresses, "the DDS participant opened no UDP socket"
    # Multicast group sockets only receive what is sent on the allowed (loopback) interface.
    off_loopback = [a for a in addresses if not (a.is_loopback or a.is_multicast)]
    assert not off_loopback, f"DDS sockets bound beyond loopback: {off_loopback}"


def test_ament_index_finds_message_packages():
    """AMENT_PREFIX_PATH covers the ROS packages rclpy came with (launch files need this)."""
    ament_index_python = pytest.importorskip("ament_index_python")
    share = Path(ament_index_python.get_package_share_directory("sensor_msgs"))
    assert (share / "package.xml").is_file()
