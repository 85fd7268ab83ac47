"""Where the engine's time and calls come from: real threads and the real clock, or a
virtual clock on which calls take simulated time.

The engine asks its runtime three things: what time it is, to wait on its condition for
at most a while, and to run a call (``work``) and hand its result to ``done``. The real
runtime does that with daemon threads and ``time.monotonic``; the virtual one runs a
discrete-event simulation in the caller's thread, so the real engine and controller run
against simulated buckets thousands of calls per CPU second, the same way every time.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Clock = Callable[[], float]


class Runtime(Protocol):
    def clock(self) -> float: ...

    def wait(self, cond: threading.Condition, timeout: float) -> None:
        """Called with ``cond`` held: return when notified or ``timeout`` has passed."""

    def submit(self, work: Callable[[], T], done: Callable[[T], None]) -> None:
        """Run ``work`` off the dispatcher and call ``done`` with its result."""

    def shutdown(self) -> None: ...


class Workers:
    """Daemon threads that run calls, started as needed up to ``cap``.

    Daemon threads, unlike ThreadPoolExecutor's, never hold the process up at
    exit: a call stuck on an endpoint that does not answer has already been
    given up by the engine, and must not keep swarm from exiting.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads = 0

    def submit(self, task: Callable[[], None]) -> None:
        self._work.put(task)
        if not self._idle.acquire(blocking=False) and self._threads < self.cap:
            self._threads += 1
            threading.Thread(target=self._loop, name="swarm-call", daemon=True).start()

    def _loop(self) -> None:
        while (task := self._work.get()) is not None:
            # A failing subscriber must not kill the thread: the dispatcher polls, and
            # the run's close records whatever the failed task left open.
            with contextlib.suppress(Exception):
                task()
            self._idle.release()

    def shutdown(self) -> None:
        for _ in range(self._threads):
            self._work.put(None)


class ThreadRuntime:
    """The real one: calls on daemon threads (at most ``cap``), time from ``clock``."""

    def __init__(self, cap: int, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._workers = Workers(cap)

    def clock(self) -> float:
        return self._clock()

    def wait(self, cond: threading.Condition, timeout: float) -> None:
        cond.wait(timeout)

    def submit(self, work: Callable[[], T], done: Callable[[T], None]) -> None:
        self._workers.submit(lambda: done(work()))

    def shutdown(self) -> None:
        self._workers.shutdown()


class VirtualRuntime:
    """A discrete-event clock. A call submitted at t runs its ``work`` at t + latency/2
    (where a real call meets the API's buckets) and its ``done`` at t + latency.

    ``wait`` runs the next due event (as a real answer would wake the dispatcher) or, if
    none is due before the timeout, moves the clock to it. Everything runs in the thread
    that calls ``wait``, which holds the engine's lock: its condition is re-entrant.
    """

    def __init__(self, latency: Callable[[], float] = lambda: 0.0, start: float = 0.0) -> None:
        self.latency = latency
        self.now = start
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.now

    def at(self, when: float, event: Callable[[], None]) -> None:
        heapq.heappush(self._events, (max(when, self.now), next(self._order), event))

    def wait(self, cond: threading.Condition, timeout: float) -> None:
        until = self.now + max(0.0, timeout)
        if self._events and self._events[0][0] <= until:
            when, _, event = heapq.heappop(self._events)
            self.now = max(self.now, when)
            event()
        else:
            self.now = until

    def submit(self, work: Callable[[], T], done: Callable[[T], None]) -> None:
        latency = max(0.0, self.latency())
        sent = self.now
        box: list[Any] = []
        self.at(sent + latency / 2, lambda: box.append(work()))
        self.at(sent + latency, lambda: done(box[0]))

    def shutdown(self) -> None:
        self._events.clear()
