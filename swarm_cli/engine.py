"""The dispatcher: a queue of intents, worker threads, and in-flight <= cwnd.

The engine knows nothing of EC2 or of the screen. It calls an *action* with a
batch of IDs, learns an :class:`Outcome` per ID, feeds the window, and
publishes :class:`Event` objects to its subscribers (ledger, display, stats).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from tenacity import RetryCallState, wait_random_exponential

from .outcome import Kind, Outcome
from .window import Window

Action = Callable[[Sequence[str]], Mapping[str, Outcome]]
Clock = Callable[[], float]
Backoff = Callable[[int], float]

EventType = Literal[
    "queued",
    "sent",
    "throttled",
    "retried",
    "window",
    "succeeded",
    "failed",
    "missing",
    "pending",
]
RESOLVED: tuple[EventType, ...] = ("succeeded", "failed", "missing", "pending")


@dataclass(frozen=True)
class Event:
    type: EventType
    at: float
    ids: tuple[str, ...] = ()
    outcome: Outcome | None = None
    attempts: int = 0
    cwnd: float = 0.0
    ssthresh: float = 0.0
    pace: float = 0.0
    in_flight: int = 0


Subscriber = Callable[[Event], None]


@dataclass
class _Intent:
    id: str
    attempts: int = 0  # calls that carried it, throttled ones included
    errors: int = 0  # transient failures, bounded by max_attempts
    isolate: bool = False


@dataclass
class RunResult:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOLVED, 0))
    fatal: Outcome | None = None
    interrupted: bool = False
    elapsed: float = 0.0


def default_backoff(attempt: int) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(10 s, 0.25 s * 2**(n-1))]."""
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.attempt_number = attempt
    return float(wait_random_exponential(multiplier=0.25, max=10)(state))


