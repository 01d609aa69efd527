"""Evaluation metrics, model check, replay and the hexapod_evaluate CLI on synthetic bags.

Every bag is written here with rosbags from signals the test chooses, so the expected numbers are
computed from those signals directly (numpy), never through the code under test:

* the measured pose is xi = xi_d - e with a known error e(t); the joint states are its inverse
  kinematics, so the evaluation (which runs the forward kinematics) must recover e;
* speeds and forces are arbitrary known signals, the forces clipped at the force limit so that
  saturation happens for a time the test can count;
* for the model check, a smooth motion whose forces the test computes with the analytic q_ddot.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from hexapod_control.bags import (
    BagWriter,
    effort_cdr,
    joint_state_cdr,
    nanoseconds,
    pose_cdr,
    reference_cdr,
)
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.trajectories import Reference, make_trajectory
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.evaluation.bag import load_run
from hexapod_control.evaluation.cli import main as evaluate_main
from hexapod_control.evaluation.metrics import evaluate_run
from hexapod_control.evaluation.replay import main as replay_main
from hexapod_control.evaluation.replay import replay_run
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import load_parameters
from hexapod_control.model.rotations import quaternion_from_euler_zyx
from hexapod_control.simulation.lockstep import message_time

PARAMETERS = load_parameters()
JOINT_NAMES = PARAMETERS.ros.joint_names
RATE = PARAMETERS.controllers.rate  # the control rate the stack records at
DT = 1.0 / RATE
FORCE_LIMIT = PARAMETERS.limits.actuator_force_max
SETTINGS = PARAMETERS.recording.evaluation

# Short runs keep the suite quick on a shared 2-core machine; the signals below vary within them.
DURATION_S = 0.4
STEADY_START_S = 0.2  # a steady-state window inside the short run (the shipped 10 s would be empty)
ERROR_FREQUENCY_HZ = 5.0  # two periods of the error signal in the run
POSITION_ERROR_M = 1e-3  # amplitude of the imposed position error
ORIENTATION_ERROR_RAD = 2e-3  # amplitude of the imposed orientation error
SPEED_AMPLITUDE = 0.3  # [m/s] of the recorded joint velocities (below the 0.65 m/s limit)
FORCE_AMPLITUDE = 1.2 * FORCE_LIMIT  # so the clipped forces saturate part of the time
# FK and IK are solved to a 1e-12 closure residual: the recovered error equals the imposed one to
# 2.0e-13 and the pose topic matches the FK to 4.0e-13 (measured).
KINEMATICS_TOLERANCE = 1e-12


def sample_times(duration: float = DURATION_S) -> np.ndarray:
    return np.arange(int(round(duration * RATE))) * DT


def imposed_error(t: np.ndarray) -> np.ndarray:
    """e(t) (N, 6): known position and orientation errors with a varying norm."""
    w = 2.0 * math.pi * ERROR_FREQUENCY_HZ * t
    position = POSITION_ERROR_M * np.column_stack((np.sin(w), 0.5 * np.ones_like(t), np.cos(2 * w)))
    orientation = ORIENTATION_ERROR_RAD * np.column_stack((np.cos(w), np.sin(3 * w), 0.3 * np.ones_like(t)))
    return np.hstack((position, orientation))


@dataclasses.dataclass
class SyntheticRun:
    t: np.ndarray
    references: list  # trajectories.Reference per sample
    q: np.ndarray
    qd: np.ndarray
    forces: np.ndarray
    error: np.ndarray


def synthetic_run(duration: float = DURATION_S) -> SyntheticRun:
    t = sample_times(duration)
    model = HexapodModel(PARAMETERS)
    trajectory = make_trajectory("operational_space", HexapodModel(PARAMETERS))
    references = [trajectory.sample(float(tk)) for tk in t]
    error = imposed_error(t)
    q = np.array([
        model.inverse_kinematics(r.pose[:3] - e[:3], r.pose[3:] - e[3:]).q for r, e in zip(references, error)
    ])
    phases = np.arange(6)
    qd = SPEED_AMPLITUDE * np.sin(2 * math.pi * 3.0 * t[:, None] + phases)
    # Close phases: the actuators saturate at nearly the same times, so some of the run is unsaturated.
    forces = np.clip(FORCE_AMPLITUDE * np.sin(2 * math.pi * 4.0 * t[:, None] + 0.1 * phases), -FORCE_LIMIT, FORCE_LIMIT)
    return SyntheticRun(t, references, q, qd, forces, error)


# Log-time offset of the controller's answer after the joint state it answers (any positive value).
ANSWER_DELAY_NS = 1000


def write_bag(path: Path, run: SyntheticRun, storage: str = "mcap", topics=None, skip=None, extra=None) -> Path:
    """The run as the stack would record it; ``topics`` renames keys, ``skip`` leaves keys out,
    ``extra(writer)`` adds more messages before closing."""
    names = dict(TOPICS, **(topics or {}))
    skip = set(skip or ())
    keys = [k for k in ("joint_states", "reference", "platform_pose", "effort_commands") if k not in skip]
    model = HexapodModel(PARAMETERS)
    with BagWriter(path, storage) as writer:
        for key in keys:
            writer.add_topic(names[key], MESSAGE_TYPES[key])
        for k, tk in enumerate(run.t):
            log = nanoseconds(tk)
            r = run.references[k]
            if "reference" in keys:
                writer.write(names["reference"], log, reference_cdr(tk, r.pose, r.velocity, r.acceleration))
            if "joint_states" in keys:
                writer.write(names["joint_states"], log, joint_state_cdr(tk, JOINT_NAMES, run.q[k], run.qd[k]))
            if "platform_pose" in keys:
                pose = model.forward_kinematics(run.q[k]).pose
                writer.write(names["platform_pose"], log, pose_cdr(tk, pose[:3], quaternion_from_euler_zyx(tuple(pose[3:]))))
            if "effort_commands" in keys:
                writer.write(names["effort_commands"], log + ANSWER_DELAY_NS, effort_cdr(run.forces[k]))
        if extra:
            extra(writer)
    return path


def settings(**changes):
    return PARAMETERS.replace(recording={"evaluation": {"steady_state_start": STEADY_START_S, **changes}}).recording.evaluation


@pytest.fixture(scope="module")
def run():
    return synthetic_run()


@pytest.fixture(scope="module")
def bag(run, tmp_path_factory):
    return write_bag(tmp_path_factory.mktemp("bags") / "synthetic", run)


def expected_error_stats(error: np.ndarray) -> dict:
    norm = np.sqrt(np.sum(error**2, axis=1))
    return {
        "rms_norm": math.sqrt(float(np.mean(norm**2))),
        "max_norm": float(norm.max()),
        "rms_axis": np.sqrt(np.mean(error**2, axis=0)),
        "max_axis": np.abs(error).max(axis=0),
    }


def assert_stats(stats, error: np.ndarray) -> None:
    expected = expected_error_stats(error)
    assert stats.samples == error.shape[0]
    assert stats.rms_norm == pytest.approx(expected["rms_norm"], abs=KINEMATICS_TOLERANCE)
    assert stats.max_norm == pytest.approx(expected["max_norm"], abs=KINEMATICS_TOLERANCE)
    np.testing.assert_allclose(stats.rms_axis, expected["rms_axis"], atol=KINEMATICS_TOLERANCE)
    np.testing.assert_allclose(stats.max_axis, expected["max_axis"], atol=KINEMATICS_TOLERANCE)


# ------------------------------------------------------------------------------------------ metrics
@pytest.mark.parametrize("matching", ["interpolate", "latest"])
def test_tracking_metrics_recover_the_imposed_error(run, bag, matching):
    data = load_run(bag, JOINT_NAMES)
    metrics = evaluate_run(data, PARAMETERS, settings(reference_matching=matching), model_check=False)
    # References share the joint-state stamps, so both matchings pick the same reference.
    steady = run.t - run.t[0] >= STEADY_START_S
    assert_stats(metrics.position_whole, run.error[:, :3])
    assert_stats(metrics.orientation_whole, run.error[:, 3:])
    assert_stats(metrics.position_steady, run.error[steady, :3])
    assert_stats(metrics.orientation_steady, run.error[steady, 3:])
    np.testing.assert_allclose(metrics.tracking.error, run.error, atol=KINEMATICS_TOLERANCE)
    assert metrics.fk_failures == []
    assert metrics.pose_topic_difference[0] < KINEMATICS_TOLERANCE


def test_force_and_speed_metrics(run, bag):
    metrics = evaluate_run(load_run(bag, JOINT_NAMES), PARAMETERS, settings(), model_check=False)
    np.testing.assert_allclose(metrics.speed_peak, np.abs(run.qd).max(axis=0), rtol=1e-15)
    forces = metrics.forces
    np.testing.assert_allclose(forces.peak, np.abs(run.forces).max(axis=0), rtol=1e-15)
    np.testing.assert_allclose(forces.rms, np.sqrt(np.mean(run.forces**2, axis=0)), rtol=1e-12)
    # Each command holds for one period (the last one too, the median period).
    saturated = np.abs(run.forces) >= FORCE_LIMIT
    np.testing.assert_allclose(forces.saturation_time, saturated.sum(axis=0) * DT, rtol=1e-9)
    assert forces.saturation_time_any == pytest.approx(saturated.any(axis=1).sum() * DT, rel=1e-9)
    assert 0 < forces.saturation_time_any < DURATION_S  # the test really exercises saturation


def test_interpolated_reference_between_samples(run, tmp_path):
    """References at every other stamp: interpolation recovers the in-between ones, 'latest' holds."""
    sparse = dataclasses.replace(run)
    path = tmp_path / "sparse"
    with BagWriter(path) as writer:
        writer.add_topic(TOPICS["reference"], MESSAGE_TYPES["reference"])
        writer.add_topic(TOPICS["joint_states"], MESSAGE_TYPES["joint_states"])
        for k, tk in enumerate(sparse.t):
            if k % 2 == 0:
                r = sparse.references[k]
                writer.write(TOPICS["reference"], nanoseconds(tk), reference_cdr(tk, r.pose, r.velocity, r.acceleration))
            writer.write(TOPICS["joint_states"], nanoseconds(tk), joint_state_cdr(tk, JOINT_NAMES, sparse.q[k], sparse.qd[k]))
    data = load_run(path, JOINT_NAMES)
    latest = evaluate_run(data, PARAMETERS, settings(reference_matching="latest"), model_check=False).tracking
    held = np.array([run.references[k - k % 2].pose for k in range(run.t.size)])
    expected_latest = held - (np.array([r.pose for r in run.references]) - run.error)
    np.testing.assert_allclose(latest.error, expected_latest, atol=KINEMATICS_TOLERANCE)
    interpolated = evaluate_run(data, PARAMETERS, settings(), model_check=False).tracking
    # The last odd stamp lies after the last reference: not evaluated by interpolation.
    inside = run.t <= run.t[(run.t.size - 1) // 2 * 2]
    exact = np.array([r.pose for r in run.references])[inside]
    linear = exact.copy()
    linear[1::2] = 0.5 * (exact[0:-1:2] + exact[2::2])[: linear[1::2].shape[0]]
    np.testing.assert_allclose(interpolated.reference, linear, atol=1e-12)


# ------------------------------------------------------------------------------------------ model check
# A smooth motion about home: 5 mm at 2 Hz, within the model check's reach (21-sample window).
MOTION_AMPLITUDE_M = 5e-3
MOTION_FREQUENCY_HZ = 2.0
FORCE_OFFSET_N = 5.0  # added to one actuator's recorded force in the second check


def dynamic_run(duration: float = 0.3):
    t = sample_times(duration)
    w = 2 * math.pi * MOTION_FREQUENCY_HZ
    phases = np.linspace(0.0, math.pi, 6)
    q = PARAMETERS.home_actuator_position + MOTION_AMPLITUDE_M * np.sin(w * t[:, None] + phases)
    qd = MOTION_AMPLITUDE_M * w * np.cos(w * t[:, None] + phases)
    model = HexapodModel(PARAMETERS)
    inverse_dynamics = model.inverse_dynamics

    def tau(tk, with_motion=True):
        angle = w * tk + phases
        q_ = PARAMETERS.home_actuator_position + MOTION_AMPLITUDE_M * np.sin(angle)
        qd_ = MOTION_AMPLITUDE_M * w * np.cos(angle) * with_motion
        qdd_ = -MOTION_AMPLITUDE_M * w**2 * np.sin(angle) * with_motion
        return inverse_dynamics(q_, qd_, qdd_, phi=model.forward_kinematics(q_).phi)

    # A command held over [t_k, t_k+1) (zero-order hold, as recorded) gives the mean acceleration of
    # its interval: the force that produces this motion is the one at the interval's midpoint.
    forces = np.array([tau(tk + 0.5 * DT) for tk in t])
    gravity = np.array([tau(tk + 0.5 * DT, with_motion=False) for tk in t])
    trajectory = make_trajectory("operational_space", HexapodModel(PARAMETERS))
    refs = [trajectory.sample(float(tk)) for tk in t]
    return SyntheticRun(t, refs, q, qd, forces, np.zeros((t.size, 6))), gravity


@pytest.mark.slow
def test_model_check_residual(tmp_path):
    motion, gravity = dynamic_run()
    check_settings = settings(model_check_stride=1)
    consistent = evaluate_run(load_run(write_bag(tmp_path / "consistent", motion), JOINT_NAMES), PARAMETERS, check_settings)
    check = consistent.model_check
    assert check.reason == "" and check.t.size > 0
    # Only the differentiation differs from the test's analytic q_ddot: far below the inertial part.
    inertial_rms = np.sqrt(np.mean((motion.forces - gravity) ** 2, axis=0))
    assert np.all(check.rms_residual < 1e-2 * inertial_rms), (check.rms_residual, inertial_rms)

    offset = dataclasses.replace(motion, forces=motion.forces + FORCE_OFFSET_N * (np.arange(6) == 2))
    shifted = evaluate_run(load_run(write_bag(tmp_path / "offset", offset), JOINT_NAMES), PARAMETERS, check_settings).model_check
    assert shifted.rms_residual[2] == pytest.approx(FORCE_OFFSET_N, rel=1e-2)
    np.testing.assert_allclose(np.delete(shifted.rms_residual, 2), np.delete(check.rms_residual, 2), rtol=1e-9)


def test_model_check_needs_a_full_window(run, tmp_path):
    short = dataclasses.replace(run, t=run.t[:5], q=run.q[:5], qd=run.qd[:5], forces=run.forces[:5], references=run.references[:5])
    metrics = evaluate_run(load_run(write_bag(tmp_path / "short", short), JOINT_NAMES), PARAMETERS, settings())
    assert "derivative window" in metrics.model_check.reason
    assert any("model check" in note for note in metrics.notes)


# ------------------------------------------------------------------------------------------ replay
def controller_forces(name: str, run: SyntheticRun) -> np.ndarray:
    """What the controller node answers: its logic (ControlLoop) fed each sample's reference, then its
    joint state, at the times the messages carry; no bag involved."""
    control = ControlLoop(HexapodModel(PARAMETERS), name, "robot", arm_on_start=True)
    forces = []
    for k, r in enumerate(run.references):
        t = message_time(float(run.t[k]))
        control.reference_sample(t, Reference(t, r.pose, r.velocity, r.acceleration))
        forces.append(control.joint_state(t, t, JOINT_NAMES, run.q[k], run.qd[k]).forces)
    return np.array(forces)


# Replay feeds the references in their message form and the stamps as a node reads them, so it is
# bit-exact (measured: 0 N); the bound leaves room for a platform whose libm rounds differently.
REPLAY_TOLERANCE_N = 1e-9


@pytest.mark.parametrize("name", ["double_loop", "computed_torque"])
def test_replay_reproduces_the_recorded_controller(run, tmp_path, name):
    replay_duration = 0.15  # the double loop's integrator state is exercised over 150 steps
    short = synthetic_run(replay_duration)
    recorded = dataclasses.replace(short, forces=controller_forces(name, short))
    data = load_run(write_bag(tmp_path / name, recorded), JOINT_NAMES, replay=True)
    result = replay_run(data, PARAMETERS, name, "latest")
    assert result.compared.all() and result.t.size == short.t.size
    np.testing.assert_allclose(result.replayed, recorded.forces, rtol=0, atol=REPLAY_TOLERANCE_N)
    other = "computed_torque" if name == "double_loop" else "double_loop"
    assert np.max(replay_run(data, PARAMETERS, other, "latest").max_difference) > 1.0  # the comparison discriminates


@pytest.mark.slow
def test_replay_cli(tmp_path, capsys):
    """The CLI on a bag recorded from computed torque: every sample compared, differences ~0; the
    output folder follows the evaluation's rule and is not written over without --force."""
    short = synthetic_run(0.05)
    recorded = dataclasses.replace(short, forces=controller_forces("computed_torque", short))
    bag = write_bag(tmp_path / "recorded", recorded)
    assert replay_main([str(bag), "--controller", "computed_torque"]) == 0
    out = capsys.readouterr().out
    assert f"{short.t.size} samples compared" in out
    (rms_line,) = [line for line in out.splitlines() if line.startswith("RMS(replayed - recorded)")]
    rms = [float(v) for v in rms_line.split(":", 1)[1].split(",")]
    assert len(rms) == 6 and max(rms) < REPLAY_TOLERANCE_N, rms_line
    folder = tmp_path / "recorded_replay"
    assert {p.suffix for p in folder.iterdir()} == {".png", ".svg", ".md", ".html"}
    assert replay_main([str(bag), "--controller", "computed_torque"]) == 1
    assert "--force" in capsys.readouterr().err
    assert replay_main([str(bag), "--controller", "computed_torque", "--force", "--no-plot"]) == 0
    assert replay_main([str(bag)]) == 1  # the synthetic bag records no controller
    assert "give --controller" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ CLI
