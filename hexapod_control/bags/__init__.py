"""rosbag2 bags (no ROS needed): message encoding, writing (through ``rosbags``), reading in bulk.

Pure Python: the recorder node (``ros/recorder_node.py``) hands the writer the serialized CDR bytes
its raw subscriptions receive, and the evaluation tools read bags recorded here or by
``ros2 bag record`` on the real robot. The same message builders write the synthetic bags of the
tests and the bags of the lockstep main job, so every bag goes through one code path.

One job per module, each depending only on those above it:

* :mod:`.topics` - topic names: the defaults of ``conventions.TOPICS`` with the user's overrides.
* :mod:`.contents` - :class:`BagContents` and :class:`MessageBlock`, what reading a bag yields.
* :mod:`.cdr` - the numbers of a whole block of fixed-layout messages at once (numpy), and messages of
  a fixed layout written in place.
* :mod:`.messages` - CDR bytes of the project's messages from plain numbers (``*_cdr``), and back;
  :class:`StepMessages`, those a closed loop records every step, at a fraction of the cost.
* :mod:`.run_info` - :class:`RunInfo`, what a bag's metadata records about its run (custom_data).
* :mod:`.writer` - :class:`BagWriter`, a bag (MCAP by default, sqlite3 as an option) of raw CDR messages.
* :mod:`.mcap`, :mod:`.sqlite` - the storage files, read in blocks; what a damaged file still holds.
* :mod:`.reader` - :func:`read_bag`: a bag directory, one without ``metadata.yaml`` or a lone file.

A bag that cannot be read at all raises :class:`~hexapod_control.errors.BagError`.
"""

from hexapod_control.bags.contents import BagContents, MessageBlock, TopicRecords
from hexapod_control.bags.messages import (
    StepMessages,
    deserialize,
    diagnostics_cdr,
    effort_cdr,
    joint_state_cdr,
    nanoseconds,
    pose_cdr,
    reference_cdr,
    twist_cdr,
)
from hexapod_control.bags.reader import read_bag
from hexapod_control.bags.run_info import RunInfo
from hexapod_control.bags.topics import parse_topic_overrides, resolve_topic_names
from hexapod_control.bags.writer import BagWriter
from hexapod_control.errors import BagError

__all__ = [
    "BagContents",
    "BagError",
    "BagWriter",
    "MessageBlock",
    "RunInfo",
    "StepMessages",
    "TopicRecords",
    "deserialize",
    "diagnostics_cdr",
    "effort_cdr",
    "joint_state_cdr",
    "nanoseconds",
    "parse_topic_overrides",
    "pose_cdr",
    "read_bag",
    "reference_cdr",
    "resolve_topic_names",
    "twist_cdr",
]
