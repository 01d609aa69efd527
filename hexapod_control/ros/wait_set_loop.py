"""One hot subscription served by a wait set of its own, beside the node's executor.

Why. rclpy's executors rebuild their wait set from every entity of the node (its services, the six
parameter services, timers, the /clock subscription) and run a generator and a task per callback.
In the 1 kHz loop that was a third of the controller's CPU (py-spy) and most of the time from a
joint state's arrival to its answer. Here the one subscription the loop lives on (the joint states
of the robot stack, the effort commands of the fake driver) is served alone: it waits in a wait set
of one entry (or not at all, below), and its messages are taken directly. The rest of the node
(services, parameter services, timers, /clock) stays with the executor, which is polled without
waiting every ``poll_period``: a
service answers within that, and costs nothing between. A poll runs one ready callback and starts
no further one once ``poll_budget`` has passed, so no rate of requests delays the loop's own work
by more than ``poll_budget`` plus the one callback running when it ran out (a flood of requests
waits in its queue, not in the loop).

The owner gives a deadline (monotonic seconds) and what to do at it: the fake driver's next tick,
the robot stack's next watchdog check. The wait never outlasts the deadline, so timing work runs on
time however quiet the subscription is.

An owner that needs its messages only at its deadline (the fake driver applies the commands at its
ticks, as ros2_control's command interfaces are read at each update) asks for ``at_deadline``: the
loop then sleeps until the deadline or the next poll and takes nothing itself; ``on_deadline``
takes the messages waiting with :meth:`WaitSetLoop.take_waiting` when its tick needs them (the
driver publishes its state first). A message no longer wakes the loop (at 1 kHz that halves the
wake-ups of a driver that ticks at 1 kHz), and each one's DDS reception time says when it arrived.

An owner whose ``serve`` waits in C can watch the executor's entities in that same wait
(:meth:`WaitSetLoop.executor_entities`, the robot stack's rcl loop) and call
:meth:`WaitSetLoop.request_poll` when one is ready: a request is then served at once, and the blind
poll, which costs a rebuild of the executor's wait set each time, is needed only every
``watched_poll_period`` while it serves (for what it does not watch: the guard conditions, the
waitables such as the QoS event handlers, the executor's own tasks, and an entity created since
the last blind poll, which finds the entities to watch and holds their handles until the next). A
poll it requested that finds nothing to run stops the watching until the next blind poll, so an
entity that keeps waking the wait without the executor running it cannot keep the loop in Python.
For ``poll_period`` after any poll the owner's wait does not watch: however fast a flood of
requests comes, it is polled once per period at most, as by the blind polls, each poll bounded by
its budget. The entities given as ``unwatched`` are never watched: a timer whose work the owner's
``serve`` does itself while it serves (the robot stack's diagnostics status) would wake it for nothing.

The loop's subscription belongs to an :class:`OwnLoopGroup`, which the executor never runs, so
nothing takes its messages but this loop. Everything runs in the calling thread: the owner's state
needs no lock.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from rclpy.callback_groups import CallbackGroup
from rclpy.executors import Executor, ExternalShutdownException, ShutdownException, TimeoutException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

NANOSECONDS = 1e9
# Not the guard conditions: a wait takes their trigger, which the executor would then miss.
WATCHED_KINDS = ("subscriptions", "timers", "clients", "services")  # rcl_loop.c's WATCHED_* order


@dataclass(frozen=True)
class ExecutorEntities:
    """The entities of a node the executor runs, by kind (``WATCHED_KINDS``), for a wait that watches
    them."""

    subscriptions: tuple = ()
    timers: tuple = ()
    clients: tuple = ()
    services: tuple = ()

    def by_kind(self) -> tuple[tuple, ...]:
        return tuple(getattr(self, kind) for kind in WATCHED_KINDS)


NO_ENTITIES = ExecutorEntities()


class OwnLoopGroup(CallbackGroup):
    """Entities a :class:`WaitSetLoop` serves: the executor never adds them to its wait set."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


