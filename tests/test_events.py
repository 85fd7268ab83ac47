"""Typed events, their subscribers, and their delivery outside the engine's lock."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import FrozenInstanceError, fields
from pathlib import Path

import pytest

from swarm_cli.engine import Engine
from swarm_cli.events import (
    EVENT_TYPES,
    RESOLVED,
    Answered,
    Event,
    Failed,
    Pending,
    Queued,
    Resolved,
    Retried,
    Sent,
    StoodStill,
    Subscriber,
    Succeeded,
    WindowChanged,
)
from swarm_cli.outcome import Kind, Outcome
from swarm_cli.runtime import VirtualRuntime
from swarm_cli.trace import Trace
from swarm_cli.window import Window, WindowProfile

# Four calls in flight from the first send on, whatever the answers say.
FOUR = WindowProfile(name="four", initial=4, min_window=4, max_window=4)
GUARD = 10.0  # seconds a test waits for what must happen before it calls it failed


def ids(n: int) -> list[str]:
    return [f"i-{k:08x}" for k in range(n)]


def succeed(batch: Sequence[str]) -> Mapping[str, Outcome]:
    return dict.fromkeys(batch, Outcome(Kind.SUCCEEDED))


def test_each_event_has_its_class_its_name_and_its_method() -> None:
    seen: list[str] = []

    class Every(Subscriber):
        def __getattribute__(self, name: str) -> object:
            if name.startswith("on_"):
                seen.append(name)
            return super().__getattribute__(name)

    for name, cls in EVENT_TYPES.items():
        event = cls(1.0, ids=("i-1",))
        assert event.type == name
        Every()(event)
    # The four outcomes reach on_resolved through their own methods.
    assert [n for n in seen if n != "on_resolved"] == [f"on_{n}" for n in EVENT_TYPES]
    assert seen.count("on_resolved") == len(RESOLVED)
    assert {cls.status for cls in EVENT_TYPES.values() if issubclass(cls, Resolved)} == set(
        RESOLVED
    )


def test_events_are_frozen_values_whose_constructor_sets_every_field() -> None:
    # The constructor is written out (for speed): it must take the fields, in order, with
    # their defaults, and set each one.
    names = [f.name for f in fields(Event)]
    parameters = list(inspect.signature(Event.__init__).parameters.values())[1:]
    assert [p.name for p in parameters] == names
    assert [p.default for p in parameters[1:]] == [f.default for f in fields(Event)][1:]
    values = (2.5, ("i-1", "i-2"), Outcome(Kind.THROTTLED, "Throttling"), 3, 4.0, 5.0, 0.25, 6)
    values += ("avoidance", 0.125, 7)
    for cls in EVENT_TYPES.values():
        event = cls(*values)
        assert tuple(getattr(event, name) for name in names) == values
        assert event == cls(*values) and hash(event) == hash(cls(*values))
        assert event != cls(*values[:-1], 8)
        assert repr(event).startswith(f"{cls.__name__}(at=2.5, ids=('i-1', 'i-2'), ")
        with pytest.raises(FrozenInstanceError):
            event.cwnd = 1.0  # type: ignore[misc]
    assert Sent(1.0) != Answered(1.0)
    assert Sent(1.0, batch=3) == Sent(at=1.0, batch=3) and Sent(1.0).ids == ()


def test_a_subscriber_overrides_only_what_it_needs_and_plain_callables_still_work() -> None:
    class Outcomes(Subscriber):
        def __init__(self) -> None:
            self.resolved: list[tuple[str, str]] = []
            self.sent = 0

        def on_sent(self, event: Sent) -> None:
            self.sent += 1

        def on_resolved(self, event: Resolved) -> None:
            self.resolved.append((event.ids[0], event.status))

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        return {
            i: Outcome(Kind.PERMANENT, "Nope") if i == "i-00000001" else Outcome(Kind.SUCCEEDED)
            for i in batch
        }

    typed = Outcomes()
    plain: list[Event] = []
    runtime = VirtualRuntime(latency=lambda: 0.1)
    Engine(action, Window(FOUR), subscribers=[typed, plain.append], runtime=runtime).run(ids(3))
    assert sorted(typed.resolved) == [
        ("i-00000000", "succeeded"),
        ("i-00000001", "failed"),
        ("i-00000002", "succeeded"),
    ]
    assert typed.sent == sum(isinstance(e, Sent) for e in plain) >= 1
    assert [type(e) for e in plain if isinstance(e, Resolved)].count(Failed) == 1
    assert plain[0].type == "queued"


def test_a_subscriber_may_take_the_engines_lock_from_another_thread() -> None:
    """Delivered with the lock let go: a subscriber that waits on a thread which takes the
    engine's lock (a view reading the engine, say) cannot deadlock the run."""
    runtime = VirtualRuntime(latency=lambda: 0.2)
    engine = Engine(succeed, Window(FOUR), runtime=runtime)
    reads: list[int] = []
    stuck: list[Event] = []

    def reads_the_engine(event: Event) -> None:
        def read() -> None:
            with engine._cond:
                reads.append(engine.in_flight)

        helper = threading.Thread(target=read, daemon=True)
        helper.start()
        helper.join(GUARD)
        if helper.is_alive():
            stuck.append(event)

    engine.subscribers.append(reads_the_engine)
    result = engine.run(ids(12))
    assert stuck == []
    assert result.counts["succeeded"] == 12
    assert len(reads) > 12  # every event was read through