@pytest.mark.slow
def test_evaluate_cli_two_bags_comparison(run, bag, tmp_path, capsys):
    """Two runs in one report: Table 1 (per run and axis) holds the imposed errors' statistics, in
    the CSV to every digit; figures as PNG and SVG, print-sized; report.md and report.html."""
    sqlite_bag = write_bag(tmp_path / "sqlite_run", run, storage="sqlite3")
    out_dir = tmp_path / "report"
    code = evaluate_main([str(bag), str(sqlite_bag), "-o", str(out_dir), "--label", "mcap", "--label", "sqlite",
                          "--steady-state-start", str(STEADY_START_S), "--model-check-stride", "20"])
    assert code == 0
    report = (out_dir / "report.md").read_text()
    assert "**Table 1.**" in report and "| mcap | x | mm |" in report and "| sqlite | nu | deg |" in report
    steady = run.t >= STEADY_START_S
    rows = {(r["run"], r["axis"]): r for r in csv.DictReader((out_dir / "table_1_tracking.csv").open())}
    for label in ("mcap", "sqlite"):
        for k, (axis, scale) in enumerate(zip(("x", "y", "z", "lambda", "mu", "nu"), (1e3,) * 3 + (180 / math.pi,) * 3)):
            row = rows[(label, axis)]
            for column, error in (("whole", run.error[:, k]), ("steady", run.error[steady, k])):
                assert float(row[f"RMS {column}"]) == pytest.approx(np.sqrt(np.mean(error**2)) * scale, abs=KINEMATICS_TOLERANCE * scale)
                assert float(row[f"max {column}"]) == pytest.approx(np.abs(error).max() * scale, abs=KINEMATICS_TOLERANCE * scale)
        norm = expected_error_stats(run.error[:, :3])
        assert float(rows[(label, "|e_p|")]["RMS whole"]) == pytest.approx(norm["rms_norm"] * 1e3, abs=1e-9)
    actuators = list(csv.DictReader((out_dir / "table_2_actuators.csv").open()))
    assert [int(r["actuator"]) for r in actuators] == [1, 2, 3, 4, 5, 6] * 2  # numbered from 1
    for r in actuators[:6]:
        k = int(r["actuator"]) - 1
        assert float(r["peak abs(F) [N]"]) == np.abs(run.forces[:, k]).max()
    figures = sorted(p.stem for p in out_dir.glob("figure_*.png"))
    assert figures == sorted(p.stem for p in out_dir.glob("figure_*.svg"))  # vector beside raster
    assert figures[:5] == ["figure_1_position", "figure_2_orientation", "figure_3_error_norms", "figure_4_forces",
                           "figure_5_speeds"]
    import matplotlib.image

    image = matplotlib.image.imread(out_dir / "figure_1_position.png")
    assert image.shape[1] >= 1400  # a full text width at 200 dpi
    html = (out_dir / "report.html").read_text()
    assert html.count("<img src=\"data:image/png;base64,") == len(figures) and "<table" in html
    assert "report:" in capsys.readouterr().out
    # A second evaluation into the same folder needs --force.
    assert evaluate_main([str(bag), "-o", str(out_dir), "--no-plots", "--no-model-check"]) == 1
    assert "--force" in capsys.readouterr().err
    assert evaluate_main([str(bag), "-o", str(out_dir), "--no-plots", "--no-model-check", "--force"]) == 0
    assert not list(out_dir.glob("figure_*"))  # the old report's figures went with it


def test_default_output_folder_is_one_rule_for_a_folder_and_its_file(bag, tmp_path):
    from hexapod_control.evaluation.evaluate import default_output

    (storage_file,) = list(bag.glob("*.mcap"))
    assert default_output(bag) == default_output(storage_file) == bag.parent / f"{bag.name}_evaluation"
    lone = tmp_path / "lone.mcap"
    lone.write_bytes(storage_file.read_bytes())
    assert default_output(lone) == tmp_path / "lone_evaluation"
