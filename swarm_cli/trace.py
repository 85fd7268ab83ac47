"""``--trace PATH``: the window's state at every call, as JSON lines, for plotting.

One line per call sent, per answer, per throttle and per change of the window:
``{"t": seconds since the run started, "event", "pair", "cwnd", "ssthresh",
"in_flight", "pace", "phase", "batch", "done"}``.

Lines are only queued as events arrive, and a thread of the trace's own writes them,
so a slow or full disk never holds a run up.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import IO, Any

from .events import (
    Answered,
    Event,
    OutageBegan,
    Recovered,
    Sent,
    StoodStill,
    Subscriber,
    Succeeded,
    Throttled,
    TimedOut,
    WindowChanged,
)
from .files import create_text


class Trace:
    """One file for every pair of a run, written by a thread of its own."""

    def __init__(self, path: str, *, started: float | None = None) -> None:
        self.path = path
        # Never through a symbolic link: a planted one would have its target truncated.
        self._file: IO[str] = create_text(path)
        self._started = time.monotonic() if started is None else started
        self._lock = threading.Lock()
        self._done: dict[str, int] = {}
        self._lines: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.error: OSError | None = None  # why lines were dropped, once the disk refused
        self._writer = threading.Thread(target=self._write_all, name="trace", daemon=True)
        self._writer.start()

    def subscriber(self, pair: str) -> Trace.Pair:
        return Trace.Pair(self, pair)

    def done(self, pair: str) -> None:
        """One more intent of ``pair`` succeeded: the ``done`` of its next lines."""
        with self._lock:
            self._done[pair] = self._done.get(pair, 0) + 1

    def write(self, pair: str, event: Event) -> None:
        """One line for ``event``, queued for the writer."""
        with self._lock:
            line: dict[str, Any] = {
                "t": round(event.at - self._started, 4),
                "event": event.type,
                "pair": pair,
                "cwnd": round(event.cwnd, 3),
                "ssthresh": round(event.ssthresh, 3),
                "in_flight": event.in_flight,
                "pace": round(event.pace, 5),
                "phase": event.phase,
                "batch": event.batch,
                "done": self._done.get(pair, 0),
            }
        if isinstance(event, Answered):
            line["latency"] = round(event.latency, 4)
            line["ids"] = len(event.ids)
        elif isinstance(event, StoodStill):
            line["seconds"] = round(event.latency, 3)
        self._lines.put(line)

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued and close the file; a disk that hangs is not waited on
        longer than ``timeout`` (the writer is a daemon thread: it never holds the exit)."""
        self._lines.put(None)
        self._writer.join(timeout)

    def _write_all(self) -> None:
        while (line := self._lines.get()) is not None:
            if self.error is not None:
                continue  # a trace is an aid: once the disk refuses it, lines are dropped
            try:
                self._file.write(json.dumps(line) + "\n")
            except OSError as err:
                self.error = err
        try:
            self._file.close()  # the last buffered lines are written here
        except OSError as err:
            self.error = self.error or err

    class Pair(Subscriber):
        """One pair's events, as lines: the window's (sent, answered, throttled, timed
        out, window, outage, recovered); successes only count."""

        def __init__(self, trace: Trace, pair: str) -> None:
            self.trace = trace
            self.pair = pair

        def on_succeeded(self, event: Succeeded) -> None:
            self.trace.done(self.pair)

        def on_sent(self, event: Sent) -> None:
            self.trace.write(self.pair, event)

        def on_answered(self, event: Answered) -> None:
            self.trace.write(self.pair, event)

        def on_throttled(self, event: Throttled) -> None:
            self.trace.write(self.pair, event)

        def on_timed_out(self, event: TimedOut) -> None:
            self.trace.write(self.pair, event)

        def on_window(self, event: WindowChanged) -> None:
            self.trace.write(self.pair, event)

        def on_outage(self, event: OutageBegan) -> None:
            self.trace.write(self.pair, event)

        def on_recovered(self, event: Recovered) -> None:
            self.trace.write(self.pair, event)

        def on_stood_still(self, event: StoodStill) -> None:
            self.trace.write(self.pair, event)
