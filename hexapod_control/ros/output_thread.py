"""A thread of its own for a node's outputs that no joint state waits for (/diagnostics, the
decimated pose, reference and twist).

Why. Building and publishing one of them costs a few tenths of a millisecond in a loaded
process, several times what the same calls take repeated in a quiet one (doc/benchmarks.md): in
the loop's thread, between two answers of a 2-4 kHz loop, that holds up the next joint state. Here
the loop's thread only hands over what they are made of (values it computed, arrays no one writes
again), and this thread builds and publishes them in the order they were handed over, while the loop
waits for its next state in C with the GIL released. An ``idle`` job runs besides every
``idle_period``: the robot stack's looks for the records that its rcl loop in C writes without
returning (ros/native_loop.py RecordRing).

Under SCHED_FIFO the thread runs one priority below the loop (:meth:`OutputThread.below`): the loop
and the driver preempt it, and while it holds the GIL the interpreter's switch interval
(``SWITCH_INTERVAL_S``) bounds how long the loop's thread waits for it on its return from C.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable

# How long a thread holding the GIL keeps it once another asks for it [s] (CPython's default is
# 5 ms, twenty 4 kHz periods): the loop's thread, back from C, waits about this for the outputs'
# (longer only while that one is in a C call that keeps the GIL).
SWITCH_INTERVAL_S = 1e-4
STOP_TIMEOUT_S = 5.0  # for the jobs handed over before a stop to finish


class OutputThread:
    """Runs the jobs handed over (:meth:`submit`) one after another, in order, in a daemon thread, and
    ``idle`` every ``idle_period`` seconds besides (a job that looks for outputs by itself).

    ``report(error)``: called with a job's exception (the job is dropped, the thread goes on), unless
    ``running()`` says the node is shutting down, when publishers fail as their context goes.
    """

    def __init__(self, name: str, report: Callable[[Exception], None], running: Callable[[], bool],
                 idle: Callable[[], None] = lambda: None, idle_period: float | None = None):
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._report, self._running = report, running
        self._idle, self._idle_period = idle, idle_period
        self.failures = 0
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    @property
    def native_id(self) -> int:
        """The thread's id for the scheduler."""
        return self._thread.native_id

    def below(self) -> None:
        """Under SCHED_FIFO (use_realtime_priority put every thread there), run one priority below
        the others, or on the normal scheduler from priority 1; nothing on the normal scheduler."""
        thread = self.native_id
        if os.sched_getscheduler(thread) != os.SCHED_FIFO:
            return
        priority = os.sched_getparam(thread).sched_priority
        policy, level = (os.SCHED_FIFO, priority - 1) if priority > 1 else (os.SCHED_OTHER, 0)
        os.sched_setscheduler(thread, policy, os.sched_param(level))

    def stop(self) -> None:
        """Run the jobs handed over so far, then end the thread."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(STOP_TIMEOUT_S)

    def _run(self) -> None:
        next_idle = time.monotonic()
        while True:
            try:
                timeout = None if self._idle_period is None else max(0.0, next_idle - time.monotonic())
                job = self._jobs.get(timeout=timeout)
            except queue.Empty:
                job, next_idle = self._idle, time.monotonic() + self._idle_period
            if job is None:
                return
            try:
                job()
            except Exception as error:  # a failed output must not stop the next ones
                if self._running():
                    self.failures += 1
                    self._report(error)
