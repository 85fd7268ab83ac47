"""The engine's logic on the virtual clock (``VirtualRuntime``): calls take simulated
time, so pacing, time-outs, outages and signals happen at set moments whatever the
machine's load. One test runs on real threads, for what only they can show."""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from swarm_cli.engine import RESOLVED, Engine, Event
from swarm_cli.outage import Outage
from swarm_cli.outcome import Kind, Outcome
from swarm_cli.rto import FixedTimeout
from swarm_cli.runtime import VirtualRuntime
from swarm_cli.stats import Stats
from swarm_cli.window import RATE, SEED, Window


def virtual(latency: float | Callable[[], float] = 0.002) -> VirtualRuntime:
    """A virtual clock on which every call takes ``latency`` seconds (or what it returns)."""
    return VirtualRuntime(latency if callable(latency) else lambda: latency)


class SlowFor:
    """Latency by batch: calls that carry one of ``slow`` take ``slow_latency``.

    A subscriber as well, since the runtime asks for a call's latency just after the
    engine announces it (``sent``).
    """

    def __init__(self, slow: set[str], slow_latency: float, latency: float = 0.002) -> None:
        self.slow = slow
        self.slow_latency = slow_latency
        self.latency = latency
        self.last: tuple[str, ...] = ()

    def __call__(self, event: Event) -> None:
        if event.type == "sent":
            self.last = event.ids

    def next(self) -> float:
        return self.slow_latency if self.slow & set(self.last) else self.latency


class Instrumented:
    """An action that records concurrency and answers from a script per ID."""

    def __init__(
        self,
        window: Window,
        delay: float = 0.002,
        script: Mapping[str, list[Outcome]] | None = None,
        throttle_above: int | None = None,
        concurrency: Callable[[], int] | None = None,
    ) -> None:
        self.window = window
        # Calls in flight when one reaches the API: counted here on real threads; on the
        # virtual clock, where a call takes no real time, the engine's count.
        self.concurrency = concurrency
        self.delay = delay
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.throttle_above = throttle_above
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, ids: Sequence[str]) -> Mapping[str, Outcome]:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.calls.append(tuple(ids))
            now = self.concurrency() if self.concurrency else self.in_flight
            over = self.throttle_above is not None and now > self.throttle_above
        if self.delay:
            time.sleep(self.delay)
        out: dict[str, Outcome] = {}
        with self.lock:
            for i in ids:
                queue = self.script.get(i)
                if over:
                    out[i] = Outcome(Kind.THROTTLED, "RequestLimitExceeded", http_status=503)
                elif queue:
                    out[i] = queue.pop(0)
                else:
                    out[i] = Outcome(Kind.SUCCEEDED)
            self.in_flight -= 1
        return out


def ids(n: int) -> list[str]:
    return [f"i-{k:08x}" for k in range(n)]


class SentCap:
    """Checks in-flight <= cwnd at the moment each call is sent."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.breaches: list[tuple[int, int]] = []

    def __call__(self, event: Event) -> None:
        if event.type == "sent" and event.in_flight > self.window.limit:
            self.breaches.append((event.in_flight, self.window.limit))


def test_in_flight_never_exceeds_window_with_real_threads() -> None:
    window = Window(SEED.bounded(max_window=24))
    action = Instrumented(window, delay=0.02, throttle_above=12)
    cap, stats = SentCap(window), Stats()
    engine = Engine(action, window, subscribers=[cap, stats], backoff=lambda n: 0.0)
    result = engine.run(ids(400))
    assert cap.breaches == []
    assert result.counts["succeeded"] == 400
    assert stats.throttled_calls > 0, "the action throttles above 12 in flight"
    assert stats.window_decreases > 0
    assert 1 < action.peak <= 24


class PaceCheck:
    """Checks no call leaves before the time the window set for it."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.due = float("-inf")
        self.early: list[float] = []
        self.paced_sends = 0

    def __call__(self, event: Event) -> None:
        if event.type == "sent":
            if event.at < self.due:
                self.early.append(self.due - event.at)
            if self.due > float("-inf"):
                self.paced_sends += 1
        self.due = self.window.send_at()


