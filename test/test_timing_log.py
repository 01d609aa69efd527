"""The loop's event log and latency window (hexapod_control/ros/timing_log.py), by hand."""

import math

import numpy as np
import pytest

from hexapod_control.ros.timing_log import LatencyWindow, TimingLog


def test_the_log_keeps_each_column_in_order_and_writes_it(tmp_path):
    path = tmp_path / "log.npz"
    log = TimingLog(str(path), ("stamps", "arrivals"))
    for t in (1.0, 2.0, 3.0):
        log.record("stamps", t)
    values = np.array([4.0, 5.0])
    log.extend("stamps", values)
    values[:] = 0.0  # the caller's array, reused: the log kept what it held
    log.record("stamps", 6.0)
    log.record("arrivals", 1.5)
    log.save()
    saved = np.load(path)
    assert saved["stamps"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert saved["arrivals"].tolist() == [1.5]


def test_without_a_path_nothing_is_kept_or_written(tmp_path):
    log = TimingLog("", ("stamps",))
    log.record("stamps", 1.0)
    log.save()
    assert log.columns == {} and list(tmp_path.iterdir()) == []


def test_the_window_reports_and_starts_again():
    window = LatencyWindow()
    for k in range(1, 101):  # 1..100 ms
        window.add(k * 1e-3)
    report = window.report()
    # Median of 1..100 is 50.5; the 99th percentile interpolates between 99 and 100 at 0.01.
    assert report["latency_median"] == pytest.approx(50.5e-3)
    assert report["latency_p99"] == pytest.approx(99.01e-3)
    assert report["latency_max"] == pytest.approx(100e-3)
    assert all(math.isnan(v) for v in window.report().values())  # the next window is empty


@pytest.mark.parametrize("count", [1, 2, 3, 7, 100, 201])
def test_the_windows_percentiles_are_numpys(count):
    """The report's order statistics against NumPy's median and default percentile, on random latencies."""
    latencies = np.random.default_rng(count).exponential(2e-4, count)
    window = LatencyWindow()
    window.add(float(latencies[0]))
    window.extend(latencies[1:])
    report = window.report()
    assert report["latency_median"] == pytest.approx(np.median(latencies), rel=1e-12)
    assert report["latency_p99"] == pytest.approx(np.percentile(latencies, 99.0), rel=1e-12)
    assert report["latency_max"] == latencies.max()
