"""The outputs thread of the robot stack: jobs run in order, off the caller's thread, a failure
reported and survived, the queue drained at a stop."""

import os
import threading

import pytest

from hexapod_control.ros.output_thread import OutputThread

JOBS = 200


def test_jobs_run_in_order_in_another_thread_and_a_stop_drains_them():
    done, threads, reported = [], set(), []
    outputs = OutputThread("test_outputs", reported.append, lambda: True)
    for k in range(JOBS):
        outputs.submit(lambda k=k: (done.append(k), threads.add(threading.get_ident())))
    outputs.stop()
    assert done == list(range(JOBS))
    assert threads and threading.get_ident() not in threads and len(threads) == 1
    assert reported == [] and outputs.failures == 0


def test_a_failing_job_is_reported_and_the_next_ones_run():
    done, reported = [], []
    outputs = OutputThread("test_outputs", reported.append, lambda: True)
    outputs.submit(lambda: done.append("before"))
    outputs.submit(lambda: 1 / 0)
    outputs.submit(lambda: done.append("after"))
    outputs.stop()
    assert done == ["before", "after"]
    assert outputs.failures == 1 and isinstance(reported[0], ZeroDivisionError)


def test_failures_while_shutting_down_are_not_reported():
    reported = []
    outputs = OutputThread("test_outputs", reported.append, lambda: False)
    outputs.submit(lambda: 1 / 0)
    outputs.stop()
    assert reported == [] and outputs.failures == 0


@pytest.mark.parametrize("priority, expected", [(50, (os.SCHED_FIFO, 49)), (1, (os.SCHED_OTHER, 0))])
def test_below_runs_the_thread_under_the_loop(priority, expected):
    outputs = OutputThread("test_outputs", lambda error: None, lambda: True)
    thread = outputs.native_id
    outputs.below()  # on the normal scheduler: nothing
    assert os.sched_getscheduler(thread) == os.SCHED_OTHER
    try:
        os.sched_setscheduler(thread, os.SCHED_FIFO, os.sched_param(priority))  # as use_realtime_priority
    except PermissionError:
        outputs.stop()
        pytest.skip("no permission for SCHED_FIFO here")
    outputs.below()
    assert (os.sched_getscheduler(thread), os.sched_getparam(thread).sched_priority) == expected
    outputs.stop()
