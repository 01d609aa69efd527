"""A lockstep loop's steps written into a bag as the messages the DDS stack's nodes publish.

The main job, the sweeps' cases and the simulated identification runs record their closed loops
(:mod:`.lockstep`) with :class:`RecordWriter`, so their bags hold the topics, types and stamps of a
recording of the nodes (``ros2 bag record`` or the recorder node), and every reader treats them
alike.
"""

from __future__ import annotations

import numpy as np

from hexapod_control.bags import BagWriter, StepMessages, diagnostics_cdr, nanoseconds
from hexapod_control.bags.messages import nanoseconds_array
from hexapod_control.control.loop import DiagnosticStatus
from hexapod_control.conventions import TOPICS
from hexapod_control.model import rotation_rows
from hexapod_control.model.rotations import quaternion_from_euler_zyx
from hexapod_control.simulation.lockstep import LoopBlock, LoopRecord

CONTROLLER_NODE_NAME = "hexapod_controller"  # the diagnostics name the controller node gives


class RecordWriter:
    """Writes the messages the DDS stack's nodes publish for each lockstep step into ``writer``,
    stamped and logged at the step's t: the topics named by ``keys`` (conventions.TOPICS keys), a
    step (:meth:`write`) or a block of steps (:meth:`write_block`) at a time."""

    def __init__(self, writer: BagWriter, keys, names):
        self.writer = writer
        self.keys = frozenset(keys)
        self.messages = StepMessages(names.joint_names, names.base_frame)

    def write(self, record: LoopRecord) -> None:
        t, step, keys, messages, write = record.t, record.step, self.keys, self.messages, self.writer.write
        log = nanoseconds(t)
        reference = record.reference
        if reference is not None and "reference" in keys:
            write(TOPICS["reference"], log, messages.reference(t, reference.pose, reference.velocity, reference.acceleration))
        if "joint_states" in keys:
            write(TOPICS["joint_states"], log, messages.joint_state(t, step.q, step.qd, record.applied_forces))
        if step.pose is not None and "platform_pose" in keys:
            write(TOPICS["platform_pose"], log,
                  messages.pose(t, step.pose[:3], quaternion_from_euler_zyx(tuple(step.pose[3:]))))
        if "effort_commands" in keys:
            write(TOPICS["effort_commands"], log, messages.effort(step.forces))
        if step.diagnostic is not None and "diagnostics" in keys:
            write(TOPICS["diagnostics"], log, _diagnostics(t, step.diagnostic))

    def write_block(self, block: LoopBlock) -> None:
        """The messages :meth:`write` writes for each step of ``block``, encoded and written in bulk."""
        keys, messages = self.keys, self.messages
        t = block.t
        log = nanoseconds_array(t)
        blocks = []
        if "reference" in keys:
            rows = block.has_reference
            reference = block.field("reference")[rows]
            blocks.append((TOPICS["reference"], log[rows],
                           messages.references(t[rows], reference[:, :6], reference[:, 6:12], reference[:, 12:])))
        if "joint_states" in keys:
            blocks.append((TOPICS["joint_states"], log, messages.joint_states(
                t, block.field("q"), block.field("qd"), block.field("applied"))))
        if "platform_pose" in keys:
            rows = block.has_pose
            pose = block.field("pose")[rows]
            blocks.append((TOPICS["platform_pose"], log[rows],
                           messages.poses(t[rows], pose[:, :3], rotation_rows.quaternion_from_euler_zyx(pose[:, 3:]))))
        if "effort_commands" in keys:
            blocks.append((TOPICS["effort_commands"], log, messages.efforts(block.field("forces"))))
        if "diagnostics" in keys:
            for row, status in block.diagnostics:
                data = _diagnostics(float(t[row]), status)
                blocks.append((TOPICS["diagnostics"], log[row:row + 1], np.frombuffer(data, dtype=np.uint8)[None, :]))
        self.writer.write_blocks(blocks)


def _diagnostics(t: float, status: DiagnosticStatus) -> bytes:
    """The controller node's safety status stamped ``t``."""
    return diagnostics_cdr(t, [(int(status.level), f"{CONTROLLER_NODE_NAME}: safety", status.message, status.values)])