def test_sends_wait_for_the_pace_set_at_the_floor() -> None:
    window = Window(RATE.bounded(max_window=4))
    throttle = Outcome(Kind.THROTTLED, "RequestLimitExceeded", http_status=503)
    script = {i: [throttle] * 2 for i in ids(2)}
    check = PaceCheck(window)
    action = Instrumented(window, delay=0, script=script)
    result = Engine(action, window, subscribers=[check], runtime=virtual()).run(ids(6))
    assert result.counts["succeeded"] == 6
    assert check.paced_sends > 0
    assert check.early == []


def test_throttled_intents_return_to_queue_and_never_fail() -> None:
    throttle = Outcome(Kind.THROTTLED, "RequestLimitExceeded", http_status=503)
    script = {"i-00000001": [throttle] * 7, "i-00000002": [throttle] * 3}
    window = Window(RATE)
    events: list[Event] = []
    engine = Engine(
        Instrumented(window, delay=0, script=script),
        window,
        subscribers=[events.append],
        max_attempts=2,
        runtime=virtual(),
    )
    result = engine.run(ids(5))
    assert result.counts == {"succeeded": 5, "failed": 0, "missing": 0, "pending": 0}
    done = {e.ids[0]: e.attempts for e in events if e.type == "succeeded"}
    assert done["i-00000001"] == 8
    assert done["i-00000002"] == 4


def test_transient_errors_retry_with_backoff_then_fail() -> None:
    boom = Outcome(Kind.TRANSIENT, "InternalError", http_status=500)
    script = {"i-00000000": [boom] * 10, "i-00000001": [boom, boom]}
    waits: list[int] = []

    def backoff(n: int) -> float:
        waits.append(n)
        return 0.001

    window = Window(SEED)
    events: list[Event] = []
    engine = Engine(
        Instrumented(window, delay=0, script=script),
        window,
        max_attempts=3,
        backoff=backoff,
        subscribers=[events.append],
        runtime=virtual(),
    )
    result = engine.run(ids(3))
    assert result.counts["failed"] == 1
    assert result.counts["succeeded"] == 2
    failed = [e for e in events if e.type == "failed"]
    assert failed[0].ids == ("i-00000000",) and failed[0].attempts == 3
    assert sorted(waits) == [1, 1, 2, 2]


def test_permanent_and_missing_fail_at_once() -> None:
    script = {
        "i-00000000": [Outcome(Kind.PERMANENT, "OperationNotPermitted")],
        "i-00000001": [Outcome(Kind.MISSING, "InvalidInstanceID.NotFound")],
    }
    window = Window(SEED)
    action = Instrumented(window, delay=0, script=script)
    result = Engine(action, window, runtime=virtual()).run(ids(4))
    assert result.counts == {"succeeded": 2, "failed": 1, "missing": 1, "pending": 0}
    assert len(action.calls) == 4


def test_fatal_error_stops_dispatch_and_records_rest_pending() -> None:
    script = {"i-00000003": [Outcome(Kind.FATAL, "AuthFailure", http_status=401)]}
    window = Window(SEED)  # window 1..: one call at a time in slow start
    action = Instrumented(window, delay=0, script=script)
    events: list[Event] = []
    result = Engine(action, window, subscribers=[events.append], runtime=virtual()).run(ids(50))
    assert result.fatal is not None and result.fatal.code == "AuthFailure"
    assert result.counts["pending"] == 50 - result.counts["succeeded"]
    pending = {e.ids[0] for e in events if e.type == "pending"}
    assert "i-00000003" in pending
    assert len(action.calls) < 50


def test_batches_split_by_requeue_and_batch_limit() -> None:
    window = Window(SEED)
    calls: list[tuple[str, ...]] = []

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        calls.append(tuple(batch))
        if "i-00000002" in batch and len(batch) > 1:
            return {i: Outcome(Kind.REQUEUE, batch_limit=1) for i in batch}
        if batch == ["i-00000002"]:
            return {"i-00000002": Outcome(Kind.MISSING, "InvalidInstanceID.NotFound")}
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    result = Engine(action, window, batch_size=3, runtime=virtual()).run(ids(6))
    assert result.counts["succeeded"] == 5 and result.counts["missing"] == 1
    assert calls[0] == ("i-00000000", "i-00000001", "i-00000002")
    assert ("i-00000002",) in calls
    assert all(len(c) <= 3 for c in calls)


