"""Telling an endpoint that is down from intents that fail.

When calls stop getting any answer at all (refused, reset, timed out) several
times in a row, the endpoint is down, not the intents: the engine then sends one
probe at a time with growing gaps and charges no intent an attempt, until an
answer comes or ``max_outage`` seconds have passed since the first call that got
none. Pure: time comes in as arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Outage:
    threshold: int = 3  # unanswered calls in a row that make an outage
    max_outage: float = 45.0
    first_gap: float = 0.25
    max_gap: float = 4.0
    down: bool = False
    since: float | None = None  # when the first unanswered call of the streak left
    streak: int = 0
    _gap: float = field(default=0.0, repr=False)
    _probe_at: float = field(default=-math.inf, repr=False)

    def on_answer(self) -> bool:
        """The endpoint answered (anything, a throttle included). True if an outage ended."""
        was_down = self.down
        self.down, self.since, self.streak, self._gap = False, None, 0, 0.0
        self._probe_at = -math.inf
        return was_down

    def on_unreachable(self, sent_at: float, now: float) -> bool:
        """A call got no answer. True if this makes the endpoint count as down."""
        self.streak += 1
        self.since = sent_at if self.since is None else min(self.since, sent_at)
        if self.down:
            self._gap = min(self.max_gap, self._gap * 2)
            self._probe_at = now + self._gap
            return False
        if self.streak < self.threshold:
            return False
        self.down = True
        self._gap = self.first_gap
        self._probe_at = now + self._gap
        return True

    def stood_still(self, seconds: float) -> None:
        """The process itself stood still this long: the endpoint was not watched, so
        that time does not count towards giving up (a probe due meanwhile goes at once)."""
        if self.since is not None:
            self.since += seconds

    def probe_at(self) -> float:
        """Earliest time the next call may leave (minus infinity unless down)."""
        return self._probe_at if self.down else -math.inf

    def give_up_at(self) -> float:
        """When to stop trying (infinity while the endpoint answers)."""
        return math.inf if self.since is None else self.since + self.max_outage

    def elapsed(self, now: float) -> float:
        return 0.0 if self.since is None else now - self.since
