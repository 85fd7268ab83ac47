"""Telling an endpoint that is down from intents that fail.

When calls stop getting any answer at all (refused, reset, timed out) several
times in a row, the endpoint is down, not the intents: the engine then sends one
probe at a time with growing gaps and charges no intent an attempt, until an
answer comes or ``max_outage`` seconds have passed since the first call that got
none. An endpoint that answers every call with an error of its own (a 5xx: one
restarting, a balancer whose backends are away) is down too, once more calls in a
row than a share of random errors would make have got nothing else for a while;
it is back at the first other answer. Pure: time comes in as arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .outcome import Outcome


@dataclass
class Outage:
    threshold: int = 3  # unanswered calls in a row that make an outage
    max_outage: float = 45.0
    # Calls in a row answered with a 5xx and nothing else, over at least this long, that
    # make one (a fifth of calls failing at random makes five in a row once in 3,000).
    error_threshold: int = 5
    error_span: float = 0.5
    first_gap: float = 0.25
    max_gap: float = 4.0
    down: bool = False
    since: float | None = None  # when the first unanswered call of the streak left
    streak: int = 0
    # While down, or building up to it: the endpoint's error code when what it gives is
    # errors of its own (None: no answer at all).
    errors: str | None = None
    _carried: set[str] = field(default_factory=set, repr=False)  # by the streak's errors
    _gap: float = field(default=0.0, repr=False)
    _probe_at: float = field(default=-math.inf, repr=False)

    def on_answer(self) -> bool:
        """The endpoint answered (anything, a throttle included). True if an outage ended."""
        was_down = self.down
        self.down, self.since, self.streak, self._gap = False, None, 0, 0.0
        self.errors = None
        self._carried = set()
        self._probe_at = -math.inf
        return was_down

    def on_unreachable(self, sent_at: float, now: float) -> bool:
        """A call got no answer. True if this makes the endpoint count as down."""
        if self.errors is not None and not self.down:
            self.streak, self.since = 0, None  # a streak of errors is not one of silence
        if not self.down:
            self.errors = None
        return self._missed(sent_at, now, self.threshold, 0.0)

    def on_error(self, code: str, sent_at: float, now: float, carried: str = "") -> bool:
        """A call was answered with an error of the endpoint's own (a 5xx), and nothing
        else; ``carried`` names what it carried (its first ID). True if this makes the
        endpoint count as down: never while every such call carried the same, for one
        intent the endpoint always fails (the last one left, say) is not an outage."""
        if self.errors is None and not self.down:
            self.streak, self.since, self._carried = 0, None, set()
            self.errors = code
        self._carried.add(carried)
        lone = len(self._carried) < 2
        return self._missed(
            sent_at, now, math.inf if lone else self.error_threshold, self.error_span
        )

    def _missed(self, sent_at: float, now: float, threshold: float, span: float) -> bool:
        self.streak += 1
        self.since = sent_at if self.since is None else min(self.since, sent_at)
        if self.down:
            self._gap = min(self.max_gap, self._gap * 2)
            self._probe_at = now + self._gap
            return False
        if self.streak < threshold or now - self.since < span:
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

    def words(self) -> str:
        """What the endpoint does, for the live view and the stop: "no answer from the
        endpoint", or "only errors from the endpoint (InternalError)"."""
        return outage_words(self.errors)


def error_name(code: str | None, status: int | None) -> str:
    """An error as a user knows it: its code ("InternalError"), or for an answer with
    none (a gateway's page) its status ("HTTP 504")."""
    if code in (None, "HttpError") and status is not None:
        return f"HTTP {status}"
    return code or "an error"


def outage_words_of(began: Outcome | None) -> str:
    """The words of an outage from the outcome that began it (OutageBegan's)."""
    if began is None or not began.endpoint_error:
        return outage_words(None)
    return outage_words(error_name(began.code, began.http_status))


def outage_words(errors: str | None) -> str:
    if errors is None:
        return "no answer from the endpoint"
    return f"only errors from the endpoint ({errors})"