def test_a_subscriber_that_blocks_does_not_hold_up_the_calls_in_flight() -> None:
    """While a subscriber blocks, the other calls are answered and recorded: the engine's
    state moves on without it."""
    arrived = threading.Barrier(4, timeout=GUARD)
    calls = 0
    lock = threading.Lock()

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        nonlocal calls
        with lock:
            calls += 1
            first_four = calls <= 4
        if first_four:
            arrived.wait()  # the four first calls are all in flight at once
        return succeed(batch)

    engine = Engine(action, Window(FOUR), batch_size=1)
    recorded_meanwhile: list[int] = []

    class Blocks(Subscriber):
        def on_succeeded(self, event: Succeeded) -> None:
            if recorded_meanwhile:
                return
            done = threading.Event()

            def watch() -> None:
                # Until the three other calls in flight are recorded by the engine.
                while not done.is_set():
                    with engine._cond:
                        if engine._result.counts["succeeded"] >= 4:
                            done.set()
                    done.wait(0.001)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            done.wait(GUARD)
            with engine._cond:
                recorded_meanwhile.append(engine._result.counts["succeeded"])
            done.set()

    engine.subscribers.append(Blocks())
    result = engine.run(ids(8))
    assert recorded_meanwhile == [4]
    assert result.counts["succeeded"] == 8


def test_events_are_delivered_once_each_in_the_order_raised() -> None:
    events: list[Event] = []
    result = Engine(succeed, Window(FOUR), batch_size=2).run(ids(40))
    assert result.counts["succeeded"] == 40
    engine = Engine(succeed, Window(FOUR), batch_size=2, subscribers=[events.append])
    engine.run(ids(40))
    assert [e.at for e in events] == sorted(e.at for e in events)
    assert events[0].type == "queued"
    resolved = [e.ids[0] for e in events if isinstance(e, Resolved)]
    assert sorted(resolved) == ids(40)
    first_sent = {}
    for n, e in enumerate(events):
        for i in e.ids if isinstance(e, Sent) else ():
            first_sent.setdefault(i, n)
    for n, e in enumerate(events):
        if isinstance(e, Resolved):
            assert first_sent[e.ids[0]] < n


def test_the_runner_and_the_engine_import_no_screen() -> None:
    code = (
        "import sys, swarm_cli.run, swarm_cli.engine\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'typer')"
        " or m in ('swarm_cli.display', 'swarm_cli.views', 'swarm_cli.summary_md',"
        " 'swarm_cli.html_report'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == ""


def test_a_stop_asked_while_a_call_is_announced_keeps_the_call_from_leaving() -> None:
    """As the failure budget does: stopped by a subscriber, nothing more leaves."""
    called: list[Sequence[str]] = []

    def action(batch: Sequence[str]) -> Mapping[str, Outcome]:
        called.append(list(batch))
        return succeed(batch)

    engine = Engine(action, Window(FOUR), runtime=VirtualRuntime(latency=lambda: 0.1))
    pending: list[Event] = []

    class StopsAtOnce(Subscriber):
        def on_sent(self, event: Sent) -> None:
            engine.stop(Outcome(Kind.UNREACHABLE, "MaxErrors", "budget spent"))

        def on_pending(self, event: Pending) -> None:
            pending.append(event)

    engine.subscribers.append(StopsAtOnce())
    result = engine.run(ids(3))
    assert called == []
    assert result.counts["pending"] == 3
    assert {e.outcome.code for e in pending if e.outcome} == {"MaxErrors"}
    assert [e.attempts for e in pending] == [0, 0, 0]


def test_the_trace_writes_the_windows_events_and_counts_successes(tmp_path: Path) -> None:
    trace = Trace(str(tmp_path / "t.jsonl"), started=10.0)
    pair = trace.subscriber("us-east-1")
    for event in (
        Queued(10.0, ids=("i-1", "i-2")),
        Sent(10.5, ids=("i-1", "i-2"), cwnd=2, in_flight=1),
        Answered(10.7, ids=("i-1", "i-2"), latency=0.2, cwnd=2),
        Succeeded(10.7, ids=("i-1",)),
        Retried(10.7, ids=("i-2",)),
        WindowChanged(10.8, cwnd=3, ssthresh=16, phase="startup"),
        StoodStill(41.0, latency=30.0),
    ):
        pair(event)
    trace.close()
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [(x["event"], x["t"], x["done"]) for x in lines] == [
        ("sent", 0.5, 0),
        ("answered", 0.7, 0),
        ("window", 0.8, 1),
        ("stood_still", 31.0, 1),
    ]
    assert lines[3]["seconds"] == 30.0
    assert lines[1]["latency"] == 0.2 and lines[1]["ids"] == 2
    assert "latency" not in lines[0] and lines[2]["phase"] == "startup"


def test_a_run_returns_only_once_every_outcome_reached_the_subscribers() -> None:
    # Calls are answered on worker threads, which hand their outcomes on after letting
    # the lock go: the run must not end (and its ledger close) before they are through.
    seen: list[str] = []

    class Slow(Subscriber):
        def on_resolved(self, event: Resolved) -> None:
            if threading.current_thread() is not threading.main_thread():
                threading.Event().wait(0.05)
            seen.extend(event.ids)

    engine = Engine(succeed, Window(FOUR), batch_size=1, subscribers=[Slow()])
    result = engine.run(ids(12))
    assert result.counts["succeeded"] == 12
    assert sorted(seen) == ids(12)
