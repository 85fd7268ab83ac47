"""The dispatcher: a queue of intents, worker threads, and in-flight <= cwnd.

The engine knows nothing of EC2 or of the screen. It calls an *action* with a
batch of IDs, learns an :class:`Outcome` per ID, feeds the window, and
publishes :class:`Event` objects to its subscribers (ledger, display, stats).

Every way a run can end goes through one place (:meth:`Engine.run`'s last
step): whatever is still open then is resolved ``pending`` with the reason, so
no intent is ever left without a record.
"""

from __future__ import annotations

import heapq
import itertools
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .batching import AutoBatch
from .outage import Outage
from .outcome import Kind, Outcome
from .retry import default_backoff
from .rto import Rto
from .runtime import Runtime, ThreadRuntime
from .window import Control

Action = Callable[[Sequence[str]], Mapping[str, Outcome]]
Clock = Callable[[], float]
Backoff = Callable[[int], float]

EventType = Literal[
    "queued",
    "sent",
    "answered",
    "throttled",
    "retried",
    "timed_out",
    "outage",
    "recovered",
    "stopping",
    "window",
    "succeeded",
    "failed",
    "missing",
    "pending",
]
RESOLVED: tuple[EventType, ...] = ("succeeded", "failed", "missing", "pending")

# The dispatcher never sleeps longer than this, so a stop asked for by a signal
# handler (which must not take locks) is seen within it.
POLL = 0.05


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
    # slow-start, avoidance, recovery (answers to calls sent before the last decrease are
    # still due), paced (under one call in flight) or outage.
    phase: str = ""
    latency: float = 0.0  # with "answered": how long the call took
    batch: int = 0  # IDs the next call may carry


Subscriber = Callable[[Event], None]


class Timeouts(Protocol):
    """How long a call may take: measured (:class:`Rto`) or fixed."""

    def sample(self, rtt: float) -> None: ...
    def on_timeout(self) -> None: ...
    def timeout(self) -> float: ...


@dataclass
class _Intent:
    id: str
    attempts: int = 0  # calls that carried it, throttled ones included
    errors: int = 0  # transient failures, bounded by max_attempts
    limit: int = 1_000_000  # most IDs it may travel with (bisection of bad batches)
    unanswered: Outcome | None = None  # why a call of it got no answer: it may have happened


@dataclass
class _Call:
    ticket: int
    batch: list[_Intent]
    sent_at: float
    deadline: float
    done: bool = False


