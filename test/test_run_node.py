"""Ctrl-C of a node run by ``run_node``: the teardown never races rclpy's own answer to the signal.

rclpy answers SIGINT in a thread of its own (it triggers the executors' guard conditions and shuts
the contexts down). The fake driver's and the robot stack's loops do not wait in the executor, so
they take the KeyboardInterrupt at once and tear down while that thread may still run: the fake
driver died with SIGSEGV at its stop, now and then, in a thread that was not Python's.

The rounds below make that race every time: a node sends itself SIGINT from its own loop, and
``run_node`` tears it down. Without ``end_signal_handling`` the process died with SIGSEGV, or hung,
within a few hundred rounds.
"""

import subprocess
import sys

import pytest

pytest.importorskip("rclpy")

ROUNDS = 300
HANG_GUARD_S = 600.0  # only ends a hung process; the rounds take seconds

ROUNDS_SCRIPT = """
import os, signal, sys
from rclpy.node import Node
from sensor_msgs.msg import JointState
from hexapod_control.ros.common import run_node


class InterruptedInItsOwnLoop(Node):
    def __init__(self):
        super().__init__("interrupted_in_its_own_loop")
        self.publisher = self.create_publisher(JointState, "interrupted_states", 10)

    def spin(self, executor):
        os.kill(os.getpid(), signal.SIGINT)
        while True:
            self.publisher.publish(JointState())


for round in range(int(sys.argv[1])):
    code = run_node(InterruptedInItsOwnLoop, "interrupted_in_its_own_loop")
    print(round, code, flush=True)
"""


def test_a_node_interrupted_in_its_own_loop_exits_with_zero_every_time():
    process = subprocess.run([sys.executable, "-X", "faulthandler", "-c", ROUNDS_SCRIPT, str(ROUNDS)],
                             capture_output=True, text=True, timeout=HANG_GUARD_S)
    rounds = [line.split() for line in process.stdout.splitlines()]
    assert process.returncode == 0, (process.returncode, rounds[-3:], process.stderr[-3000:])
    assert rounds == [[str(round), "0"] for round in range(ROUNDS)]
