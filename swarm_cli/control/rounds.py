"""Whether what gets answered still grows with the window: delivery per round trip.

BBR leaves its startup when the delivery rate has not grown by a quarter over three
round trips in a row: the path is full, and a larger window only builds a queue. An
endpoint that serves a fixed number of calls a second without throttling any is such a
path: past that, calls wait in its queue until they time out.
"""

from __future__ import annotations

GROWTH = 1.25  # a round that delivers less than this times the best so far is flat ...
FLAT_ROUNDS = 3  # ... and this many flat rounds in a row end the growth
MIN_ANSWERS = 8  # a round with fewer answers says too little to count


class DeliveryRounds:
    def __init__(self) -> None:
        self.best = 0.0  # IDs per second, the most a round delivered
        self._start: float | None = None
        self._ids = 0
        self._answers = 0
        self._flat = 0

    def on_success(self, now: float, ids: int, rtt: float) -> None:
        """One answered call of ``ids`` IDs; rounds last a smoothed round trip."""
        if self._start is None:
            self._start = now
        self._ids += ids
        self._answers += 1
        seconds = now - self._start
        if seconds < rtt or self._answers < MIN_ANSWERS:
            return
        rate = self._ids / seconds
        if rate >= GROWTH * self.best:
            self._flat = 0
        else:
            self._flat += 1
        self.best = max(self.best, rate)
        self._start, self._ids, self._answers = now, 0, 0

    def flat(self) -> bool:
        """Whether delivery has stopped growing for FLAT_ROUNDS rounds in a row."""
        return self._flat >= FLAT_ROUNDS