class Engine:
    def __init__(
        self,
        action: Action,
        window: Window,
        *,
        batch_size: int = 1,
        max_attempts: int = 5,
        clock: Clock = time.monotonic,
        backoff: Backoff = default_backoff,
        subscribers: Iterable[Subscriber] = (),
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch size must be at least 1")
        if max_attempts < 1:
            raise ValueError("max attempts must be at least 1")
        self.action = action
        self.window = window
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.clock = clock
        self.backoff = backoff
        self.subscribers = list(subscribers)
        self._cond = threading.Condition()
        self._queue: deque[_Intent] = deque()
        self._delayed: list[tuple[float, int, _Intent]] = []
        self._tiebreak = itertools.count()
        self._open: dict[str, _Intent] = {}
        self._in_flight = 0
        self._stopping = False
        self._closed = False
        self._result = RunResult()

    def stop(self) -> None:
        """Send nothing more; calls in flight finish, the rest is recorded as pending."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def run(self, ids: Sequence[str]) -> RunResult:
        start = self.clock()
        ids = list(dict.fromkeys(ids))  # one intent per ID, first place kept
        with self._cond:
            for i in ids:
                intent = _Intent(i)
                self._open[i] = intent
                self._queue.append(intent)
            self._emit("queued", ids=tuple(ids))
        pool = ThreadPoolExecutor(
            max_workers=self.window.profile.max_window, thread_name_prefix="swarm"
        )
        try:
            self._dispatch(pool)
        except KeyboardInterrupt:
            self._result.interrupted = True
            self.stop()
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C stops the wait
                self._drain()
        finally:
            with self._cond:
                for intent in list(self._open.values()):
                    self._resolve(intent, "pending", None)
                self._closed = True
            pool.shutdown(wait=False, cancel_futures=True)
        self._result.elapsed = self.clock() - start
        return self._result

    def _dispatch(self, pool: ThreadPoolExecutor) -> None:
        with self._cond:
            while not self._stopping:
                now = self.clock()
                while self._delayed and self._delayed[0][0] <= now:
                    self._queue.append(heapq.heappop(self._delayed)[2])
                if not self._queue and not self._delayed and self._in_flight == 0:
                    return
                ready_at = self.window.send_at()
                if self._queue and self._in_flight < self.window.limit and now >= ready_at:
                    batch = self._take_batch()
                    ticket = self.window.on_send(now)
                    self._in_flight += 1
                    for intent in batch:
                        intent.attempts += 1
                    self._emit("sent", ids=tuple(i.id for i in batch))
                    pool.submit(self._call, batch, ticket)
                    continue
                wake = [self._delayed[0][0]] if self._delayed else []
                if self._queue and now < ready_at:
                    wake.append(ready_at)
                self._cond.wait(min(wake) - now if wake else None)
        self._drain()

    def _drain(self) -> None:
        with self._cond:
            while self._in_flight > 0:
                self._cond.wait()

    def _take_batch(self) -> list[_Intent]:
        first = self._queue.popleft()
        batch = [first]
        if first.isolate:
            return batch
        while self._queue and len(batch) < self.batch_size and not self._queue[0].isolate:
            batch.append(self._queue.popleft())
        return batch

    def _call(self, batch: list[_Intent], ticket: int) -> None:
        ids = [i.id for i in batch]
        sent_at = self.clock()
        try:
            outcomes = dict(self.action(ids))
        except Exception as err:  # an action must classify; anything else is retried, bounded
            outcomes = {i: Outcome(Kind.TRANSIENT, type(err).__name__, str(err)) for i in ids}
        answered_at = self.clock()
        with self._cond:
            if self._closed:
                return
            in_flight = self._in_flight
            self._in_flight -= 1
            results = [
                (
                    intent,
                    outcomes.get(intent.id)
                    or Outcome(Kind.TRANSIENT, "NoResult", "the call gave no result for this ID"),
                )
                for intent in batch
            ]
            self._feed_window(
                ticket, [o for _, o in results], answered_at - sent_at, answered_at, in_flight
            )
            throttled = [(i, o) for i, o in results if o.kind is Kind.THROTTLED]
            if throttled:
                self._emit(
                    "throttled", ids=tuple(i.id for i, _ in throttled), outcome=throttled[0][1]
                )
            again = [i for i, o in results if self._settle(i, o, answered_at)]
            self._queue.extendleft(reversed(again))
            self._cond.notify_all()

    def _feed_window(
        self, ticket: int, outcomes: list[Outcome], latency: float, now: float, in_flight: int
    ) -> None:
        w = self.window
        pace = w.pace
        if any(o.kind is Kind.THROTTLED for o in outcomes):
            changed = w.on_throttle(ticket, now)
        elif all(o.answered for o in outcomes):
            changed = w.on_success(ticket, latency, now, in_flight)
        else:
            changed = w.on_error(ticket, now)
        if changed or w.pace != pace:
            self._emit("window")

    def _settle(self, intent: _Intent, outcome: Outcome, now: float) -> bool:
        """Record one intent's outcome; True if it goes back to the head of the queue."""
        kind = outcome.kind
        if kind is Kind.THROTTLED:
            return True
        if kind is Kind.SUCCEEDED:
            self._resolve(intent, "succeeded", outcome)
        elif kind is Kind.MISSING:
            self._resolve(intent, "missing", outcome)
        elif kind is Kind.PERMANENT:
            self._resolve(intent, "failed", outcome)
        elif kind is Kind.REQUEUE and not intent.isolate:
            # An isolated intent travels alone, so only a sibling could requeue it;
            # if it comes back anyway it is retried as a transient error below.
            intent.isolate = outcome.isolate
            return True
        elif kind is Kind.FATAL:
            if self._result.fatal is None:
                self._result.fatal = outcome
            self._stopping = True
        else:  # transient
            intent.errors += 1
            if intent.errors >= self.max_attempts:
                self._resolve(intent, "failed", outcome)
            else:
                due = now + self.backoff(intent.errors)
                heapq.heappush(self._delayed, (due, next(self._tiebreak), intent))
                self._emit("retried", ids=(intent.id,), outcome=outcome, attempts=intent.attempts)
        return False

    def _resolve(self, intent: _Intent, status: EventType, outcome: Outcome | None) -> None:
        del self._open[intent.id]
        self._result.counts[status] += 1
        self._emit(status, ids=(intent.id,), outcome=outcome, attempts=intent.attempts)

    def _emit(
        self,
        type_: EventType,
        *,
        ids: tuple[str, ...] = (),
        outcome: Outcome | None = None,
        attempts: int = 0,
    ) -> None:
        w = self.window
        event = Event(
            type_, self.clock(), ids, outcome, attempts, w.cwnd, w.ssthresh, w.pace, self._in_flight
        )
        for subscriber in self.subscribers:
            subscriber(event)
