"""One evaluation on several processes (evaluation.parallel): the pieces run in other processes, come back
in order with their arrays, a child's error reaches the caller, and a bag decoded, evaluated and reported
on two workers gives what one worker gives, with pieces small enough that a short run has many."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
from test_evaluation import JOINT_NAMES, PARAMETERS, STEADY_START_S, settings, synthetic_run, write_bag

from hexapod_control.evaluation import batch, parallel
from hexapod_control.evaluation.bag import load_run
from hexapod_control.evaluation.cli import main as evaluate_main
from hexapod_control.evaluation.metrics import evaluate_run
from hexapod_control.evaluation.report import write_report
from hexapod_control.model.hexapod import HexapodModel

# Rows per piece in these tests: the 0.4 s run at 1 kHz then has five pieces, the last one short.
SMALL_PIECE_ROWS = 97
# Each piece's forward kinematics starts from home instead of the previous row: both converge to the
# closure tolerance (1e-12 m), so the poses agree to a few times it.
POSE_TOLERANCE = 5e-12


def test_pieces_come_back_in_order_from_other_processes():
    shared = np.arange(12.0)  # seen by the children as it is, not sent to them

    def piece(k: int) -> dict:
        return {"k": k, "pid": os.getpid(), "values": shared[k:] * k}

    results = parallel.map_forked(piece, range(6), workers=2)
    assert [r["k"] for r in results] == list(range(6))
    assert os.getpid() not in {r["pid"] for r in results}
    for k, result in enumerate(results):
        np.testing.assert_array_equal(result["values"], shared[k:] * k)
        result["values"][:] = -1.0  # an array that came back is this process's own to change
    here = parallel.map_forked(piece, range(3), workers=2, here=1)
    assert here[0]["pid"] == os.getpid() and os.getpid() not in {r["pid"] for r in here[1:]}


def test_results_come_through_the_pipe_when_shared_memory_is_full(monkeypatch):
    def full(path, buffers):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(parallel, "_write_buffers", full)  # the children inherit it
    results = parallel.map_forked(lambda k: np.full(1000, float(k)), range(4), workers=2)
    for k, values in enumerate(results):
        np.testing.assert_array_equal(values, np.full(1000, float(k)))


def test_one_worker_runs_the_pieces_here_in_turn():
    assert [pid for pid, _ in parallel.map_forked(lambda k: (os.getpid(), k), range(4), workers=1)] == [os.getpid()] * 4


def test_a_piece_that_fails_raises_its_error_here():
    def piece(k: int) -> int:
        if k == 3:
            raise ValueError(f"piece {k} failed")
        return k

    with pytest.raises(ValueError, match="piece 3 failed"):
        parallel.map_forked(piece, range(5), workers=2)
    assert parallel.map_forked(piece, range(3), workers=2) == [0, 1, 2]  # and the next call works


def test_a_nested_map_runs_inside_its_piece():
    def outer(k: int) -> list:
        return parallel.map_forked(lambda j: (os.getpid(), j), range(2), workers=2)

    for inner in parallel.map_forked(outer, range(2), workers=2):
        assert len({pid for pid, _ in inner}) == 1 and inner[0][0] != os.getpid()


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    return write_bag(tmp_path_factory.mktemp("parallel") / "run", synthetic_run())


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(batch, "PIECE_ROWS", SMALL_PIECE_ROWS)


def assert_same_arrays(first, second) -> None:
    for name, value in vars(first).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(second, name), value, err_msg=name)


def test_forward_kinematics_in_pieces_tracks_the_physical_mode_across_their_seams(bag, small_pieces):
    run = load_run(bag, JOINT_NAMES)
    kinematics = HexapodModel(PARAMETERS).kinematics
    whole = batch.forward_kinematics_batch(kinematics, run.q)
    assert len(batch.pieces(len(run.q))) > 3
    for workers in (1, 2):
        pieced = batch.forward_kinematics_pieces(kinematics, run.q, workers)
        assert pieced.failures == []
        np.testing.assert_allclose(pieced.pose, whole.pose, rtol=0, atol=POSE_TOLERANCE)
        np.testing.assert_allclose(pieced.phi, whole.phi, rtol=0, atol=POSE_TOLERANCE)


def test_failures_keep_their_row_in_the_whole_series(bag, small_pieces):
    q = load_run(bag, JOINT_NAMES).q.copy()
    q[[5, 150, 301]] = np.nan  # in the first, second and fourth piece
    pieced = batch.forward_kinematics_pieces(HexapodModel(PARAMETERS).kinematics, q, 2)
    assert [row for row, _ in pieced.failures] == [5, 150, 301]


def test_two_workers_decode_evaluate_and_report_what_one_does(bag, small_pieces, tmp_path):
    evaluation = settings(model_check_stride=1)
    runs, reports = {}, {}
    for workers in (1, 2):
        run = load_run(bag, JOINT_NAMES, workers=workers)
        metrics = evaluate_run(run, PARAMETERS, evaluation, workers=workers)
        runs[workers] = (run, metrics)
        reports[workers] = write_report([(run, metrics)], tmp_path / str(workers), evaluation, workers=workers)
    (run_1, metrics_1), (run_2, metrics_2) = runs[1], runs[2]
    assert_same_arrays(run_1, run_2)
    assert (run_1.notes, run_1.available, run_1.decoded, run_1.storage) == (run_2.notes, run_2.available, run_2.decoded,
                                                                             run_2.storage)
    assert metrics_1.model_check.t.size > 3 * SMALL_PIECE_ROWS  # the model check ran in pieces too
    for name in ("tracking", "model_check", "position_whole", "orientation_steady", "forces"):
        assert_same_arrays(getattr(metrics_1, name), getattr(metrics_2, name))
    assert metrics_1.position_whole.rms_norm == metrics_2.position_whole.rms_norm
    assert reports[1].read_text().replace(str(tmp_path / "1"), "") == reports[2].read_text().replace(str(tmp_path / "2"), "")
    figures = sorted(path.name for path in (tmp_path / "2").glob("figure_*"))
    assert figures == sorted(path.name for path in (tmp_path / "1").glob("figure_*")) and len(figures) == 2 * 6
    assert all((tmp_path / "2" / name).stat().st_size > 0 for name in figures)


def test_workers_below_one_is_refused(bag, tmp_path, capsys):
    assert evaluate_main([str(bag), "-o", str(tmp_path / "report"), "--workers", "0",
                          "--steady-state-start", str(STEADY_START_S)]) == 1
    assert "--workers must be >= 1, got 0" in capsys.readouterr().err
