"""The main job end to end in a short form, and its two transports against each other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hexapod_control.evaluation.bag import load_run
from hexapod_control.main_job import run_direct
from hexapod_control.model.parameters import default_parameters_path, load_parameters

REPO_ROOT = Path(__file__).resolve().parent.parent
SHORT_DURATION_S = 0.3  # a few hundred control steps per controller: what CI can afford
# Wall-clock cap of the short job on a loaded 2-core machine (it normally takes ~20 s).
JOB_TIMEOUT_S = 600


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
    report = (output / "report.md").read_text()
    for controller in ("double_loop", "computed_torque"):
        assert (output / "bags" / controller / "metadata.yaml").is_file()
        assert f"| {controller} |" in report
        for figure in ("tracking", "speeds", "forces", "model_check"):
            assert (output / f"{controller}_{figure}.png").is_file()
    assert "## Comparison" in report and (output / "comparison_tracking.png").is_file()


def test_main_job_rejects_bad_options(tmp_path):
    from hexapod_control.main_job import main

    assert main(["--duration", "-1"]) == 1
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    assert main(["--duration", "0.01", "-o", str(tmp_path / "busy")]) == 1


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
    run_ros(params, controller, "embedded", ROS_STEPS_S, tmp_path / "ros", "mcap", topics)
    run_direct(params, controller, "embedded", ROS_STEPS_S, tmp_path / "direct", "mcap", topics)
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
