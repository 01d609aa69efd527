"""The main job end to end in a short form, and its two transports against each other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hexapod_control.bags import RunInfo
from hexapod_control.bags.reader import read_custom_data
from hexapod_control.evaluation.bag import load_run
from hexapod_control.evaluation.replay import main as replay_main
from hexapod_control.main_job import JobSettings, run_direct, write_plant_overlay
from hexapod_control.model.parameters import default_parameters_path, load_parameters

REPO_ROOT = Path(__file__).resolve().parent.parent
SHORT_DURATION_S = 0.3  # a few hundred control steps per controller: what CI can afford
# Wall-clock cap of the short job on a loaded 2-core machine (it normally takes ~20 s).
JOB_TIMEOUT_S = 600
REPLAY_DURATION_S = 0.2  # 200 control steps: the integrator and the delay estimate have state
NOISE_M = 1e-6  # [m] sensor noise of the mismatch run


def test_main_job_short_run_writes_bags_report_and_plots(tmp_path):
    output = tmp_path / "job"
    completed = subprocess.run(
        [sys.executable, "-m", "hexapod_control.main_job", "--duration", str(SHORT_DURATION_S), "-o", str(output)],
        cwd=REPO_ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr
    assert f"output folder {output.resolve()}" in completed.stdout
    assert "[double_loop] t =" not in completed.stdout  # progress goes to stderr
    assert "compiles its C code" in completed.stderr and "evaluating" in completed.stderr
    report = (output / "report.md").read_text()
    assert (output / "report.html").is_file()
    assert (output / "table_2_tracking.csv").is_file()  # Table 1 lists the job's runs
    for controller in ("double_loop", "computed_torque"):
        assert (output / "bags" / controller / "metadata.yaml").is_file()
        assert f"| {controller} | x | mm |" in report
        assert (output / f"figure_{6 if controller == 'double_loop' else 7}_model_check_{controller}.svg").is_file()
        info = RunInfo.from_custom_data(read_custom_data(output / "bags" / controller))
        assert (info.controller, info.gain_set, info.trajectory) == (controller, "simulated_plant", "operational_space")
        assert info.controller_parameters(controller) == load_parameters()  # the whole tree, recorded
    for k, name in enumerate(("position", "orientation", "error_norms", "forces", "speeds"), start=1):
        assert (output / f"figure_{k}_{name}.png").is_file() and (output / f"figure_{k}_{name}.svg").is_file()


@pytest.mark.parametrize("controller", ["double_loop", "computed_torque"])
def test_replay_reproduces_a_main_job_bag_exactly_by_default(tmp_path, capsys, controller):
    """The bag names its controller, gain set and parameters: replay needs no option and gives the
    recorded forces to rounding. The main job ran the compiled lockstep, the replay runs the loop per
    joint state on the recorded references: the last bit may differ (4e-16 N on the double loop)."""
    parameters = load_parameters()
    job = JobSettings(str(default_parameters_path()), str(default_parameters_path()), "operational_space", "embedded",
                      "mcap", tuple(parameters.recording.topics))
    run_direct(job, controller, REPLAY_DURATION_S, tmp_path / controller)
    assert replay_main([str(tmp_path / controller), "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert f"through {controller} (gain set simulated_plant" in out
    (rms_line,) = [line for line in out.splitlines() if line.startswith("RMS(replayed - recorded)")]
    assert max(abs(float(v)) for v in rms_line.split(":", 1)[1].split(",")) < 1e-12  # [N]


def test_model_mismatch_and_sensor_noise_reach_the_plant_and_the_bag(tmp_path):
    """The plant on the validation set (Table 6.1) with sensor noise; the controllers keep theirs."""
    parameters = load_parameters()
    plant_file = write_plant_overlay(tmp_path, str(default_parameters_path("hexapod_validation.yaml")), None, NOISE_M)
    job = JobSettings(str(default_parameters_path()), plant_file, "operational_space", "embedded", "mcap",
                      tuple(parameters.recording.topics))
    run_direct(job, "computed_torque", REPLAY_DURATION_S, tmp_path / "bag")
    info = RunInfo.from_custom_data(read_custom_data(tmp_path / "bag"))
    assert info.plant_parameters_file == plant_file and info.sensor_noise == f"{NOISE_M:g} m"
    assert info.controller_parameters("bag") == parameters  # the controller's set, not the plant's
    plant = load_parameters(plant_file)
    assert plant.geometry.leg_length == 0.3689 and plant.simulation.sensor.noise_std == NOISE_M
    # The measured positions carry the noise: they are not the smooth motion a noiseless plant gives.
    q = load_run(tmp_path / "bag", parameters.ros.joint_names).q
    roughness = np.std(np.diff(q, n=2, axis=0))
    assert roughness > NOISE_M  # second differences of white noise: sqrt(6) sigma


def test_main_job_rejects_bad_options(tmp_path, capsys):
    from hexapod_control.main_job import build_parser, main

    assert main(["--duration", "-1"]) == 1
    assert main(["--sensor-noise", "1e-6", "--plant", "mujoco"]) == 1
    assert "no sensor model" in capsys.readouterr().err
    assert main(["--model-mismatch", "--transport", "ros"]) == 1
    assert "--transport direct" in capsys.readouterr().err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    assert main(["--duration", "0.01", "-o", str(tmp_path / "busy")]) == 1
    text = " ".join(build_parser().format_help().split())
    for default in ("(default: 30.0", "(default: operational_space)", "(default: embedded)", "(default: direct)",
                    "noise_std = 0)", "loop_delay.periods =", "recording.storage = mcap)"):
        assert default in text, default


ROS_STEPS_S = 0.05  # 50 lockstep steps through DDS (each crosses rclpy several times)
REFERENCE_TOLERANCE = 1e-9  # [m, rad] message round trips of the reference and the measured home pose
FORCE_TOLERANCE_N = 1e-3  # 100x the gain-amplified round-off above; a logic difference gives >= 0.1 N
POSITION_TOLERANCE_M = 1e-7  # that force difference integrated over 50 steps stays below 1e-8 m


@pytest.mark.parametrize("controller", ["computed_torque", "double_loop"])
def test_direct_transport_records_what_the_ros_stack_records(tmp_path, controller):
    """Same controller, plant and trajectory: the joint states and forces of both bags agree."""
    pytest.importorskip("rclpy")
    from hexapod_control.main_job import run_ros

    params = str(default_parameters_path())
    parameters = load_parameters(params)
    topics = parameters.recording.topics
    joint_names = parameters.ros.joint_names
    job = JobSettings(params, params, "operational_space", "embedded", "mcap", tuple(topics))
    run_ros(job, controller, ROS_STEPS_S, tmp_path / "ros")
    run_direct(job, controller, ROS_STEPS_S, tmp_path / "direct")
    ros, direct = load_run(tmp_path / "ros", joint_names), load_run(tmp_path / "direct", joint_names)
    assert ros.joint_t.size == direct.joint_t.size == round(ROS_STEPS_S * parameters.controllers.rate)
    np.testing.assert_array_equal(ros.joint_t, direct.joint_t)
    # Same deterministic lockstep sequence. The ROS trajectory node may centre the trajectory on the
    # home pose it measured through the FK node's message (a quaternion round trip, ~1e-11), which
    # the computed-torque gains (K_P up to 1e5 s^-2) turn into force differences of ~1e-5 N.
    np.testing.assert_allclose(ros.ref_pose, direct.ref_pose, rtol=0, atol=REFERENCE_TOLERANCE)
    np.testing.assert_allclose(ros.forces, direct.forces, rtol=0, atol=FORCE_TOLERANCE_N)
    np.testing.assert_allclose(ros.q, direct.q, rtol=0, atol=POSITION_TOLERANCE_M)
    np.testing.assert_array_equal(ros.effort_t, direct.effort_t)
    np.testing.assert_array_equal(ros.ref_t, direct.ref_t)
