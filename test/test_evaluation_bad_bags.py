"""Bad bags: missing topics, unsorted or duplicated stamps, truncated files, wrong message sizes,
renamed topics, extra topics, wrong types, garbage. Each gives a note or a one-line CLI error,
never a traceback; the metrics of what is left are checked against the imposed signals."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_evaluation import (
    JOINT_NAMES,
    PARAMETERS,
    RATE,
    assert_stats,
    settings,
    synthetic_run,
    write_bag,
)

from hexapod_control.bags import (
    BagError,
    BagWriter,
    diagnostics_cdr,
    effort_cdr,
    joint_state_cdr,
    nanoseconds,
    read_bag,
    reference_cdr,
)
from hexapod_control.conventions import MESSAGE_TYPES, TOPICS
from hexapod_control.evaluation.bag import load_run
from hexapod_control.evaluation.cli import main as evaluate_main
from hexapod_control.evaluation.metrics import evaluate_run

# Fraction of the storage file kept when cutting a bag short: past the first MCAP chunk / sqlite pages.
KEPT_FRACTION = 0.6


@pytest.fixture(scope="module")
def run():
    return synthetic_run()


def evaluate(path, **kwargs):
    data = load_run(path, JOINT_NAMES, **kwargs)
    return data, evaluate_run(data, PARAMETERS, settings(), model_check=False)


def run_cli(args, capsys):
    code = evaluate_main([str(a) for a in args] + ["--no-model-check", "--no-plots"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured


def error_lines(captured) -> list[str]:
    return [line for line in captured.err.splitlines() if line.startswith("hexapod_evaluate: error:")]


def test_missing_reference_is_an_error_unless_partial(run, tmp_path, capsys):
    bag = write_bag(tmp_path / "no_reference", run, skip={"reference"})
    data, metrics = evaluate(bag)
    assert metrics.tracking is None and metrics.forces is not None
    assert any(TOPICS["reference"] in note and "not in the bag" in note for note in data.notes)
    code, captured = run_cli([bag, "-o", tmp_path / "out"], capsys)
    (line,) = error_lines(captured)
    assert code == 1 and f"tracking need reference: {TOPICS['reference']}" in line and "not in the bag" in line
    assert not (tmp_path / "out").exists()
    code, _ = run_cli([bag, "-o", tmp_path / "out", "--partial"], capsys)
    assert code == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "not in the bag" in report and "tracking: no references decoded" in report


def test_nothing_to_evaluate_is_one_line_and_exit_1(run, tmp_path, capsys):
    path = tmp_path / "diagnostics_only"
    with BagWriter(path) as writer:
        writer.add_topic(TOPICS["diagnostics"], MESSAGE_TYPES["diagnostics"])
        writer.write(TOPICS["diagnostics"], 1, diagnostics_cdr(0.0, [(0, "x", "ok", {})]))
    for partial in ([], ["--partial"]):
        code, captured = run_cli([path, "-o", tmp_path / "out", *partial], capsys)
        (line,) = error_lines(captured)
        assert code == 1 and TOPICS["joint_states"] in line and "/diagnostics" in line  # what the bag has instead
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make", ["missing", "empty_dir", "garbage_mcap", "text_file"])
def test_unreadable_paths(tmp_path, capsys, make):
    path = tmp_path / make
    if make == "empty_dir":
        path.mkdir()
    elif make == "garbage_mcap":
        path = tmp_path / "garbage.mcap"
        path.write_bytes(b"this is not an mcap file" * 10)
    elif make == "text_file":
        path = tmp_path / "notes.txt"
        path.write_text("hello")
    code, captured = run_cli([path, "-o", tmp_path / "out"], capsys)
    (line,) = error_lines(captured)
    assert code == 1 and line.count(str(path)) == 1  # named once


def test_unsorted_and_duplicated_stamps(run, tmp_path):
    """Stamps swapped in pairs and some messages repeated: the same tracking numbers, with notes."""
    path = tmp_path / "shuffled"
    order = np.arange(run.t.size)
    order[10:40:2], order[11:40:2] = order[11:40:2].copy(), order[10:40:2].copy()  # 15 swapped pairs
    repeated = {5, 50, 51, 200}
    with BagWriter(path) as writer:
        writer.add_topic(TOPICS["reference"], MESSAGE_TYPES["reference"])
        writer.add_topic(TOPICS["joint_states"], MESSAGE_TYPES["joint_states"])
        for slot, k in enumerate(order):
            log = nanoseconds(run.t[slot])  # log order is the write order, stamps are not
            r, tk = run.references[k], run.t[k]
            for _ in range(2 if k in repeated else 1):
                writer.write(TOPICS["reference"], log, reference_cdr(tk, r.pose, r.velocity, r.acceleration))
                writer.write(TOPICS["joint_states"], log, joint_state_cdr(tk, JOINT_NAMES, run.q[k], run.qd[k]))
    data, metrics = evaluate(path)
    assert_stats(metrics.position_whole, run.error[:, :3])
    assert_stats(metrics.orientation_whole, run.error[:, 3:])
    for topic in (TOPICS["reference"], TOPICS["joint_states"]):
        assert f"{topic}: 15 stamp(s) out of order: sorted by stamp" in data.notes
        assert f"{topic}: {len(repeated)} duplicated stamp(s): kept the first message of each" in data.notes


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_truncated_bag(run, tmp_path, capsys, storage):
    bag = write_bag(tmp_path / storage, run, storage=storage)
    (storage_file,) = [p for p in bag.iterdir() if p.suffix in (".mcap", ".db3")]
    data_full = load_run(bag, JOINT_NAMES)
    size = storage_file.stat().st_size
    with storage_file.open("r+b") as handle:
        handle.truncate(int(size * KEPT_FRACTION))
    data, metrics = evaluate(bag)
    assert any("truncated or corrupt" in note for note in data.notes)
    assert 0 < data.joint_t.size < data_full.joint_t.size
    # The surviving samples (by sample index: t = 0 is the first reference, as in the run): their
    # errors are still the imposed ones.
    kept = np.isin(np.round(run.t * RATE), np.round(data.joint_t * RATE))
    assert_stats(metrics.position_whole, run.error[kept, :3])
    code, _ = run_cli([bag, "-o", tmp_path / f"out_{storage}"], capsys)
    assert code == 0 and "truncated or corrupt" in (tmp_path / f"out_{storage}" / "report.md").read_text()


def test_bag_without_metadata(run, tmp_path):
    """A bag without metadata.yaml: the storage file is read directly, with a note."""
    bag = write_bag(tmp_path / "killed", run)
    (bag / "metadata.yaml").unlink()
    data, metrics = evaluate(bag)
    assert data.joint_t.size == run.t.size
    assert any("no metadata.yaml" in note for note in data.notes)
    assert_stats(metrics.position_whole, run.error[:, :3])


def test_wrong_message_sizes_are_skipped_and_counted(run, tmp_path):
    bad_joint_states = {3, 77, 150}  # 5 positions instead of 6
    bad_commands = {10, 11, 300}  # 7 values instead of 6
    path = tmp_path / "bad_sizes"
    with BagWriter(path) as writer:
        for key in ("reference", "joint_states", "effort_commands"):
            writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
        for k, tk in enumerate(run.t):
            log, r = nanoseconds(tk), run.references[k]
            writer.write(TOPICS["reference"], log, reference_cdr(tk, r.pose, r.velocity, r.acceleration))
            if k in bad_joint_states:
                message = joint_state_cdr(tk, JOINT_NAMES, run.q[k][:5], run.qd[k])
            else:
                message = joint_state_cdr(tk, JOINT_NAMES, run.q[k], run.qd[k])
            writer.write(TOPICS["joint_states"], log, message)
            forces = np.append(run.forces[k], 1.0) if k in bad_commands else run.forces[k]
            writer.write(TOPICS["effort_commands"], log + 1, effort_cdr(forces))
    data, metrics = evaluate(path)
    assert f"{TOPICS['joint_states']}: skipped 3 message(s): joint state has 6 names but 5 positions" in data.notes
    assert f"{TOPICS['effort_commands']}: skipped 3 message(s): effort command has 7 values, expected 6" in data.notes
    good = ~np.isin(np.arange(run.t.size), sorted(bad_joint_states))
    assert_stats(metrics.position_whole, run.error[good, :3])
    # The command after a skipped joint state is tied to the previous valid one (the latest logged
    # before it) and supersedes that one's command: one command fewer per skipped joint state.
    superseded = len(bad_joint_states - bad_commands)
    assert metrics.force_samples == run.t.size - len(bad_commands) - superseded
    assert f"{TOPICS['effort_commands']}: {superseded} command(s) superseded by a later one for the same joint state" in data.notes


def test_undecodable_messages_and_wrong_types(run, tmp_path):
    path = tmp_path / "garbage"
    with BagWriter(path) as writer:
        writer.add_topic(TOPICS["joint_states"], MESSAGE_TYPES["joint_states"])
        writer.add_topic(TOPICS["reference"], MESSAGE_TYPES["effort_commands"])  # wrong type on the reference topic
        writer.add_topic("/rosout", "rcl_interfaces/msg/Log")  # a typical extra topic
        for k, tk in enumerate(run.t):
            data = joint_state_cdr(tk, JOINT_NAMES, run.q[k], run.qd[k])
            writer.write(TOPICS["joint_states"], nanoseconds(tk), data[:9] if k == 7 else data)
            writer.write(TOPICS["reference"], nanoseconds(tk), effort_cdr(run.forces[k]))
    data, metrics = evaluate(path)
    assert any("undecodable CDR" in note for note in data.notes)
    assert any("type std_msgs/msg/Float64MultiArray, expected trajectory_msgs" in note for note in data.notes)
    assert "/rosout" in data.available
    assert data.joint_t.size == run.t.size - 1
    assert metrics.speed_peak is not None and metrics.tracking is None


def test_renamed_topics_through_options(run, tmp_path, capsys):
    renamed = {"joint_states": "/robot/joint_states", "effort_commands": "/robot/effort"}
    bag = write_bag(tmp_path / "renamed", run, topics=renamed)
    _, metrics = evaluate(bag)
    assert metrics.tracking is None and metrics.forces is None  # default names: nothing found
    _, metrics = evaluate(bag, topic_overrides=renamed)
    assert_stats(metrics.position_whole, run.error[:, :3])
    assert metrics.forces is not None
    code, _ = run_cli([bag, "-o", tmp_path / "out", "--topic", "joint_states=/robot/joint_states",
                       "--topic", "effort_commands=/robot/effort"], capsys)
    assert code == 0
    code, captured = run_cli([bag, "--topic", "not_a_key=/x"], capsys)
    assert code == 1 and "unknown topic key" in captured.err


def test_read_bag_rejects_non_bags(tmp_path):
    with pytest.raises(BagError):
        read_bag(tmp_path / "nothing")
    copy = tmp_path / "copy"
    copy.mkdir()
    with pytest.raises(BagError, match="not a rosbag2 bag"):
        read_bag(copy)


def test_damaged_metadata_reads_the_storage_file(run, tmp_path):
    """A directory whose metadata is damaged but whose storage file is intact still reads."""
    bag = write_bag(tmp_path / "damaged_meta", run)
    (bag / "metadata.yaml").write_text("rosbag2_bagfile_information: [not, valid")
    contents = read_bag(bag)
    assert any("metadata.yaml unreadable" in note for note in contents.notes)
    assert len(contents.topics[TOPICS["joint_states"]].records) == run.t.size


def test_non_finite_values_are_skipped_never_evaluated(run, tmp_path):
    """NaN/inf in joint states, commands and references: skipped and counted, the rest exact."""
    bad = (3, 77, 150)  # the same samples on every topic, so no command is re-tied to another state
    path = tmp_path / "non_finite"
    with BagWriter(path) as writer:
        for key in ("reference", "joint_states", "effort_commands"):
            writer.add_topic(TOPICS[key], MESSAGE_TYPES[key])
        for k, tk in enumerate(run.t):
            log, r = nanoseconds(tk), run.references[k]
            pose, q, forces = r.pose.copy(), run.q[k].copy(), run.forces[k].copy()
            if k in bad:
                pose[0], q[2], forces[5] = np.nan, np.inf, np.nan
            writer.write(TOPICS["reference"], log, reference_cdr(tk, pose, r.velocity, r.acceleration))
            writer.write(TOPICS["joint_states"], log, joint_state_cdr(tk, JOINT_NAMES, q, run.qd[k]))
            writer.write(TOPICS["effort_commands"], log + 1, effort_cdr(forces))
    data, metrics = evaluate(path)
    for key in ("reference", "joint_states", "effort_commands"):  # notes are grouped by error text
        skipped = [re.match(rf"{re.escape(TOPICS[key])}: skipped (\d+) message", note) for note in data.notes]
        assert sum(int(m.group(1)) for m in skipped if m) == len(bad), data.notes
    good = ~np.isin(np.arange(run.t.size), bad)
    assert np.all(np.isfinite(data.q)) and np.all(np.isfinite(data.forces)) and np.all(np.isfinite(data.ref_pose))
    assert_stats(metrics.position_whole, run.error[good, :3])
    assert_stats(metrics.orientation_whole, run.error[good, 3:])
    assert metrics.force_samples == good.sum()
    np.testing.assert_allclose(metrics.forces.peak, np.abs(run.forces[good]).max(axis=0), rtol=1e-15)
