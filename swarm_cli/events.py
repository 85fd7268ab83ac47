"""What an engine tells its subscribers: one frozen class per event, and the
:class:`Subscriber` base whose methods (one per event) do nothing unless overridden.

Every event carries the time it was raised and the controller's state at that moment
(``cwnd``, ``ssthresh``, ``pace``, ``in_flight``, ``phase``, ``batch``); the fields
``ids``, ``outcome``, ``attempts`` and ``latency`` mean something only where the event's
docstring says so. ``type`` names the event as a string (``"sent"``, ``"window"``, ...),
for code that still tells events apart by name.

The engine raises events under its lock but delivers them after releasing it, in the
order they were raised, each on the thread that raised it: a subscriber may do I/O,
take the engine's lock, or stop the engine, without holding the engine up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

from .outcome import Outcome

EventType = Literal[
    "queued",
    "sent",
    "answered",
    "throttled",
    "retried",
    "timed_out",
    "outage",
    "recovered",
    "stood_still",
    "stopping",
    "window",
    "succeeded",
    "failed",
    "missing",
    "pending",
]
Status = Literal["succeeded", "failed", "missing", "pending"]
RESOLVED: tuple[Status, ...] = ("succeeded", "failed", "missing", "pending")


@dataclass(frozen=True, init=False)
class Event:
    """The base of every event; its subclasses add no fields (only a name and a method),
    so they are plain subclasses: equality, hashing, repr and immutability come from here."""

    type: ClassVar[EventType]
    at: float
    ids: tuple[str, ...] = ()
    outcome: Outcome | None = None
    attempts: int = 0
    cwnd: float = 0.0
    ssthresh: float = 0.0
    pace: float = 0.0
    in_flight: int = 0
    # slow-start, avoidance, recovery (answers to calls sent before the last decrease are
    # still due), paced (under one call in flight), outage, or the controller's own phase.
    phase: str = ""
    latency: float = 0.0  # with Answered: how long the call took; with StoodStill, how long
    batch: int = 0  # IDs the next call may carry

    def __init__(
        self,
        at: float,
        ids: tuple[str, ...] = (),
        outcome: Outcome | None = None,
        attempts: int = 0,
        cwnd: float = 0.0,
        ssthresh: float = 0.0,
        pace: float = 0.0,
        in_flight: int = 0,
        phase: str = "",
        latency: float = 0.0,
        batch: int = 0,
    ) -> None:
        # The fields above, in their order. A run raises several events per call: one
        # update of the instance's dict costs a fraction of a frozen setattr per field.
        self.__dict__.update(
            at=at,
            ids=ids,
            outcome=outcome,
            attempts=attempts,
            cwnd=cwnd,
            ssthresh=ssthresh,
            pace=pace,
            in_flight=in_flight,
            phase=phase,
            latency=latency,
            batch=batch,
        )

    def deliver(self, to: Subscriber) -> None:
        """Call the subscriber's method for this event (each kind names its own; an
        event of no kind has none to call)."""


class Queued(Event):
    """The run's intents (``ids``), before anything is sent."""

    type: ClassVar[EventType] = "queued"

    def deliver(self, to: Subscriber) -> None:
        to.on_queued(self)


class Sent(Event):
    """A call leaves with ``ids``."""

    type: ClassVar[EventType] = "sent"

    def deliver(self, to: Subscriber) -> None:
        to.on_sent(self)


class Answered(Event):
    """A call is over (answered or given up on): ``ids``, its worst ``outcome``, ``latency``."""

    type: ClassVar[EventType] = "answered"

    def deliver(self, to: Subscriber) -> None:
        to.on_answered(self)


class Throttled(Event):
    """A call was throttled: the ``ids`` throttled and the first throttle's ``outcome``."""

    type: ClassVar[EventType] = "throttled"

    def deliver(self, to: Subscriber) -> None:
        to.on_throttled(self)


class Retried(Event):
    """One intent (``ids``) goes back to wait for a retry after ``outcome``; ``attempts``
    so far."""

    type: ClassVar[EventType] = "retried"

    def deliver(self, to: Subscriber) -> None:
        to.on_retried(self)


class TimedOut(Event):
    """A call (``ids``) got no answer in time and is given up on (``outcome`` says how long)."""

    type: ClassVar[EventType] = "timed_out"

    def deliver(self, to: Subscriber) -> None:
        to.on_timed_out(self)