@dataclass
class RunResult:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOLVED, 0))
    fatal: Outcome | None = None
    # Why the run stopped before the queue was empty (a signal, the ledger, an outage).
    stopped: Outcome | None = None
    signal: int | None = None
    gave_up: bool = False  # the endpoint stayed unreachable past max_outage
    elapsed: float = 0.0

    @property
    def interrupted(self) -> bool:
        return self.signal is not None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Engine:
    def __init__(
        self,
        action: Action,
        window: Control,
        *,
        batch_size: int | AutoBatch = 1,
        max_attempts: int = 5,
        clock: Clock = time.monotonic,
        backoff: Backoff = default_backoff,
        subscribers: Iterable[Subscriber] = (),
        timeouts: Timeouts | None = None,
        outage: Outage | None = None,
        drain_timeout: float = 3.0,
        poll_interval: float = 2.0,
        runtime: Runtime | None = None,
    ) -> None:
        if isinstance(batch_size, int) and batch_size < 1:
            raise ValueError("batch size must be at least 1")
        if max_attempts < 1:
            raise ValueError("max attempts must be at least 1")
        self.action = action
        self.window = window
        self.batching = batch_size
        self.batch_size = batch_size if isinstance(batch_size, int) else batch_size.size
        self.max_attempts = max_attempts
        # Headroom above the window for calls given up on but still blocked in a socket.
        self.runtime = runtime or ThreadRuntime(window.profile.max_window * 2 + 8, clock)
        self.clock = self.runtime.clock
        self.backoff = backoff
        self.subscribers = list(subscribers)
        self.timeouts: Timeouts = timeouts or Rto()
        self.outage = outage or Outage()
        self.drain_timeout = drain_timeout
        self.poll_interval = poll_interval  # between asks of an intent that is not there yet
        self._cond = threading.Condition()
        self._queue: deque[_Intent] = deque()
        self._delayed: list[tuple[float, int, _Intent]] = []
        self._tiebreak = itertools.count()
        self._open: dict[str, _Intent] = {}
        self._calls: dict[int, _Call] = {}
        # (deadline, ticket) of calls sent: the dispatcher looks at the earliest only.
        # Entries of calls already over are dropped when they reach the top.
        self._deadlines: list[tuple[float, int]] = []
        self._closed = False
        self._result = RunResult()
        # Set without a lock (a signal handler may set them); read by the dispatcher.
        self._stop_cause: Outcome | None = None
        self._signals: list[int] = []

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    def stop(self, cause: Outcome | None = None) -> None:
        """Send nothing more; calls in flight get ``drain_timeout``, the rest is pending.

        Safe from any thread and from a signal handler: it only sets a field.
        """
        if self._stop_cause is None:
            self._stop_cause = cause or Outcome(Kind.UNREACHABLE, "Stopped", "the run was stopped")

    def refuse(self, outcome: Outcome) -> None:
        """Send nothing at all (e.g. no credentials for this account): every intent will be
        recorded pending with this reason, and a fatal one is the run's fatal."""
        if outcome.kind is Kind.FATAL and self._result.fatal is None:
            self._result.fatal = outcome
        self.stop(outcome)

    def interrupt(self, signum: int) -> None:
        """A signal: stop as :meth:`stop` does; a second one ends the wait for calls in flight."""
        self._signals.append(signum)
        name = signal_name(signum)
        self.stop(Outcome(Kind.UNREACHABLE, "Interrupted", f"stopped by {name} before an answer"))

    def run(self, ids: Sequence[str], settled: Mapping[str, Outcome] | None = None) -> RunResult:
        """Run ``ids`` to the end; those in ``settled`` are recorded with that outcome, unsent
        (e.g. instances a rail protects)."""
        start = self.clock()
        ids = list(dict.fromkeys(ids))  # one intent per ID, first place kept
        settled = settled or {}
        with self._cond:
            for i in ids:
                intent = _Intent(i)
                self._open[i] = intent
                if i not in settled:
                    self._queue.append(intent)
            self._emit("queued", ids=tuple(ids))
            for i in ids:
                if i in settled:
                    self._settle(self._open[i], settled[i], start)
        try:
            try:
                self._dispatch()
            except KeyboardInterrupt:  # no handler installed: SIGINT arrived as an exception
                self.interrupt(signal.SIGINT)
            if self._open:
                self._drain()
        except KeyboardInterrupt:
            self.interrupt(signal.SIGINT)
        finally:
            self._close()
        self._result.elapsed = self.clock() - start
        return self._result

    def _dispatch(self) -> None:
        with self._cond:
            while self._stop_cause is None:
                now = self.clock()
                self._expire(now)
                if now >= self.outage.give_up_at():
                    self._give_up(now)
                    break
                while self._delayed and self._delayed[0][0] <= now:
                    self._queue.append(heapq.heappop(self._delayed)[2])
                if not self._queue and not self._delayed and not self._calls:
                    return
                ready_at = max(self.window.send_at(), self.outage.probe_at())
                room = self.in_flight < (1 if self.outage.down else self.window.limit)
                if self._queue and room and now >= ready_at:
                    self._send(now)
                    continue
                wake = [now + POLL, self.outage.give_up_at()]
                if self._deadlines:
                    wake.append(self._deadlines[0][0])
                if self._delayed:
                    wake.append(self._delayed[0][0])
                if self._queue and now < ready_at:
                    wake.append(ready_at)
                self.runtime.wait(self._cond, max(0.0, min(wake) - now))
            self._emit("stopping", outcome=self._stop_cause)

    def _send(self, now: float) -> None:
        if isinstance(self.batching, AutoBatch):
            self.batch_size = self.batching.update(self.window, now)
        batch = self._take_batch()
        timeout = self.timeouts.timeout()
        ticket = self.window.on_send(now, len(batch))
        call = _Call(ticket, batch, now, now + timeout)
        for intent in batch:
            intent.attempts += 1
        self._calls[ticket] = call
        heapq.heappush(self._deadlines, (call.deadline, ticket))
        self._emit("sent", ids=tuple(i.id for i in batch))
        try:
            self.runtime.submit(lambda: self._attempt(call), lambda out: self._answer(call, out))
        except BaseException:
            del self._calls[ticket]  # never left: no phantom call in flight
            self._queue.extendleft(reversed(batch))
            raise

    def _drain(self) -> None:
        """Calls in flight get ``drain_timeout`` to answer; a second signal ends the wait."""
        with self._cond:
            signals = len(self._signals)
            deadline = self.clock() + self.drain_timeout
            while self._calls and len(self._signals) == signals:
                now = self.clock()
                self._expire(now)
                if now >= deadline:
                    break
                self.runtime.wait(self._cond, min(POLL, deadline - now))

    def _close(self) -> None:
        """Resolve every open intent ``pending``, with the reason the run stopped."""
        with self._cond:
            cause = self._stop_cause or self._result.fatal
            self._result.stopped = self._stop_cause
            if self._signals:
                self._result.signal = self._signals[0]
            unknown = {i.id for c in self._calls.values() for i in c.batch}
            for intent in list(self._open.values()):
                if intent.id in unknown:
                    why = Outcome(
                        Kind.UNREACHABLE,
                        cause.code if cause else "NoAnswer",
                        "in flight when the run stopped: may or may not be done",
                    )
                else:
                    why = cause or Outcome(Kind.UNREACHABLE, "NotSent")
                self._resolve(intent, "pending", why)
            self._closed = True
        self.runtime.shutdown()

    def _take_batch(self) -> list[_Intent]:
        first = self._queue.popleft()
        batch = [first]
        cap = min(self.batch_size, first.limit)
        while self._queue and len(batch) < min(cap, self._queue[0].limit):
            nxt = self._queue.popleft()
            cap = min(cap, nxt.limit)
            batch.append(nxt)
        return batch

    def _attempt(self, call: _Call) -> dict[str, Outcome] | None:
        """The call itself, off the dispatcher; None if it was given up on before it left
        (a call the engine has already settled is never sent late)."""
        if call.done or self._closed:
            return None
        ids = [i.id for i in call.batch]
        try:
            return dict(self.action(ids))
        except Exception as err:  # an action must classify; anything else is retried, bounded
            return {i: Outcome(Kind.TRANSIENT, type(err).__name__, str(err)) for i in ids}

    def _answer(self, call: _Call, outcomes: dict[str, Outcome] | None) -> None:
        if outcomes is None:
            return
        with self._cond:
            if call.done or self._closed:
                return  # given up on already: its intents were requeued or recorded
            self._finish(call, outcomes, self.clock())
            self._cond.notify_all()

    def _expire(self, now: float) -> None:
        """Give up on calls past their deadline: their intents count as unanswered."""
        while self._deadlines and (
            self._deadlines[0][1] not in self._calls or self._deadlines[0][0] <= now
        ):
            _, ticket = heapq.heappop(self._deadlines)
            call = self._calls.get(ticket)
            if call is None:
                continue  # answered already
            self.timeouts.on_timeout()
            waited = call.deadline - call.sent_at
            timed_out = Outcome(Kind.UNREACHABLE, "CallTimeout", f"no answer within {waited:.1f}s")
            self._emit("timed_out", ids=tuple(i.id for i in call.batch), outcome=timed_out)
            self._finish(call, dict.fromkeys((i.id for i in call.batch), timed_out), now)

    def _finish(self, call: _Call, outcomes: Mapping[str, Outcome], now: float) -> None:
        """One call is over (answered or given up on): feed the window, settle its intents."""
        call.done = True
        in_flight = self.in_flight
        del self._calls[call.ticket]
        no_result = Outcome(Kind.TRANSIENT, "NoResult", "the call gave no result for this ID")
        results = [(intent, outcomes.get(intent.id) or no_result) for intent in call.batch]
        kinds = {o.kind for _, o in results}
        worst = min((o for _, o in results), key=lambda o: o.kind is Kind.SUCCEEDED)
        self._emit(
            "answered",
            ids=tuple(i.id for i in call.batch),
            outcome=worst,
            latency=now - call.sent_at,
        )
        if Kind.UNREACHABLE in kinds:
            if self.outage.on_unreachable(call.sent_at, now):
                self._emit("outage", outcome=results[0][1])
            elif not self.outage.down:
                self._feed_window(self.window.on_timeout, call.ticket, now)
        else:
            self.timeouts.sample(now - call.sent_at)
            if self.outage.on_answer():
                self.window.restart(now)
                self._emit("recovered")
                self._emit("window")
            self._feed_answer(call, [o for _, o in results], now, in_flight)
        throttled = [(i, o) for i, o in results if o.kind is Kind.THROTTLED]
        if throttled:
            self._emit("throttled", ids=tuple(i.id for i, _ in throttled), outcome=throttled[0][1])
        again = [i for i, o in results if self._settle(i, o, now)]
        self._queue.extendleft(reversed(again))

    def _feed_answer(
        self, call: _Call, outcomes: list[Outcome], now: float, in_flight: int
    ) -> None:
        w = self.window
        if any(o.kind is Kind.THROTTLED for o in outcomes):
            self._feed_window(w.on_throttle, call.ticket, now)
        elif all(o.answered for o in outcomes):
            pace = w.pace
            # Every ID of an answered call spent a token, whatever its own outcome.
            size = len(outcomes)
            if w.on_success(call.ticket, now - call.sent_at, now, in_flight, size) or (
                w.pace != pace
            ):
                self._emit("window")
        else:
            self._feed_window(w.on_error, call.ticket, now)

    def _feed_window(self, signal_: Callable[[int, float], bool], ticket: int, now: float) -> None:
        pace = self.window.pace
        if signal_(ticket, now) or self.window.pace != pace:
            self._emit("window")

    def _give_up(self, now: float) -> None:
        self._result.gave_up = True
        self.stop(
            Outcome(
                Kind.UNREACHABLE,
                "EndpointUnreachable",
                f"no answer from the endpoint for {self.outage.elapsed(now):.0f}s "
                f"(--max-outage {self.outage.max_outage:g}s)",
            )
        )

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
        elif kind is Kind.REQUEUE and intent.limit > 1:
            # Only a sibling could requeue an intent travelling alone; if one comes back
            # anyway it is retried as a transient error below.
            intent.limit = min(intent.limit, outcome.batch_limit or intent.limit)
            return True
        elif kind is Kind.FATAL:
            if self._result.fatal is None:
                self._result.fatal = outcome
            self.stop(outcome)
        elif kind is Kind.UNREACHABLE and self.outage.down:
            return True  # the endpoint is down, not this intent: no attempt charged
        elif kind is Kind.NOT_YET:
            due = now + self.poll_interval
            heapq.heappush(self._delayed, (due, next(self._tiebreak), intent))
        else:  # transient, or unreachable before an outage is declared
            intent.errors += 1
            if kind is Kind.UNREACHABLE:
                intent.unanswered = outcome
            if intent.errors >= self.max_attempts:
                if intent.unanswered is not None:
                    # A call that got no answer may have happened: not known done, not failed.
                    self._resolve(intent, "pending", intent.unanswered)
                else:
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
        latency: float = 0.0,
    ) -> None:
        w = self.window
        event = Event(
            type_,
            self.clock(),
            ids,
            outcome,
            attempts,
            w.cwnd,
            w.ssthresh,
            w.pace,
            self.in_flight,
            self._phase(),
            latency,
            self.batch_size,
        )
        for subscriber in self.subscribers:
            subscriber(event)

    def _phase(self) -> str:
        if self.outage.down:
            return "outage"
        if self.window.phase in ("canary", "startup"):
            return self.window.phase
        if self.window.pace or self.window.phase == "paced":
            return "paced"
        oldest = next(iter(self._calls), None)  # tickets rise, and the dict keeps their order
        if oldest is not None and oldest <= self.window.recover_point:
            return "recovery"
        return self.window.phase