def test_every_intent_resolves_exactly_once() -> None:
    window = Window(RATE.bounded(max_window=16))
    flaky = Outcome(Kind.TRANSIENT, "InternalError", http_status=500)
    script = {i: [flaky] for i in ids(300)[::7]}
    events: list[Event] = []
    action = Instrumented(window, delay=0, script=script, throttle_above=6)
    engine = Engine(
        action,
        window,
        batch_size=4,
        backoff=lambda n: 0.0,
        subscribers=[events.append],
        runtime=virtual(lambda: 0.02),
    )
    action.concurrency = lambda: engine.in_flight
    engine.run(ids(300))
    assert action.calls and any(e.type == "throttled" for e in events)
    resolved = [e.ids[0] for e in events if e.type in ("succeeded", "failed", "missing", "pending")]
    assert sorted(resolved) == sorted(ids(300))


def test_stop_from_another_thread_records_pending() -> None:
    window = Window(SEED.bounded(max_window=2))
    action = Instrumented(window, delay=0)
    runtime = virtual(0.01)
    engine = Engine(action, window, runtime=runtime)

    def stop_from_another_thread() -> None:
        thread = threading.Thread(target=engine.stop)
        thread.start()
        thread.join()

    runtime.at(0.1, stop_from_another_thread)
    result = engine.run(ids(500))
    assert result.counts["pending"] > 0
    assert result.counts["succeeded"] + result.counts["pending"] == 500


UNREACHABLE = Outcome(Kind.UNREACHABLE, "EndpointConnectionError", "connection refused")


def test_a_call_that_never_answers_is_given_up_and_its_intents_retried() -> None:
    window = Window(RATE)
    calls: list[tuple[str, ...]] = []

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        calls.append(tuple(batch))
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    # The first call reaches the API at 0.15 s, but its answer would come at 0.3 s: after
    # its deadline (0.2 s). Every other call takes 10 ms.
    latencies = iter([0.3])
    events: list[Event] = []
    result = Engine(
        action,
        window,
        timeouts=FixedTimeout(0.2),
        backoff=lambda n: 0.0,
        subscribers=[events.append],
        runtime=virtual(lambda: next(latencies, 0.01)),
    ).run(ids(3))
    assert result.counts == {"succeeded": 3, "failed": 0, "missing": 0, "pending": 0}
    assert [e.ids for e in events if e.type == "timed_out"] == [("i-00000000",)]
    assert calls.count(("i-00000000",)) == 2


def test_an_outage_is_ridden_out_without_charging_attempts() -> None:
    window = Window(RATE.bounded(max_window=8))
    down = True
    sent_while_down = 0

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        nonlocal down, sent_while_down
        if down:
            sent_while_down += 1
            if sent_while_down >= 12:
                down = False  # the endpoint comes back
            return dict.fromkeys(batch, UNREACHABLE)
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    result = Engine(
        action,
        window,
        max_attempts=2,
        backoff=lambda n: 0.0,
        outage=Outage(first_gap=0.01, max_gap=0.02),
        subscribers=[events.append],
        runtime=virtual(),
    ).run(ids(20))
    assert result.counts["succeeded"] == 20
    types = [e.type for e in events]
    assert "outage" in types and "recovered" in types
    assert types.index("outage") < types.index("recovered")


def test_an_endpoint_that_never_answers_is_given_up_and_everything_is_pending() -> None:
    window = Window(RATE)
    sent: list[int] = []

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        sent.append(len(batch))
        return dict.fromkeys(batch, UNREACHABLE)

    events: list[Event] = []
    result = Engine(
        action,
        window,
        batch_size=5,
        backoff=lambda n: 0.0,
        outage=Outage(max_outage=0.3, first_gap=0.02, max_gap=0.05),
        subscribers=[events.append],
        runtime=virtual(),
    ).run(ids(20))
    assert result.gave_up
    assert result.counts == {"succeeded": 0, "failed": 0, "missing": 0, "pending": 20}
    pending = [e.outcome for e in events if e.type == "pending"]
    assert {o.code for o in pending if o} == {"EndpointUnreachable"}


