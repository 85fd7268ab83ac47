"""Whether throttles answer to the pace: a decrease that did not reduce them is not
repeated.

A bucket's throttles fall when calls slow down; throttles that come at a share of calls
whatever the pace (an API answering some calls 503 at random) do not. After each
decrease, the share of throttles among the next answers is compared with the share
before it: if it hardly fell, that share is noise, the decrease is undone, and from then
on throttles up to that share say nothing of the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

WEIGHT = 1 / 16  # of each answer in the running throttle share
AFTER = 16  # answers after a decrease before it is judged
LOUD = 0.1  # a share under this is what pacing just above the refill costs anyway
HELD = 0.7  # a share that kept this much of itself did not answer to the decrease
FELL = 0.5  # ... and one that fell under this much of itself did
STRIKES = 2  # decreases that did not help, with none between that plainly did
SHUT = 0.9  # a share of throttles this high after a decrease: the endpoint let nothing by
MOST = 0.5  # more than this share of throttles is a limit, whatever else it is
# Throttles up to this share above the noise are quiet: one throttle among a dozen
# answers (calls arriving bunched at a small bucket) lowers nothing; two do.
QUIET = 0.075


@dataclass
class _Decrease:
    rate_before: float
    share_before: float
    ticket: int
    answers: int = 0
    throttled: int = 0


class NoiseFloor:
    def __init__(self) -> None:
        self.share = 0.0  # running share of throttled answers
        self.floor = 0.0  # share of throttles that do not answer to the pace
        self._pending: _Decrease | None = None
        self._strikes = 0
        # A decrease left next to every call throttled: the endpoint shut calls out (a
        # storm, or others holding the bucket), whatever the pace. Read by the controller.
        self.shut_out = False

    def on_answer(self, ticket: int, throttled: bool) -> float | None:
        """Count one answer. Returns a rate to go back to when a decrease proved useless."""
        self.share += WEIGHT * ((1.0 if throttled else 0.0) - self.share)
        d = self._pending
        if d is None or ticket <= d.ticket:
            return None
        d.answers += 1
        d.throttled += throttled
        if d.answers < AFTER:
            return None
        self._pending = None
        after = d.throttled / d.answers
        if d.share_before < LOUD or after < FELL * d.share_before:
            self._strikes = 0  # few throttles before, or the decrease plainly helped
            return None
        if after < LOUD or after < HELD * d.share_before:
            return None  # between: sixteen answers say neither
        if after >= SHUT:
            self._strikes = 0  # next to every call throttled: shut out, not noise
            self.shut_out = True
            return None
        # Twice, so that one decrease that fell short of the limit is not noise.
        self._strikes += 1
        if self._strikes < STRIKES:
            return None
        self.floor = min(MOST, max(self.floor, after))
        return d.rate_before

    def learn(self, share: float) -> None:
        """A share of throttles that a slower pace did not reduce, seen elsewhere."""
        self.floor = min(MOST, max(self.floor, share))

    def quiet(self, margin: float = QUIET) -> bool:
        """Whether the throttles now are within the noise."""
        return self.share <= self.floor + margin

    def decreased(self, rate_before: float, ticket: int) -> None:
        """The rate was lowered; calls after ``ticket`` show whether that helped."""
        if self._pending is None:
            self._pending = _Decrease(rate_before, self.share, ticket)

    def correct(self, rate: float) -> float:
        """What got through, counted as if the noise's throttles had gone through too."""
        return rate / (1.0 - min(self.floor, 0.9))
