"""The dispatcher: a queue of intents, worker threads, and in-flight <= cwnd.

The engine knows nothing of EC2 or of the screen. It calls an *action* with a
batch of IDs, learns an :class:`Outcome` per ID, feeds the window, and
publishes typed events (events.py) to its subscribers (ledger, stats, views).
Events are raised under the engine's lock and delivered once the raising thread
has let it go, in the order raised: no subscriber runs, nor does I/O, under the lock.

Every way a run can end goes through one place (:meth:`Engine.run`'s last
step): whatever is still open then is resolved ``pending`` with the reason, so
no intent is ever left without a record.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Protocol

from .batching import AutoBatch
from .events import RESOLVED as RESOLVED  # re-exported: where callers found them
from .events import (
    RESOLVED_EVENTS,
    Answered,
    Listener,
    OutageBegan,
    Queued,
    Recovered,
    Retried,
    Sent,
    Status,
    StoodStill,
    Stopping,
    Throttled,
    TimedOut,
    WindowChanged,
)
from .events import Event as Event
from .events import Subscriber as Subscriber
from .outage import Outage, error_name
from .outcome import MAYBE_DONE, NEVER_LEFT, Kind, Outcome, maybe_done
from .retry import default_backoff
from .rto import Rto
from .runtime import Runtime, ThreadRuntime
from .window import Control

Action = Callable[[Sequence[str]], Mapping[str, Outcome]]
INTERRUPTED = "Interrupted"  # the code of what a signal left undone
BEFORE_SENT = "before it was sent"  # what a signal left undone that no call carried
Clock = Callable[[], float]
Backoff = Callable[[int], float]

# The dispatcher never sleeps longer than this, so a stop asked for by a signal
# handler (which must not take locks) is seen within it.
POLL = 0.05
# The dispatcher back this much later than it meant to be: the process itself stood still
# (starved of CPU, stopped), and the threads reading answers stood still with it.
STOOD_STILL = 0.5
# ... and this long: stopped (Ctrl-Z), not starved; the pace is found again from the start.
STOOD_STILL_LONG = 5.0
# Seconds a call that has not left for want of something of this machine's (a credential
# helper that does not answer) waits in all before what it waits on is taken as hung.
STUCK_PATIENCE = 60.0


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
    unanswered: Outcome | None = None  # why a call of it got no answer
    maybe: bool = False  # a call of it left and got no answer: it may have happened


@dataclass
class _Call:
    ticket: int
    batch: list[_Intent]
    sent_at: float
    deadline: float
    done: bool = False
    thread: int | None = None  # the thread that makes the call, once it has begun


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
        subscribers: Iterable[Listener] = (),
        timeouts: Timeouts | None = None,
        outage: Outage | None = None,
        drain_timeout: float = 3.0,
        poll_interval: float = 2.0,
        runtime: Runtime | None = None,
        stuck: Callable[[int], Outcome | None] | None = None,
    ) -> None:
        if isinstance(batch_size, int) and batch_size < 1:
            raise ValueError("batch size must be at least 1")
        if max_attempts < 1:
            raise ValueError("max attempts must be at least 1")
        self.action = action
        # An action that may answer without calling the endpoint (a wait past its
        # deadline) says so: read once, not at every step of the dispatcher.
        self._answers_unsent: Callable[[], bool] | None = getattr(action, "answers_unsent", None)
        # A read's call with no answer did nothing: its intents are never "maybe done".
        self._changes = bool(getattr(action, "changes", True))
        self.window = window
        self.batching = batch_size
        self.batch_size = batch_size if isinstance(batch_size, int) else batch_size.size
        self.max_attempts = max_attempts
        # Headroom above the window for calls given up on but still blocked in a socket.
        self.runtime = runtime or ThreadRuntime(window.profile.max_window * 2 + 8, clock)
        self.clock = self.runtime.clock
        self.backoff = backoff
        # Subscribers, or plain callables of an event: each is called with every event.
        self.subscribers: list[Listener] = list(subscribers)
        self.timeouts: Timeouts = timeouts or Rto()
        self.outage = outage or Outage()
        self.drain_timeout = drain_timeout
        self.poll_interval = poll_interval  # between asks of an intent that is not there yet
        # What a call that timed out was stuck on, from its thread (a credential refresh
        # that hangs is no fault of the endpoint's): its outcome, or None for a time-out.
        self.stuck = stuck
        self._cond = threading.Condition()
        # Events are raised under the lock and delivered once the raising thread has let
        # it go: ``_seq`` numbers them as raised, ``_delivered`` counts those delivered
        # (under ``_turn``), so each thread delivers its own in the engine's order.
        self._seq = 0
        self._delivered = 0
        self._turn = threading.Condition(threading.Lock())
        self._mine = threading.local()  # per thread: lock depth and events to deliver
        self._holds = _Locked(self)  # its state is per thread: one serves every thread
        self._queue: deque[_Intent] = deque()
        self._delayed: list[tuple[float, int, _Intent]] = []
        self._tiebreak = itertools.count()
        self._open: dict[str, _Intent] = {}
        self._calls: dict[int, _Call] = {}
        # (deadline, ticket) of calls sent: the dispatcher looks at the earliest only.
        # Entries of calls already over are dropped when they reach the top.
        self._deadlines: list[tuple[float, int]] = []
        self._wake_at: float | None = None  # when the dispatcher meant to be back
        self._closed = False
        self._result = RunResult()
        # Set without a lock (a signal handler may set them); read by the dispatcher.
        self._stop_cause: Outcome | None = None
        self._signals: list[int] = []
        # The controller's state as events carry it, read once for a run of events raised
        # while it cannot change (the outcomes of one answer); None: read it per event.
        self._held: tuple[float, float, float, int, str] | None = None

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
        self.stop(Outcome(Kind.UNREACHABLE, INTERRUPTED, f"stopped by {name}"))

    def run(self, ids: Sequence[str], settled: Mapping[str, Outcome] | None = None) -> RunResult:
        """Run ``ids`` to the end; those in ``settled`` are recorded with that outcome, unsent
        (e.g. instances a rail protects)."""
        start = self.clock()
        ids = list(dict.fromkeys(ids))  # one intent per ID, first place kept
        settled = settled or {}
        with self._locked():
            for i in ids:
                intent = _Intent(i)
                self._open[i] = intent
                if i not in settled:
                    self._queue.append(intent)
            self._emit(Queued, ids=tuple(ids))
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
            self._settled()
        self._result.elapsed = self.clock() - start
        return self._result

    def _settled(self, limit: float = 60.0) -> None:
        """Wait until every event raised is delivered: a call answered on another thread
        may still be handing its outcomes to the ledger when the last intent resolves."""
        deadline = time.monotonic() + limit
        with self._turn:
            while self._delivered < self._seq and time.monotonic() < deadline:
                self._turn.wait(0.1)

    def _dispatch(self) -> None:
        """Step until the queue is empty or the run stops; events are delivered between
        steps, and a call leaves only once its ``sent`` has been delivered."""
        going = True
        while going:
            with self._locked():
                call, going = self._step()
                # A step that only waited keeps the lock: nothing to deliver, nothing to send.
                while going and call is None and not self._raised():
                    call, going = self._step()
            if call is None:
                continue
            if self._stop_cause is not None:
                # Asked while its ``sent`` was delivered (the failure budget, a signal): it
                # does not leave, as it would not have with the stop seen a moment sooner.
                self._withdraw(call)
            else:
                self._submit(call)

    def _step(self) -> tuple[_Call | None, bool]:
        """One decision of the dispatcher, under the lock: a call to send, or a wait.
        Returns the call prepared (or None) and whether to go on."""
        if self._stop_cause is not None:
            self._emit(Stopping, outcome=self._stop_cause)
            return None, False
        now = self.clock()
        self._stood_still(now)
        self._wake_at = now  # back at once, unless it waits below
        self._expire(now)
        if now >= self.outage.give_up_at():
            self._give_up(now)
            self._emit(Stopping, outcome=self._stop_cause)
            return None, False
        unsent = self._unsent()
        # Answered without a call, an intent waiting out a retry's back-off need not wait.
        while self._delayed and (unsent or self._delayed[0][0] <= now):
            self._queue.append(heapq.heappop(self._delayed)[2])
        if not self._queue and not self._delayed and not self._calls:
            return None, False
        if unsent:
            ready_at, room = now, True  # nothing leaves: nothing to pace or to hold back
        else:
            ready_at = max(self.window.send_at(), self.outage.probe_at())
            room = self.in_flight < (1 if self.outage.down else self.window.limit)
        if self._queue and room and now >= ready_at:
            return self._send(now), True
        if self._raised():
            return None, True  # deliver what this step raised before waiting
        wake = [now + POLL, self.outage.give_up_at()]
        if self._deadlines:
            wake.append(self._deadlines[0][0])
        if self._delayed:
            wake.append(self._delayed[0][0])
        if self._queue and now < ready_at:
            wake.append(ready_at)
        self._wake_at = min(wake)
        self.runtime.wait(self._cond, max(0.0, self._wake_at - now))
        return None, True

    def _unsent(self) -> bool:
        """Whether the action answers its next calls without calling the endpoint (a wait
        past its deadline, which times out what is left): the pace and the window, set
        for the endpoint, hold none of them back."""
        return self._answers_unsent is not None and bool(self._answers_unsent())

    def _send(self, now: float) -> _Call:
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
        self._emit(Sent, ids=tuple(i.id for i in batch))
        return call

    def _submit(self, call: _Call) -> None:
        """Hand a prepared call to the runtime (only the dispatcher's thread does)."""
        try:
            self.runtime.submit(lambda: self._attempt(call), lambda out: self._answer(call, out))
        except BaseException:
            with self._locked():
                del self._calls[call.ticket]  # never left: no phantom call in flight
                self._queue.extendleft(reversed(call.batch))
            raise

    def _withdraw(self, call: _Call) -> None:
        """A prepared call that will not leave: its intents go back as they were."""
        with self._locked():
            del self._calls[call.ticket]
            for intent in call.batch:
                intent.attempts -= 1
            self._queue.extendleft(reversed(call.batch))

    def _drain(self) -> None:
        """Calls in flight get ``drain_timeout`` to answer; a second signal ends the wait."""
        with self._locked():
            signals = len(self._signals)
            deadline = self.clock() + self.drain_timeout
        while True:
            with self._locked():
                if not self._calls or len(self._signals) != signals:
                    break
                now = self.clock()
                self._stood_still(now)
                self._expire(now)
                if now >= deadline:
                    break
                if not self._raised():
                    self._wake_at = now + min(POLL, deadline - now)
                    self.runtime.wait(self._cond, self._wake_at - now)

    def _close(self) -> None:
        """Resolve every open intent ``pending``, with the reason the run stopped."""
        with self._locked():
            cause = self._stop_cause or self._result.fatal
            self._result.stopped = self._stop_cause
            if self._signals:
                self._result.signal = self._signals[0]
            unknown = {i.id for c in self._calls.values() for i in c.batch}
            self._held = self._state()  # nothing below changes it
            for intent in list(self._open.values()):
                if intent.id in unknown:
                    why = Outcome(
                        Kind.UNREACHABLE,
                        cause.code if cause else "NoAnswer",
                        "in flight when the run stopped"
                        + (f": {MAYBE_DONE}" if self._changes else ""),
                    )
                elif intent.maybe and intent.unanswered is not None:
                    # An earlier call of it got no answer (or one that does not say it did
                    # nothing) before the run stopped: the stop's reason, and that the call
                    # may have happened.
                    before = intent.unanswered
                    what = "got no answer" if before.kind is Kind.UNREACHABLE else "may have acted"
                    earlier = (
                        f"an earlier call {what} ({error_name(before.code, before.http_status)})"
                    )
                    said = f"{cause.message}; {earlier}" if cause and cause.message else earlier
                    why = (
                        maybe_done(replace(cause, message=said))
                        if cause
                        else maybe_done(intent.unanswered)
                    )
                else:
                    why = cause or Outcome(Kind.UNREACHABLE, "NotSent")
                    if cause is not None and cause.code == INTERRUPTED:
                        # No call of it on its way: none left, or each was refused.
                        when = BEFORE_SENT + (" again" if intent.attempts else "")
                        why = replace(cause, message=f"{cause.message} {when}")
                self._resolve(intent, "pending", why)
            self._held = None
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
        call.thread = threading.get_ident()
        try:
            return dict(self.action(ids))
        except Exception as err:  # an action must classify; anything else is retried, bounded
            return {i: Outcome(Kind.TRANSIENT, type(err).__name__, str(err)) for i in ids}

    def _answer(self, call: _Call, outcomes: dict[str, Outcome] | None) -> None:
        if outcomes is None:
            return
        with self._locked():
            if call.done or self._closed:
                return  # given up on already: its intents were requeued or recorded
            self._finish(call, outcomes, self.clock())
            self._cond.notify_all()

    def _stood_still(self, now: float) -> None:
        """The dispatcher back far later than it meant to be (from a wait, or from
        sending): the whole process stood still, and the answers that came meanwhile are
        unread. The calls in flight get that time back before they count as unanswered,
        and an outage before it is given up on: a deadline measures the endpoint, not
        this machine."""
        wake, self._wake_at = self._wake_at, None
        if wake is None or now - wake < STOOD_STILL:
            return
        late = now - wake
        self._deadlines = [(at + late, ticket) for at, ticket in self._deadlines]  # still a heap
        for call in self._calls.values():
            call.deadline += late
            call.sent_at += late  # its round trip is the endpoint's, not this machine's pause
        self.outage.stood_still(late)
        self._emit(StoodStill, latency=late)
        if late >= STOOD_STILL_LONG:
            # Stopped for long (Ctrl-Z, a suspended VM): what the window measured of the
            # pace is stale, and the bucket refilled meanwhile. Found again from the start,
            # as after an outage.
            self.window.restart(now)
            self._emit(WindowChanged)

    def _expire(self, now: float) -> None:
        """Give up on calls past their deadline: their intents count as unanswered."""
        while self._deadlines and (
            self._deadlines[0][1] not in self._calls or self._deadlines[0][0] <= now
        ):
            _, ticket = heapq.heappop(self._deadlines)
            call = self._calls.get(ticket)
            if call is None:
                continue  # answered already
            stuck = self.stuck(call.thread) if self.stuck and call.thread is not None else None
            if stuck is not None:
                # It has not reached the endpoint: no time-out of the endpoint's. It waits
                # up to STUCK_PATIENCE in all (a slow helper is no hung one), then stands.
                if now - call.sent_at < STUCK_PATIENCE:
                    call.deadline = call.sent_at + STUCK_PATIENCE
                    heapq.heappush(self._deadlines, (call.deadline, ticket))
                    continue
                self._finish(call, dict.fromkeys((i.id for i in call.batch), stuck), now)
                continue
            self.timeouts.on_timeout()
            waited = call.deadline - call.sent_at
            timed_out = Outcome(Kind.UNREACHABLE, "CallTimeout", f"no answer within {waited:.1f}s")
            self._emit(TimedOut, ids=tuple(i.id for i in call.batch), outcome=timed_out)
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
            Answered,
            ids=tuple(i.id for i in call.batch),
            outcome=worst,
            latency=now - call.sent_at,
        )
        error = results[0][1] if all(o.endpoint_error for _, o in results) else None
        if Kind.UNREACHABLE in kinds:
            if self.outage.on_unreachable(call.sent_at, now):
                self._emit(OutageBegan, outcome=results[0][1])
            elif not self.outage.down:
                self._feed_window(self.window.on_timeout, call.ticket, now)
        elif error is not None:
            # Only an error of the endpoint's own: a run of them is the endpoint down.
            self.timeouts.sample(now - call.sent_at)
            named = error_name(error.code, error.http_status)
            if self.outage.on_error(named, call.sent_at, now, call.batch[0].id):
                self._emit(OutageBegan, outcome=error)
            elif not self.outage.down:
                self._feed_answer(call, [o for _, o in results], now, in_flight)
        else:
            self.timeouts.sample(now - call.sent_at)
            silent = self.outage.errors is None  # it gave no answer at all, not errors
            if self.outage.on_answer():
                if silent:  # the way to it may have changed: found again from the start
                    self.window.restart(now)
                self._emit(Recovered)
                self._emit(WindowChanged)
            self._feed_answer(call, [o for _, o in results], now, in_flight)
        throttled = [(i, o) for i, o in results if o.kind is Kind.THROTTLED]
        if throttled:
            self._emit(Throttled, ids=tuple(i.id for i, _ in throttled), outcome=throttled[0][1])
        # Settling touches neither the window nor the calls: one reading serves every intent.
        self._held = self._state()
        try:
            again = [i for i, o in results if self._settle(i, o, now)]
        finally:
            self._held = None
        if self.outage.down:
            # To the back: the next probe carries others, so that one intent the endpoint
            # always fails (its call a 5xx) cannot keep an endpoint that is back down.
            self._queue.extend(again)
        else:
            self._queue.extendleft(reversed(again))

    def _feed_answer(
        self, call: _Call, outcomes: list[Outcome], now: float, in_flight: int
    ) -> None:
        w = self.window
        throttled = any(o.kind is Kind.THROTTLED for o in outcomes)
        if isinstance(self.batching, AutoBatch):
            self.batching.on_answer(call.sent_at, throttled)
        if throttled:
            self._feed_window(w.on_throttle, call.ticket, now)
        elif all(o.answered for o in outcomes):
            pace = w.pace
            # Every ID of an answered call spent a token, whatever its own outcome.
            size = len(outcomes)
            if w.on_success(call.ticket, now - call.sent_at, now, in_flight, size) or (
                w.pace != pace
            ):
                self._emit(WindowChanged)
        else:
            self._feed_window(w.on_error, call.ticket, now)

    def _feed_window(self, signal_: Callable[[int, float], bool], ticket: int, now: float) -> None:
        pace = self.window.pace
        if signal_(ticket, now) or self.window.pace != pace:
            self._emit(WindowChanged)

    def _give_up(self, now: float) -> None:
        self._result.gave_up = True
        self.stop(
            Outcome(
                Kind.UNREACHABLE,
                "EndpointUnreachable" if self.outage.errors is None else "EndpointErrors",
                f"{self.outage.words()} for {self.outage.elapsed(now):.0f}s "
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
            if outcome.maybe_acted:
                self._unanswered(intent, outcome)
            return True
        elif kind is Kind.FATAL:
            if self._result.fatal is None:
                self._result.fatal = outcome
            self.stop(outcome)
        elif self.outage.down and (kind is Kind.UNREACHABLE or outcome.endpoint_error):
            # The endpoint is down, not this intent: no attempt charged. A call that may
            # have reached it (a read timed out, a 5xx) may still have acted.
            self._unanswered(intent, outcome)
            return True
        elif kind is Kind.NOT_YET:
            due = now + self.poll_interval
            heapq.heappush(self._delayed, (due, next(self._tiebreak), intent))
        else:  # transient, or unreachable before an outage is declared
            intent.errors += 1
            if kind is Kind.UNREACHABLE or outcome.maybe_acted:
                self._unanswered(intent, outcome)
            if intent.errors >= self.max_attempts:
                if intent.unanswered is not None:
                    # A call that got no answer may have happened: not known done, not failed.
                    why = intent.unanswered
                    self._resolve(intent, "pending", maybe_done(why) if intent.maybe else why)
                else:
                    self._resolve(intent, "failed", outcome)
            else:
                due = now + self.backoff(intent.errors)
                heapq.heappush(self._delayed, (due, next(self._tiebreak), intent))
                self._emit(Retried, ids=(intent.id,), outcome=outcome, attempts=intent.attempts)
        return False

    def _unanswered(self, intent: _Intent, outcome: Outcome) -> None:
        """A call of ``intent`` got no answer: it may have happened, unless it never left
        (or is a read's)."""
        intent.unanswered = outcome
        intent.maybe = intent.maybe or (self._changes and outcome.code not in NEVER_LEFT)

    def _resolve(self, intent: _Intent, status: Status, outcome: Outcome | None) -> None:
        del self._open[intent.id]
        self._result.counts[status] += 1
        self._emit(
            RESOLVED_EVENTS[status], ids=(intent.id,), outcome=outcome, attempts=intent.attempts
        )

    def _emit(
        self,
        kind: type[Event],
        *,
        ids: tuple[str, ...] = (),
        outcome: Outcome | None = None,
        attempts: int = 0,
        latency: float = 0.0,
    ) -> None:
        """Raise an event (under the lock): the state is read now, delivered later."""
        cwnd, ssthresh, pace, in_flight, phase = self._held or self._state()
        event = kind(
            self.clock(),
            ids,
            outcome,
            attempts,
            cwnd,
            ssthresh,
            pace,
            in_flight,
            phase,
            latency,
            self.batch_size,
        )
        self._mine.events.append((self._seq, event))
        self._seq += 1

    def _state(self) -> tuple[float, float, float, int, str]:
        """What every event carries of the controller: cwnd, ssthresh, pace, in flight, phase."""
        w = self.window
        return w.cwnd, w.ssthresh, w.pace, len(self._calls), self._phase()

    def _locked(self) -> _Locked:
        """The engine's lock; leaving the outermost hold delivers the events raised in it."""
        return self._holds

    def _raised(self) -> bool:
        """This thread raised events not delivered yet."""
        return bool(self._mine.events)

    def _deliver(self) -> None:
        """Deliver this thread's events (called with the lock released), each after every
        event raised before it. A subscriber that raises does not keep the others, nor
        the events after, from being delivered; the first error is raised at the end."""
        events: list[tuple[int, Event]] = self._mine.events
        if not events:
            return
        self._mine.events = []
        subscribers = list(self.subscribers)
        error: BaseException | None = None
        # Raised under one hold of the lock, they follow one another: one turn for all.
        one_turn = events[-1][0] - events[0][0] == len(events) - 1
        for k, (seq, event) in enumerate(events):
            if k == 0 or not one_turn:
                with self._turn:
                    while self._delivered < seq:
                        self._turn.wait()
            try:
                for subscriber in subscribers:
                    try:
                        subscriber(event)
                    except BaseException as err:
                        error = error or err
            finally:
                if not one_turn or k == len(events) - 1:
                    with self._turn:
                        self._delivered = seq + 1
                        self._turn.notify_all()
        if error is not None:
            raise error

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


class _Locked:
    """``with engine._locked():`` holds the engine's lock; leaving the outermost hold of
    a thread delivers the events that thread raised, the lock released."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __enter__(self) -> None:
        mine = self.engine._mine
        if not hasattr(mine, "depth"):
            mine.depth, mine.events = 0, []
        self.engine._cond.acquire()
        mine.depth += 1

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        mine = self.engine._mine
        mine.depth -= 1
        self.engine._cond.release()
        if mine.depth or not mine.events:
            return
        if err is None:
            self.engine._deliver()
        else:
            # The step failed: its events still go out; the step's error is the one raised.
            with contextlib.suppress(Exception):
                self.engine._deliver()