def test_a_call_that_may_have_landed_during_an_outage_is_left_maybe_done() -> None:
    """Calls that reach the endpoint and time out (a read timeout, not a refused
    connection) during an outage may have acted: given up, their intents say so, for a
    resume to look them up (and never take their resources gone for a typo)."""
    timed_out = Outcome(Kind.UNREACHABLE, "ReadTimeoutError", "read timed out")

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        return dict.fromkeys(batch, timed_out)

    events: list[Event] = []
    result = Engine(
        action,
        Window(RATE),
        backoff=lambda n: 0.0,
        outage=Outage(max_outage=0.3, first_gap=0.02, max_gap=0.05),
        subscribers=[events.append],
        runtime=virtual(),
    ).run(ids(20))
    assert result.gave_up and result.counts["pending"] == 20
    pending = {e.ids[0]: e.outcome for e in events if e.type == "pending"}
    sent = {i for e in events if e.type == "sent" for i in e.ids}
    assert sent and sent < set(pending)  # some never left: those stay plain pending
    for i, outcome in pending.items():
        assert outcome is not None and outcome.code == "EndpointUnreachable"
        assert (outcome.message or "").endswith("may or may not be done") == (i in sent), i


# An error of the endpoint's own, as the EC2 layer classifies it: it may have acted.
ENDPOINT_ERROR = Outcome(
    Kind.TRANSIENT, "InternalError", "restarting", http_status=500, maybe_acted=True
)


def test_an_endpoint_answering_only_errors_is_an_outage_ridden_out() -> None:
    """A restarting endpoint answers every call 500 for five seconds: the first calls
    are charged their attempts, then it counts as down (probes, no attempt charged)
    until it answers again; nothing fails for it."""
    runtime = virtual(0.05)

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        if runtime.now < 5.0:
            return dict.fromkeys(batch, ENDPOINT_ERROR)
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    stats = Stats()
    result = Engine(
        action,
        Window(RATE),
        max_attempts=3,
        backoff=lambda n: 0.4,
        outage=Outage(max_outage=60.0),
        subscribers=[events.append, stats],
        runtime=runtime,
    ).run(ids(20))
    assert result.counts == {"succeeded": 20, "failed": 0, "missing": 0, "pending": 0}
    (began,) = [e for e in events if e.type == "outage"]
    assert began.outcome is not None and began.outcome.code == "InternalError"
    assert [e.type for e in events].count("recovered") == 1
    assert stats.outage == "only errors from the endpoint (InternalError)"


def test_probes_go_round_so_one_intent_that_always_errs_keeps_no_outage_going() -> None:
    """The endpoint answers only 500 for two seconds, then all but one instance (the
    first probe's) fine: the probes take turns, so the others bring it back."""
    runtime = virtual(0.05)
    bad: set[str] = set()

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        if engine.outage.down and not bad:
            bad.update(batch)  # the first probe's intent errs for ever
        if runtime.now < 2.0 or bad & set(batch):
            return dict.fromkeys(batch, ENDPOINT_ERROR)
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    engine = Engine(
        action,
        Window(RATE),
        max_attempts=3,
        backoff=lambda n: 0.2,
        outage=Outage(max_outage=30.0),
        runtime=runtime,
    )
    result = engine.run(ids(20))
    assert bad and not result.gave_up
    assert result.counts == {"succeeded": 19, "failed": 0, "missing": 0, "pending": 1}


def test_one_intent_the_endpoint_always_fails_is_no_outage_even_when_it_is_the_last() -> None:
    """The last instance left gets a 500 on every call: the calls all carry it, so it is
    that instance, not the endpoint; its attempts run out (pending, maybe done) and the
    run ends, instead of probing an outage for --max-outage."""
    last = ids(50)[-1]

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        if last in batch:
            return dict.fromkeys(batch, ENDPOINT_ERROR)
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    result = Engine(
        action,
        Window(RATE),
        batch_size=1,
        backoff=lambda n: 0.3,
        outage=Outage(max_outage=45.0),
        subscribers=[events.append],
        runtime=virtual(0.05),
    ).run(ids(50))
    assert not result.gave_up and "outage" not in [e.type for e in events]
    assert result.counts == {"succeeded": 49, "failed": 0, "missing": 0, "pending": 1}


def test_no_capacity_is_a_refusal_not_an_outage_and_fails_once_tried() -> None:
    """InsufficientInstanceCapacity comes as a 500, but EC2 did nothing: retried, then
    failed; every call answered so is no endpoint down."""
    no_room = Outcome(Kind.TRANSIENT, "InsufficientInstanceCapacity", "none", http_status=500)
    events: list[Event] = []
    result = Engine(
        lambda batch: dict.fromkeys(batch, no_room),
        Window(RATE),
        max_attempts=3,
        backoff=lambda n: 0.3,
        outage=Outage(max_outage=45.0),
        subscribers=[events.append],
        runtime=virtual(0.05),
    ).run(ids(20))
    assert "outage" not in [e.type for e in events]
    assert result.counts == {"succeeded": 0, "failed": 20, "missing": 0, "pending": 0}