class OutageBegan(Event):
    """The endpoint stopped answering (``outcome``: the first call that got no answer)."""

    type: ClassVar[EventType] = "outage"

    def deliver(self, to: Subscriber) -> None:
        to.on_outage(self)


class Recovered(Event):
    """The endpoint answers again after an outage."""

    type: ClassVar[EventType] = "recovered"

    def deliver(self, to: Subscriber) -> None:
        to.on_recovered(self)


class StoodStill(Event):
    """The process itself stood still for ``latency`` seconds (stopped with Ctrl-Z, a
    machine suspended, starved of CPU): nothing was sent or read meanwhile."""

    type: ClassVar[EventType] = "stood_still"

    def deliver(self, to: Subscriber) -> None:
        to.on_stood_still(self)


class Stopping(Event):
    """The run sends nothing more before its queue is empty; ``outcome`` says why."""

    type: ClassVar[EventType] = "stopping"

    def deliver(self, to: Subscriber) -> None:
        to.on_stopping(self)


class WindowChanged(Event):
    """The controller changed its window or its pace."""

    type: ClassVar[EventType] = "window"

    def deliver(self, to: Subscriber) -> None:
        to.on_window(self)


class Resolved(Event):
    """One intent (``ids[0]``) has its outcome for this run, after ``attempts`` calls."""

    type: ClassVar[EventType]
    status: ClassVar[Status]


class Succeeded(Resolved):
    type: ClassVar[EventType] = "succeeded"
    status: ClassVar[Status] = "succeeded"

    def deliver(self, to: Subscriber) -> None:
        to.on_succeeded(self)


class Failed(Resolved):
    type: ClassVar[EventType] = "failed"
    status: ClassVar[Status] = "failed"

    def deliver(self, to: Subscriber) -> None:
        to.on_failed(self)


class Missing(Resolved):
    type: ClassVar[EventType] = "missing"
    status: ClassVar[Status] = "missing"

    def deliver(self, to: Subscriber) -> None:
        to.on_missing(self)


class Pending(Resolved):
    """Not known done: never sent, or sent without an answer."""

    type: ClassVar[EventType] = "pending"
    status: ClassVar[Status] = "pending"

    def deliver(self, to: Subscriber) -> None:
        to.on_pending(self)


RESOLVED_EVENTS: dict[Status, type[Resolved]] = {
    "succeeded": Succeeded,
    "failed": Failed,
    "missing": Missing,
    "pending": Pending,
}


class Subscriber:
    """Override the methods for the events you need; the others do nothing.

    The engine calls a subscriber with each event (``subscriber(event)``), which hands
    it to the event's method; a subclass may override ``__call__`` to see every event
    first. The four outcomes go to :meth:`on_resolved` unless their own method is
    overridden.
    """

    def __call__(self, event: Event) -> None:
        event.deliver(self)

    def on_queued(self, event: Queued) -> None:
        pass

    def on_sent(self, event: Sent) -> None:
        pass

    def on_answered(self, event: Answered) -> None:
        pass

    def on_throttled(self, event: Throttled) -> None:
        pass

    def on_retried(self, event: Retried) -> None:
        pass

    def on_timed_out(self, event: TimedOut) -> None:
        pass

    def on_outage(self, event: OutageBegan) -> None:
        pass

    def on_recovered(self, event: Recovered) -> None:
        pass

    def on_stood_still(self, event: StoodStill) -> None:
        pass

    def on_stopping(self, event: Stopping) -> None:
        pass

    def on_window(self, event: WindowChanged) -> None:
        pass

    def on_resolved(self, event: Resolved) -> None:
        pass

    def on_succeeded(self, event: Succeeded) -> None:
        self.on_resolved(event)

    def on_failed(self, event: Failed) -> None:
        self.on_resolved(event)

    def on_missing(self, event: Missing) -> None:
        self.on_resolved(event)

    def on_pending(self, event: Pending) -> None:
        self.on_resolved(event)


# What an engine accepts: a Subscriber, or any callable of an event.
Listener = Callable[[Event], None]

# Each event's class by its name: for code that builds events from their names (a replay).
EVENT_TYPES: dict[EventType, type[Event]] = {
    cls.type: cls
    for cls in (
        Queued,
        Sent,
        Answered,
        Throttled,
        Retried,
        TimedOut,
        OutageBegan,
        Recovered,
        StoodStill,
        Stopping,
        WindowChanged,
        Succeeded,
        Failed,
        Missing,
        Pending,
    )
}
