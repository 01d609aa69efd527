"""Ctrl-C of a node run by ``run_node``: the teardown never races rclpy's own answer to the signal,
and a second Ctrl-C (a terminal's group, then ros2 launch's) does not interrupt it.

rclpy answers SIGINT in a thread of its own (it triggers the executors' guard conditions and shuts
the contexts down). The fake driver's and the robot stack's loops do not wait in the executor, so
they take the KeyboardInterrupt at once and tear down while that thread may still run: the fake
driver died with SIGSEGV at its stop, now and then, in a thread that was not Python's.

The rounds below make that race every time: a node sends itself SIGINT from its own loop, and
``run_node`` tears it down. Without ``end_signal_handling`` the process died with SIGSEGV, or hung,
within a few hundred rounds.
"""

import signal
import subprocess
import sys
import time

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


# In a terminal, Ctrl-C reaches every process of the foreground group: the node, and ros2 launch,
# which then sends the node a SIGINT of its own. The second one lands at some moment of the first
# one's teardown: the lags below spread it over the first tenth of a second.
SECOND_SIGNAL_LAGS_S = (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
START_TIMEOUT_S = 120.0


@pytest.mark.parametrize("lag", SECOND_SIGNAL_LAGS_S)
def test_a_second_ctrl_c_during_the_teardown_does_not_interrupt_it(lag):
    """Without SIGINT ignored once the teardown starts, every one of these ended with exit code -2,
    the first ones with a KeyboardInterrupt traceback from the teardown."""
    node = subprocess.Popen([sys.executable, "-m", "hexapod_control.ros.fake_driver"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any("ready" in line for line in lines) and time.monotonic() < deadline and node.poll() is None:
            lines.append(node.stdout.readline())
        assert any("ready" in line for line in lines), "".join(lines)[-3000:]
        node.send_signal(signal.SIGINT)
        time.sleep(lag)  # the spread of the second signal is what is tested, not a wait for an event
        node.send_signal(signal.SIGINT)
        output = node.communicate(timeout=HANG_GUARD_S)[0]
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
    assert node.returncode == 0, output[-3000:]
    assert "Traceback" not in output