def test_an_endpoint_that_only_errs_is_given_up_with_everything_maybe_done() -> None:
    sent: set[str] = set()

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        sent.update(batch)
        return dict.fromkeys(batch, ENDPOINT_ERROR)

    events: list[Event] = []
    result = Engine(
        action,
        Window(RATE),
        batch_size=5,
        max_attempts=50,
        backoff=lambda n: 0.1,
        outage=Outage(max_outage=10.0),
        subscribers=[events.append],
        runtime=virtual(0.05),
    ).run(ids(20))
    assert result.gave_up
    assert result.counts == {"succeeded": 0, "failed": 0, "missing": 0, "pending": 20}
    pending = {e.ids[0]: e.outcome for e in events if e.type == "pending"}
    assert sent and set(pending) == set(ids(20))
    for i, outcome in pending.items():
        assert outcome is not None and outcome.code == "EndpointErrors"
        message = outcome.message or ""
        assert message.startswith("only errors from the endpoint (InternalError) for 1"), message
        # A 5xx may have come after EC2 acted: a resume looks those up.
        assert message.endswith("may or may not be done") == (i in sent), i


def test_errors_at_random_are_no_outage_and_an_intent_that_always_errs_is_not_failed() -> None:
    """Every fifth call answered 500 never makes an outage (other answers
    come between them), and an instance whose every call gets one ends pending, maybe
    done, once its attempts are spent: a 5xx does not say the call did nothing."""
    draw = iter([k % 5 == 0 for k in range(10_000)])
    cursed = "i-00000007"

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        if cursed in batch or next(draw):
            return dict.fromkeys(batch, ENDPOINT_ERROR)
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    result = Engine(
        action,
        Window(RATE),
        max_attempts=5,
        backoff=lambda n: 0.05 * 2**n,
        outage=Outage(max_outage=60.0),
        subscribers=[events.append],
        runtime=virtual(0.05),
    ).run(ids(500))
    assert "outage" not in [e.type for e in events]
    assert result.counts == {"succeeded": 499, "failed": 0, "missing": 0, "pending": 1}
    (pending,) = [e for e in events if e.type == "pending"]
    assert pending.ids == (cursed,) and pending.outcome is not None
    assert pending.outcome.code == "InternalError"
    assert (pending.outcome.message or "").endswith("may or may not be done")


def test_unreachable_calls_before_an_outage_stay_bounded_by_max_attempts() -> None:
    window = Window(SEED)
    flip = itertools.count()

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        # Every other call answers, so no outage is ever declared.
        if next(flip) % 2:
            return dict.fromkeys(batch, UNREACHABLE)
        return dict.fromkeys(batch, Outcome(Kind.TRANSIENT, "InternalError", http_status=500))

    events: list[Event] = []
    engine = Engine(action, window, max_attempts=3, backoff=lambda n: 0.0, runtime=virtual())
    engine.subscribers.append(events.append)
    result = engine.run(ids(4))
    # Bounded; an intent one of whose calls got no answer is not known failed.
    assert result.counts["failed"] + result.counts["pending"] == 4
    assert result.counts["pending"] > 0
    assert {e.outcome.code for e in events if e.type == "pending" and e.outcome} == {
        "EndpointConnectionError"
    }