class WaitSetLoop:
    """Serve one subscription of ``node`` from a wait set of its own; poll the executor for the rest.

    The loop subscribes to ``topic`` itself (in an :class:`OwnLoopGroup`). ``on_messages(messages,
    infos)`` gets every message taken at one wake, oldest first (more than one when the loop fell
    behind), and rclpy's message info of each (a dict: ``source_timestamp`` when it was published,
    ``received_timestamp`` when DDS received it, system clock [ns]; 0 where the middleware does not
    tell);
    ``deadline()`` is the next monotonic time ``on_deadline(now)`` is due. ``poll_period`` [s]:
    how often the executor's ready callbacks are run; ``poll_budget`` [s]: after how long a poll
    starts no further callback (by default it runs every one that is ready); ``raw``: the messages
    are taken serialized (bytes), for an owner that reads them itself (ros/wire.py); ``at_deadline``:
    the loop only sleeps to each ``on_deadline``, which takes the messages (:meth:`take_waiting`).
    ``serve(until, poll)``: asked before each wait whether the owner serves the subscription itself
    until the monotonic time ``until`` (the next deadline or poll, whichever comes first; ``poll``:
    the next poll) or until it needs this loop (the robot stack's rcl loop in C,
    ros/native_loop.py; with ``at_deadline``, the deadlines' work too: the fake driver's ticks in
    C, ros/native_driver.py); it returns True when it did, False to let this loop wait.
    ``watched_poll_period`` [s]: the blind poll's period after a ``serve`` that watched the
    executor's entities (module doc); by default ``poll_period``. ``polls_requested`` and
    ``polls_blind`` count the polls of each kind. ``clock``: monotonic seconds (a test's own).
    """

    def __init__(self, node, message_type, topic: str, qos, on_messages: Callable[[list, list], None],
                 deadline: Callable[[], float], on_deadline: Callable[[float], None], poll_period: float,
                 poll_budget: float = math.inf, raw: bool = False,
                 serve: Callable[[float, float], bool] | None = None, at_deadline: bool = False,
                 watched_poll_period: float | None = None, clock: Callable[[], float] = time.monotonic,
                 unwatched: tuple = ()):
        self.node = node
        self.unwatched = unwatched
        # The executor never runs this callback (OwnLoopGroup); rclpy requires one.
        self.subscription = node.create_subscription(message_type, topic, lambda message: on_messages([message], [{}]),
                                                     qos, callback_group=OwnLoopGroup(), raw=raw)
        self.at_deadline = at_deadline
        self.on_messages = on_messages
        self.deadline = deadline
        self.on_deadline = on_deadline
        self.poll_period = poll_period
        self.watched_poll_period = poll_period if watched_poll_period is None else watched_poll_period
        self.poll_budget = poll_budget
        self.serve = serve
        self.clock = clock
        self.polls_requested = 0
        self.polls_blind = 0
        self._poll_requested = False
        self._watched = NO_ENTITIES
        self._watching = False  # in this serve: no poll ran for poll_period

    def executor_entities(self) -> ExecutorEntities:
        """The node's entities the executor runs (not this loop's subscription), for the owner's
        ``serve`` to watch: as found at the last blind poll, their handles held valid until the next
        one; none within ``poll_period`` of a poll, or while the watching is stopped (module doc)."""
        return self._watched if self._watching else NO_ENTITIES

    def _watch(self, handles: contextlib.ExitStack, watching: bool) -> None:
        """Find the entities to watch (none when not ``watching``), their handles held in ``handles``
        (the previous ones released)."""
        handles.close()
        if not watching:
            self._watched = NO_ENTITIES
            return
        watched = {kind: [] for kind in WATCHED_KINDS}
        for kind, entities in watched.items():
            for entity in getattr(self.node, kind):
                if not entity.callback_group.can_execute(entity) or any(entity is u for u in self.unwatched):
                    continue
                try:
                    handles.enter_context(entity.handle)
                except _rclpy.InvalidHandle:
                    continue  # destroyed meanwhile
                entities.append(entity)
        self._watched = ExecutorEntities(**{kind: tuple(entities) for kind, entities in watched.items()})

    def request_poll(self) -> None:
        """Poll the executor before the next wait: a watched entity is ready."""
        self._poll_requested = True

    def spin(self, executor: Executor) -> None:
        """Run until the context shuts down (Ctrl-C, SIGTERM or rclpy.shutdown)."""
        context = self.node.context
        subscription = self.subscription
        last_poll = -math.inf
        served = False
        # No SIGINT guard condition of its own: rclpy's signal thread triggers the registered ones
        # while Ctrl-C ends this loop, and destroying one then (unregistering it, freeing it) raced
        # with that thread: a SIGSEGV on Ctrl-C. The wait is never longer than the next deadline or
        # poll, after which the KeyboardInterrupt or the shut-down context ends the loop.
        try:
            # The handles stay valid while the wait set holds them, as in rclpy's executors.
            with context.handle, subscription.handle, contextlib.ExitStack() as watched_handles:
                wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, context.handle)
                poll = ExecutorPoll(executor, self.clock)
                while context.ok():
                    now = self.clock()
                    requested = self._poll_requested
                    if requested or now >= last_poll + (self.watched_poll_period if served else self.poll_period):
                        ran = poll(now + self.poll_budget)
                        if requested:
                            self.polls_requested += 1
                            if not ran:
                                self._watch(watched_handles, watching=False)
                        else:
                            self.polls_blind += 1
                            self._watch(watched_handles, watching=self.serve is not None)
                        self._poll_requested = False
                        last_poll = now
                    served = False
                    if self.serve is not None:
                        watch_from = last_poll + self.poll_period
                        self._watching = now >= watch_from
                        due = last_poll + self.watched_poll_period if self._watching else watch_from
                        served = self.serve(min(self.deadline(), due), due)
                    wait_until = min(self.deadline(), last_poll + self.poll_period)
                    if served:
                        pass  # the owner served until its deadline or poll, or until it needs this loop
                    elif self.at_deadline:
                        time.sleep(max(wait_until - self.clock(), 0.0))
                    else:
                        wait_set.clear_entities()
                        wait_set.add_subscription(subscription.handle)
                        wait_set.wait(max(int((wait_until - self.clock()) * NANOSECONDS), 0))
                        if wait_set.is_ready("subscription", 0):
                            self.take_waiting()
                    now = self.clock()
                    if now >= self.deadline():
                        self.on_deadline(now)
        except _rclpy.InvalidHandle:
            if context.ok():
                raise
            # The context was shut down under a callback (Ctrl-C, a test's teardown) while it
            # published: nothing is left to serve.

    def take_waiting(self) -> None:
        """Take every waiting message and hand them over to ``on_messages``, if any."""
        messages, infos = [], []
        subscription = self.subscription
        while True:
            taken = subscription.handle.take_message(subscription.msg_type, subscription.raw)
            if taken is None:
                break
            messages.append(taken[0])
            infos.append(taken[1])
        if messages:
            self.on_messages(messages, infos)


