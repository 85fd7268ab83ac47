"""``--trace PATH``: the window's state at every call, as JSON lines, for plotting.

One line per call sent, per answer, per throttle and per change of the window:
``{"t": seconds since the run started, "event", "pair", "cwnd", "ssthresh",
"in_flight", "pace", "phase", "batch", "done"}``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import IO

from .engine import Event

TRACED = frozenset({"sent", "answered", "throttled", "timed_out", "window", "outage", "recovered"})


class Trace:
    """One file for every pair of a run; lines are written as events come, under a lock."""

    def __init__(self, path: str, *, started: float | None = None) -> None:
        self.path = path
        self._file: IO[str] | None = open(path, "w", encoding="utf-8")  # noqa: SIM115
        self._started = time.monotonic() if started is None else started
        self._lock = threading.Lock()
        self._done: dict[str, int] = {}

    def subscriber(self, pair: str) -> Trace.Pair:
        return Trace.Pair(self, pair)

    def write(self, pair: str, event: Event) -> None:
        with self._lock:
            if event.type == "succeeded":
                self._done[pair] = self._done.get(pair, 0) + 1
                return
            if self._file is None or event.type not in TRACED:
                return
            line = {
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
            if event.type == "answered":
                line["latency"] = round(event.latency, 4)
                line["ids"] = len(event.ids)
            try:
                self._file.write(json.dumps(line) + "\n")
            except OSError:  # a trace is an aid: it never stops a run
                self._close()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    class Pair:
        def __init__(self, trace: Trace, pair: str) -> None:
            self.trace = trace
            self.pair = pair

        def __call__(self, event: Event) -> None:
            self.trace.write(self.pair, event)