def test_calls_that_time_out_until_attempts_run_out_leave_their_intents_pending() -> None:
    window = Window(SEED)

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    # A call of i-00000000 reaches the API (at 40 ms) but never answers in time (80 ms,
    # past its 50 ms deadline): maybe done, maybe not.
    slow = SlowFor({"i-00000000"}, 0.08)

    def transient(batch: Sequence[str]) -> Mapping[str, Outcome]:
        return dict.fromkeys(batch, Outcome(Kind.TRANSIENT, "InternalError", http_status=500))

    events: list[Event] = []
    result = Engine(
        action,
        window,
        max_attempts=2,
        timeouts=FixedTimeout(0.05),
        backoff=lambda n: 0.0,
        outage=Outage(max_outage=60),
        subscribers=[slow, events.append],
        runtime=virtual(slow.next),
    ).run(ids(3))
    assert result.counts == {"succeeded": 2, "failed": 0, "missing": 0, "pending": 1}
    (pending,) = [e for e in events if e.type == "pending"]
    assert pending.ids == ("i-00000000",) and pending.outcome is not None
    assert pending.outcome.code == "CallTimeout"
    # Answers that say the call failed still fail the intent once attempts run out.
    failed = Engine(
        transient, Window(SEED), max_attempts=2, backoff=lambda n: 0.0, runtime=virtual()
    ).run(ids(2))
    assert failed.counts["failed"] == 2


def test_a_signal_drains_calls_in_flight_then_records_the_rest_pending() -> None:
    window = Window(SEED.bounded(max_window=2))
    action = Instrumented(window, delay=0)
    events: list[Event] = []
    runtime = virtual(0.05)
    engine = Engine(action, window, subscribers=[events.append], runtime=runtime)
    runtime.at(0.2, lambda: engine.interrupt(signal.SIGTERM))
    result = engine.run(ids(500))
    assert result.signal == signal.SIGTERM and result.interrupted
    assert result.counts["succeeded"] == len(action.calls)  # every call sent was answered
    assert result.counts["succeeded"] + result.counts["pending"] == 500
    pending = [e.outcome for e in events if e.type == "pending"]
    assert all(o is not None and o.code == "Interrupted" for o in pending)
    # None of them was sent: the message does not read as if an answer was awaited.
    assert {o.message for o in pending if o is not None} == {
        "stopped by SIGTERM before it was sent"
    }


def test_a_second_signal_ends_the_wait_for_calls_in_flight() -> None:
    window = Window(SEED)

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    runtime = virtual(60.0)  # the first call hangs: no answer within the drain's 30 s
    engine = Engine(action, window, drain_timeout=30, subscribers=[events.append], runtime=runtime)
    runtime.at(0.1, lambda: engine.interrupt(signal.SIGINT))
    runtime.at(0.3, lambda: engine.interrupt(signal.SIGINT))
    result = engine.run(ids(3))
    assert result.signal == signal.SIGINT
    assert result.counts["pending"] == 3
    in_flight = [e for e in events if e.type == "pending" and e.ids == ("i-00000000",)]
    assert in_flight[0].outcome is not None
    assert "in flight" in (in_flight[0].outcome.message or "")


def test_an_interrupt_while_sending_leaves_no_call_in_flight_forever() -> None:
    window = Window(SEED.bounded(max_window=4))
    action = Instrumented(window, delay=0)
    sends = itertools.count()

    def interrupt_on_fifth_send(event: Event) -> None:
        if event.type == "sent" and next(sends) == 4:
            raise KeyboardInterrupt  # arrives after the bookkeeping, before the call leaves

    resolved: list[str] = []
    result = Engine(
        action,
        window,
        timeouts=FixedTimeout(0.3),
        drain_timeout=1.0,
        subscribers=[
            interrupt_on_fifth_send,
            lambda e: resolved.extend(e.ids) if e.type in RESOLVED else None,
        ],
        runtime=virtual(0.01),
    ).run(ids(50))
    assert result.signal == signal.SIGINT
    assert sorted(resolved) == ids(50)  # each intent resolved exactly once
    assert result.counts["pending"] == 50 - result.counts["succeeded"]


def test_intents_not_there_yet_are_asked_again_without_charging_attempts() -> None:
    window = Window(SEED)
    asked: dict[str, int] = {}

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        out = {}
        for i in batch:
            asked[i] = asked.get(i, 0) + 1
            ready = asked[i] > 4
            out[i] = Outcome(
                Kind.SUCCEEDED if ready else Kind.NOT_YET, "Reached" if ready else None
            )
        return out

    result = Engine(action, window, max_attempts=1, poll_interval=0.01, runtime=virtual()).run(
        ids(3)
    )
    assert result.counts["succeeded"] == 3
    assert asked == dict.fromkeys(ids(3), 5)


