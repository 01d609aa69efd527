"""A bag as a robot records it, written by another tool: robot names, two clocks at epochs, jitter, gaps.

The bag is written with ``rosbags`` directly (its own Writer and message classes, integer stamps),
not with the package's BagWriter: joint states on ``/robot/joint_states`` named ``j1..j6`` and stamped
by the driver on the recorder's wall clock (an epoch of 1.7e9 s), references stamped by another
computer's clock (5000 s since boot), sampling jitter on the joint states, and dropped messages on
both. The evaluation must map names from the command line, fail loudly without the mapping, put
both topics on one clock, report the gaps, and still recover the imposed tracking error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from rosbags.rosbag2 import Writer
from rosbags.typesys import Stores, get_typestore
from test_evaluation import JOINT_NAMES, PARAMETERS, imposed_error

from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS, reference_point_from_euler
from hexapod_control.evaluation.bag import load_run
from hexapod_control.evaluation.cli import main as evaluate_main
from hexapod_control.evaluation.metrics import evaluate_run
from hexapod_control.model.hexapod import HexapodModel

ROBOT_NAMES = [f"j{k}" for k in range(1, 7)]
JOINT_TOPIC = "/robot/joint_states"
SAMPLES = 400
PERIOD_NS = 1_000_000
JITTER_NS = 200_000  # joint-state stamps within +-0.2 ms of the nominal instant
JOINT_CLOCK_NS = 1_700_000_000 * 10**9  # the driver stamps on the recorder's wall clock
REFERENCE_CLOCK_NS = 5_000 * 10**9  # the trajectory node's computer: time since boot
LATENCY_NS = 400_000  # receive time - stamp, the same on both topics
DROPPED_JOINT_STATES = range(150, 180)  # a 30 ms gap
DROPPED_REFERENCES = range(300, 310)
# Linear interpolation of the reference between 1 ms samples: |xi_dd| dt^2 / 8 ~ 5e-9 m for the 6.5
# trajectory; the recovered error agrees with the imposed one to 1.3e-9 (measured).
INTERPOLATION_TOLERANCE = 2e-8
TYPES = get_typestore(Stores.ROS2_KILTED)


def _time(ns: int):
    return TYPES.types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)


def _header(ns: int):
    return TYPES.types["std_msgs/msg/Header"](stamp=_time(ns), frame_id="")


def _reference_message(ns: int, reference):
    types = TYPES.types
    point = reference_point_from_euler(reference.pose, reference.velocity, reference.acceleration)
    v3 = types["geometry_msgs/msg/Vector3"]

    def vector(values):
        return v3(x=float(values[0]), y=float(values[1]), z=float(values[2]))

    twist = types["geometry_msgs/msg/Twist"]
    trajectory_point = types["trajectory_msgs/msg/MultiDOFJointTrajectoryPoint"](
        transforms=[types["geometry_msgs/msg/Transform"](
            translation=vector(point.translation), rotation=types["geometry_msgs/msg/Quaternion"](*point.rotation))],
        velocities=[twist(linear=vector(point.linear_velocity), angular=vector(point.angular_velocity))],
        accelerations=[twist(linear=vector(point.linear_acceleration), angular=vector(point.angular_acceleration))],
        time_from_start=types["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
    )
    return types["trajectory_msgs/msg/MultiDOFJointTrajectory"](header=_header(ns), joint_names=["platform"],
                                                                 points=[trajectory_point])


@pytest.fixture(scope="module")
def robot_bag(tmp_path_factory):
    """The bag, and (joint-state times [s] from the first reference, the imposed error there)."""
    rng = np.random.default_rng(16)
    model = HexapodModel(PARAMETERS)
    trajectory = make_trajectory("operational_space", model)
    nominal = np.arange(SAMPLES) * PERIOD_NS
    joint_ns = nominal + rng.integers(-JITTER_NS, JITTER_NS, SAMPLES)
    joint_ns[0] = nominal[0] + JITTER_NS  # after the first reference: every joint state has one before it
    kept = np.setdiff1d(np.arange(SAMPLES), DROPPED_JOINT_STATES)
    t = joint_ns[kept] * 1e-9
    error = imposed_error(t)
    references = [trajectory.sample(float(tk)) for tk in t]
    q = np.array([model.inverse_kinematics(r.pose[:3] - e[:3], r.pose[3:] - e[3:]).q for r, e in zip(references, error)])
    path = tmp_path_factory.mktemp("robot") / "robot_run"
    writer = Writer(path, version=9)
    writer.open()
    joint = writer.add_connection(JOINT_TOPIC, MESSAGE_TYPES["joint_states"], typestore=TYPES)
    reference = writer.add_connection(TOPICS["reference"], MESSAGE_TYPES["reference"], typestore=TYPES)
    effort = writer.add_connection(TOPICS["effort_commands"], MESSAGE_TYPES["effort_commands"], typestore=TYPES)
    messages = []
    for k in np.setdiff1d(np.arange(SAMPLES), DROPPED_REFERENCES):
        sample = trajectory.sample(nominal[k] * 1e-9)
        messages.append((int(JOINT_CLOCK_NS + nominal[k] + LATENCY_NS), reference,
                         _reference_message(int(REFERENCE_CLOCK_NS + nominal[k]), sample)))
    state_type, array_type = TYPES.types["sensor_msgs/msg/JointState"], TYPES.types["std_msgs/msg/Float64MultiArray"]
    layout = TYPES.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    for row, k in enumerate(kept):
        stamp = int(JOINT_CLOCK_NS + joint_ns[k])
        # The driver lists its joints in its own order: reversed.
        message = state_type(header=_header(stamp), name=ROBOT_NAMES[::-1], position=q[row][::-1].copy(),
                             velocity=np.zeros(6), effort=np.zeros(6))
        messages.append((stamp + LATENCY_NS, joint, message))
        messages.append((stamp + LATENCY_NS + PERIOD_NS // 10, effort, array_type(layout=layout, data=np.full(6, -4.0))))
    for log, connection, message in sorted(messages, key=lambda m: m[0]):
        writer.write(connection, log, TYPES.serialize_cdr(message, connection.msgtype))
    writer.close()
    return path, t, error


ROBOT_OPTIONS = ["--topic", f"joint_states={JOINT_TOPIC}", "--joint-names", *ROBOT_NAMES]


def test_robot_bag_evaluates_on_one_clock_with_its_gaps_reported(robot_bag, tmp_path, capsys):
    path, t, error = robot_bag
    run = load_run(path, ROBOT_NAMES, {"joint_states": JOINT_TOPIC})
    assert any("stamped on another clock" in note for note in run.notes), run.notes
    # The first reference stamp is t = 0 on the joint-state clock.
    np.testing.assert_allclose(run.joint_t, t, rtol=0, atol=1e-12)
    joints = run.sampling["joint_states"]
    assert joints.period == pytest.approx(1e-3, rel=0.05)
    (gap,) = joints.gaps
    assert gap[1] == pytest.approx(len(DROPPED_JOINT_STATES) * 1e-3 + 1e-3, abs=2 * JITTER_NS * 1e-9)
    assert joints.missing == pytest.approx(len(DROPPED_JOINT_STATES), abs=1)
    assert len(run.sampling["reference"].gaps) == 1
    settings = PARAMETERS.replace(recording={"evaluation": {"steady_state_start": 0.1}}).recording.evaluation
    metrics = evaluate_run(run, PARAMETERS, settings, model_check=False)
    # Joint states strictly inside the reference gap are not evaluated (the line across it is not a reference).
    gap_start, gap_end = (DROPPED_REFERENCES.start - 1) * 1e-3, DROPPED_REFERENCES.stop * 1e-3
    evaluated = ~((t > gap_start) & (t < gap_end))
    assert metrics.tracking.t.size == evaluated.sum() and (~evaluated).any()
    np.testing.assert_allclose(metrics.tracking.error, error[evaluated], rtol=0, atol=INTERPOLATION_TOLERANCE)
    position = error[evaluated, :3]
    assert metrics.position_whole.rms_norm == pytest.approx(math.sqrt(np.mean(np.sum(position**2, axis=1))),
                                                            abs=INTERPOLATION_TOLERANCE)
    code = evaluate_main([str(path), "-o", str(tmp_path / "report"), "--no-plots", "--no-model-check", *ROBOT_OPTIONS])
    assert code == 0, capsys.readouterr().err
    report = (tmp_path / "report" / "report.md").read_text()
    assert "moved onto the joint-state clock" in report and "gap(s) longer than" in report and "j1" in report


def test_robot_bag_without_the_mapping_fails_naming_what_it_found(robot_bag, tmp_path, capsys):
    path, _, _ = robot_bag
    code = evaluate_main([str(path), "-o", str(tmp_path / "a"), "--no-plots"])
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error:" in line]
    assert code == 1 and len(errors) == 1
    assert f"{TOPICS['joint_states']} (sensor_msgs/msg/JointState) is not in the bag" in errors[0]
    assert f"{JOINT_TOPIC} ({SAMPLES - len(DROPPED_JOINT_STATES)} messages)" in errors[0]
    code = evaluate_main([str(path), "-o", str(tmp_path / "b"), "--no-plots", "--topic", f"joint_states={JOINT_TOPIC}"])
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error:" in line]
    assert code == 1 and len(errors) == 1
    assert f"lacks joint(s) {list(JOINT_NAMES)}" in errors[0] and "--joint-names" in errors[0] and "'j6'" in errors[0]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