class ExecutorPoll:
    """Runs the callbacks ``executor`` has ready now, without waiting: the first one always, no further
    one after the budget's end (on ``clock``), so that a loaded machine still serves one per poll.

    rclpy's executor keeps the generator of its last wait between calls. After a poll that stopped at
    a callback, its next call resumes that generator, and once it is spent ends it with
    TimeoutException, without a new wait; the poll then calls once more to wait anew. A poll after
    one that found nothing waits once."""

    def __init__(self, executor: Executor, clock: Callable[[], float] = time.monotonic):
        self.executor = executor
        self.clock = clock
        self._resumes = False  # the last poll stopped at a callback: the executor's generator is suspended

    def __call__(self, budget_end: float) -> int:
        """Run what is ready, starting none after ``budget_end``; returns how many ran."""
        ran, waited_anew = 0, False
        while ran == 0 or self.clock() < budget_end:
            try:
                handler, _entity, _node = self.executor.wait_for_ready_callbacks(timeout_sec=0.0)
            except TimeoutException:
                if self._resumes and not ran and not waited_anew:
                    waited_anew = True  # the suspended generator is spent: the next call waits
                    continue
                self._resumes = False
                return ran
            except (ShutdownException, ExternalShutdownException):
                self._resumes = False
                return ran  # shutting down, which ends the loop
            handler()
            ran += 1
            exception = handler.exception()
            if exception is not None:
                raise exception
        self._resumes = True
        return ran
