"""The outputs thread of the robot stack: jobs run in order, off the caller's thread, a failure
reported and survived, the queue drained at a stop; and the ring of records the rcl loop in C
writes for it, read whole and once."""

import os
import threading

import pytest

from hexapod_control.ros.native_loop import RecordRing
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


def write_record(ring: RecordRing, values) -> None:
    """A record as rcl_loop.c's write_record writes it: the slot's number odd, the values, the number
    even, then the count of records."""
    written = int(ring.array[0])
    at = 1 + (written % ring.slots) * ring.slot_size
    ring.array[at] += 1.0
    ring.array[at + 1:at + ring.slot_size] = values
    ring.array[at] += 1.0
    ring.array[0] = written + 1


def test_the_record_ring_gives_each_record_once_and_only_whole_ones():
    ring = RecordRing(inputs_size=2, out_size=1, slots=4)
    assert ring.new_records() == []
    for k in range(3):
        write_record(ring, [k, k + 0.5, -k])
    records = ring.new_records()
    assert [(inputs.tolist(), out.tolist()) for inputs, out in records] == [
        ([k, k + 0.5], [-k]) for k in range(3)]
    assert ring.new_records() == []  # each once
    for k in range(3, 10):  # more than the ring holds since the last read: the last four are left
        write_record(ring, [k, k, k])
    assert [inputs[0] for inputs, _ in ring.new_records()] == [6, 7, 8, 9] and ring.lost == 3
    behind = RecordRing(inputs_size=2, out_size=1, slots=4)
    for k in range(7):
        write_record(behind, [k, k, k])
    behind.array[1 + 3 * behind.slot_size] += 1.0  # record 7 begun in the slot of record 3
    assert [inputs[0] for inputs, _ in behind.new_records()] == [4, 5, 6]  # 3 is being written over
    assert behind.lost == 3 + 1  # 0-2 written over, 3 being written over