class StandsStill(VirtualRuntime):
    """A virtual clock on which the whole process stands still once, for ``seconds``, at
    ``at``: a wait asked to end then ends that much later, and nothing else ran meanwhile
    (answers that came are read after it, as on a machine starved of CPU)."""

    def __init__(self, latency: float, at: float, seconds: float) -> None:
        super().__init__(lambda: latency)
        self.stall_at, self.seconds = at, seconds

    def wait(self, cond: threading.Condition, timeout: float) -> None:
        if self.seconds and self.now + timeout >= self.stall_at:
            self.now = max(self.now + timeout, self.stall_at) + self.seconds
            self.seconds = 0.0
            return
        super().wait(cond, timeout)


def test_a_call_answered_while_the_client_stood_still_is_not_timed_out() -> None:
    # A call takes 0.5 s and may take 1 s; the process stands still for 3 s from 0.1 s,
    # with the answer waiting to be read. Counting the stall against the endpoint would
    # give up on a call that answered, and charge the window a time-out.
    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    runtime = StandsStill(latency=0.5, at=0.1, seconds=3.0)
    result = Engine(
        action,
        Window(RATE),
        timeouts=FixedTimeout(1.0),
        backoff=lambda n: 0.0,
        subscribers=[events.append],
        runtime=runtime,
    ).run(ids(1))
    assert result.counts == {"succeeded": 1, "failed": 0, "missing": 0, "pending": 0}
    assert [e for e in events if e.type == "timed_out"] == []
    assert [e.ids for e in events if e.type == "sent"] == [("i-00000000",)]
    assert runtime.now > 3.0  # the stall did happen


def test_a_long_stand_still_is_no_round_trip_and_the_pace_is_found_again() -> None:
    """Ctrl-Z for 50 s mid-run: the calls in flight measured a 50 s round trip, and what
    the controller had measured of the pace spanned the stop. After fg the run went at a
    third of its pace. The stop is no round trip, and after a long one the pace is found
    again from the start."""
    from swarm_cli.window import ADAPTIVE, new_controller

    runtime = StandsStill(latency=0.1, at=5.0, seconds=50.0)
    sent: list[float] = []
    bucket = {"tokens": 5.0, "at": 0.0}  # 5 calls of burst, 20 a second

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        now = runtime.now
        sent.append(now)
        bucket["tokens"] = min(5.0, bucket["tokens"] + (now - bucket["at"]) * 20.0)
        bucket["at"] = now
        if bucket["tokens"] < 1.0:
            return dict.fromkeys(batch, Outcome(Kind.THROTTLED, "RequestLimitExceeded"))
        bucket["tokens"] -= 1.0
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    result = Engine(
        action,
        new_controller(ADAPTIVE),
        backoff=lambda n: 0.0,
        subscribers=[events.append],
        runtime=runtime,
    ).run(ids(400))
    assert result.counts["succeeded"] == 400
    # Said as what it was (the view and the summary give it as a fall's cause).
    stood = [e.latency for e in events if e.type == "stood_still"]
    assert len(stood) == 1 and 49.0 < stood[0] < 51.0, stood
    latencies = [e.latency for e in events if e.type == "answered" and e.latency is not None]
    assert latencies and max(latencies) < 1.0, max(latencies)
    after = [t for t in sent if t > 56.0]
    assert after and max(b - a for a, b in itertools.pairwise(after)) < 1.0


def test_an_outage_is_not_given_up_for_the_time_the_client_stood_still() -> None:
    # The endpoint answers nothing until 3 s, and may do so for 5 s; the process stands
    # still from 1 s to 11 s. That stand-still is not the endpoint's: once back, the run
    # probes, finds the endpoint answering, and finishes.
    runtime = StandsStill(latency=0.01, at=1.0, seconds=10.0)

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        if runtime.now < 3.0:
            return dict.fromkeys(batch, UNREACHABLE)
        return {i: Outcome(Kind.SUCCEEDED) for i in batch}

    events: list[Event] = []
    result = Engine(
        action,
        Window(RATE.bounded(max_window=8)),
        max_attempts=2,
        backoff=lambda n: 0.0,
        outage=Outage(max_outage=5.0, first_gap=0.1, max_gap=0.2),
        subscribers=[events.append],
        runtime=runtime,
    ).run(ids(20))
    assert result.counts["succeeded"] == 20
    types = [e.type for e in events]
    assert "outage" in types and "recovered" in types
    assert runtime.now > 11.0  # the stand-still did happen


def test_a_gateway_that_answers_only_its_own_error_page_is_named_by_its_status() -> None:
    """A 504 page has no EC2 code (HttpError): the outage and the records name it
    "HTTP 504", as the user would look it up."""
    gateway = Outcome(Kind.TRANSIENT, "HttpError", "HTTP 504", http_status=504, maybe_acted=True)

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        return dict.fromkeys(batch, gateway)

    events: list[Event] = []
    stats = Stats()
    Engine(
        action,
        Window(RATE),
        max_attempts=50,
        backoff=lambda n: 0.1,
        outage=Outage(max_outage=5.0),
        subscribers=[events.append, stats],
        runtime=virtual(0.05),
    ).run(ids(5))
    assert stats.outage == "only errors from the endpoint (HTTP 504)"
    said = {e.outcome.message for e in events if e.type == "pending" and e.outcome}
    assert said and all(
        m and m.startswith("only errors from the endpoint (HTTP 504)") for m in said
    )


def test_a_read_that_slows_as_it_grows_is_waited_for_not_taken_for_an_outage() -> None:
    """Describe calls of 200 IDs answer in 0.7 s, then in 2.5 s as more go at once: a
    look-up waits at least 10 s for each (a call taken for lost would start probing an
    outage that is not there); a run's calls keep their 2-second floor."""
    from swarm_cli.describe import read_options
    from swarm_cli.run import RunOptions, new_engine

    def timed_out(options: RunOptions) -> int:
        answers = iter([0.7] * 5)
        events: list[Event] = []
        engine = new_engine(
            lambda batch: {i: Outcome(Kind.SUCCEEDED) for i in batch},
            options,
            [events.append],
            runtime=virtual(lambda: next(answers, 2.5)),
        )
        engine.run(ids(4000))
        return [e.type for e in events].count("timed_out")

    read = read_options(RunOptions(), 200)
    assert read.min_timeout == 10.0
    assert timed_out(read) == 0
    assert timed_out(replace(read, min_timeout=RunOptions().min_timeout)) > 0


def test_what_a_wait_answers_past_its_deadline_is_not_paced_as_calls_are() -> None:
    """A wait's Describe throttled until its deadline: the pace has sunk to a call per
    tens of seconds. What is left past the deadline is answered with no call, so it is
    not held to that pace (one batch per gap was minutes over --wait-timeout)."""
    runtime = virtual(0.05)
    deadline = 30.0
    asked: list[float] = []
    window = Window(RATE)
    gaps: list[float] = []  # the pace when the deadline passed

    class Wait:
        def __call__(self, batch: Sequence[str]) -> Mapping[str, Outcome]:
            if self.answers_unsent():
                gaps.append(window.pace)
                return dict.fromkeys(batch, Outcome(Kind.PERMANENT, "WaitTimeout"))
            asked.append(runtime.clock())
            return dict.fromkeys(batch, Outcome(Kind.THROTTLED, "RequestLimitExceeded"))

        def answers_unsent(self) -> bool:
            return runtime.clock() >= deadline

    result = Engine(Wait(), window, batch_size=10, runtime=runtime).run(ids(400))
    assert result.counts["failed"] == 400  # every one timed out
    assert asked and max(asked) < deadline  # no call left past the deadline
    assert gaps[0] >= 1.0  # the throttles had slowed the pace to a call per this many s ...
    assert runtime.clock() < deadline + 1.0  # ... and the 40 batches were not held to it


def test_what_waits_out_a_retry_past_a_waits_deadline_is_answered_at_once() -> None:
    """Every Describe failing: each ID waits out a back-off before its next try. Past the
    deadline it is answered timed out with no call: it need not wait that out first."""
    runtime = virtual(0.05)
    deadline = 5.0

    class Wait:
        def __call__(self, batch: Sequence[str]) -> Mapping[str, Outcome]:
            if self.answers_unsent():
                return dict.fromkeys(batch, Outcome(Kind.PERMANENT, "WaitTimeout"))
            return dict.fromkeys(batch, Outcome(Kind.TRANSIENT, "InternalError", maybe_acted=True))

        def answers_unsent(self) -> bool:
            return runtime.clock() >= deadline

    result = Engine(Wait(), Window(RATE), batch_size=10, max_attempts=10, runtime=runtime).run(
        ids(50)
    )
    assert result.counts["failed"] == 50
    assert runtime.clock() < deadline + 1.0
